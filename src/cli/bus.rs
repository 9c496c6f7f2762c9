//! `pantheon bus --track T …`: the message bus of one track (docs/PROTOCOL.md §3 and §5).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use notify::{RecursiveMode, Watcher};
use serde_json::{Value, json};

use super::Outcome;
use crate::engine::{
    Bus, DEFAULT_LOCK_TYPE, EventPattern, Heartbeat, LockKey, MessageKind, Origin, Root, TrackName,
    WorkerId, is_write_event,
    queue::{Filter, Page, QueueCursor},
    time::parse_duration_checked,
};

#[derive(Debug, Args)]
pub struct BusArgs {
    /// The track whose bus to use.
    #[arg(long)]
    pub track: String,
    #[command(subcommand)]
    pub command: BusCommand,
}

#[derive(Debug, Subcommand)]
pub enum BusCommand {
    /// Create the bus files (never wipes existing ones).
    Init,
    /// Append a message to the queue (and touch its events).
    Post {
        /// The message type, e.g. PROGRESS, TASK_COMPLETE (^[A-Z][A-Z0-9_]*$).
        #[arg(value_name = "TYPE")]
        kind: String,
        /// Who posts it (a worker id, a director, orchestrator).
        #[arg(long)]
        source: String,
        /// The payload, a JSON object.
        #[arg(long, default_value = "{}")]
        payload: String,
        /// Post the same message N times from this one process (each with its own id).
        #[arg(long, default_value_t = 1, value_name = "N")]
        count: usize,
        /// Also post one message per JSON line on stdin: a payload object, or
        /// {"type": …, "source": …, "payload": {…}} overriding TYPE and --source.
        #[arg(long)]
        stdin: bool,
    },
    /// Read messages (skipping and counting bad lines).
    Read {
        /// Only messages at or after this moment (compared as instants): RFC 3339, now, back from
        /// now (-5m), or a local time today (10:30).
        #[arg(long, value_name = "TS", allow_hyphen_values = true, value_parser = super::moment)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Only this type.
        #[arg(long = "type", value_name = "TYPE")]
        kind: Option<String>,
        /// Only this source.
        #[arg(long)]
        source: Option<String>,
        /// Only the last N (read from the end of the file).
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
        /// At most N messages (oldest first); `next_cursor` in the output continues from there.
        #[arg(long, value_name = "N", conflicts_with = "follow")]
        limit: Option<usize>,
        /// Continue a paged read from a previous output's `next_cursor`.
        #[arg(long, value_name = "CURSOR", conflicts_with_all = ["follow", "tail"])]
        cursor: Option<String>,
        /// Print matching messages as JSON lines, then keep printing new ones as they arrive.
        #[arg(long)]
        follow: bool,
    },
    /// Acquire or renew the lock on a file.
    Lock {
        /// The file to lock, as the workers name it (a path relative to the project).
        path: String,
        /// The worker taking the lock.
        #[arg(long)]
        worker: String,
        /// Lease length (30m, 2h, 90s).
        #[arg(long, default_value = "30m")]
        ttl: String,
        /// The kind of lock, recorded in locks.json.
        #[arg(long, default_value = DEFAULT_LOCK_TYPE)]
        lock_type: String,
        /// Renew only the lease this fencing token belongs to; a stale token is refused (exit 1).
        #[arg(long, value_name = "N")]
        token: Option<u64>,
    },
    /// Release a lock (only its holder, or an operator with --force).
    Unlock {
        /// The locked file, as it was locked.
        path: String,
        /// The worker releasing the lock (its holder, unless --force).
        #[arg(long)]
        worker: String,
        /// Operator override: release a lock held by someone else (recorded as forced_by).
        #[arg(long)]
        force: bool,
        /// Release only the lease this fencing token belongs to; a stale token is refused (exit 1).
        #[arg(long, value_name = "N")]
        token: Option<u64>,
    },
    /// Record a worker heartbeat (merged into worker-status.json).
    Heartbeat {
        /// The worker reporting.
        #[arg(long)]
        worker: String,
        /// The task it works on.
        #[arg(long)]
        task: String,
        /// RUNNING, COMPLETE, FAILED or BLOCKED.
        #[arg(long)]
        status: String,
        /// Progress, 0–100.
        #[arg(long)]
        progress: Option<f64>,
        /// What it is doing right now, in a few words.
        #[arg(long)]
        subtask: Option<String>,
    },
    /// Wait for an event file matching PATTERN (glob); exits 1 on timeout.
    Wait {
        /// A glob over the event file names in events/ (TASK_COMPLETE_*, FILE_UNLOCK_src_main.rs.event, …).
        pattern: String,
        /// Seconds to wait.
        #[arg(long, default_value_t = 300.0)]
        timeout: f64,
        /// Only count events created after the wait began.
        #[arg(long)]
        fresh: bool,
    },
    /// Report every deadlock cycle among blocked workers.
    Deadlocks,
    /// Locks, workers, events and board of the track at a glance.
    Status,
    /// Archive a finished track's queue and clear its locks, workers and events.
    Archive {
        /// The name of the archive (archive/{ID}/); repeating it finishes an interrupted archive.
        #[arg(long, value_name = "ID")]
        track_id: String,
        /// Archive even with live locks or running workers.
        #[arg(long)]
        force: bool,
    },
}

