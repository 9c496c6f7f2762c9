//! `conductor/approvals/`: the approval links' records (docs/PROTOCOL.md §2.15), for pane 2's
//! detail of a held item (its links open, used, expired or revoked). Every file there is hostile
//! input: only names shaped as a record's (64 hex digits and `.json`) are read, a symbolic link is
//! never followed (it is listed as unreadable), a file over [`MAX_RECORD_BYTES`] is not read, at
//! most [`MAX_RECORD_FILES`] entries are taken, and one that does not parse is a warning, never the
//! pane's failure. A file is re-read only when its `lstat` fingerprint changed.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use crate::engine::{LinkRecord, Root, read_json_nofollow};
use crate::live::snapshot::{FileWarning, LinksView};

/// The largest record read (a record is under 2 KiB; the rest is not one).
pub(super) const MAX_RECORD_BYTES: u64 = 64 * 1024;
/// The most directory entries taken (the engine keeps at most 10,000 records, plus a margin).
pub(super) const MAX_RECORD_FILES: usize = 10_100;

/// What a file's `lstat` says of its version: inode, size, modification and change times.
type Version = (u64, u64, i64, i64, i64, i64);

/// One record file as last read.
#[derive(Debug, Clone)]
struct Read {
    version: Version,
    record: Result<Arc<LinkRecord>, NotARecord>,
}

/// Why a file in `conductor/approvals/` is not a record the pane shows (its warning's message).
#[derive(Debug, Clone)]
enum NotARecord {
    /// A symbolic link: never followed.
    Link,
    /// Not a regular file.
    NotRegular,
    /// Over [`MAX_RECORD_BYTES`] (its size, when the listing gave one).
    TooLarge(Option<u64>),
    /// Gone between the listing and the read.
    Gone,
    /// The read or the JSON failed.
    Unreadable(String),
    /// JSON, but not a record's fields.
    Shape(String),
    /// Its `token_sha256` is not its file name.
    Misnamed,
}

impl std::fmt::Display for NotARecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Link => f.write_str("a symbolic link, not an approval link record: not followed"),
            Self::NotRegular => f.write_str("not a regular file: not an approval link record"),
            Self::TooLarge(Some(n)) => write!(
                f,
                "{n} bytes, over the {MAX_RECORD_BYTES} bytes an approval link record may take: not read"
            ),
            Self::TooLarge(None) => write!(
                f,
                "over the {MAX_RECORD_BYTES} bytes an approval link record may take: not read"
            ),
            Self::Gone => f.write_str("gone, or not a regular file"),
            Self::Unreadable(why) => f.write_str(why),
            Self::Shape(e) => write!(f, "not an approval link record: {e}"),
            Self::Misnamed => {
                f.write_str("its token_sha256 is not its file name: not an approval link record")
            }
        }
    }
}

/// The records of `conductor/approvals/`, re-read as they change.
#[derive(Debug, Default)]
pub(super) struct LinkTracker {
    files: BTreeMap<String, Read>,
}

