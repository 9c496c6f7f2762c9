//! Narrow terminals (issue 42, items 5 and 6): the header keeps every alert, shortening counts and
//! alerts to glyph and number before anything goes; record ids stay whole while other columns give
//! way; every cut ends in `…` and hidden lines say how many.

use std::path::Path;

use pantheon::testing::console::keymap::{Action, Pane};
use serde_json::json;

use super::support::*;

fn put(root: &Path, rel: &str, v: &serde_json::Value) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// The fixture root (an overdue dispatch, a stale worker, an expired lock, files that cannot be
/// read) with every other alert the header has: a held dispatch, a deadlock, a stalled and an
/// orphaned workflow, and a dispatch with an ack deadline no supervisor enforces.
fn all_alerts_root() -> tempfile::TempDir {
    let root = fixture_root();
    let r = root.path();
    put(
        r,
        "conductor/pending/_quarantine/hof_20260614_ccc777.json",
        &json!({
            "handoff_id": "hof_20260614_ccc777", "workflow_id": "wf_ext_9", "from_god": "thoth",
            "to_god": "caduceus", "step": "announce", "dispatched_at": "2026-06-14T09:30:00+00:00",
            "ack_status": "unacked", "held_because": "caduceus is a bridge god: an operator approves",
            "context": {"summary": "Tell the partner pantheon"}
        }),
    );
    // A deadlock: two workers, each waiting for the other's lock.
    let bus = "conductor/tracks/t9/.message-bus";
    put(
        r,
        &format!("{bus}/locks.json"),
        &json!({
            "a.ts": {"worker_id": "w1", "acquired_at": "2026-06-14T10:30:00Z", "expires_at": "2099-01-01T00:00:00Z"},
            "b.ts": {"worker_id": "w2", "acquired_at": "2026-06-14T10:30:00Z", "expires_at": "2099-01-01T00:00:00Z"},
        }),
    );
    let msg = |id: &str, src: &str, res: &str| {
        json!({"id": id, "type": "BLOCKED", "source": src, "timestamp": "2026-06-14T10:34:00Z",
               "payload": {"waiting_for": "file_lock", "resource": res}})
        .to_string()
    };
    std::fs::write(
        r.join(bus).join("queue.jsonl"),
        format!("{}\n{}\n", msg("m1", "w1", "b.ts"), msg("m2", "w2", "a.ts")),
    )
    .unwrap();
    let state = |wf: &str, status: &str| {
        json!({"workflow_id": wf, "definition_id": "deploy-feature", "status": status,
               "current_step": "implement", "dispatched_to": "hephaestus",
               "created": "2026-06-14T09:00:00Z", "updated": "2026-06-14T10:00:00Z"})
    };
    put(
        r,
        "conductor/state/wf_stuck_5.json",
        &state("wf_stuck_5", "stalled"),
    );
    put(
        r,
        "conductor/state/wf_lost_6.json",
        &state("wf_lost_6", "waiting_for_ack"),
    );
    // A dispatch whose ack is due, with no `pantheon serve` heartbeat anywhere.
    put(
        r,
        "conductor/pending/iris/hof_20260614_eee555.json",
        &json!({
            "handoff_id": "hof_20260614_eee555", "workflow_id": "wf_page_8", "from_god": "thoth",
            "to_god": "iris", "step": "triage", "dispatched_at": "2026-06-14T10:35:00Z",
            "ack_status": "unacked", "ack_deadline": "2026-06-14T10:45:00Z",
            "deliveries": [{"at": "2026-06-14T10:35:00Z", "to": "iris"}], "max_deliveries": 3,
            "context": {"summary": "Page the on-call god"}
        }),
    );
    root
}

/// Every alert the header shows, by the words it has room for or by its glyph and number.
const ALERTS: [(&str, &str); 9] = [
    ("no supervisor", "▲ no serve"),
    ("overdue", "▲1"),
    ("stalled", "⊘1"),
    ("stale", "◔1"),
    ("expired", "✗1"),
    ("deadlock", "⟲1"),
    ("orphaned", "∅1"),
    ("issues", "⚠3"),
    ("held", "‖1"),
];

