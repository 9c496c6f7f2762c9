//! Packs (docs/HISTORY.md): the small blobs a segment's records name, appended to one file per
//! segment (`packs/{seq:020}.pack`) instead of one file each, so recording a change allocates no
//! inode on the root's file system. A packed blob is named `{hash}:{pack}:{offset}:{len}`; reading it
//! checks the bytes against the hash, so a torn or erased range reads as missing, never as other
//! bytes. A checkpoint never names a packed blob (closing a segment copies what its tree still holds
//! into blob files), so a pack is named only by its own segment's records and goes with them.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use super::store::{hash_of, is_hash};
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::safe::SafeDir;

/// `history/packs`: the small blobs of each segment, one append-only file per segment.
pub(crate) const PACKS_DIR: &str = "packs";
/// The suffix of a pack's name.
pub(crate) const PACK_SUFFIX: &str = ".pack";
/// A blob of at most this many bytes recorded between checkpoints goes into the segment's pack.
pub(crate) const PACKED_MAX: u64 = 64 * 1024;
/// A segment is closed once its pack holds this many bytes.
pub(crate) const PACK_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Where a blob that a record or checkpoint names lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loc<'a> {
    /// A file of its own, `blobs/{h[..2]}/{h[2..]}` (the hash).
    File(&'a str),
    /// A range of a pack.
    Packed {
        /// The content hash the bytes must have.
        hash: &'a str,
        /// The pack (its segment's first sequence number).
        pack: u64,
        /// Where the bytes start.
        off: u64,
        /// How many.
        len: u64,
    },
}

fn number(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Where blob name `name` points (`None`: not a blob name, or a range no writer makes).
pub(crate) fn locate(name: &str) -> Option<Loc<'_>> {
    let mut it = name.split(':');
    let hash = it.next().filter(|h| is_hash(h))?;
    let Some(pack) = it.next() else {
        return Some(Loc::File(hash));
    };
    let pack = number(pack)?;
    let off = number(it.next()?)?;
    let len = number(it.next()?)?;
    if it.next().is_some() || len > PACKED_MAX || off.checked_add(len).is_none() {
        return None;
    }
    Some(Loc::Packed {
        hash,
        pack,
        off,
        len,
    })
}

/// The content hash blob name `name` carries (the name itself for a blob file).
pub(crate) fn hash_part(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// The name of a packed blob.
pub(crate) fn packed_name(hash: &str, pack: u64, off: u64, len: u64) -> String {
    format!("{hash}:{pack}:{off}:{len}")
}

/// `packs/{seq:020}.pack` under history directory `dir`.
pub(crate) fn pack_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(PACKS_DIR).join(format!("{seq:020}{PACK_SUFFIX}"))
}

/// Opens a regular file for reading without following a link.
fn open_nofollow(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    f.metadata().ok()?.is_file().then_some(f)
}

/// Reads packed blobs, keeping the last pack it opened (the blobs of one moment mostly share one).
#[derive(Debug)]
pub(crate) struct PackReader {
    dir: PathBuf,
    open: Option<(u64, Option<File>)>,
}

impl PackReader {
    /// A reader of the packs of history directory `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            open: None,
        }
    }

    /// The bytes of a packed blob, `None` when the pack or the range is missing or the bytes are not
    /// the ones hashed (a torn tail, a range erased by `record --forget`).
    pub(crate) fn read(&mut self, hash: &str, pack: u64, off: u64, len: u64) -> Option<Vec<u8>> {
        if self.open.as_ref().map(|(p, _)| *p) != Some(pack) {
            self.open = Some((pack, open_nofollow(&pack_path(&self.dir, pack))));
        }
        let f = self.open.as_ref()?.1.as_ref()?;
        let mut buf = vec![0u8; usize::try_from(len.min(PACKED_MAX)).ok()?];
        f.read_exact_at(&mut buf, off).ok()?;
        (hash_of(&buf) == hash).then_some(buf)
    }
}

