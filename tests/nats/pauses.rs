//! Pauses across pantheons (docs/NATS.md "Pauses"): this root's pauses announced on
//! `pantheon.{name}.paused` on a pause, a resume, the end of an `--until`, the bridge's start and
//! every period, so a late peer learns them; a peer's announcement shown by `paused` and
//! `bridge status` until the peer falls silent. The peer is a `nats-py` client (core NATS).

use super::peers::{Listener, core_publish};
use super::*;

/// The announcements `l` received, newest last.
fn announcements(l: &Listener) -> Vec<Value> {
    l.received()
}

/// The names of the pauses in an announcement.
fn names(a: &Value) -> Vec<String> {
    a["pauses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["kind"].as_str().unwrap(),
                p["name"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

fn wait_announced(l: &Listener, after: usize, want: &[&str]) -> Value {
    let mut last = Value::Null;
    wait_for(
        &format!("an announcement of {want:?}"),
        Duration::from_secs(20),
        || {
            let got = announcements(l);
            match got.iter().skip(after).find(|a| names(a) == want) {
                Some(a) => {
                    last = a.clone();
                    true
                }
                None => false,
            }
        },
    );
    last
}

#[test]
fn this_roots_pauses_are_announced_to_peers_on_every_change_and_on_start() {
    let server = Server::start();
    let url = server.url();
    let mut a = Machine::new("konan");
    let peer = Listener::start(&url, "pantheon.konan.paused");
    // An hour between periodic announcements: every one below comes from a change or a start.
    a.start_bridge(&url, &["--peer", "tallon", "--announce-every", "1h"]);
    let first = wait_announced(&peer, 0, &[]);
    assert_eq!(first["pantheon_pauses"], 1, "{first}");
    assert_eq!(first["from_pantheon"], "konan");
    assert_eq!(first["every_s"], 3600);

    a.ok(
        &["pause", "--god", "hermes", "--reason", "incident 7"],
        None,
    );
    let n = announcements(&peer).len();
    let p = wait_announced(&peer, n, &["god hermes"]);
    let pause = &p["pauses"][0];
    assert_eq!(pause["reason"], "incident 7");
    assert!(pause["id"].as_str().unwrap().starts_with("pause_"), "{p}");
    assert!(
        pause["since"].is_string() && pause["until"].is_null(),
        "{p}"
    );

    // A pause ended by its --until (the supervisor's pass) is announced gone.
    a.ok(
        &[
            "pause",
            "--track",
            "main",
            "--until",
            "2s",
            "--reason",
            "deploy window",
        ],
        None,
    );
    wait_announced(&peer, n, &["god hermes", "track main"]);
    std::thread::sleep(Duration::from_millis(2200));
    let n = announcements(&peer).len();
    let t = a.ok(&["tick"], None);
    assert_eq!(t["resumed"].as_array().map(Vec::len), Some(1), "{t}");
    wait_announced(&peer, n, &["god hermes"]);

    // A peer that starts listening late learns the pause when the bridge starts again.
    let late = Listener::start(&url, "pantheon.konan.paused");
    a.restart_bridge();
    wait_announced(&late, 0, &["god hermes"]);

    let n = announcements(&peer).len();
    a.ok(&["resume", "--god", "hermes"], None);
    wait_announced(&peer, n, &[]);
    assert!(a.bridge.terminate());
}

#[test]
fn a_late_peer_learns_the_pause_from_the_periodic_announcement() {
    let server = Server::start();
    let url = server.url();
    let mut a = Machine::new("konan");
    a.start_bridge(&url, &["--peer", "tallon", "--announce-every", "1s"]);
    a.ok(&["pause", "--all", "--reason", "freeze"], None);
    std::thread::sleep(Duration::from_millis(1500));
    let late = Listener::start(&url, "pantheon.konan.paused");
    let got = wait_announced(&late, 0, &["all -"]);
    assert_eq!(got["pauses"][0]["reason"], "freeze");
    assert!(a.bridge.terminate());
}

#[test]
fn a_peers_pause_is_shown_until_the_peer_falls_silent_and_strangers_are_ignored() {
    let server = Server::start();
    let url = server.url();
    let mut a = Machine::new("konan");
    a.start_bridge(&url, &["--peer", "tallon"]);
    wait_for("konan's bridge", Duration::from_secs(20), || {
        a.ok(&["bridge", "status"], None)["status"]["connected"] == true
    });
    let announcement = |from: &str, kind: &str| {
        let mut a = json!({"pantheon_pauses": 1, "from_pantheon": from, "at": "2026-12-06T10:00:00Z",
               "every_s": 1, "more": 0,
               "pauses": [{"id": "pause_20261206_100000_abcdef", "kind": kind, "name": "hermes",
                           "by": "ops", "reason": "tallon's incident", "since": "2026-12-06T09:00:00Z",
                           "until": null}]});
        if kind == "all" {
            a["pauses"][0].as_object_mut().unwrap().remove("name");
        }
        a
    };
    // A stranger (on a shared server, the usual case: ignored, not an error of this bridge), then
    // the peer itself on the same connection, so once the peer's pause is seen the stranger's was read.
    core_publish(
        &url,
        "pantheon.vulcan.paused",
        &[announcement("vulcan", "god")],
    );
    let peer_pauses = |a: &Machine| a.ok(&["paused"], None)["peers"].clone();
    core_publish(
        &url,
        "pantheon.tallon.paused",
        &[announcement("tallon", "god")],
    );
    wait_for("tallon's first pause", Duration::from_secs(10), || {
        peer_pauses(&a).as_array().is_some_and(|v| v.len() == 1)
    });
    let status = a.ok(&["bridge", "status"], None);
    assert!(
        status["status"]["last_error"].is_null(),
        "a stranger's announcement is no error: {status}"
    );
    // A peer's name claimed on another's subject: refused and named, not shown.
    core_publish(
        &url,
        "pantheon.vulcan.paused",
        &[announcement("tallon", "god")],
    );
    // The peer announces (a few times, as its bridge does every second).
    for _ in 0..3 {
        core_publish(
            &url,
            "pantheon.tallon.paused",
            &[announcement("tallon", "god")],
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_for(
        "tallon's pause in `paused`",
        Duration::from_secs(10),
        || peer_pauses(&a).as_array().is_some_and(|v| v.len() == 1),
    );
    let peers = peer_pauses(&a);
    assert_eq!(peers[0]["peer"], "tallon", "{peers}");
    assert_eq!(peers[0]["pauses"][0]["kind"], "god");
    assert_eq!(peers[0]["pauses"][0]["name"], "hermes");
    assert_eq!(peers[0]["pauses"][0]["reason"], "tallon's incident");
    let status = a.ok(&["bridge", "status"], None);
    let shown = status["status"]["peer_pauses"].as_array().unwrap();
    assert_eq!(shown.len(), 1, "{status}");
    assert!(
        status["status"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("vulcan")),
        "the refused announcements are named: {status}"
    );
    // Silent for three periods (3 s): forgotten, and not before. The bridge's own times are the
    // measure (a publisher's exit comes later than the delivery on a loaded machine).
    let ts = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let mut expires = None;
    wait_for("tallon's pause to expire", Duration::from_secs(15), || {
        let p = peer_pauses(&a);
        let Some(first) = p.as_array().and_then(|v| v.first()) else {
            return true;
        };
        assert_eq!(
            ts(&first["expires_at"]) - ts(&first["received_at"]),
            chrono::Duration::seconds(3),
            "{first}"
        );
        expires = Some(ts(&first["expires_at"]));
        false
    });
    let expires = expires.expect("the pause was seen before it expired");
    assert!(
        chrono::Utc::now() >= expires,
        "forgotten before {expires}, three periods of 1 s after it was last heard"
    );
    wait_for("the status without it", Duration::from_secs(15), || {
        a.ok(&["bridge", "status"], None)["status"]["peer_pauses"]
            .as_array()
            .is_some_and(Vec::is_empty)
    });
    // An empty list from the peer ends its pauses at once.
    core_publish(
        &url,
        "pantheon.tallon.paused",
        &[announcement("tallon", "all")],
    );
    wait_for("tallon's `all` pause", Duration::from_secs(10), || {
        peer_pauses(&a).as_array().is_some_and(|v| v.len() == 1)
    });
    let mut none = announcement("tallon", "all");
    none["pauses"] = json!([]);
    core_publish(&url, "pantheon.tallon.paused", &[none]);
    wait_for("tallon's pauses ended", Duration::from_secs(2), || {
        peer_pauses(&a).as_array().is_some_and(Vec::is_empty)
    });
    assert!(a.bridge.terminate());
}

/// Runs `client.py URL CMD ARGS…` and returns its standard output (the command must succeed).
fn client(url: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(super::peers::python())
        .arg(super::peers::client_py())
        .arg(url)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "client.py {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// After the NATS server restarts, the bridge announces this root's pauses again as soon as it has
/// reconnected (its period is an hour, so only the reconnection can send it). A nats-py client
/// keeps what is published on `pantheon.konan.paused` in a JetStream stream on the server's
/// disk, which survives the restart, so the re-announcement is seen whichever of the bridge and
/// the peer's own subscriber reconnects first; the peer's core subscriber hears the pause before
/// the restart.
#[test]
fn the_bridge_announces_its_pauses_again_when_it_reconnects_after_the_server_restarts() {
    let mut server = Server::start();
    let url = server.url();
    client(
        &url,
        &["stream-add", "KONAN_PAUSES", "pantheon.konan.paused"],
    );
    let mut a = Machine::new("konan");
    let peer = Listener::start(&url, "pantheon.konan.paused");
    a.start_bridge(&url, &["--peer", "tallon", "--announce-every", "1h"]);
    wait_announced(&peer, 0, &[]);
    a.ok(
        &["pause", "--god", "hermes", "--reason", "incident 9"],
        None,
    );
    wait_announced(&peer, 0, &["god hermes"]);
    let kept = super::peers::stream_msgs(&url, "KONAN_PAUSES");
    assert_eq!(kept, 2, "the start's announcement and the pause's");

    let restarted = chrono::Utc::now();
    server.restart();
    wait_for(
        "the re-announcement after the reconnection",
        Duration::from_secs(30),
        || super::peers::try_stream_msgs(&url, "KONAN_PAUSES").is_some_and(|n| n > kept),
    );
    let again: Value =
        serde_json::from_str(client(&url, &["stream-get", "KONAN_PAUSES", "3"]).trim()).unwrap();
    assert_eq!(again["from_pantheon"], "konan", "{again}");
    assert_eq!(names(&again), ["god hermes"], "{again}");
    assert_eq!(again["pauses"][0]["reason"], "incident 9", "{again}");
    let at = chrono::DateTime::parse_from_rfc3339(again["at"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert!(at >= restarted, "sent after the restart: {again}");
    // Once: nothing more until a change (or the hour's period).
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        super::peers::stream_msgs(&url, "KONAN_PAUSES"),
        kept + 1,
        "one re-announcement"
    );
    assert!(a.bridge.terminate());
}