fn json_of<T: serde::Serialize>(v: T) -> anyhow::Result<Outcome> {
    Ok(Outcome::Json(serde_json::to_value(v)?))
}

/// Runs `pantheon bus …`.
pub(crate) fn run(args: BusArgs, root: &Root, origin: Origin) -> anyhow::Result<Outcome> {
    let bus = Bus::open(root, &TrackName::parse(&args.track)?).with_origin(origin);
    match args.command {
        BusCommand::Init => json_of(bus.init()?),
        BusCommand::Post {
            kind,
            source,
            payload,
            count,
            stdin,
        } => post(&bus, kind, source, &payload, count, stdin),
        BusCommand::Read {
            since,
            kind,
            source,
            tail,
            limit,
            cursor,
            follow,
        } => {
            let filter = Filter {
                since,
                kind,
                source,
            };
            if follow {
                follow_queue(&bus, &filter, tail)
            } else {
                bus.require()?;
                let read = bus.read_page(&filter, tail, &Page { limit, cursor })?;
                for o in &read.oversized {
                    eprintln!("note: {}", o.note(&bus.queue_path()));
                }
                json_of(read)
            }
        }
        BusCommand::Lock {
            path,
            worker,
            ttl,
            lock_type,
            token,
        } => {
            let ttl = parse_duration_checked("--ttl", &ttl)?;
            json_of(bus.acquire_lock_fenced(
                &LockKey::parse(&path)?,
                &WorkerId::parse(&worker)?,
                ttl,
                Some(&lock_type),
                token,
            )?)
        }
        BusCommand::Unlock {
            path,
            worker,
            force,
            token,
        } => json_of(bus.release_lock_fenced(
            &LockKey::parse(&path)?,
            &WorkerId::parse(&worker)?,
            force,
            token,
        )?),
        BusCommand::Heartbeat {
            worker,
            task,
            status,
            progress,
            subtask,
        } => json_of(bus.heartbeat(&Heartbeat {
            worker_id: &WorkerId::parse(&worker)?,
            task_id: Some(&task),
            status: Some(&status),
            progress_pct: progress,
            current_subtask: subtask.as_deref(),
        })?),
        BusCommand::Wait {
            pattern,
            timeout,
            fresh,
        } => {
            let pattern = EventPattern::parse_as("pattern", &pattern)?;
            let Ok(wait) = Duration::try_from_secs_f64(timeout) else {
                anyhow::bail!("--timeout must be a number of seconds, not {timeout}");
            };
            let r = bus.wait_for_event(&pattern, wait, fresh)?;
            if !r.matched {
                anyhow::bail!(
                    "no event matching {:?} in {}{} within {timeout}s",
                    pattern.as_str(),
                    bus.events_dir().display(),
                    if fresh { " (fresh only)" } else { "" }
                );
            }
            json_of(r)
        }
        BusCommand::Deadlocks => json_of(bus.detect_deadlocks()?),
        BusCommand::Status => json_of(bus.status()?),
        BusCommand::Archive { track_id, force } => {
            json_of(bus.archive(&TrackName::parse_as("track id", &track_id)?, force)?)
        }
    }
}

