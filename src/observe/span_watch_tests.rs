use serde_json::{Value, json};

use super::*;
use crate::engine::{Actor, Conductor, span_id};

struct Fixture {
    _dir: tempfile::TempDir,
    root: Root,
    c: Conductor,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::at(dir.path());
    let c = Conductor::new(root.clone());
    c.init().unwrap();
    Fixture { _dir: dir, root, c }
}

impl Fixture {
    fn submit(&self, wf: &str, hid: &str) {
        let h = json!({
            "handoff_id": hid, "workflow_id": wf, "from_god": "thoth", "to_god": "marvin",
            "step": "plan", "context": {"summary": "s", "decisions": [], "artifacts": []},
        });
        self.c.submit_handoff(&h).unwrap();
    }

    fn ack(&self, hid: &str, ack: &str, status: &str) {
        let a = json!({"ack_id": ack, "handoff_id": hid, "status": status});
        self.c.ack_handoff(&a, Actor::Recipient).unwrap();
    }

    fn state(&self, wf: &str) -> PathBuf {
        self.root.state_dir().join(format!("{wf}.json"))
    }

    fn inbox(&self, hid: &str) -> PathBuf {
        self.root
            .pending_root()
            .join("marvin")
            .join(format!("{hid}.json"))
    }

    fn dead(&self, hid: &str) -> PathBuf {
        self.root
            .dead_root()
            .join("marvin")
            .join(format!("{hid}.json"))
    }
}

/// The names of the spans `paths` give.
fn names(w: &mut SpanWatch, paths: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    w.changed(paths, &mut |s| out.push(s.name));
    out.sort();
    out
}

fn rescanned(w: &mut SpanWatch) -> Vec<String> {
    let mut out = Vec::new();
    w.rescan(&mut |s| out.push(s.name));
    out.sort();
    out
}

/// Writes `v` as a god would: a temporary file renamed over the record.
fn rewrite(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_files_an_event_names_give_their_new_records_once() {
    let f = fixture();
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    f.submit("wf_a", "hof_20261201_aaaa01");
    let paths = [f.state("wf_a"), f.inbox("hof_20261201_aaaa01")];
    assert_eq!(names(&mut w, &paths), ["submit plan"]);
    assert!(
        names(&mut w, &paths).is_empty(),
        "nothing new, nothing again"
    );
    f.ack("hof_20261201_aaaa01", "ack_20261201_aaaa01", "accepted");
    assert_eq!(
        names(&mut w, &paths),
        ["ack accepted", "dispatch plan"],
        "the engine's ack is the state's record, not the dispatch's"
    );
    // A file no event names is not read: another workflow's acts wait for their own event.
    f.submit("wf_b", "hof_20261201_bbbb01");
    assert!(names(&mut w, &paths).is_empty());
    assert_eq!(names(&mut w, &[f.state("wf_b")]), ["submit plan"]);
    // A removed state is forgotten.
    let n = w.remembered();
    std::fs::remove_file(f.state("wf_b")).unwrap();
    assert!(names(&mut w, &[f.state("wf_b")]).is_empty());
    assert_eq!(w.remembered(), n - 1);
}

#[test]
fn records_from_before_the_start_are_passed_over() {
    let f = fixture();
    f.submit("wf_a", "hof_20261201_aaaa01");
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    f.ack("hof_20261201_aaaa01", "ack_20261201_aaaa01", "accepted");
    let spans = names(&mut w, &[f.state("wf_a"), f.inbox("hof_20261201_aaaa01")]);
    assert_eq!(spans, ["ack accepted", "dispatch plan"]);
}

#[test]
fn a_rescan_reads_what_changed_since_the_previous_one() {
    let f = fixture();
    f.submit("wf_old", "hof_20261201_oooo01");
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    f.submit("wf_a", "hof_20261201_aaaa01");
    assert_eq!(rescanned(&mut w), ["submit plan"], "wf_old is from before");
    assert!(rescanned(&mut w).is_empty());
    f.ack("hof_20261201_aaaa01", "ack_20261201_aaaa01", "accepted");
    f.ack("hof_20261201_oooo01", "ack_20261201_oooo01", "accepted");
    assert_eq!(
        rescanned(&mut w),
        [
            "ack accepted",
            "ack accepted",
            "dispatch plan",
            "dispatch plan"
        ]
    );
    std::fs::remove_file(f.state("wf_a")).unwrap();
    assert!(rescanned(&mut w).is_empty());
    assert_eq!(
        w.remembered(),
        1,
        "what a rescan no longer lists is forgotten"
    );
}

#[test]
fn a_link_a_fifo_an_oversized_or_torn_file_gives_no_span_and_keeps_the_cursor() {
    let f = fixture();
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    f.submit("wf_a", "hof_20261201_aaaa01");
    let good = std::fs::read(f.state("wf_a")).unwrap();
    let elsewhere = f.root.dir.join("elsewhere.json");
    std::fs::write(&elsewhere, &good).unwrap();
    let link = f.state("wf_link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let fifo = f.state("wf_fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path and a mode; mkfifo touches nothing else.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let big = f.state("wf_big");
    std::fs::write(&big, &good).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(MAX_JSON_BYTES + 1)
        .unwrap();
    assert!(names(&mut w, &[link, fifo, big]).is_empty());
    // Torn mid-write by a foreign writer: nothing, then the whole file gives its records once.
    std::fs::write(f.state("wf_a"), &good[..good.len() / 2]).unwrap();
    assert!(names(&mut w, &[f.state("wf_a")]).is_empty());
    std::fs::write(f.state("wf_a"), &good).unwrap();
    assert_eq!(names(&mut w, &[f.state("wf_a")]), ["submit plan"]);
    // A list is not a state, whatever its items.
    std::fs::write(f.state("wf_a"), b"[\"wf_a\", 1]").unwrap();
    assert!(names(&mut w, &[f.state("wf_a")]).is_empty());
    std::fs::write(f.state("wf_a"), &good).unwrap();
    assert!(
        names(&mut w, &[f.state("wf_a")]).is_empty(),
        "its cursor stayed"
    );
}

#[test]
fn a_gods_own_pending_write_a_redelivery_and_a_dead_letter_are_seen_in_the_files() {
    let f = fixture();
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    let hid = "hof_20261201_rrrr01";
    f.submit("wf_r", hid);
    assert_eq!(
        names(&mut w, &[f.state("wf_r"), f.inbox(hid)]),
        ["submit plan"]
    );
    // The god marks its dispatch pending by rewriting the file itself: no ack in the state.
    let mut d = read(&f.inbox(hid));
    d["ack_status"] = json!("pending");
    rewrite(&f.inbox(hid), &d);
    assert_eq!(names(&mut w, &[f.inbox(hid)]), ["ack pending"]);
    assert!(names(&mut w, &[f.inbox(hid)]).is_empty(), "once");
    // A supervisor delivers it again (to the same god).
    d["ack_status"] = json!("unacked");
    d["deliveries"] = json!([
        {"at": crate::engine::time::now_ts(), "to": "marvin"},
        {"at": crate::engine::time::now_ts(), "to": "marvin"}
    ]);
    rewrite(&f.inbox(hid), &d);
    let mut spans = Vec::new();
    w.changed(&[f.inbox(hid)], &mut |s| spans.push(s));
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].name, "redeliver plan");
    assert_eq!(spans[0].parent, Some(span_id("dispatch", hid)));
    // Then dead-lettered: its span, and the dispatch's own (never acked, so its state gave none:
    // the redelivery's and the dead letter's parent), and the dispatch is forgotten in its inbox.
    d["dead_at"] = json!(crate::engine::time::now_ts());
    rewrite(&f.dead(hid), &d);
    std::fs::remove_file(f.inbox(hid)).unwrap();
    let mut spans = Vec::new();
    w.changed(&[f.inbox(hid), f.dead(hid)], &mut |s| spans.push(s));
    let mut got: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    got.sort();
    assert_eq!(got, ["dead letter plan", "dispatch plan"]);
    let dispatch = spans.iter().find(|s| s.name == "dispatch plan").unwrap();
    assert_eq!(dispatch.span_id, span_id("dispatch", hid));
    assert_eq!(dispatch.parent, Some(span_id("submit", hid)));
    assert!(names(&mut w, &[f.dead(hid)]).is_empty(), "once");
    assert_eq!(w.remembered(), 2, "the workflow and its dead letter");
    std::fs::remove_file(f.dead(hid)).unwrap();
    assert!(names(&mut w, &[f.dead(hid)]).is_empty());
    assert_eq!(w.remembered(), 1);
}

