//! The bridge's files for the console's bridge view (docs/NATS.md): the shared tracks' cursors, the
//! outbox, its sent records and the dead letters. Each part is re-read only when its directory
//! changed; the status file is read by the model on every snapshot it publishes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::engine::{Root, layout, nats as eb, outbox};
use crate::live::snapshot::{BRIDGE_KEPT, BridgeKind, BridgeRow, BridgeView};

/// Which of the bridge's files changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum BridgePart {
    /// `conductor/bridge/status.json`.
    Status,
    Cursors,
    Outbox,
    Sent,
    Dead,
    /// A directory appeared or went: everything is listed again.
    All,
}

/// The part of the bridge's files `path` belongs to, if any.
pub(super) fn part_of(root: &Root, path: &Path) -> Option<BridgePart> {
    if path == eb::status_path(root) {
        return Some(BridgePart::Status);
    }
    if eb::watched_dirs(root).iter().any(|d| d == path) {
        return Some(BridgePart::All);
    }
    let parts = [
        (eb::track::cursors_dir(root), BridgePart::Cursors),
        (eb::dead_dir(root), BridgePart::Dead),
        (outbox::sent_dir(root), BridgePart::Sent),
        (outbox::outbox_dir(root), BridgePart::Outbox),
        (eb::bridge_dir(root), BridgePart::All),
    ];
    parts
        .into_iter()
        .find(|(d, _)| path.starts_with(d))
        .map(|(d, p)| {
            // Only a file directly in the directory is a record; deeper paths are new directories.
            if path.parent() == Some(d.as_path()) && !path.is_dir() {
                p
            } else {
                BridgePart::All
            }
        })
}

/// The bridge's records as last read.
#[derive(Debug, Default)]
pub(super) struct BridgeTracker {
    cursors: Vec<BridgeRow>,
    pending: Vec<BridgeRow>,
    sent: Vec<BridgeRow>,
    sent_total: usize,
    dead: Vec<BridgeRow>,
    unreadable: BTreeMap<PathBuf, String>,
}

fn text(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn num(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// The `*.json` files of `dir` (no hidden or temporary ones), newest first by modification time.
fn records(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".json") && !n.starts_with('.') && !n.starts_with(layout::TEMP_PREFIX)
        })
        .map(|e| {
            let t = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (t, e.path())
        })
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    files.into_iter().map(|(_, p)| p).collect()
}