/// The alerts `header` lacks, in neither form.
fn missing(header: &str) -> Vec<&'static str> {
    ALERTS
        .iter()
        .filter(|(word, tight)| !header.contains(word) && !header.contains(tight))
        .map(|(word, _)| *word)
        .collect()
}

/// At 120, 80 and 60 columns the header keeps every alert: `▲ deadlock` and `‖ held` went at
/// 80x24, `▲ stale` too at 60x14. The root path and the plain totals go first, then the alerts
/// and counts shorten (`▲1 overdue`, `@10`), then the alerts to their glyph and number, the last
/// first.
#[test]
fn the_header_keeps_every_alert_at_120_80_and_60_columns() {
    let root = all_alerts_root();
    let app = app_for(root.path(), fixture_now());
    let wide = screen(&app, 200, 50, root.path());
    let header = wide.lines().next().unwrap();
    for (word, _) in ALERTS {
        assert!(header.contains(word), "200: {word} missing: {header}");
    }
    assert!(
        header.contains("@ 10 need you") && header.contains("▲ 1 deadlock"),
        "{header}"
    );
    for (w, h) in [(120u16, 40u16), (80, 24), (60, 14)] {
        let s = screen(&app, w, h, root.path());
        let header = s.lines().next().unwrap();
        assert_eq!(missing(header), Vec::<&str>::new(), "{w}x{h}: {header}");
        assert!(
            header.contains("@10 ") || header.contains("@ 10 need you"),
            "{w}x{h}: {header}"
        );
        assert!(!header.contains('…'), "{w}x{h}: nothing is cut: {header}");
        assert!(
            !header.contains("/srv/pantheon"),
            "{w}x{h}: the path went first: {header}"
        );
    }
    // At 120 every alert still has its word; at 80 the first ones keep theirs.
    let s = screen(&app, 120, 40, root.path());
    let header = s.lines().next().unwrap();
    for (word, _) in ALERTS {
        assert!(header.contains(word), "120: {word}: {header}");
    }
    let s = screen(&app, 80, 24, root.path());
    let header = s.lines().next().unwrap();
    assert!(
        header.contains("▲ no supervisor") && header.contains("▲1 overdue"),
        "80: {header}"
    );
}

/// The same in a real terminal: the console in tmux at 120x40, 80x24 and 60x14 on the same root.
#[test]
fn in_tmux_the_header_keeps_every_alert_at_120_80_and_60_columns() {
    let root = all_alerts_root();
    let bin = assert_cmd::cargo::cargo_bin("pantheon");
    let log = tempfile::tempdir().unwrap();
    let script = format!(
        "PANTHEON_LOG={} {} --root {} console --read-only; sleep 600",
        log.path().join("console.log").display(),
        bin.display(),
        root.path().display()
    );
    let t = crate::tmux::Tmux::start("narrow", &script);
    t.wait("the console", |s| s.contains("1 Workflows"));
    for (w, h) in [("120", "40"), ("80", "24"), ("60", "14")] {
        t.tmux(&["resize-window", "-t", "main", "-x", w, "-y", h]);
        let s = t.wait(&format!("the header at {w}x{h}"), |s| {
            s.lines().next().is_some_and(|l| missing(l).is_empty())
                && s.lines()
                    .nth(1)
                    .is_some_and(|l| l.chars().count() <= w.parse().unwrap())
        });
        let header = s.lines().next().unwrap();
        assert!(
            header.contains("READ-ONLY") || header.contains("RO "),
            "{header}"
        );
    }
}

