//! The simulation's in-memory event log: what happened, in order, with the tick it happened at.
//!
//! Entries hold no timestamps and no random ids (handoff, ack, message and session ids are generated
//! by the engine from the clock and the OS), so two runs with the same seed produce equal logs.

use std::collections::BTreeMap;

use serde::Serialize;

/// One thing the simulation did or saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimEvent {
    pub tick: u64,
    /// What happened (`ack_rejected`, `lock_acquired`, `board_vote`, …).
    pub kind: String,
    /// Who did it: a god, worker, director, `orchestrator`, `sim-operator` or `operator`.
    pub actor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// A short deterministic detail (target god, lock path, verdict…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Builder for an event before it is recorded.
pub struct EventBuilder<'a> {
    log: &'a mut EventLog,
    event: SimEvent,
}

impl EventBuilder<'_> {
    pub fn workflow(mut self, wf: &str) -> Self {
        self.event.workflow = Some(wf.to_owned());
        self
    }
    pub fn step(mut self, step: &str) -> Self {
        self.event.step = Some(step.to_owned());
        self
    }
    pub fn track(mut self, track: &str) -> Self {
        self.event.track = Some(track.to_owned());
        self
    }
    pub fn task(mut self, task: &str) -> Self {
        self.event.task = Some(task.to_owned());
        self
    }
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.event.detail = Some(detail.into());
        self
    }
}

impl Drop for EventBuilder<'_> {
    fn drop(&mut self) {
        let e = std::mem::replace(
            &mut self.event,
            SimEvent {
                tick: 0,
                kind: String::new(),
                actor: String::new(),
                workflow: None,
                step: None,
                track: None,
                task: None,
                detail: None,
            },
        );
        tracing::debug!(tick = e.tick, kind = %e.kind, actor = %e.actor, detail = ?e.detail, "demo event");
        self.log.events.push(e);
    }
}

/// The ordered log.
#[derive(Debug, Default, Clone)]
pub struct EventLog {
    events: Vec<SimEvent>,
}

impl EventLog {
    /// Starts an event; it is recorded when the builder is dropped (end of the statement).
    pub fn at(&mut self, tick: u64, kind: &str, actor: &str) -> EventBuilder<'_> {
        EventBuilder {
            event: SimEvent {
                tick,
                kind: kind.to_owned(),
                actor: actor.to_owned(),
                workflow: None,
                step: None,
                track: None,
                task: None,
                detail: None,
            },
            log: self,
        }
    }

    /// Every event so far, in order.
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }

    /// How many events of each kind.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for e in &self.events {
            *m.entry(e.kind.clone()).or_insert(0) += 1;
        }
        m
    }

    /// How many events of `kind`.
    pub fn count(&self, kind: &str) -> usize {
        self.events.iter().filter(|e| e.kind == kind).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_recorded_in_order_and_counted_by_kind() {
        let mut log = EventLog::default();
        log.at(1, "blocked", "w1")
            .track("t")
            .task("task-1")
            .detail("a.ts");
        log.at(2, "blocked", "w2");
        log.at(2, "unblocked", "w1");
        assert_eq!(log.events().len(), 3);
        assert_eq!(log.events()[0].detail.as_deref(), Some("a.ts"));
        assert_eq!(log.events()[2].kind, "unblocked");
        assert_eq!(log.count("blocked"), 2);
        assert_eq!(log.counts().get("unblocked"), Some(&1));
    }
}
