//! Deadlock detection (docs/PROTOCOL.md §3.6): a wait-for graph from each worker's latest message when it is
//! `BLOCKED`, resolved through the live locks and the workers' tasks; every cycle is reported.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Bus;
use super::locks::normalize_key;
use super::model::{Envelope, LockEntry, WorkerEntry, WorkerStatus};
use crate::error::Result;

/// One wait: `worker` is blocked on `resource`, which `holder` holds (or runs).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WaitEdge {
    /// The waiting worker.
    pub worker: String,
    /// The task it was on, if it said.
    pub task_id: Option<String>,
    /// As written in the `BLOCKED` message (`FILE_UNLOCK_{path}`, `file_lock`, a task id).
    pub waiting_for: String,
    /// The lock path or task id waited for.
    pub resource: String,
    /// The worker holding the lock or running the task; `None` when nobody does (the wait will end).
    pub holder: Option<String>,
    /// When it said it was blocked (the message's timestamp).
    pub since: String,
}

/// A cycle of waits: nobody in it can move.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cycle {
    /// The workers in wait order, starting from the smallest id.
    pub workers: Vec<String>,
    /// The resources waited for, in the same order.
    pub resources: Vec<String>,
    /// Each wait of the cycle, in order.
    pub edges: Vec<WaitEdge>,
}

/// Every wait and every cycle.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct DeadlockReport {
    /// True when at least one cycle exists.
    pub deadlocked: bool,
    /// Every cycle found.
    pub cycles: Vec<Cycle>,
    /// Every current wait, including those that are not part of a cycle.
    pub waits: Vec<WaitEdge>,
}

fn lock_holder(locks: &[LockEntry], path: &str, now: DateTime<Utc>) -> Option<String> {
    let key = normalize_key(path).ok()?;
    locks
        .iter()
        .find(|l| normalize_key(&l.path).ok().as_deref() == Some(key.as_str()) && l.is_live(now))
        .and_then(|l| l.worker_id.clone())
}

fn task_runner(
    messages: &[Envelope],
    workers: &[WorkerEntry],
    task: &str,
    waiter: &str,
) -> Option<String> {
    let active = |w: &&WorkerEntry| {
        w.task_id.as_deref() == Some(task)
            && !matches!(w.status, WorkerStatus::Complete | WorkerStatus::Failed)
    };
    if let Some(w) = workers.iter().find(active) {
        return Some(w.worker_id.clone());
    }
    // Fall back to the latest message about the task from someone else (e.g. WORKER_DISPATCHED).
    messages.iter().rev().find_map(|m| {
        (m.payload_str("task_id") == Some(task) && m.source != waiter).then(|| {
            m.payload_str("worker_id")
                .map(str::to_owned)
                .unwrap_or_else(|| m.source.clone())
        })
    })
}

fn norm(path: &str) -> String {
    normalize_key(path).unwrap_or_else(|_| path.to_owned())
}

/// Builds the wait-for graph and reports every cycle.
pub fn detect_deadlocks(
    messages: &[Envelope],
    locks: &[LockEntry],
    workers: &[WorkerEntry],
    now: DateTime<Utc>,
) -> DeadlockReport {
    // Each source's latest message (by position in the log, which is append order).
    let mut latest: BTreeMap<&str, &Envelope> = BTreeMap::new();
    for m in messages {
        latest.insert(m.source.as_str(), m);
    }
    let mut waits = Vec::new();
    for (worker, m) in latest {
        if m.kind != super::vocab::MessageType::Blocked.as_str() {
            continue;
        }
        let waiting_for = m.payload_str("waiting_for").unwrap_or("").to_owned();
        let given = m.payload_str("resource").map(str::to_owned);
        let (resource, holder) = if let Some(path) = waiting_for.strip_prefix("FILE_UNLOCK_") {
            (norm(path), lock_holder(locks, path, now))
        } else if waiting_for == "file_lock" || (waiting_for.is_empty() && given.is_some()) {
            let path = given.clone().unwrap_or_default();
            match lock_holder(locks, &path, now) {
                Some(h) => (norm(&path), Some(h)),
                None if waiting_for.is_empty() => {
                    let h = task_runner(messages, workers, &path, worker);
                    (path, h)
                }
                None => (norm(&path), None),
            }
        } else {
            let h = task_runner(messages, workers, &waiting_for, worker);
            (waiting_for.clone(), h)
        };
        waits.push(WaitEdge {
            worker: worker.to_owned(),
            task_id: m.payload_str("task_id").map(str::to_owned),
            waiting_for,
            resource,
            holder,
            since: m.timestamp.clone(),
        });
    }

    // Each worker waits on at most one holder, so cycles are found by walking from every node.
    let next: HashMap<&str, usize> = waits
        .iter()
        .enumerate()
        .map(|(i, w)| (w.worker.as_str(), i))
        .collect();
    let mut state: HashMap<&str, u8> = HashMap::new(); // 1 = on the current walk, 2 = done
    let mut cycles = Vec::new();
    for start in waits.iter().map(|w| w.worker.as_str()) {
        let mut path: Vec<&str> = Vec::new();
        let mut node = start;
        loop {
            match state.get(node) {
                Some(2) => break,
                Some(1) => {
                    let at = path.iter().position(|n| *n == node).unwrap_or(0);
                    cycles.push(cycle_of(&path[at..], &waits, &next));
                    break;
                }
                _ => {}
            }
            state.insert(node, 1);
            path.push(node);
            match next.get(node).and_then(|i| waits[*i].holder.as_deref()) {
                Some(h) => node = h,
                None => break,
            }
        }
        for n in path {
            state.insert(n, 2);
        }
    }
    cycles.sort_by(|a, b| a.workers.cmp(&b.workers));
    DeadlockReport {
        deadlocked: !cycles.is_empty(),
        cycles,
        waits,
    }
}

