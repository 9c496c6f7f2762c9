//! Copy an approval link (`L` on a held dispatch of pane 2): mints a pair of one-time links to the
//! held dispatch (docs/PROTOCOL.md §2.15), as `pantheon approve HOF --link` does (channel
//! `console`, the root's default lifetime), and puts the approve URL on the clipboard (OSC 52); the
//! flash shows it too. The confirmation says which links the item has already (open, used,
//! expired, revoked). A read-only console refuses it, as every operator action: minting writes
//! into the root.

use chrono::{DateTime, Utc};

use crate::engine::{ApprovalChannel, Conductor, Error, HandoffId, Root};
use crate::live::snapshot::Snapshot;

use super::super::app::{App, Effect, FlashKind, Tone};
use super::super::engine_ops::EngineOperator;
use super::super::keymap::Pane;
use super::super::ops::{Done, Outcome};
use super::super::shown::{self, Version};
use super::{Act, Op, line};

/// `L` on a held dispatch.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if app.refuse_if_gone(Pane::Inboxes) {
        return Vec::new();
    }
    match app.selected_dispatch() {
        Some((_, d, true)) => match HandoffId::parse(&d.handoff_id) {
            Ok(handoff_id) => app.confirm(Op::Link { handoff_id }),
            Err(e) => app.flash(FlashKind::Error, e.to_string()),
        },
        _ => app.need("a held dispatch (the _quarantine rows of pane 2)"),
    }
    Vec::new()
}

/// The item's links as the root keeps them: `2 open, 1 expired` (none: `none yet`).
pub(crate) fn link_state(root: &std::path::Path, handoff_id: &str) -> String {
    let entries = Conductor::new(Root::at(root)).link_entries();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in entries.iter().filter(|e| e.handoff_id == handoff_id) {
        match counts.iter_mut().find(|(s, _)| *s == e.state) {
            Some((_, n)) => *n += 1,
            None => counts.push((e.state.clone(), 1)),
        }
    }
    if counts.is_empty() {
        return "none yet".into();
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Act for super::Link<'_> {
    fn title(&self) -> String {
        format!("Approval link for {}", self.handoff_id)
    }

    fn verb(&self) -> &'static str {
        "Mint"
    }

    fn describe(&self, out: &mut Vec<(Tone, String)>, snap: &Snapshot, _now: DateTime<Utc>) {
        use Tone::*;
        let root = Root::at(&snap.root);
        out.push(line(
            Normal,
            format!(
                "Mint a one-time pair of links to held dispatch {}, bound to its exact bytes.",
                self.handoff_id
            ),
        ));
        out.push(line(
            Normal,
            format!(
                "Its links so far: {}.",
                link_state(&snap.root, self.handoff_id.as_str())
            ),
        ));
        let ttl = crate::approvals::default_ttl(&root);
        match crate::engine::read_approvals_listener(&root) {
            Some(l) => out.push(line(
                Dim,
                format!(
                    "They live {} min and point at {}; the approve URL goes to the clipboard (OSC 52).",
                    ttl.as_secs() / 60,
                    l.base_url
                ),
            )),
            None => out.push(line(
                Warn,
                "No listener is recorded: start `pantheon serve --approvals ADDR` first.",
            )),
        }
    }

    fn version(&self, v: &mut Version, snap: &Snapshot) {
        shown::dispatch(v, self.handoff_id.as_str(), snap)
    }

    fn execute(&self, engine: &EngineOperator) -> Result<Done, Error> {
        let key = engine
            .link_key()
            .map_err(|e| Error::refused(format!("{e:#}")))?;
        let c = Conductor::new(engine.root().clone())
            .with_origin(engine.conductor().origin())
            .with_link_key(key);
        let urls = crate::approvals::mint_urls(
            &c,
            self.handoff_id,
            crate::approvals::default_ttl(engine.root()),
            None,
            ApprovalChannel::Console,
        )
        .map_err(|e| Error::refused(format!("{e:#}")))?;
        Ok(Done::new(urls, summary, Outcome::Link))
    }

    fn subject(&self) -> String {
        self.handoff_id.to_string()
    }

    fn done_word(&self) -> &'static str {
        "linked"
    }

    fn finished(&self, _app: &mut App, outcome: &Outcome) -> Vec<Effect> {
        match outcome {
            Outcome::Link(u) => vec![Effect::Clipboard(u.approve_url.clone())],
            _ => Vec::new(),
        }
    }
}

/// The flash made of the minted pair.
fn summary(u: &crate::approvals::LinkUrls) -> String {
    format!(
        "approval link for {} copied (OSC 52), expires {}: {}",
        u.handoff_id, u.expires_at, u.approve_url
    )
}