/// Workflow ids that differ only at their end, in a root that records usage (the COST column).
fn similar_ids_root() -> tempfile::TempDir {
    let root = all_alerts_root();
    for n in 1..=3 {
        let wf = format!("wf_deploy_feature_{n}");
        put(
            root.path(),
            &format!("conductor/state/{wf}.json"),
            &json!({"workflow_id": wf, "definition_id": "deploy-feature", "status": "in_progress",
                    "current_step": "implement_the_whole_thing", "dispatched_to": "hephaestus",
                    "created": "2026-06-14T09:00:00Z", "updated": "2026-06-14T10:00:00Z",
                    "acks": [{"handoff_id": format!("hof_20260614_00000{n}"), "status": "accepted",
                              "acked_at": "2026-06-14T10:00:00Z"}]}),
        );
    }
    root
}

/// At 60x14 pane 1 cut workflow ids to `wf_deploy_feat…` while STEP, GOD and the others kept
/// their width: now the optional columns go first and every id stays whole, at 80x24 too.
#[test]
fn at_60x14_and_80x24_workflow_ids_stay_whole() {
    let root = similar_ids_root();
    let app = app_for(root.path(), fixture_now());
    for (w, h) in [(60u16, 14u16), (80, 24)] {
        let s = screen(&app, w, h, root.path());
        for n in 1..=3 {
            let id = format!("wf_deploy_feature_{n} ");
            assert!(s.contains(&id), "{w}x{h}: {id} cut:\n{s}");
        }
        assert!(!s.contains("wf_deploy_feat…"), "{s}");
    }
}

/// The tab bar's Attention count beside a bare pane number reads `7 @10`, not `7 10`.
#[test]
fn the_narrow_tab_bar_says_what_the_attention_count_is() {
    let root = all_alerts_root();
    let app = app_for(root.path(), fixture_now());
    let s = screen(&app, 60, 14, root.path());
    let tabs = s.lines().nth(1).unwrap();
    assert!(tabs.contains(" 7 @10 "), "{tabs}");
    assert!(!tabs.contains(" 7 10 "), "{tabs}");
}

/// The Board at 60x14 and 80x24: its title and phases line end in `…` when cut (never bare),
/// the box and the cards count the lines they cannot show, and the discussion says how many
/// earlier messages are above the newest.
#[test]
fn the_board_cuts_with_an_ellipsis_and_counts_what_it_hides() {
    let root = all_alerts_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::GoPane(Pane::Board));
    let s = screen(&app, 60, 14, root.path());
    let lines: Vec<&str> = s.lines().collect();
    let title = lines.iter().find(|l| l.contains("6 Board")).unwrap();
    assert!(
        title.contains("…╮"),
        "the session id is cut with …: {title}"
    );
    let phases = lines.iter().find(|l| l.contains("assess")).unwrap();
    assert!(
        phases.contains("resolve") || phases.trim_end_matches('│').trim_end().ends_with('…'),
        "{phases}"
    );
    assert!(s.contains("+1 more╯"), "the verdict line is counted:\n{s}");
    assert!(
        s.contains("+2 more╯") && s.contains("+4 more╯"),
        "the cards count theirs:\n{s}"
    );
    assert!(
        s.contains("+2 earlier"),
        "the discussion counts the earlier messages:\n{s}"
    );
    assert!(
        s.contains("Rollback plan?"),
        "the newest message is shown:\n{s}"
    );
    // At 80x24 everything fits: nothing is counted as hidden, nothing cut.
    let s = screen(&app, 80, 24, root.path());
    assert!(!s.contains("more╯") && !s.contains("earlier"), "{s}");
    for l in s.lines().filter(|l| l.starts_with('│')) {
        assert!(l.chars().count() <= 80, "{l}");
    }
}

/// A detail's title wider than a 60-column box (the workflow id and its file's path) ends in `…`.
#[test]
fn a_detail_title_cut_at_60_columns_ends_in_an_ellipsis() {
    let root = similar_ids_root();
    let mut app = app_for(root.path(), fixture_now());
    app.dispatch(Action::Open);
    let s = screen(&app, 60, 14, root.path());
    let title = s.lines().nth(2).unwrap();
    assert!(
        title.starts_with("╭ wf_") && title.ends_with("…╮"),
        "{title}"
    );
}