fn cycle_of(members: &[&str], waits: &[WaitEdge], next: &HashMap<&str, usize>) -> Cycle {
    let min = (0..members.len()).min_by_key(|i| members[*i]).unwrap_or(0);
    let ordered: Vec<&str> = members[min..]
        .iter()
        .chain(&members[..min])
        .copied()
        .collect();
    let edges: Vec<WaitEdge> = ordered
        .iter()
        .filter_map(|w| next.get(w).map(|i| waits[*i].clone()))
        .collect();
    Cycle {
        workers: ordered.iter().map(|s| s.to_string()).collect(),
        resources: edges.iter().map(|e| e.resource.clone()).collect(),
        edges,
    }
}

impl Bus {
    /// Reads the queue, locks and workers and reports every deadlock cycle.
    pub fn detect_deadlocks(&self) -> Result<DeadlockReport> {
        self.require()?;
        let messages = super::queue::read(&self.queue_path(), &Default::default())?.messages;
        let locks: Vec<LockEntry> = self.locks()?.into_iter().map(|l| l.entry).collect();
        let workers: Vec<WorkerEntry> = self.workers()?.into_iter().map(|w| w.entry).collect();
        Ok(detect_deadlocks(&messages, &locks, &workers, Utc::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(source: &str, kind: &str, payload: serde_json::Value) -> Envelope {
        Envelope {
            id: format!("msg-{source}"),
            kind: kind.into(),
            source: source.into(),
            timestamp: "2026-02-01T12:00:00Z".into(),
            payload,
            ..Default::default()
        }
    }

    fn lock(path: &str, holder: &str) -> LockEntry {
        LockEntry::from_value(
            path,
            &json!({"worker_id": holder, "expires_at": "2099-01-01T00:00:00Z"}),
        )
    }

    #[test]
    fn reports_every_cycle_with_workers_and_resources() {
        let messages = vec![
            // w1 <-> w2 over two files.
            msg(
                "w1",
                "BLOCKED",
                json!({"task_id": "1", "waiting_for": "FILE_UNLOCK_./b.ts", "resource": "b.ts"}),
            ),
            msg(
                "w2",
                "BLOCKED",
                json!({"task_id": "2", "waiting_for": "file_lock", "resource": "a.ts"}),
            ),
            // w3 -> task 4 (run by w4) -> w3's file: a second cycle, through a task.
            msg("w3", "BLOCKED", json!({"task_id": "3", "waiting_for": "4"})),
            msg(
                "w4",
                "BLOCKED",
                json!({"task_id": "4", "waiting_for": "file_lock", "resource": "c.ts"}),
            ),
            // w5 was blocked but moved on: not a wait any more.
            msg(
                "w5",
                "BLOCKED",
                json!({"waiting_for": "file_lock", "resource": "a.ts"}),
            ),
            msg("w5", "PROGRESS", json!({"task_id": "5"})),
            // w6 waits for w1, which is in a cycle: a wait, but not itself in a cycle.
            msg(
                "w6",
                "BLOCKED",
                json!({"waiting_for": "file_lock", "resource": "d.ts"}),
            ),
        ];
        let locks = vec![
            lock("a.ts", "w1"),
            lock("b.ts", "w2"),
            lock("c.ts", "w3"),
            lock("d.ts", "w1"),
        ];
        let workers = vec![WorkerEntry::from_value(
            "w4",
            &json!({"task_id": "4", "status": "BLOCKED"}),
        )];
        let r = detect_deadlocks(&messages, &locks, &workers, Utc::now());
        assert!(r.deadlocked);
        assert_eq!(r.waits.len(), 5);
        let cycles: Vec<_> = r
            .cycles
            .iter()
            .map(|c| (c.workers.clone(), c.resources.clone()))
            .collect();
        assert_eq!(
            cycles,
            vec![
                (
                    vec!["w1".to_string(), "w2".into()],
                    vec!["b.ts".to_string(), "a.ts".into()]
                ),
                (
                    vec!["w3".to_string(), "w4".into()],
                    vec!["4".to_string(), "c.ts".into()]
                ),
            ]
        );
    }

    #[test]
    fn expired_locks_and_finished_tasks_break_the_chain() {
        let messages = vec![
            msg(
                "w1",
                "BLOCKED",
                json!({"waiting_for": "file_lock", "resource": "a"}),
            ),
            msg(
                "w2",
                "BLOCKED",
                json!({"waiting_for": "file_lock", "resource": "b"}),
            ),
        ];
        let expired = LockEntry::from_value(
            "b",
            &json!({"worker_id": "w1", "expires_at": "2020-01-01T00:00:00Z"}),
        );
        let r = detect_deadlocks(&messages, &[lock("a", "w2"), expired], &[], Utc::now());
        assert!(!r.deadlocked);
        assert_eq!(r.waits[1].holder, None);
    }
}