/// The pack a writer appends to: the current segment's.
#[derive(Debug)]
pub(crate) struct PackWriter {
    /// Its number (the segment's first sequence number).
    pub seq: u64,
    file: File,
    path: PathBuf,
    len: u64,
    /// Hash -> (offset, length) of what it holds, so identical contents are stored once.
    index: HashMap<String, (u64, u64)>,
    dirty: bool,
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

impl PackWriter {
    /// Opens pack `seq` of history directory `dir` (created when missing, its name made durable),
    /// cut after the last byte that `names` (the blob names of its segment's kept records) use: a
    /// killed writer's tail that no kept record names is dropped, and the index of what it holds is
    /// rebuilt from the names, so nothing is stored twice. `fresh` empties it (a new segment).
    pub(crate) fn open<'a>(
        root: &Root,
        dir: &Path,
        seq: u64,
        fresh: bool,
        names: impl Iterator<Item = &'a str>,
    ) -> Result<Self> {
        let path = pack_path(dir, seq);
        let (parent, name) = SafeDir::parent_of(root, &path, true)?
            .ok_or_else(|| Error::not_found(format!("{} is missing", path.display())))?;
        // Never truncated on open: a file planted under the name (a hard link to a file elsewhere,
        // another user's) is checked before anything is written to it.
        let missing = || Error::not_found(format!("{} is missing", path.display()));
        let mut file = parent
            .open_file(&name, OFlags::RDWR | OFlags::CREATE)?
            .ok_or_else(missing)?;
        if let Err(e) = crate::store::safe::require_own_single_link(&file, &path) {
            if !fresh {
                return Err(e);
            }
            // A new segment's pack: the planted file is set aside, and the pack made anew.
            drop(file);
            super::store::set_aside(root, dir, &path)?;
            file = parent
                .open_file(&name, OFlags::RDWR | OFlags::CREATE | OFlags::EXCL)?
                .ok_or_else(missing)?;
            crate::store::safe::require_own_single_link(&file, &path)?;
        }
        let mut index = HashMap::new();
        let mut end = 0u64;
        if !fresh {
            for n in names {
                if let Some(Loc::Packed {
                    hash,
                    pack,
                    off,
                    len,
                }) = locate(n)
                    && pack == seq
                {
                    index.insert(hash.to_owned(), (off, len));
                    end = end.max(off + len);
                }
            }
        }
        let cur = file.metadata().map_err(io_at(&path))?.len();
        if cur != end {
            file.set_len(end).map_err(io_at(&path))?;
            file.sync_data().map_err(io_at(&path))?;
        }
        // The pack's name is durable before any record naming it can be.
        parent.sync()?;
        Ok(Self {
            seq,
            file,
            path,
            len: end,
            index,
            dirty: false,
        })
    }

    /// Bytes it holds.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `bytes` (whose hash is `hash`) unless the pack holds them already, and returns the
    /// blob's name. The write lands at an offset of its own, so a failed write is overwritten by the
    /// next one and never leaves a gap that a name points into.
    pub(crate) fn put(&mut self, hash: &str, bytes: &[u8]) -> Result<String> {
        let len = bytes.len() as u64;
        if let Some(&(off, l)) = self.index.get(hash)
            && l == len
        {
            // Checked again, in case the range was erased (`record --forget`) since.
            let mut buf = vec![0u8; bytes.len()];
            if self.file.read_exact_at(&mut buf, off).is_ok() && buf == bytes {
                return Ok(packed_name(hash, self.seq, off, len));
            }
        }
        let off = self.len;
        self.file
            .write_all_at(bytes, off)
            .map_err(io_at(&self.path))?;
        self.len += len;
        self.dirty = true;
        self.index.insert(hash.to_owned(), (off, len));
        Ok(packed_name(hash, self.seq, off, len))
    }

