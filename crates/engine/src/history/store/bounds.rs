//! The bounds every count and size read from the history is held to (docs/HISTORY.md, "Bounds"),
//! and setting a history file aside.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::pack::{self, Loc};
use super::{ASIDE_DIR, FileVer, HistoryDir, MAX_FILE_BYTES, MAX_PIECES, MAX_TREE_FILES, Tree};
use crate::error::{Error, Result};
use crate::store::Root;

/// Refuses a tree of more than [`MAX_TREE_FILES`] entries, naming the history file that made it.
pub(crate) fn check_tree_len(source: &Path, tree: &Tree) -> Result<()> {
    if tree.len() > MAX_TREE_FILES {
        return Err(Error::Corrupt {
            path: source.to_path_buf(),
            message: format!(
                "it makes a tree of more than {MAX_TREE_FILES} files; this history was not written \
                 by a recorder"
            ),
        });
    }
    Ok(())
}

/// Moves history file `path` into `history/aside/` (its name and the moment, so nothing is
/// overwritten): a file the writer will not write to or cannot read is kept for a look, out of the
/// way. Returns where it went.
pub(crate) fn set_aside(root: &Root, hist_dir: &Path, path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let to = hist_dir.join(ASIDE_DIR).join(format!(
        "{name}.{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ")
    ));
    crate::store::atomic::rename_durable(root, path, &to)?;
    Ok(to)
}

/// What is wrong with file version `f` of `key` against the bounds: more than [`MAX_PIECES`] blobs,
/// or blobs adding up to more than [`MAX_FILE_BYTES`] (a single blob is bounded when it is read).
/// `sizes` keeps the sizes of blob files already looked at.
pub(super) fn over_bounds(
    hist: &HistoryDir,
    key: &str,
    f: &FileVer,
    sizes: &mut HashMap<String, u64>,
) -> Option<String> {
    if f.blobs.len() > MAX_PIECES {
        return Some(format!(
            "{} is made of {} blobs (at most {MAX_PIECES})",
            key.escape_debug(),
            f.blobs.len()
        ));
    }
    if f.blobs.len() < 2 {
        return None;
    }
    let mut total = 0u64;
    for b in &f.blobs {
        let n = match pack::locate(b) {
            Some(Loc::Packed { len, .. }) => len,
            Some(Loc::File(h)) => *sizes.entry(h.to_owned()).or_insert_with(|| {
                hist.blob_path(h)
                    .and_then(|p| std::fs::symlink_metadata(p).ok())
                    .map_or(0, |m| m.len())
            }),
            None => 0,
        };
        total = total.saturating_add(n);
        if total > MAX_FILE_BYTES {
            return Some(format!(
                "{} is made of {} blobs adding up to more than {} MiB (a recorded file holds at \
                 most {} MiB)",
                key.escape_debug(),
                f.blobs.len(),
                MAX_FILE_BYTES >> 20,
                MAX_FILE_BYTES >> 20
            ));
        }
    }
    None
}

impl HistoryDir {
    /// Checks the versions of `keys` in `tree` (the files the records of segment `seq` appended
    /// to) against the bounds, naming the segment when one is over them.
    pub(crate) fn check_appended<'a>(
        &self,
        seq: u64,
        tree: &Tree,
        keys: impl IntoIterator<Item = &'a String>,
    ) -> Result<()> {
        let mut sizes = HashMap::new();
        for k in keys {
            if let Some(f) = tree.get(k)
                && let Some(why) = over_bounds(self, k, f, &mut sizes)
            {
                return Err(Error::Corrupt {
                    path: self.segment_path(seq),
                    message: format!("{why}; these records were not written by a recorder"),
                });
            }
        }
        Ok(())
    }
}