/// True when two lists hold the same records.
fn same(a: &[BridgeRow], b: &[BridgeRow]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.id == y.id && x.at == y.at && x.raw == y.raw)
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl BridgeTracker {
    /// Reads the files of `part` again; true when the bridge view changes.
    pub(super) fn refresh(&mut self, root: &Root, part: BridgePart) -> bool {
        match part {
            BridgePart::Status => true,
            BridgePart::Cursors => self.read_cursors(root),
            BridgePart::Outbox => self.read_pending(root),
            BridgePart::Sent => self.read_sent(root),
            BridgePart::Dead => self.read_dead(root),
            BridgePart::All => {
                // Every part is read (no short circuit).
                let c = self.read_cursors(root);
                let p = self.read_pending(root);
                let s = self.read_sent(root);
                let d = self.read_dead(root);
                c || p || s || d
            }
        }
    }

    /// Reads the files of `paths` (at most `keep`), each into a row by `row`.
    fn read(
        &mut self,
        dir: &Path,
        keep: usize,
        row: impl Fn(&Path, Arc<Value>) -> BridgeRow,
    ) -> (Vec<BridgeRow>, usize) {
        self.unreadable.retain(|p, _| p.parent() != Some(dir));
        let files = records(dir);
        let total = files.len();
        let mut out = Vec::new();
        for p in files.into_iter().take(keep) {
            match crate::engine::read_json(&p) {
                Ok(Some(v)) if v.is_object() => out.push(row(&p, Arc::new(v))),
                Ok(Some(_)) => {
                    self.unreadable.insert(p, "not a JSON object".into());
                }
                Ok(None) => {}
                Err(e) => {
                    self.unreadable.insert(p, e.to_string());
                }
            }
        }
        (out, total)
    }

    fn read_cursors(&mut self, root: &Root) -> bool {
        let (mut rows, _) = self.read(&eb::track::cursors_dir(root), usize::MAX, |p, v| {
            BridgeRow {
                kind: BridgeKind::Track,
                id: stem(p),
                subject: text(&v, "stream"),
                what: String::new(),
                at: text(&v, "updated"),
                raw: v,
            }
        });
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        let changed = !same(&self.cursors, &rows);
        self.cursors = rows;
        changed
    }

    fn read_pending(&mut self, root: &Root) -> bool {
        let (mut rows, _) = self.read(&outbox::outbox_dir(root), usize::MAX, |p, v| BridgeRow {
            kind: BridgeKind::Pending,
            id: match text(&v, "outbox_id") {
                id if id.is_empty() => stem(p),
                id => id,
            },
            subject: text(&v, "subject"),
            what: format!(
                "{} {}/{}",
                text(&v, "kind"),
                text(&v, "workflow_id"),
                text(&v, "step")
            ),
            at: text(&v, "created"),
            raw: v,
        });
        rows.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        let changed = !same(&self.pending, &rows);
        self.pending = rows;
        changed
    }

    fn read_sent(&mut self, root: &Root) -> bool {
        let (mut rows, total) = self.read(&outbox::sent_dir(root), BRIDGE_KEPT, |p, v| BridgeRow {
            kind: BridgeKind::Sent,
            id: match text(&v, "outbox_id") {
                id if id.is_empty() => stem(p),
                id => id,
            },
            subject: text(&v, "subject"),
            what: format!(
                "seq {} · {} {}/{}",
                num(&v, "stream_seq"),
                text(&v, "kind"),
                text(&v, "workflow_id"),
                text(&v, "step")
            ),
            at: text(&v, "sent_at"),
            raw: v,
        });
        rows.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
        let changed = !same(&self.sent, &rows) || total != self.sent_total;
        self.sent = rows;
        self.sent_total = total;
        changed
    }

    fn read_dead(&mut self, root: &Root) -> bool {
        let (mut rows, _) = self.read(&eb::dead_dir(root), usize::MAX, |p, v| BridgeRow {
            kind: BridgeKind::Dead,
            id: stem(p),
            subject: text(&v, "subject"),
            what: text(&v, "reason"),
            at: text(&v, "dead_at"),
            raw: v,
        });
        rows.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
        let changed = !same(&self.dead, &rows);
        self.dead = rows;
        changed
    }

    /// The view, with each track's counts taken from the status file (`tracks` in `status`).
    pub(super) fn view(&self, status: Option<&eb::Status>) -> BridgeView {
        let mut rows: Vec<BridgeRow> = self
            .cursors
            .iter()
            .map(|c| {
                let mut r = c.clone();
                let mut what = format!(
                    "cursor seq {} · offset {}",
                    num(&c.raw, "stream_seq"),
                    num(&c.raw, "published_offset")
                );
                if let Some(t) = status.and_then(|s| s.tracks.get(&c.id)) {
                    what.push_str(&format!(
                        " · published {} · mirrored {} · lag {}",
                        t.published, t.mirrored, t.lag
                    ));
                }
                r.what = what;
                r
            })
            .collect();
        // A record the bridge cannot publish says why and what to do (`stuck` in the status).
        let stuck = status.map(|s| s.stuck.as_slice()).unwrap_or_default();
        rows.extend(self.pending.iter().map(|r| {
            let mut r = r.clone();
            if let Some(st) = stuck.iter().find(|s| s.outbox_id == r.id) {
                r.what = format!(
                    "{} · waiting, attempt {}, next in {}s: {}",
                    r.what,
                    st.attempts,
                    st.retry_in_s,
                    st.why()
                );
            }
            r
        }));
        rows.extend(self.dead.iter().cloned());
        rows.extend(self.sent.iter().cloned());
        BridgeView {
            rows,
            pending: self.pending.len(),
            sent: self.sent_total,
            dead: self.dead.len(),
            unreadable: self
                .unreadable
                .iter()
                .map(|(p, e)| format!("{}: {e}", p.display()))
                .collect(),
        }
    }
}