fn post(
    bus: &Bus,
    kind: String,
    source: String,
    payload: &str,
    count: usize,
    stdin: bool,
) -> anyhow::Result<Outcome> {
    let payload: Value = serde_json::from_str(payload)
        .with_context(|| format!("--payload is not JSON: {payload}"))?;
    let kind = MessageKind::parse(&kind)?;
    if !stdin && count != 1 {
        let (posted, first_id, last_id) = bus.post_repeated(&kind, &source, payload, count)?;
        return json_of(json!({"posted": posted, "first_id": first_id, "last_id": last_id}));
    }
    let mut items: Vec<(MessageKind, String, Value)> =
        std::iter::repeat_n((kind.clone(), source.clone(), payload), count).collect();
    if stdin {
        for (i, line) in std::io::stdin().lock().lines().enumerate() {
            let line = line.context("reading stdin")?;
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&line)
                .with_context(|| format!("stdin line {} is not JSON", i + 1))?;
            let full = v.get("payload").is_some() || v.get("type").is_some();
            let item = if full {
                (
                    match v.get("type").and_then(Value::as_str) {
                        Some(t) => MessageKind::parse(t)
                            .with_context(|| format!("stdin line {}", i + 1))?,
                        None => kind.clone(),
                    },
                    v.get("source")
                        .and_then(Value::as_str)
                        .unwrap_or(&source)
                        .to_owned(),
                    v.get("payload").cloned().unwrap_or(Value::Null),
                )
            } else {
                (kind.clone(), source.clone(), v)
            };
            items.push(item);
        }
    }
    let posted = bus.post_batch(items)?;
    if posted.len() == 1 && !stdin {
        return json_of(&posted[0]);
    }
    json_of(json!({
        "posted": posted.len(),
        "first_id": posted.first().map(|e| e.id.clone()),
        "last_id": posted.last().map(|e| e.id.clone()),
    }))
}

/// Prints matching messages as JSON lines, then every new one as it is appended (woken by notify).
fn follow_queue(bus: &Bus, filter: &Filter, tail: Option<usize>) -> anyhow::Result<Outcome> {
    bus.require()?;
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        // Our own reads of the queue notify too; waking on them would spin.
        if ev.as_ref().is_ok_and(|e| !is_write_event(e)) {
            return;
        }
        let _ = tx.send(ev);
    })?;
    // Watch the directory, so an archived (renamed) and re-created queue is followed too.
    watcher.watch(&bus.dir, RecursiveMode::NonRecursive)?;
    let first = bus.read(filter, tail)?;
    let mut out = std::io::stdout().lock();
    let mut print = |msgs: &[crate::engine::Envelope]| -> bool {
        for m in msgs.iter().filter(|m| filter.matches(m)) {
            let line = serde_json::to_string(m).expect("envelopes serialise");
            if writeln!(out, "{line}").is_err() {
                return false;
            }
        }
        out.flush().is_ok()
    };
    if !print(&first.messages) {
        return Ok(Outcome::Exit(ExitCode::SUCCESS));
    }
    let mut cursor = QueueCursor::at(&bus.queue_path(), first.next_offset);
    while rx.recv().is_ok() {
        while rx.try_recv().is_ok() {}
        let msgs = cursor.poll()?;
        if !print(&msgs) {
            break;
        }
    }
    Ok(Outcome::Exit(ExitCode::SUCCESS))
}
