//! The history's files (docs/HISTORY.md): segments of change records, content-addressed blobs and one
//! checkpoint per segment, all under `conductor/history/`. Reading them ([`HistoryDir`], [`Seek`]) and
//! appending to them ([`Writer`], which only the holder of the writer lease builds).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek as _, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::pack::{
    self, Loc, PACK_MAX_BYTES, PACK_SUFFIX, PACKED_MAX, PACKS_DIR, PackReader, PackWriter,
};
use crate::error::{Error, Result};
use crate::store::Root;
use crate::store::layout;
use crate::store::safe::SafeDir;

mod bounds;
mod open;

use bounds::over_bounds;
pub(crate) use bounds::{check_tree_len, set_aside};

/// `history/segments`: one file of change records per segment.
pub(crate) const SEGMENTS_DIR: &str = "segments";
/// `history/checkpoints`: the whole tree at the start of each segment.
pub(crate) const CHECKPOINTS_DIR: &str = "checkpoints";
/// `history/blobs`: file contents by hash, `blobs/{first two hex}/{rest}` (large contents, and what
/// checkpoints name; the small contents of a segment's records are in its pack, see [`pack`]).
pub(crate) const BLOBS_DIR: &str = "blobs";
/// `history/.writer.lock`: the writer lease (an exclusive `flock` held while recording).
pub(crate) const WRITER_LOCK: &str = ".writer.lock";
/// `history/writer.json`: who holds the lease (pid, since), for messages.
pub(crate) const WRITER_FILE: &str = "writer.json";
/// `history/forgotten.json`: workflows whose recorded context was dropped.
pub(crate) const FORGOTTEN_FILE: &str = "forgotten.json";
const SEGMENT_SUFFIX: &str = ".log";
const CHECKPOINT_SUFFIX: &str = ".json";
/// The format version new segments are written with: 3 (records may record a directory, see
/// [`Kind::Dir`]). Version 2 segments (no directory records) and version 1 segments (every blob a
/// file, no packs) are read as they are.
pub(crate) const FORMAT: u32 = 3;
/// The first format whose records may record a directory ([`Kind::Dir`]).
pub(crate) const FORMAT_DIRS: u32 = 3;

/// A segment is closed (a checkpoint taken, a new segment begun) after this many records…
pub(crate) const SEGMENT_MAX_RECORDS: u64 = 20_000;
/// …or this many bytes of records.
pub(crate) const SEGMENT_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// The longest a written record waits for its `fdatasync`.
pub(crate) const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// Largest segment file read (a segment closes at [`SEGMENT_MAX_BYTES`]; one batch may pass it).
pub(crate) const MAX_SEGMENT_BYTES: u64 = 32 * 1024 * 1024;
/// Largest checkpoint file read (a tree of some 250,000 files), parsed as it is read.
pub(crate) const MAX_CHECKPOINT_BYTES: u64 = 32 * 1024 * 1024;
/// Most files and directories a tree of one moment holds (what a checkpoint and the records
/// applied to it may name), so a forged history's tree is bounded in memory too.
pub(crate) const MAX_TREE_FILES: usize = 400_000;
/// Most blobs one file version may name (a segment's appends, at most [`SEGMENT_MAX_RECORDS`],
/// after a checkpoint's merged chunks).
pub(crate) const MAX_PIECES: usize = 65_536;
/// The open segment closes once the blobs it brought (its pack and the blob files written since it
/// began) pass this share of the history's `max_size`: one quarter.
const SEGMENT_SHARE: u64 = 4;
/// `history/aside`: history files set aside (a segment or pack that failed the writer's checks,
/// a checkpoint that could not be read), kept for a look, never read or counted.
pub(crate) const ASIDE_DIR: &str = "aside";
/// A file larger than this is recorded without its content (its size and time only).
pub(crate) const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// At a checkpoint, runs of small appended pieces are merged into blobs of about this size.
pub(crate) const CHUNK_BYTES: u64 = 1024 * 1024;
/// A file with more pieces than this is merged at the next checkpoint.
const MERGE_AFTER_PIECES: usize = 8;
/// Longest record line read (paths are bounded by the file system, so a longer line is garbage).
const MAX_LINE: usize = 64 * 1024;

/// One file as the history holds it at a moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileVer {
    /// The blobs whose concatenation is the content (empty: the content was not kept, see
    /// `MAX_FILE_BYTES`).
    #[serde(rename = "b", default)]
    pub blobs: Vec<String>,
    /// Its size in bytes.
    #[serde(rename = "n", default)]
    pub len: u64,
    /// Its modification time, microseconds since the epoch.
    #[serde(rename = "m", default)]
    pub mtime_us: i64,
    /// A directory rather than a file (format 3: the directories whose mere existence the live
    /// model shows, see `history::dirs`); it has no content.
    #[serde(rename = "d", default, skip_serializing_if = "std::ops::Not::not")]
    pub dir: bool,
}

/// What a change did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The file appeared or was replaced: its content is the blob.
    Put,
    /// Bytes were appended (a JSONL file): the blob is the new tail.
    App,
    /// The file (or the directory) is gone.
    Del,
    /// The directory appeared (format 3; only the directories `history::dirs` names).
    Dir,
}

impl Kind {
    /// `put`, `app` or `del`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Put => "put",
            Kind::App => "app",
            Kind::Del => "del",
            Kind::Dir => "dir",
        }
    }
}

/// One recorded change (one line of a segment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Its sequence number: consecutive over the whole history, never reused.
    #[serde(rename = "s")]
    pub seq: u64,
    /// When it happened (the file's mtime, or when it was seen), microseconds since the epoch;
    /// never decreasing along the sequence.
    #[serde(rename = "t")]
    pub at_us: i64,
    /// The file, relative to the root (`conductor/…`, `shared/handoffs/…`).
    #[serde(rename = "p")]
    pub path: String,
    /// What happened to it.
    #[serde(rename = "k")]
    pub kind: Kind,
    /// The blob of a put or append (none for a delete or a file too large to keep).
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// The file's size after the change.
    #[serde(rename = "n", default)]
    pub len: u64,
    /// The file's mtime after the change, microseconds.
    #[serde(rename = "m", default)]
    pub mtime_us: i64,
}

/// The first line of a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentHeader {
    /// Format version ([`FORMAT`]; 1 for a history written before packs).
    pub history: u32,
    /// The sequence number of the segment's first record (also its checkpoint's name).
    pub seq: u64,
    /// The moment its checkpoint shows, microseconds (the segment's first moment).
    pub t: i64,
}

/// The whole tree at the start of a segment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The sequence number of the first record not included.
    pub seq: u64,
    /// The moment it shows, microseconds.
    pub t: i64,
    /// Every file, by path.
    pub files: BTreeMap<String, FileVer>,
}

/// A tree of files at one moment.
pub type Tree = BTreeMap<String, FileVer>;

/// A checkpoint as written: the writer's own tree, borrowed (a large root's tree is not copied to
/// be written).
#[derive(Serialize)]
struct CheckpointOut<'a> {
    seq: u64,
    t: i64,
    files: &'a Tree,
}