/// True for a record's file name: the token's SHA-256 in hex and `.json`.
fn record_name(name: &str) -> Option<&str> {
    name.strip_suffix(".json")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn version_of(m: &std::fs::Metadata) -> Version {
    (
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// Reads one record file (no link followed, bounded) into a record or why it is none.
fn read_record(
    path: &Path,
    hash: &str,
    meta: &std::fs::Metadata,
) -> Result<LinkRecord, NotARecord> {
    if meta.file_type().is_symlink() {
        return Err(NotARecord::Link);
    }
    if !meta.is_file() {
        return Err(NotARecord::NotRegular);
    }
    if meta.len() > MAX_RECORD_BYTES {
        return Err(NotARecord::TooLarge(Some(meta.len())));
    }
    let read = read_json_nofollow(path)
        .map_err(|e| NotARecord::Unreadable(e.to_string()))?
        .ok_or(NotARecord::Gone)?;
    if read.metadata.len() > MAX_RECORD_BYTES {
        return Err(NotARecord::TooLarge(None));
    }
    let v = read
        .value
        .map_err(|e| NotARecord::Unreadable(e.to_string()))?;
    let r: LinkRecord = serde_json::from_value(v).map_err(|e| NotARecord::Shape(e.to_string()))?;
    if r.token_sha256 != hash {
        return Err(NotARecord::Misnamed);
    }
    Ok(r)
}

impl LinkTracker {
    /// Lists `conductor/approvals/` again and re-reads the records whose version changed. True
    /// when anything shown changed.
    pub(super) fn refresh(&mut self, root: &Root) -> bool {
        let dir = root.approvals_dir();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            let changed = !self.files.is_empty();
            self.files.clear();
            return changed;
        };
        let mut seen: BTreeMap<String, Read> = BTreeMap::new();
        let mut changed = false;
        // Bounded over every entry, as the engine's own listing is: a directory stuffed with other
        // names costs no more than one of records.
        for e in rd.filter_map(|e| e.ok()).take(MAX_RECORD_FILES) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(hash) = record_name(&name) else {
                continue;
            };
            let path = dir.join(&name);
            // `lstat`: a link is seen as one, never followed.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let version = version_of(&meta);
            let read = match self.files.remove(&name) {
                Some(r) if r.version == version => r,
                _ => {
                    changed = true;
                    Read {
                        version,
                        record: read_record(&path, hash, &meta).map(Arc::new),
                    }
                }
            };
            seen.insert(name, read);
        }
        changed |= !self.files.is_empty();
        self.files = seen;
        changed
    }

    /// The records by held item, each item's oldest first.
    pub(super) fn view(&self) -> LinksView {
        let mut by_handoff: BTreeMap<String, Vec<Arc<LinkRecord>>> = BTreeMap::new();
        for r in self.files.values().filter_map(|f| f.record.as_ref().ok()) {
            by_handoff
                .entry(r.handoff_id.clone())
                .or_default()
                .push(r.clone());
        }
        for v in by_handoff.values_mut() {
            v.sort_by(|a, b| (&a.minted_at, &a.token_sha256).cmp(&(&b.minted_at, &b.token_sha256)));
        }
        LinksView {
            by_handoff,
            unreadable: self.files.values().filter(|f| f.record.is_err()).count(),
        }
    }

    /// A warning per record file that could not be read as one.
    pub(super) fn warnings(&self, root: &Root) -> Vec<FileWarning> {
        let dir = root.approvals_dir();
        self.files
            .iter()
            .filter_map(|(name, f)| {
                Some(FileWarning {
                    path: dir.join(name),
                    message: f.record.as_ref().err()?.to_string(),
                    since: None,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let r = Root::at(d.path());
        std::fs::create_dir_all(r.approvals_dir()).unwrap();
        (d, r)
    }

    #[test]
    fn huge_malformed_and_linked_records_are_warnings_not_failures() {
        let (d, r) = root();
        let dir = r.approvals_dir();
        let name = |c: char| format!("{}.json", c.to_string().repeat(64));
        std::fs::write(dir.join(name('a')), "{not json").unwrap();
        std::fs::write(dir.join(name('b')), vec![b' '; 70 * 1024]).unwrap();
        let secret = d.path().join("secret.json");
        std::fs::write(&secret, "{}").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join(name('c'))).unwrap();
        std::fs::write(dir.join("listener.json"), "{}").unwrap();
        std::fs::write(dir.join(name('d')), r#"{"token_sha256": "x"}"#).unwrap();
        let mut t = LinkTracker::default();
        assert!(t.refresh(&r));
        let v = t.view();
        assert!(v.by_handoff.is_empty());
        assert_eq!(v.unreadable, 4);
        let w = t.warnings(&r);
        assert_eq!(w.len(), 4, "{w:#?}");
        assert!(
            w.iter().any(|w| w.message.contains("symbolic link")),
            "{w:#?}"
        );
        assert!(
            w.iter().any(|w| w.message.contains("over the 65536 bytes")),
            "{w:#?}"
        );
        // Nothing changed: nothing re-read, nothing to publish.
        assert!(!t.refresh(&r));
        std::fs::remove_file(dir.join(name('a'))).unwrap();
        assert!(t.refresh(&r));
        assert_eq!(t.view().unreadable, 3);
    }
}
