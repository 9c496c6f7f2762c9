//! Opening the history for writing: the newest segment resumed (its tail repaired), or set aside
//! and begun anew when it fails the writer's checks or cannot be read (docs/HISTORY.md, "Set
//! aside").

use std::collections::{BTreeSet, HashMap};

use super::pack::{PACKS_DIR, PackReader, PackWriter};
use super::{
    BLOBS_DIR, CHECKPOINTS_DIR, CheckpointOut, FORMAT, HistoryDir, Kind, Retention, SEGMENTS_DIR,
    Tree, Writer, apply, check_tree_len, cut_segment, hist_format, new_segment, reopen_segment,
    set_aside, write_checkpoint,
};
use crate::error::{Error, Result};
use crate::store::Root;

impl Writer {
    /// Opens the history for appending (creating it when missing), after repairing the tail a
    /// killed writer may have left: a torn last line is cut, and records whose blob is missing are
    /// cut with everything after them.
    pub fn open(root: &Root, retention: Retention, now_us: i64) -> Result<Self> {
        let hist = HistoryDir::of(root);
        for d in [SEGMENTS_DIR, CHECKPOINTS_DIR, BLOBS_DIR, PACKS_DIR] {
            crate::store::atomic::ensure_dir(root, &hist.dir.join(d))?;
        }
        let segs = hist.segments();
        let mut w = match segs.last() {
            None => Self::begin(hist, Tree::new(), 0, now_us, true, retention)?,
            Some(&seg) => match Self::resume(hist.clone(), seg, retention.clone()) {
                Ok(w) => w,
                // Not a passing failure (an I/O error is reported and tried again): the segment
                // cannot be written or read as it is, so it goes aside and a new one begins.
                Err(e @ (Error::Corrupt { .. } | Error::Refused(_) | Error::NotFound(_))) => {
                    Self::begin_anew(hist, seg, now_us, retention, e)?
                }
                Err(e) => return Err(e),
            },
        };
        if hist_format(&w.hist, w.seg) < FORMAT {
            // A segment of an older format is closed, so the records that may name packs begin a
            // segment whose header says so.
            w.roll(now_us)?;
        }
        w.enforce_retention(now_us)?;
        Ok(w)
    }

    /// A history's first segment, or the one begun after a newest segment was set aside: segment
    /// `seq` showing `tree` at `t` (its checkpoint written when `checkpoint`), with a new pack.
    fn begin(
        hist: HistoryDir,
        tree: Tree,
        seq: u64,
        t: i64,
        checkpoint: bool,
        retention: Retention,
    ) -> Result<Self> {
        if checkpoint {
            write_checkpoint(
                &hist,
                &CheckpointOut {
                    seq,
                    t,
                    files: &tree,
                },
            )?;
        }
        let pack = PackWriter::open(&hist.root, &hist.dir, seq, true, std::iter::empty())?;
        let file = new_segment(&hist, seq, t)?;
        Ok(Self {
            hist,
            tree,
            seg: seq,
            seg_file: file,
            seg_records: 0,
            seg_bytes: 0,
            seg_blob_bytes: 0,
            next_seq: seq,
            last_t: t,
            blob_dirs: HashMap::new(),
            pack,
            packing: true,
            retention,
            repaired: 0,
            set_aside: None,
            unsynced: None,
        })
    }

    /// The newest segment `seg` reopened for appending, its tail repaired.
    fn resume(hist: HistoryDir, seg: u64, retention: Retention) -> Result<Self> {
        let root = hist.root.clone();
        let cp = hist.checkpoint(seg)?;
        let path = hist.segment_path(seg);
        // The writer's checks come before anything is read or cut: a planted file is never
        // truncated.
        let mut file = reopen_segment(&root, &path, None)?;
        let read = hist.segment(seg)?;
        let mut tree = cp.files;
        let mut next_seq = cp.seq;
        let mut last_t = cp.t;
        let mut keep_len = read.whole_len;
        let mut kept = 0u64;
        let mut repaired = 0usize;
        let mut packs = PackReader::new(&hist.dir);
        let mut appended = BTreeSet::new();
        for (i, (off, c)) in read.records.iter().enumerate() {
            let blob_ok = c
                .blob
                .as_deref()
                .is_none_or(|b| hist.has_blob(b, &mut packs));
            if c.seq != next_seq || c.at_us < last_t || !blob_ok {
                keep_len = *off;
                repaired = read.records.len() - i;
                break;
            }
            apply(&mut tree, c);
            check_tree_len(&path, &tree)?;
            if c.kind == Kind::App {
                appended.insert(c.path.clone());
            }
            next_seq = c.seq + 1;
            last_t = c.at_us;
            kept += 1;
        }
        hist.check_appended(seg, &tree, &appended)?;
        let names = read.records[..kept as usize]
            .iter()
            .filter_map(|(_, c)| c.blob.as_deref());
        let pack = PackWriter::open(&root, &hist.dir, seg, false, names)?;
        cut_segment(&mut file, &path, keep_len)?;
        Ok(Self {
            hist,
            tree,
            seg,
            seg_file: file,
            seg_records: kept,
            seg_bytes: keep_len,
            seg_blob_bytes: 0,
            next_seq,
            last_t,
            blob_dirs: HashMap::new(),
            pack,
            packing: true,
            retention,
            repaired,
            set_aside: None,
            unsynced: None,
        })
    }

    /// Sets the newest segment `seg` aside (and its checkpoint when that cannot be read) because
    /// of `why`, and begins segment `seg` anew (its pack emptied, or set aside by
    /// [`PackWriter::open`] when it fails the checks): from its checkpoint's tree when that
    /// reads, else from an empty tree at `now_us` (the recorder's first scan then records every
    /// file as it finds it). The records of the segment set aside are not part of the history.
    fn begin_anew(
        hist: HistoryDir,
        seg: u64,
        now_us: i64,
        retention: Retention,
        why: Error,
    ) -> Result<Self> {
        let root = hist.root.clone();
        let cp = hist.checkpoint(seg);
        let mut aside = Vec::new();
        // Its pack is emptied by the new segment's (set aside there if it fails the checks).
        let mut paths = vec![hist.segment_path(seg)];
        if cp.is_err() {
            paths.push(hist.checkpoint_path(seg));
        }
        for p in paths {
            if std::fs::symlink_metadata(&p).is_ok() {
                aside.push(set_aside(&root, &hist.dir, &p)?.display().to_string());
            }
        }
        let mut w = match cp {
            Ok(cp) => Self::begin(hist, cp.files, seg, cp.t, false, retention)?,
            Err(_) => Self::begin(hist, Tree::new(), seg, now_us, true, retention)?,
        };
        w.set_aside = Some(format!(
            "{why}; set aside as {} and segment {seg} begun anew",
            aside.join(", ")
        ));
        Ok(w)
    }
}