/// Applies `c` to `tree`.
pub fn apply(tree: &mut Tree, c: &Change) {
    match c.kind {
        Kind::Del => {
            tree.remove(&c.path);
        }
        Kind::Put => {
            tree.insert(
                c.path.clone(),
                FileVer {
                    blobs: c.blob.iter().cloned().collect(),
                    len: c.len,
                    mtime_us: c.mtime_us,
                    dir: false,
                },
            );
        }
        Kind::Dir => {
            tree.insert(
                c.path.clone(),
                FileVer {
                    mtime_us: c.mtime_us,
                    dir: true,
                    ..FileVer::default()
                },
            );
        }
        Kind::App => {
            let e = tree.entry(c.path.clone()).or_default();
            match &c.blob {
                Some(b) if !(e.blobs.is_empty() && e.len > 0) => e.blobs.push(b.clone()),
                // Content that was not kept stays unknown.
                _ => e.blobs.clear(),
            }
            e.len = c.len;
            e.mtime_us = c.mtime_us;
        }
    }
}

/// The content hash of `bytes`: the first 128 bits of its SHA-256, in hex.
pub(crate) fn hash_of(bytes: &[u8]) -> String {
    let d = sha2::Sha256::digest(bytes);
    hex::encode(&d[..16])
}

/// True when `h` is a content hash (32 lowercase hex digits).
pub(crate) fn is_hash(h: &str) -> bool {
    h.len() == 32
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Microseconds since the epoch of `t`.
pub(crate) fn micros(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_micros()
}

/// The instant of `us` microseconds since the epoch.
pub fn instant(us: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_micros(us).unwrap_or_default()
}

/// The history directory of a root, for reading.
#[derive(Debug, Clone)]
pub struct HistoryDir {
    /// The root.
    pub root: Root,
    /// `conductor/history`.
    pub dir: PathBuf,
}

/// Where a moment falls in the history.
#[derive(Debug)]
pub enum Seek {
    /// Nothing was ever recorded on this root.
    Never,
    /// The moment is before the oldest moment kept (which is given, microseconds).
    Before(i64),
    /// The tree at the moment.
    Found {
        /// The files.
        tree: Tree,
        /// The last change applied (its sequence number), if any.
        seq: Option<u64>,
        /// The history's first moment kept, microseconds.
        first: i64,
        /// Its last recorded moment, microseconds.
        last: i64,
    },
}

/// A record line that could not be read, or a record out of order.
#[derive(Debug, Clone)]
pub struct Damage {
    /// The segment.
    pub segment: u64,
    /// The byte offset of the line.
    pub offset: u64,
    /// What is wrong.
    pub message: String,
}

/// A segment read whole.
#[derive(Debug, Default)]
pub struct SegmentRead {
    /// Its header, if the first line is one.
    pub header: Option<SegmentHeader>,
    /// Its records with the byte offset each line starts at.
    pub records: Vec<(u64, Change)>,
    /// Lines that are not records.
    pub damage: Vec<Damage>,
    /// The length of the prefix made of whole lines (a torn last line is cut there).
    pub whole_len: u64,
}

fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let Some(f) = crate::store::read::open_regular(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!("over the {max}-byte limit"),
        });
    }
    Ok(Some(bytes))
}

fn numbered(dir: &Path, suffix: &str) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name();
            let n = n.to_str()?;
            let stem = n.strip_suffix(suffix)?;
            (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
                .then(|| stem.parse().ok())
                .flatten()
        })
        .collect();
    v.sort_unstable();
    v
}

impl HistoryDir {
    /// The history of `root` (it may not exist).
    pub fn of(root: &Root) -> Self {
        Self {
            root: root.clone(),
            dir: root.conductor.join(layout::HISTORY_DIR),
        }
    }

    /// `segments/{seq:020}.log`.
    pub fn segment_path(&self, seq: u64) -> PathBuf {
        self.dir
            .join(SEGMENTS_DIR)
            .join(format!("{seq:020}{SEGMENT_SUFFIX}"))
    }

    /// `checkpoints/{seq:020}.json`.
    pub(crate) fn checkpoint_path(&self, seq: u64) -> PathBuf {
        self.dir
            .join(CHECKPOINTS_DIR)
            .join(format!("{seq:020}{CHECKPOINT_SUFFIX}"))
    }

    /// `blobs/{h[..2]}/{h[2..]}` of a blob kept as a file (`None` for a packed blob's name).
    pub(crate) fn blob_path(&self, h: &str) -> Option<PathBuf> {
        match pack::locate(h) {
            Some(Loc::File(h)) => Some(self.dir.join(BLOBS_DIR).join(&h[..2]).join(&h[2..])),
            _ => None,
        }
    }

    /// `packs/{seq:020}.pack`.
    pub(crate) fn pack_path(&self, seq: u64) -> PathBuf {
        pack::pack_path(&self.dir, seq)
    }

    /// The packs kept, oldest first.
    pub(crate) fn packs(&self) -> Vec<u64> {
        numbered(&self.dir.join(PACKS_DIR), PACK_SUFFIX)
    }

    /// The segments kept, oldest first (by their first sequence number).
    pub fn segments(&self) -> Vec<u64> {
        numbered(&self.dir.join(SEGMENTS_DIR), SEGMENT_SUFFIX)
    }

    /// The checkpoints kept, oldest first.
    pub(crate) fn checkpoints(&self) -> Vec<u64> {
        numbered(&self.dir.join(CHECKPOINTS_DIR), CHECKPOINT_SUFFIX)
    }

    /// True when anything was ever recorded here.
    pub fn exists(&self) -> bool {
        !self.segments().is_empty()
    }

    /// The content of blob `h` (`None` when it is not kept: forgotten, or the file was too large).
    pub fn blob(&self, h: &str) -> Result<Option<Vec<u8>>> {
        self.blob_with(h, &mut PackReader::new(&self.dir))
    }

