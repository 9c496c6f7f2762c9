//! Force-unlock a lock of pane 4 (`u`): `FILE_UNLOCK` posted with `forced_by: operator`.

use crate::console::marks::SkipWhy;
use chrono::{DateTime, Utc};

use crate::engine::{Error, LockKey, TrackName, WorkerId, time::relative};
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Effect, FlashKind, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::items;
use super::super::keymap::Pane;
use super::super::marks::FanOut;
use super::super::ops::{Done, OPERATOR, Outcome};
use super::super::rowkey::RowKey;
use super::super::shown::Version;
use super::{Act, Op, line, marks_fit};

/// `u` on a lock.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if marks_fit(app, &|_: &App, _: &RowKey| true, "listed") {
        start_unlock(app);
    }
    Vec::new()
}

fn start_unlock(app: &mut App) {
    if app.pane() == Pane::Locks && app.refuse_if_gone(Pane::Locks) {
        return;
    }
    let rows = items::locks(app.snapshot(), &app.filter(Pane::Locks));
    let Some((track, lock)) = rows.get(app.selected(Pane::Locks)).copied() else {
        return app.need("a lock in the Locks pane (4)");
    };
    // Both parsed here, where the op is built: a hostile name never reaches a confirmation.
    match TrackName::parse(track).and_then(|t| Ok((t, LockKey::parse(&lock.path)?))) {
        Ok((track, path)) => app.confirm(Op::ForceUnlock { track, path }),
        Err(e) => app.flash(FlashKind::Error, e.to_string()),
    }
}

impl Act for super::ForceUnlock<'_> {
    fn title(&self) -> String {
        format!("Force-unlock {}", self.path)
    }

    fn verb(&self) -> &'static str {
        "Unlock"
    }

    fn is_destructive(&self) -> bool {
        true
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, now: DateTime<Utc>) {
        use Tone::*;
        let (track, path) = (self.track, self.path);
        let lock = snap.track(track.as_str()).and_then(|t| {
            t.locks.iter().find(|l| {
                l.path == path.as_str() || LockKey::parse(&l.path).is_ok_and(|k| k == *path)
            })
        });
        match lock {
            Some(l) => {
                out.push(line(
                    Danger,
                    format!(
                        "Lock on {path} held by {} will be removed from {track}'s locks.json.",
                        l.worker_id.as_deref().unwrap_or("nobody")
                    ),
                ));
                let exp = match l.expires() {
                    Some(t) if t <= now => format!("expired {}", relative(t, now)),
                    Some(t) => format!("would expire {}", relative(t, now)),
                    None => "has no expiry".to_owned(),
                };
                out.push(line(Normal, format!("The lease {exp}.")));
            }
            None => out.push(line(
                Warn,
                format!("{path} is no longer locked on {track} (released since you selected it)."),
            )),
        }
        out.push(line(
            Normal,
            format!(
                "FILE_UNLOCK will be posted with forced_by: {OPERATOR}; waiters on it will wake up."
            ),
        ));
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        let what = format!("lock {}", self.path);
        let lock = items::track(snap, Some(self.track.as_str()))
            .and_then(|t| t.locks.iter().find(|l| l.path == self.path.as_str()));
        match lock {
            None => v.push((what, "released".into())),
            Some(l) => {
                v.push((
                    format!("{what}: holder"),
                    l.worker_id.clone().unwrap_or_else(|| "-".into()),
                ));
                v.push((
                    format!("{what}: acquired"),
                    l.acquired_at.clone().unwrap_or_else(|| "-".into()),
                ));
            }
        }
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        Ok(Done::new(
            engine
                .bus(self.track)?
                .release_lock(self.path, &WorkerId::operator(), true)?,
            summary,
            Outcome::Unlock,
        ))
    }

    fn subject(&self) -> String {
        self.path.to_string()
    }

    fn done_word(&self) -> &'static str {
        "unlocked"
    }

    fn mark(&self, fan: &mut FanOut<'_>, mark: &RowKey) -> Option<Result<Op, SkipWhy>> {
        Some(
            match items::locks(fan.snap, &fan.all)
                .iter()
                .find(|(t, l)| mark.is_lock(t, &l.path))
            {
                None => Err(SkipWhy::NoLongerListed),
                Some((t, l)) => TrackName::parse(t)
                    .and_then(|track| Ok((track, LockKey::parse(&l.path)?)))
                    .map_err(SkipWhy::from)
                    .map(|(track, path)| Op::ForceUnlock { track, path }),
            },
        )
    }
}

/// The flash made of the engine's answer.
fn summary(r: &crate::engine::UnlockResult) -> String {
    format!(
        "{} unlocked{}",
        r.filepath,
        r.released_from
            .as_deref()
            .map(|h| format!(" (was held by {h})"))
            .unwrap_or_default()
    )
}