    /// `fdatasync`s what was appended since the last sync.
    pub(crate) fn sync(&mut self) -> Result<()> {
        if self.dirty {
            self.file.sync_data().map_err(io_at(&self.path))?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Overwrites a packed blob's range with zeros (`record --forget`): its content is gone, and its
/// name reads as missing. False when the pack or the range is not there.
pub(crate) fn erase(root: &Root, dir: &Path, pack: u64, off: u64, len: u64) -> Result<bool> {
    let path = pack_path(dir, pack);
    let Some(f) = crate::store::safe::open_file(root, &path, OFlags::RDWR)? else {
        return Ok(false);
    };
    crate::store::safe::require_own_single_link(&f, &path)?;
    let size = f.metadata().map_err(io_at(&path))?.len();
    if off.saturating_add(len) > size {
        return Ok(false);
    }
    let zeros = vec![0u8; usize::try_from(len.min(PACKED_MAX)).unwrap_or(0)];
    f.write_all_at(&zeros, off).map_err(io_at(&path))?;
    f.sync_data().map_err(io_at(&path))?;
    Ok(true)
}

/// Flushes every write of the file system holding `dir` (one call instead of a sync per file, for
/// the blob files a closing segment writes before the checkpoint that names them).
pub(crate) fn sync_file_system(root: &Root, dir: &Path) -> Result<()> {
    let d = SafeDir::open(root, dir, false)?
        .ok_or_else(|| Error::not_found(format!("{} is missing", dir.display())))?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let r = rustix::fs::syncfs(&d);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let r = {
        rustix::fs::sync();
        rustix::fs::fsync(&d)
    };
    r.map_err(|e| Error::io(dir, std::io::Error::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_strictly() {
        let h = hash_of(b"x");
        assert_eq!(locate(&h), Some(Loc::File(&h)));
        let n = packed_name(&h, 20_000, 12, 1);
        assert_eq!(
            locate(&n),
            Some(Loc::Packed {
                hash: &h,
                pack: 20_000,
                off: 12,
                len: 1
            })
        );
        assert_eq!(hash_part(&n), h);
        for bad in [
            format!("{h}:1:2"),
            format!("{h}:1:2:3:4"),
            format!("{h}:1:-2:3"),
            format!("{h}:1:2:{}", PACKED_MAX + 1),
            format!("{h}:1:{}:1", u64::MAX),
            format!("{h}::2:3"),
            "../etc/passwd".to_owned(),
        ] {
            assert_eq!(locate(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_pack_stores_once_reads_back_checked_and_cuts_what_no_record_names() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let dir = d.path().join("conductor/history");
        let mut w = PackWriter::open(&root, &dir, 7, true, std::iter::empty()).unwrap();
        let (a, b) = (b"first".as_slice(), b"second".as_slice());
        let na = w.put(&hash_of(a), a).unwrap();
        assert_eq!(w.put(&hash_of(a), a).unwrap(), na, "stored once");
        let nb = w.put(&hash_of(b), b).unwrap();
        w.sync().unwrap();
        assert_eq!(w.len(), 11);
        let mut r = PackReader::new(&dir);
        let read = |r: &mut PackReader, n: &str| match locate(n) {
            Some(Loc::Packed {
                hash,
                pack,
                off,
                len,
            }) => r.read(hash, pack, off, len),
            _ => None,
        };
        assert_eq!(read(&mut r, &nb).as_deref(), Some(b));
        // Bytes that are not the ones hashed read as missing.
        let wrong = packed_name(&hash_of(b), 7, 0, 6);
        assert_eq!(read(&mut r, &wrong), None);
        drop(w);
        // A killed writer's tail: bytes after the last named range go at the next open.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(pack_path(&dir, 7))
            .unwrap();
        std::io::Write::write_all(&mut f, b"torn").unwrap();
        let mut w = PackWriter::open(&root, &dir, 7, false, [na.as_str()].into_iter()).unwrap();
        assert_eq!(w.len(), 5, "cut after the one range a kept record names");
        assert_eq!(w.put(&hash_of(a), a).unwrap(), na, "the index is rebuilt");
        let nb2 = w.put(&hash_of(b), b).unwrap();
        assert_eq!(nb2, nb, "the cut blob is stored again where it was");
        // Erasing leaves the range unreadable and the pack's length as it was.
        assert!(erase(&root, &dir, 7, 0, 5).unwrap());
        let mut r = PackReader::new(&dir);
        assert_eq!(read(&mut r, &na), None);
        assert_eq!(read(&mut r, &nb).as_deref(), Some(b));
        assert_eq!(
            w.put(&hash_of(a), a).unwrap(),
            packed_name(&hash_of(a), 7, 11, 5),
            "an erased range is not reused"
        );
    }
}
