//! What a confirmation showed: the version of every record it acts on (a dispatch's inbox, ack
//! status and delivery; a workflow's status and step; a lock's holder and lease; a dead letter's
//! deliveries; a board session's phase and round). `Enter` acts only when the records are still
//! what was shown; otherwise the console refuses and says what changed, so a confirmation never
//! lands on a newer state than the one the operator read (a session that moved on, a lock taken by
//! another worker, a dispatch acked meanwhile).

use crate::live::snapshot::Snapshot;

use super::ops::Op;

/// (what, its value) for every field a confirmation's act depends on, in a fixed order.
pub(crate) type Version = Vec<(String, String)>;

/// The version of the records `op` acts on, as `snap` has them (each action's module says which,
/// `Act::version`).
pub(crate) fn version(op: &Op, snap: &Snapshot) -> Version {
    let mut v = Version::new();
    op.version(&mut v, snap);
    v
}

/// A dispatch's version: its inbox, ack status and deliveries.
pub(crate) fn dispatch(v: &mut Version, handoff_id: &str, snap: &Snapshot) {
    let found = snap
        .inboxes
        .iter()
        .chain(std::iter::once(&*snap.quarantine))
        .find_map(|i| {
            i.dispatches
                .iter()
                .find(|d| &*d.dispatch.handoff_id == handoff_id)
                .map(|d| (i.god.as_str(), d))
        });
    match found {
        None => v.push((handoff_id.to_owned(), "in no inbox".into())),
        Some((god, d)) => {
            let x = &d.dispatch;
            v.push((format!("{handoff_id}: inbox"), god.to_owned()));
            v.push((format!("{handoff_id}: ack"), x.ack_status.to_string()));
            v.push((
                format!("{handoff_id}: deliveries"),
                x.deliveries.to_string(),
            ));
        }
    }
}

/// A workflow's version: its status, step and god.
pub(crate) fn workflow(v: &mut Version, wf: &str, snap: &Snapshot) {
    match snap.workflows.iter().find(|w| &*w.id == wf) {
        None => v.push((wf.to_owned(), "gone".into())),
        Some(w) => {
            let s = &w.state;
            v.push((format!("{wf}: status"), s.status.to_string()));
            v.push((
                format!("{wf}: step"),
                s.current_step.as_deref().unwrap_or("-").to_owned(),
            ));
            v.push((
                format!("{wf}: god"),
                s.dispatched_to.as_deref().unwrap_or("-").to_owned(),
            ));
        }
    }
}

/// A dead letter's version: its deliveries.
pub(crate) fn dead_letter(v: &mut Version, handoff_id: &str, snap: &Snapshot) {
    let found = snap.dead_letters.iter().find_map(|i| {
        i.dispatches
            .iter()
            .find(|d| &*d.dispatch.handoff_id == handoff_id)
    });
    match found {
        None => v.push((format!("dead letter {handoff_id}"), "no longer dead".into())),
        Some(d) => v.push((
            format!("dead letter {handoff_id}: deliveries"),
            d.dispatch.deliveries.to_string(),
        )),
    }
}

/// What differs between the version shown and the version now, in words (`None`: nothing).
pub(crate) fn changed(shown: &Version, now: &Version) -> Option<String> {
    let mut out = Vec::new();
    for (what, was) in shown {
        match now.iter().find(|(w, _)| w == what) {
            Some((_, is)) if is == was => {}
            Some((_, is)) => out.push(format!("{what} {was} → {is}")),
            None => {
                // The record changed shape (a lock released, a dispatch gone): say what it is now.
                let record = what.split(": ").next().unwrap_or(what);
                let is = now
                    .iter()
                    .find(|(w, _)| w.split(": ").next() == Some(record))
                    .map_or("gone", |(_, v)| v.as_str());
                let line = format!("{record} is {is}");
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    for (what, is) in now {
        let line = format!("{what} is {is}");
        if !shown.iter().any(|(w, _)| w == what) && !what.contains(": ") && !out.contains(&line) {
            out.push(line);
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Version {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn a_change_is_said_field_by_field_and_a_record_that_went_is_said_once() {
        let shown = v(&[
            ("board of alpha: session", "s1"),
            ("board of alpha: phase", "DISCUSSING"),
        ]);
        assert_eq!(changed(&shown, &shown), None);
        let now = v(&[
            ("board of alpha: session", "s1"),
            ("board of alpha: phase", "VOTING"),
        ]);
        assert_eq!(
            changed(&shown, &now).as_deref(),
            Some("board of alpha: phase DISCUSSING → VOTING")
        );
        let lock = v(&[("lock a.rs: holder", "w1"), ("lock a.rs: acquired", "t1")]);
        assert_eq!(
            changed(&lock, &v(&[("lock a.rs", "released")])).as_deref(),
            Some("lock a.rs is released")
        );
    }
}