#[test]
fn a_dispatch_first_seen_counts_only_what_happened_after_the_start() {
    let f = fixture();
    let hid = "hof_20261201_pppp01";
    f.submit("wf_p", hid);
    let mut d = read(&f.inbox(hid));
    let before = "2026-01-01T00:00:00Z";
    d["ack_status"] = json!("pending");
    d["acked_at"] = json!(before);
    d["deliveries"] = json!([{"at": before, "to": "marvin"}, {"at": before, "to": "marvin"}]);
    rewrite(&f.inbox(hid), &d);
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    assert!(
        names(&mut w, &[f.inbox(hid)]).is_empty(),
        "pending and redelivered before the exporter started"
    );
    let mut list = d["deliveries"].as_array().unwrap().clone();
    list.push(json!({"at": crate::engine::time::now_ts(), "to": "marvin"}));
    d["deliveries"] = Value::Array(list);
    rewrite(&f.inbox(hid), &d);
    assert_eq!(names(&mut w, &[f.inbox(hid)]), ["redeliver plan"]);
}

#[test]
fn directories_events_name_ask_for_new_watches() {
    let f = fixture();
    let mut w = SpanWatch::new(f.root.clone(), Utc::now());
    assert!(w.dirs().contains(&f.root.state_dir()));
    assert!(!w.dirs().contains(&f.root.dead_root().join("marvin")));
    std::fs::create_dir_all(f.root.dead_root().join("marvin")).unwrap();
    std::fs::create_dir_all(f.root.pending_root().join("_webhooks")).unwrap();
    let dirs = w.dirs();
    assert!(dirs.contains(&f.root.dead_root().join("marvin")));
    assert!(!dirs.contains(&f.root.pending_root().join("_webhooks")));
    assert!(w.changed(&[f.root.pending_root().join("hermes")], &mut |_| {}));
    assert!(!w.changed(&[f.root.conductor.join(layout::JOURNAL_FILE)], &mut |_| {}));
    // The files of a directory watched late are read (those from before the start give nothing).
    f.submit("wf_a", "hof_20261201_aaaa01");
    let mut out = Vec::new();
    w.read_dirs(&[f.root.state_dir()], &mut |s| out.push(s.name));
    assert_eq!(out, ["submit plan"]);
}