    /// [`HistoryDir::blob`] through `packs`, which keeps the last pack it opened.
    pub(crate) fn blob_with(&self, h: &str, packs: &mut PackReader) -> Result<Option<Vec<u8>>> {
        match pack::locate(h) {
            Some(Loc::Packed {
                hash,
                pack,
                off,
                len,
            }) => Ok(packs.read(hash, pack, off, len)),
            Some(Loc::File(_)) => match self.blob_path(h) {
                Some(p) => read_bounded(&p, MAX_FILE_BYTES),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// True when blob `h` can be read: its file exists, or its packed range is whole and hashes
    /// right.
    pub(crate) fn has_blob(&self, h: &str, packs: &mut PackReader) -> bool {
        match pack::locate(h) {
            Some(Loc::Packed {
                hash,
                pack,
                off,
                len,
            }) => packs.read(hash, pack, off, len).is_some(),
            Some(Loc::File(_)) => self.blob_path(h).is_some_and(|p| p.is_file()),
            None => false,
        }
    }

    /// Removes blob `h` (`record --forget`): its file is removed, a packed range overwritten with
    /// zeros. True when something was removed.
    pub fn erase_blob(&self, h: &str) -> Result<bool> {
        match pack::locate(h) {
            Some(Loc::Packed { pack, off, len, .. }) => {
                pack::erase(&self.root, &self.dir, pack, off, len)
            }
            Some(Loc::File(_)) => match self.blob_path(h) {
                Some(p) => crate::store::atomic::remove_file(&self.root, &p),
                None => Ok(false),
            },
            None => Ok(false),
        }
    }

    /// The content of a file version: its blobs joined (`None` when one of them is missing).
    pub fn content(&self, f: &FileVer) -> Result<Option<Vec<u8>>> {
        if f.blobs.is_empty() && f.len > 0 {
            return Ok(None);
        }
        let over = |what: String| Error::Corrupt {
            path: self.dir.clone(),
            message: format!(
                "a recorded file is {what}, over the {} MiB a recorded file holds; the history was \
                 written by hand",
                MAX_FILE_BYTES >> 20
            ),
        };
        if f.blobs.len() > MAX_PIECES {
            return Err(over(format!("made of {} blobs", f.blobs.len())));
        }
        let mut out = Vec::with_capacity(usize::try_from(f.len).unwrap_or(0).min(1 << 20));
        let mut packs = PackReader::new(&self.dir);
        for b in &f.blobs {
            match self.blob_with(b, &mut packs)? {
                Some(bytes) => {
                    if (out.len() as u64).saturating_add(bytes.len() as u64) > MAX_FILE_BYTES {
                        return Err(over(format!(
                            "made of {} blobs adding up to more",
                            f.blobs.len()
                        )));
                    }
                    out.extend_from_slice(&bytes)
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// Reads a checkpoint; refused (naming it) when it is over [`MAX_CHECKPOINT_BYTES`] or a file
    /// version it names is over the bounds (more than [`MAX_PIECES`] blobs, or more than
    /// [`MAX_FILE_BYTES`] of content).
    pub fn checkpoint(&self, seq: u64) -> Result<Checkpoint> {
        let p = self.checkpoint_path(seq);
        let f = crate::store::read::open_regular(&p)?
            .ok_or_else(|| Error::not_found(format!("{} is missing", p.display())))?;
        let len = f.metadata().map_err(|e| Error::io(&p, e))?.len();
        if len > MAX_CHECKPOINT_BYTES {
            return Err(Error::Corrupt {
                path: p,
                message: format!("over the {MAX_CHECKPOINT_BYTES}-byte limit"),
            });
        }
        // Parsed as it is read: the bytes are not held beside the tree they make.
        let reader = std::io::BufReader::new(f.take(MAX_CHECKPOINT_BYTES));
        let cp: Checkpoint = serde_json::from_reader(reader).map_err(|e| Error::Corrupt {
            path: p.clone(),
            message: e.to_string(),
        })?;
        check_tree_len(&p, &cp.files)?;
        let mut sizes = HashMap::new();
        for (k, f) in &cp.files {
            if let Some(why) = over_bounds(self, k, f, &mut sizes) {
                return Err(Error::Corrupt {
                    path: p,
                    message: format!("{why}; this checkpoint was not written by a recorder"),
                });
            }
        }
        Ok(cp)
    }

    /// The header of a segment (its first line only).
    pub fn header(&self, seq: u64) -> Option<SegmentHeader> {
        let f = crate::store::read::open_regular(&self.segment_path(seq))
            .ok()
            .flatten()?;
        let mut buf = Vec::with_capacity(256);
        f.take(4096).read_to_end(&mut buf).ok()?;
        let line = buf.split(|b| *b == b'\n').next()?;
        serde_json::from_slice(line).ok()
    }

    /// Reads a segment whole.
    pub fn segment(&self, seq: u64) -> Result<SegmentRead> {
        let p = self.segment_path(seq);
        let bytes = read_bounded(&p, MAX_SEGMENT_BYTES)?
            .ok_or_else(|| Error::not_found(format!("{} is missing", p.display())))?;
        Ok(parse_segment(seq, &bytes))
    }

    /// The tree at `at_us`: the newest segment that starts at or before it, its checkpoint, then its
    /// records up to the moment.
    pub fn seek(&self, at_us: i64) -> Result<Seek> {
        let segs = self.segments();
        let heads: Vec<(u64, i64)> = segs
            .iter()
            .filter_map(|s| self.header(*s).map(|h| (*s, h.t)))
            .collect();
        let Some(&(_, first)) = heads.first() else {
            return Ok(if segs.is_empty() {
                Seek::Never
            } else {
                Seek::Before(i64::MAX)
            });
        };
        if at_us < first {
            return Ok(Seek::Before(first));
        }
        let i = heads
            .partition_point(|(_, t)| *t <= at_us)
            .saturating_sub(1);
        let (seg, _) = heads[i];
        let cp = self.checkpoint(seg)?;
        let mut tree = cp.files;
        let mut seq = cp.seq.checked_sub(1);
        let p = self.segment_path(seg);
        let bytes = read_bounded(&p, MAX_SEGMENT_BYTES)?
            .ok_or_else(|| Error::not_found(format!("{} is missing", p.display())))?;
        let mut last = cp.t;
        let mut appended = BTreeSet::new();
        // Records are in time order: parse only up to the moment, then read the last line's time.
        for line in bytes.split(|b| *b == b'\n').skip(1) {
            let Ok(c) = serde_json::from_slice::<Change>(line) else {
                continue;
            };
            if c.at_us > at_us {
                break;
            }
            apply(&mut tree, &c);
            check_tree_len(&p, &tree)?;
            if c.kind == Kind::App {
                appended.insert(c.path.clone());
            } else {
                appended.remove(&c.path);
            }
            seq = Some(c.seq);
            last = c.at_us;
        }
        self.check_appended(seg, &tree, &appended)?;
        if let Some(c) = bytes
            .split(|b| *b == b'\n')
            .rev()
            .find_map(|l| serde_json::from_slice::<Change>(l).ok())
        {
            last = c.at_us;
        }
        if let Some(&(s, _)) = heads.last()
            && s != seg
            && let Ok(Some(b)) = read_bounded(&self.segment_path(s), MAX_SEGMENT_BYTES)
            && let Some(c) = b
                .split(|x| *x == b'\n')
                .rev()
                .find_map(|l| serde_json::from_slice::<Change>(l).ok())
        {
            last = c.at_us;
        }
        Ok(Seek::Found {
            tree,
            seq,
            first,
            last,
        })
    }

    /// The changes with `from_us < t <= to_us`, oldest first, at most `limit` (the bool: more were left
    /// out).
    pub(crate) fn changes(
        &self,
        from_us: i64,
        to_us: i64,
        limit: usize,
    ) -> Result<(Vec<Change>, bool)> {
        let segs: Vec<(u64, i64)> = self
            .segments()
            .into_iter()
            .filter_map(|s| self.header(s).map(|h| (s, h.t)))
            .collect();
        let mut out = Vec::new();
        for (i, (seg, t)) in segs.iter().enumerate() {
            let next_t = segs.get(i + 1).map(|(_, t)| *t);
            if *t > to_us || next_t.is_some_and(|n| n < from_us) {
                continue;
            }
            for (_, c) in self.segment(*seg)?.records {
                if c.at_us > from_us && c.at_us <= to_us {
                    if out.len() >= limit {
                        return Ok((out, true));
                    }
                    out.push(c);
                }
            }
        }
        Ok((out, false))
    }

    /// The workflows whose recorded context was dropped (`record --forget`).
    pub(crate) fn forgotten(&self) -> BTreeSet<String> {
        read_bounded(&self.dir.join(FORGOTTEN_FILE), 16 * 1024 * 1024)
            .ok()
            .flatten()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| {
                v.get("workflows")?.as_array().map(|a| {
                    a.iter()
                        .filter_map(|w| w.get("workflow_id")?.as_str().map(str::to_owned))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Bytes the history takes on disk (apparent sizes of its files; what was set aside, in
    /// `aside/`, is not counted: it may be a link to a file that is not the history's).
    pub fn size(&self) -> u64 {
        fn walk(p: &Path, depth: usize) -> u64 {
            let Ok(rd) = std::fs::read_dir(p) else {
                return 0;
            };
            rd.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() && depth == 0 && e.file_name() == ASIDE_DIR => 0,
                    Ok(t) if t.is_dir() && depth < 4 => walk(&e.path(), depth + 1),
                    Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
                    _ => 0,
                })
                .sum()
        }
        walk(&self.dir, 0)
    }
}

/// Parses a segment's bytes: the header, the records, the damage, and where the whole lines end.
pub(crate) fn parse_segment(seq: u64, bytes: &[u8]) -> SegmentRead {
    let mut out = SegmentRead::default();
    let mut off = 0usize;
    let mut first = true;
    while off < bytes.len() {
        let Some(nl) = memchr::memchr(b'\n', &bytes[off..]) else {
            break;
        };
        let line = &bytes[off..off + nl];
        let at = off as u64;
        off += nl + 1;
        out.whole_len = off as u64;
        if first {
            first = false;
            if let Ok(h) = serde_json::from_slice::<SegmentHeader>(line) {
                out.header = Some(h);
                continue;
            }
        }
        if line.len() > MAX_LINE {
            out.damage.push(Damage {
                segment: seq,
                offset: at,
                message: format!("a line of {} bytes", line.len()),
            });
            continue;
        }
        match serde_json::from_slice::<Change>(line) {
            Ok(c) => out.records.push((at, c)),
            Err(e) => out.damage.push(Damage {
                segment: seq,
                offset: at,
                message: format!("not a change record: {e}"),
            }),
        }
    }
    out
}

/// One change found by the recorder, not yet numbered.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The file (relative to the root).
    pub path: String,
    /// What happened.
    pub kind: Kind,
    /// Its blob (already stored).
    pub blob: Option<String>,
    /// Size after.
    pub len: u64,
    /// Mtime after, microseconds.
    pub mtime_us: i64,
    /// When it happened as far as the recorder can tell (the mtime, else when it was seen).
    pub when_us: i64,
}

/// Retention and switches of the history, from the `history:` mapping of `conductor/config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Most bytes the history keeps (whole oldest segments are dropped past it).
    pub max_bytes: u64,
    /// Oldest history kept.
    pub max_age: std::time::Duration,
}

/// Appends to the history: only the holder of the writer lease builds one.
#[derive(Debug)]
pub struct Writer {
    /// Where it writes.
    pub hist: HistoryDir,
    /// The tree as of the last record written.
    pub tree: Tree,
    seg: u64,
    seg_file: File,
    seg_records: u64,
    seg_bytes: u64,
    /// Bytes of blob files written since the segment began (its pack's are counted by the pack).
    seg_blob_bytes: u64,
    /// The next sequence number.
    pub next_seq: u64,
    /// The stamp of the last record (stamps never go back).
    pub last_t: i64,
    blob_dirs: HashMap<String, SafeDir>,
    /// The current segment's pack, where small blobs go.
    pack: PackWriter,
    /// Whether [`Writer::put_blob`] packs small blobs (true; the recorder's scans write blob files,
    /// since what a scan finds is the tree the next checkpoint names).
    pub packing: bool,
    retention: Retention,
    /// Records cut from a damaged tail at open (a killed writer's half-written batch).
    pub repaired: usize,
    /// Why the newest segment was set aside at open and a new one begun (it failed the writer's
    /// checks, or it or its checkpoint could not be read), if it was.
    pub set_aside: Option<String>,
    /// Since when records are written and not yet `fdatasync`ed ([`Writer::sync_due`]).
    unsynced: Option<std::time::Instant>,
}

impl Drop for Writer {
    /// A writer that stops syncs what it wrote (best effort: a failure is found again on open).
    fn drop(&mut self) {
        let _ = self.sync();
    }
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

impl Writer {
    /// Stores `bytes` as a blob and returns its name: a small one in the segment's pack (while
    /// [`Writer::packing`]), a large one as a file; identical contents are stored once.
    pub fn put_blob(&mut self, bytes: &[u8]) -> Result<String> {
        if self.packing && bytes.len() as u64 <= PACKED_MAX {
            return self.pack.put(&hash_of(bytes), bytes);
        }
        self.put_blob_file(bytes)
    }

    /// Stores `bytes` as a blob file (once: an existing blob is kept) and returns its hash.
    pub fn put_blob_file(&mut self, bytes: &[u8]) -> Result<String> {
        let h = hash_of(bytes);
        let sub = h[..2].to_owned();
        let name = h[2..].to_owned();
        if !self.blob_dirs.contains_key(&sub) {
            let p = self.hist.dir.join(BLOBS_DIR).join(&sub);
            let d = SafeDir::open(&self.hist.root, &p, true)?
                .ok_or_else(|| Error::not_found(format!("{} is missing", p.display())))?;
            self.blob_dirs.insert(sub.clone(), d);
        }
        if let Some(d) = self.blob_dirs.get(&sub) {
            let exists =
                rustix::fs::statat(d, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| s.st_size as u64 == bytes.len() as u64);
            if !exists {
                d.replace_volatile(OsStr::new(&name), bytes)?;
                self.seg_blob_bytes = self.seg_blob_bytes.saturating_add(bytes.len() as u64);
            }
        }
        Ok(h)
    }

    /// Numbers, stamps and appends `batch` (one write), applies it to the tree, and closes the
    /// segment when it is full. Stamps never go back and never pass `now_us`. The write reaches the
    /// disk by `Writer::sync_due` within `SYNC_EVERY` (a killed recorder loses nothing: the
    /// kernel keeps its writes; a power loss may cut the last second, and opening repairs the tail),
    /// so a busy root's writers do not wait on an `fdatasync` per batch of the recorder's.
    pub fn commit(&mut self, mut batch: Vec<Pending>, now_us: i64) -> Result<Vec<Change>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        batch.sort_by_key(|p| p.when_us);
        let mut out = Vec::with_capacity(batch.len());
        let mut bytes = Vec::new();
        for p in batch {
            let t = p.when_us.min(now_us).max(self.last_t);
            let c = Change {
                seq: self.next_seq,
                at_us: t,
                path: p.path,
                kind: p.kind,
                blob: p.blob,
                len: p.len,
                mtime_us: p.mtime_us,
            };
            bytes.extend_from_slice(&crate::store::json_text(&c, false));
            bytes.push(b'\n');
            self.next_seq += 1;
            self.last_t = t;
            out.push(c);
        }
        let path = self.hist.segment_path(self.seg);
        self.seg_file.write_all(&bytes).map_err(io_at(&path))?;
        self.unsynced.get_or_insert_with(std::time::Instant::now);
        self.seg_records += out.len() as u64;
        self.seg_bytes += bytes.len() as u64;
        for c in &out {
            apply(&mut self.tree, c);
        }
        if self.seg_records >= SEGMENT_MAX_RECORDS
            || self.seg_bytes >= SEGMENT_MAX_BYTES
            || self.pack.len() >= PACK_MAX_BYTES
            || self.pack.len().saturating_add(self.seg_blob_bytes) >= self.blob_share()
        {
            self.roll(now_us)?;
        }
        Ok(out)
    }

    /// The blob bytes past which the open segment closes: a [`SEGMENT_SHARE`] of `max_size`, so
    /// that retention, which drops whole closed segments, keeps the history within `max_size` plus
    /// one segment.
    fn blob_share(&self) -> u64 {
        (self.retention.max_bytes / SEGMENT_SHARE).max(1)
    }

    /// `fdatasync`s the records written if the oldest of them is `SYNC_EVERY` old (true: synced).
    pub(crate) fn sync_due(&mut self) -> Result<bool> {
        match self.unsynced {
            Some(t) if t.elapsed() >= SYNC_EVERY => self.sync().map(|()| true),
            _ => Ok(false),
        }
    }

    /// How long until [`Writer::sync_due`] syncs, if records wait for it.
    pub(crate) fn sync_wait(&self) -> Option<std::time::Duration> {
        self.unsynced
            .map(|t| SYNC_EVERY.saturating_sub(t.elapsed()))
    }

    /// `fdatasync`s the records written so far, their pack first (a record is never durable
    /// before the bytes it names).
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced.is_some() {
            self.pack.sync()?;
            let path = self.hist.segment_path(self.seg);
            self.seg_file.sync_data().map_err(io_at(&path))?;
            self.unsynced = None;
        }
        Ok(())
    }

    /// Closes the current segment: merges long runs of appended pieces, copies the packed blobs the
    /// tree still names into blob files (a checkpoint names no pack, so a pack goes with its
    /// segment), writes the checkpoint of the tree, begins the next segment and its pack, then
    /// applies retention.
    pub(crate) fn roll(&mut self, now_us: i64) -> Result<()> {
        self.sync()?;
        let paths: Vec<String> = self
            .tree
            .iter()
            .filter(|(_, f)| {
                f.blobs.len() > MERGE_AFTER_PIECES
                    || f.blobs
                        .iter()
                        .any(|b| matches!(pack::locate(b), Some(Loc::Packed { .. })))
            })
            .map(|(p, _)| p.clone())
            .collect();
        let wrote = !paths.is_empty();
        for p in paths {
            let Some(f) = self.tree.get(&p).cloned() else {
                continue;
            };
            if let Some(settled) = self.settle(&f)? {
                self.tree.insert(p, settled);
            }
        }
        if wrote {
            // The blob files just written are durable before the checkpoint naming them.
            pack::sync_file_system(&self.hist.root, &self.hist.dir)?;
        }
        let cp = CheckpointOut {
            seq: self.next_seq,
            t: self.last_t,
            files: &self.tree,
        };
        write_checkpoint(&self.hist, &cp)?;
        let pack = PackWriter::open(
            &self.hist.root,
            &self.hist.dir,
            self.next_seq,
            true,
            std::iter::empty(),
        )?;
        self.seg_file = new_segment(&self.hist, self.next_seq, self.last_t)?;
        self.pack = pack;
        self.seg = self.next_seq;
        self.seg_records = 0;
        self.seg_bytes = 0;
        self.seg_blob_bytes = 0;
        self.enforce_retention(now_us).map(|_| ())
    }

    /// The version of `f` a checkpoint names: a long run of small pieces merged into chunks of
    /// about [`CHUNK_BYTES`], packed pieces copied into blob files. A missing packed piece makes the
    /// content unknown (as for a file too large to keep); `None` when a piece is missing otherwise
    /// (the version then stays as it is).
    fn settle(&mut self, f: &FileVer) -> Result<Option<FileVer>> {
        let merge = f.blobs.len() > MERGE_AFTER_PIECES;
        let mut out = Vec::new();
        let mut acc: Vec<u8> = Vec::new();
        let mut packs = PackReader::new(&self.hist.dir);
        for b in &f.blobs {
            let packed = matches!(pack::locate(b), Some(Loc::Packed { .. }));
            if !merge && !packed {
                out.push(b.clone());
                continue;
            }
            let Some(bytes) = self.hist.blob_with(b, &mut packs)? else {
                return Ok(packed.then(|| FileVer {
                    blobs: Vec::new(),
                    ..f.clone()
                }));
            };
            if !merge {
                out.push(self.put_blob_file(&bytes)?);
                continue;
            }
            if bytes.len() as u64 >= CHUNK_BYTES && acc.is_empty() {
                out.push(b.clone());
                continue;
            }
            acc.extend_from_slice(&bytes);
            if acc.len() as u64 >= CHUNK_BYTES {
                out.push(self.put_blob_file(&acc)?);
                acc.clear();
            }
        }
        if !acc.is_empty() {
            out.push(self.put_blob_file(&acc)?);
        }
        Ok(Some(FileVer {
            blobs: out,
            ..f.clone()
        }))
    }

    /// Drops whole oldest segments (with their checkpoints) while the history is over its size bound
    /// or a segment ended before the age bound, never the segment being written; then removes the
    /// blobs no kept checkpoint or record names.
    pub(crate) fn enforce_retention(&mut self, now_us: i64) -> Result<usize> {
        let age_us = i64::try_from(self.retention.max_age.as_micros()).unwrap_or(i64::MAX);
        let cutoff = now_us.saturating_sub(age_us);
        let mut dropped = 0usize;
        loop {
            let segs = self.hist.segments();
            let (Some(&oldest), Some(&next)) = (segs.first(), segs.get(1)) else {
                break;
            };
            if oldest == self.seg {
                break;
            }
            // A segment's records end where the next one begins.
            let ends = self.hist.header(next).map(|h| h.t).unwrap_or(i64::MAX);
            if self.hist.size() <= self.retention.max_bytes && ends >= cutoff {
                break;
            }
            // The segment goes first: a kill between the two leaves a checkpoint nobody reads
            // (removed below or by the next pass).
            crate::store::atomic::remove_file(&self.hist.root, &self.hist.segment_path(oldest))?;
            for cp in self.hist.checkpoints() {
                if cp <= oldest {
                    crate::store::atomic::remove_file(
                        &self.hist.root,
                        &self.hist.checkpoint_path(cp),
                    )?;
                }
            }
            // The blobs and the pack only the dropped segment named go now, so the size is known
            // for the next decision.
            collect_garbage(&self.hist, Some(self.pack.seq))?;
            dropped += 1;
        }
        Ok(dropped)
    }
}

/// The blobs named by any kept checkpoint or record.
pub(crate) fn referenced_blobs(hist: &HistoryDir) -> Result<BTreeSet<String>> {
    let mut keep = BTreeSet::new();
    for seg in hist.segments() {
        if let Ok(cp) = hist.checkpoint(seg) {
            for f in cp.files.values() {
                keep.extend(f.blobs.iter().cloned());
            }
        }
        for (_, c) in hist.segment(seg)?.records {
            keep.extend(c.blob);
        }
    }
    Ok(keep)
}

/// Every blob stored as a file, by hash.
pub(crate) fn stored_blobs(hist: &HistoryDir) -> Vec<String> {
    let mut out = Vec::new();
    let base = hist.dir.join(BLOBS_DIR);
    for sub in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let s = sub.file_name().to_string_lossy().into_owned();
        if s.len() != 2 {
            continue;
        }
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let n = f.file_name().to_string_lossy().into_owned();
            let h = format!("{s}{n}");
            if is_hash(&h) {
                out.push(h);
            }
        }
    }
    out
}

/// Removes the blob files and the packs nothing kept names, except pack `writing` (the writer's own,
/// which its next records will name); returns how many files went.
pub(crate) fn collect_garbage(hist: &HistoryDir, writing: Option<u64>) -> Result<usize> {
    let keep = referenced_blobs(hist)?;
    let keep_packs: BTreeSet<u64> = keep
        .iter()
        .filter_map(|b| match pack::locate(b) {
            Some(Loc::Packed { pack, .. }) => Some(pack),
            _ => None,
        })
        .chain(writing)
        .collect();
    let mut n = 0;
    for h in stored_blobs(hist) {
        if !keep.contains(&h)
            && let Some(p) = hist.blob_path(&h)
            && crate::store::atomic::remove_file(&hist.root, &p)?
        {
            n += 1;
        }
    }
    for p in hist.packs() {
        if !keep_packs.contains(&p)
            && crate::store::atomic::remove_file(&hist.root, &hist.pack_path(p))?
        {
            n += 1;
        }
    }
    Ok(n)
}

fn write_checkpoint(hist: &HistoryDir, cp: &CheckpointOut<'_>) -> Result<()> {
    let mut bytes = crate::store::json_text(cp, false);
    bytes.push(b'\n');
    crate::store::atomic::write_atomic(&hist.root, &hist.checkpoint_path(cp.seq), &bytes)
}

/// The format segment `seq`'s header names ([`FORMAT`] when it has none: a new segment's).
fn hist_format(hist: &HistoryDir, seq: u64) -> u32 {
    hist.header(seq).map_or(FORMAT, |h| h.history)
}

/// Creates segment `seq` with its header, durably.
fn new_segment(hist: &HistoryDir, seq: u64, t: i64) -> Result<File> {
    let path = hist.segment_path(seq);
    let header = SegmentHeader {
        history: FORMAT,
        seq,
        t,
    };
    let mut line = crate::store::json_text(&header, false);
    line.push(b'\n');
    // Written whole under a temporary name then renamed, so a segment never lacks its header.
    crate::store::atomic::write_atomic(&hist.root, &path, &line)?;
    reopen_segment(&hist.root, &path, Some(line.len() as u64))
}

/// Opens a segment for appending (never through a link, and only a file of one link that this
/// user owns: a hard link planted under the name would make the writer cut and write a file
/// elsewhere), then, given `len`, cuts it there.
fn reopen_segment(root: &Root, path: &Path, len: Option<u64>) -> Result<File> {
    let (dir, name) = SafeDir::parent_of(root, path, false)?
        .ok_or_else(|| Error::not_found(format!("{} is missing", path.display())))?;
    let mut f = dir
        .open_file(&name, OFlags::RDWR)?
        .ok_or_else(|| Error::not_found(format!("{} is missing", path.display())))?;
    crate::store::safe::require_own_single_link(&f, path)?;
    if let Some(len) = len {
        cut_segment(&mut f, path, len)?;
    }
    Ok(f)
}

/// Cuts open segment `f` to `len` bytes (when longer) and places the writer at its end.
fn cut_segment(f: &mut File, path: &Path, len: u64) -> Result<()> {
    let cur = f.metadata().map_err(io_at(path))?.len();
    if cur != len {
        f.set_len(len).map_err(io_at(path))?;
        f.sync_data().map_err(io_at(path))?;
    }
    f.seek(SeekFrom::Start(len)).map_err(io_at(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(path: &str, blob: &str, when: i64) -> Pending {
        Pending {
            path: path.into(),
            kind: Kind::Put,
            blob: Some(blob.into()),
            len: 1,
            mtime_us: when,
            when_us: when,
        }
    }

    #[test]
    fn stamps_never_go_back_and_a_torn_tail_is_cut() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret.clone(), 1_000).unwrap();
        let a = w.put_blob(b"a").unwrap();
        let out = w
            .commit(
                vec![put("conductor/x", &a, 5_000), put("conductor/y", &a, 500)],
                10_000,
            )
            .unwrap();
        assert_eq!(
            out[0].at_us, 1_000,
            "an old mtime is stamped no earlier than the last stamp"
        );
        assert_eq!(out[1].at_us, 5_000);
        drop(w);
        let seg = HistoryDir::of(&root).segment_path(0);
        let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(b"{\"s\":2,\"t\":6").unwrap();
        let w = Writer::open(&root, ret, 20_000).unwrap();
        assert_eq!(w.next_seq, 2);
        assert_eq!(w.tree.len(), 2);
        let hist = HistoryDir::of(&root);
        match hist.seek(4_000).unwrap() {
            Seek::Found { tree, .. } => {
                assert_eq!(tree.keys().collect::<Vec<_>>(), ["conductor/y"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(hist.seek(999).unwrap(), Seek::Before(1_000)));
    }

    #[test]
    fn packed_blobs_are_cut_when_lost_copied_out_at_a_roll_and_old_blob_files_still_read() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let hist = HistoryDir::of(&root);
        // A version 1 history: every blob a file.
        let mut w = Writer::open(&root, ret.clone(), 1_000).unwrap();
        w.packing = false;
        let old = w.put_blob(b"old").unwrap();
        assert!(hist.blob_path(&old).unwrap().is_file());
        w.commit(vec![put("conductor/old", &old, 1_500)], 2_000)
            .unwrap();
        drop(w);
        let seg = hist.segment_path(0);
        let text = std::fs::read_to_string(&seg).unwrap();
        let now = format!("\"history\":{FORMAT}");
        std::fs::write(&seg, text.replacen(&now, "\"history\":1", 1)).unwrap();
        assert_eq!(hist.header(0).unwrap().history, 1);
        // Opened by this version, the old segment is closed: packed names begin a segment of
        // format 2, and the old one stays as it was.
        let mut w = Writer::open(&root, ret.clone(), 3_000).unwrap();
        assert_eq!(hist.segments(), [0, 1]);
        assert_eq!(
            (
                hist.header(0).unwrap().history,
                hist.header(1).unwrap().history
            ),
            (1, FORMAT)
        );
        let a = w.put_blob(b"kept").unwrap();
        let b = w.put_blob(b"lost").unwrap();
        assert!(matches!(
            pack::locate(&a),
            Some(Loc::Packed { pack: 1, .. })
        ));
        assert_eq!(hist.blob(&a).unwrap().as_deref(), Some(b"kept".as_slice()));
        w.commit(vec![put("conductor/a", &a, 3_000)], 3_000)
            .unwrap();
        w.commit(vec![put("conductor/b", &b, 4_000)], 4_000)
            .unwrap();
        drop(w);
        // The pack lost its tail (a power loss the segment's record survived): the record naming
        // the lost bytes is cut, and nothing after the kept ranges stays in the pack.
        let pack_file = std::fs::OpenOptions::new()
            .write(true)
            .open(hist.pack_path(1))
            .unwrap();
        pack_file.set_len(6).unwrap();
        let mut w = Writer::open(&root, ret, 5_000).unwrap();
        assert_eq!((w.repaired, w.next_seq), (1, 2));
        assert_eq!(std::fs::metadata(hist.pack_path(1)).unwrap().len(), 4);
        assert_eq!(w.put_blob(b"kept").unwrap(), a, "stored once");
        // A roll copies what the tree names out of the pack: the checkpoint names blob files only.
        w.roll(5_000).unwrap();
        let cp = hist.checkpoint(2).unwrap();
        assert!(
            cp.files
                .values()
                .flat_map(|f| &f.blobs)
                .all(|b| matches!(pack::locate(b), Some(Loc::File(_))))
        );
        assert_eq!(hist.packs(), [0, 1, 2]);
        for (path, want) in [("conductor/old", "old"), ("conductor/a", "kept")] {
            let f = &cp.files[path];
            assert_eq!(hist.content(f).unwrap().unwrap(), want.as_bytes());
        }
        // Both forms read along the history: the old blob file, the packed blob.
        let (all, _) = hist.changes(0, 10_000, 10).unwrap();
        let read: Vec<Vec<u8>> = all
            .iter()
            .map(|c| hist.blob(c.blob.as_deref().unwrap()).unwrap().unwrap())
            .collect();
        assert_eq!(read, [b"old".to_vec(), b"kept".to_vec()]);
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
        // A damaged packed range is found by validate.
        std::fs::write(hist.pack_path(1), b"XXXX").unwrap();
        let (errors, _) = crate::history::check(&root);
        assert!(errors.iter().any(|e| e.contains("1 blob(s)")), "{errors:?}");
    }

    #[test]
    fn retention_drops_whole_oldest_segments_and_their_blobs() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret, 1_000_000).unwrap();
        // Four segments of ten changes each, a second apart; each change a new blob.
        let mut t = 1_000_000;
        for seg in 0..4 {
            for i in 0..10 {
                t += 100_000;
                let b = w
                    .put_blob(format!("segment {seg} change {i} {}", "x".repeat(200)).as_bytes())
                    .unwrap();
                w.commit(vec![put(&format!("conductor/f{}", i % 3), &b, t)], t)
                    .unwrap();
            }
            w.roll(t).unwrap();
        }
        let hist = HistoryDir::of(&root);
        assert_eq!(hist.segments().len(), 5);
        assert_eq!(hist.packs(), hist.segments(), "one pack per segment");
        let blobs_before = stored_blobs(&hist).len();
        let size_before = hist.size();
        let at_mid = match hist.seek(t - 500_000).unwrap() {
            Seek::Found { tree, .. } => tree,
            other => panic!("{other:?}"),
        };
        // Over the size bound: the oldest whole segments go until it fits, never the newest.
        w.retention.max_bytes = size_before * 6 / 10;
        let dropped = w.enforce_retention(t).unwrap();
        assert!(dropped >= 1, "dropped {dropped}");
        let segs = hist.segments();
        assert_eq!(segs.len(), 5 - dropped);
        assert_eq!(
            hist.checkpoints(),
            segs,
            "each kept segment keeps its checkpoint, no other"
        );
        assert!(hist.size() <= size_before * 6 / 10 || segs.len() == 1);
        assert!(
            stored_blobs(&hist).len() < blobs_before,
            "the dropped segments' blobs are gone"
        );
        assert_eq!(hist.packs(), segs, "the dropped segments' packs are gone");
        let mut packs = PackReader::new(&hist.dir);
        assert!(
            referenced_blobs(&hist)
                .unwrap()
                .iter()
                .all(|b| hist.has_blob(b, &mut packs))
        );
        // The first moment kept is the oldest kept segment's; before it is refused, after it unchanged.
        let first = hist.header(segs[0]).unwrap().t;
        assert!(matches!(hist.seek(first - 1).unwrap(), Seek::Before(f) if f == first));
        match hist.seek(t - 500_000).unwrap() {
            Seek::Found { tree, .. } => assert_eq!(tree, at_mid),
            other => panic!("{other:?}"),
        }
        // Past the age bound: everything but the newest segment goes.
        w.retention.max_bytes = u64::MAX;
        w.retention.max_age = std::time::Duration::from_secs(1);
        w.enforce_retention(t + 10_000_000).unwrap();
        assert_eq!(hist.segments().len(), 1);
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_hard_link_planted_as_the_newest_segment_or_a_next_pack_is_set_aside_never_written() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret.clone(), 1_000).unwrap();
        let a = w.put_blob(b"a").unwrap();
        w.commit(vec![put("conductor/a", &a, 2_000)], 2_000)
            .unwrap();
        drop(w);
        let hist = HistoryDir::of(&root);
        let precious = outside.path().join("precious");
        let text = b"not the history's: must stay as it is\n".repeat(30_000);
        std::fs::write(&precious, &text).unwrap();
        // The newest segment replaced by a hard link to a file elsewhere.
        std::fs::remove_file(hist.segment_path(0)).unwrap();
        std::fs::hard_link(&precious, hist.segment_path(0)).unwrap();
        let mut w = Writer::open(&root, ret.clone(), 3_000).unwrap();
        let why = w.set_aside.clone().unwrap();
        assert!(why.contains("hard links") && why.contains("aside"), "{why}");
        assert_eq!(
            std::fs::read(&precious).unwrap(),
            text,
            "never cut or written"
        );
        assert_eq!(hist.segments(), [0]);
        let seg = std::fs::metadata(hist.segment_path(0)).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&seg),
            1,
            "a new segment"
        );
        assert_eq!(hist.header(0).unwrap().seq, 0);
        let b = w.put_blob(b"b").unwrap();
        w.commit(vec![put("conductor/b", &b, 4_000)], 4_000)
            .unwrap();
        // The pack of the next segment planted the same way: set aside when the segment closes.
        std::fs::hard_link(&precious, hist.pack_path(w.next_seq)).unwrap();
        w.roll(5_000).unwrap();
        let c = w.put_blob(b"c").unwrap();
        w.commit(vec![put("conductor/c", &c, 6_000)], 6_000)
            .unwrap();
        w.sync().unwrap();
        assert_eq!(
            std::fs::read(&precious).unwrap(),
            text,
            "never cut or written"
        );
        drop(w);
        let aside: Vec<_> = std::fs::read_dir(hist.dir.join(ASIDE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(aside.len(), 2, "{aside:?}");
        assert!(
            hist.size() < text.len() as u64,
            "what is aside is not counted"
        );
        match hist.seek(i64::MAX).unwrap() {
            Seek::Found { tree, .. } => {
                assert_eq!(
                    tree.keys().collect::<Vec<_>>(),
                    ["conductor/b", "conductor/c"]
                )
            }
            other => panic!("{other:?}"),
        }
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_garbage_checkpoint_sets_its_segment_aside_and_a_new_one_begins_from_nothing() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret.clone(), 1_000).unwrap();
        let a = w.put_blob(b"a").unwrap();
        w.commit(vec![put("conductor/a", &a, 2_000)], 2_000)
            .unwrap();
        w.roll(2_500).unwrap();
        drop(w);
        let hist = HistoryDir::of(&root);
        std::fs::write(hist.checkpoint_path(1), b"garbage").unwrap();
        let w = Writer::open(&root, ret, 9_000).unwrap();
        assert!(
            w.set_aside.as_deref().unwrap().contains("checkpoints"),
            "{:?}",
            w.set_aside
        );
        assert_eq!(
            (w.next_seq, w.tree.len()),
            (1, 0),
            "begun anew, from nothing"
        );
        drop(w);
        assert_eq!(hist.segments(), [0, 1]);
        assert_eq!(hist.header(1).unwrap().t, 9_000);
        assert!(hist.checkpoint(1).unwrap().files.is_empty());
        // The moments before the new segment read as they were.
        match hist.seek(2_400).unwrap() {
            Seek::Found { tree, .. } => assert_eq!(tree.len(), 1),
            other => panic!("{other:?}"),
        }
        let (errors, _) = crate::history::check(&root);
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_forged_blob_list_is_refused_naming_the_file_not_read() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let ret = Retention {
            max_bytes: u64::MAX,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret, 1_000).unwrap();
        w.packing = false;
        // One blob of 2 MiB: named 40 times it would be 80 MiB, over what a recorded file holds.
        let big = w.put_blob(&vec![b'x'; 2 << 20]).unwrap();
        w.packing = true;
        let small = w.put_blob(b"y").unwrap();
        drop(w);
        let hist = HistoryDir::of(&root);
        let forged = |blobs: Vec<String>| {
            let files: Tree = [(
                "conductor/tracks/t1/.message-bus/queue.jsonl".to_owned(),
                FileVer {
                    blobs,
                    len: 0,
                    mtime_us: 1_000,
                    dir: false,
                },
            )]
            .into();
            let cp = CheckpointOut {
                seq: 0,
                t: 1_000,
                files: &files,
            };
            write_checkpoint(&hist, &cp).unwrap();
        };
        forged(vec![big.clone(); 40]);
        let e = hist.checkpoint(0).unwrap_err().to_string();
        assert!(
            e.contains("checkpoints/00000000000000000000.json") && e.contains("40 blobs"),
            "{e}"
        );
        assert!(hist.seek(2_000).is_err());
        forged(vec![small.clone(); MAX_PIECES + 1]);
        let e = hist.checkpoint(0).unwrap_err().to_string();
        assert!(e.contains(&format!("{} blobs", MAX_PIECES + 1)), "{e}");
        // The same through the records of a segment: the segment is named.
        forged(Vec::new());
        let mut lines = String::new();
        for i in 0..40u64 {
            let c = Change {
                seq: i,
                at_us: 1_000,
                path: "conductor/tracks/t1/.message-bus/queue.jsonl".into(),
                kind: Kind::App,
                blob: Some(big.clone()),
                len: 1,
                mtime_us: 1_000,
            };
            lines.push_str(&String::from_utf8(crate::store::json_text(&c, false)).unwrap());
            lines.push('\n');
        }
        let seg = hist.segment_path(0);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes.extend_from_slice(lines.as_bytes());
        std::fs::write(&seg, bytes).unwrap();
        let e = hist.seek(2_000).unwrap_err().to_string();
        assert!(e.contains("segments/00000000000000000000.log"), "{e}");
        let mut t = super::super::timeline::Timeline::open(&root).unwrap();
        let e = t.tree_at(40).unwrap_err().to_string();
        assert!(e.contains("segments/00000000000000000000.log"), "{e}");
        // A checkpoint over its size, or naming more files than a tree holds.
        let cp = hist.checkpoint_path(0);
        std::fs::File::create(&cp)
            .unwrap()
            .set_len(MAX_CHECKPOINT_BYTES + 1)
            .unwrap();
        let e = hist.checkpoint(0).unwrap_err().to_string();
        assert!(
            e.contains("checkpoints/") && e.contains("-byte limit"),
            "{e}"
        );
        let files: Tree = (0..=MAX_TREE_FILES)
            .map(|i| (format!("conductor/x/{i}"), FileVer::default()))
            .collect();
        write_checkpoint(
            &hist,
            &CheckpointOut {
                seq: 0,
                t: 1_000,
                files: &files,
            },
        )
        .unwrap();
        let e = hist.checkpoint(0).unwrap_err().to_string();
        assert!(
            e.contains(&format!("more than {MAX_TREE_FILES} files")),
            "{e}"
        );
        // A version within the bounds reads (39 x 2 MiB is not: 31 is).
        let f = FileVer {
            blobs: vec![big; 31],
            len: 31 << 21,
            mtime_us: 1,
            dir: false,
        };
        assert_eq!(hist.content(&f).unwrap().unwrap().len(), 31 << 21);
    }

    #[test]
    fn the_open_segment_closes_at_a_share_of_max_size_so_the_history_stays_bounded() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::at(d.path());
        let max = 1 << 20;
        let ret = Retention {
            max_bytes: max,
            max_age: std::time::Duration::from_secs(3600),
        };
        let mut w = Writer::open(&root, ret, 1_000).unwrap();
        let hist = HistoryDir::of(&root);
        let file = 2_000_000usize;
        let mut largest = 0;
        for i in 0..12u8 {
            let t = 2_000 + i64::from(i) * 1_000;
            let b = w.put_blob(&vec![b'a' + i; file]).unwrap();
            w.commit(vec![put("conductor/big.json", &b, t)], t).unwrap();
            largest = largest.max(hist.size());
        }
        // Within max_size plus one segment (whose blobs pass a quarter of max_size by at most one
        // file): 24 MB written, never more than about 3 MB kept.
        assert!(
            largest <= max + 2 * file as u64 + 64 * 1024,
            "the history reached {largest} bytes"
        );
        match hist.seek(i64::MAX).unwrap() {
            Seek::Found { tree, .. } => {
                let f = &tree["conductor/big.json"];
                assert_eq!(hist.content(f).unwrap().unwrap(), vec![b'a' + 11; file]);
            }
            other => panic!("{other:?}"),
        }
    }
}
