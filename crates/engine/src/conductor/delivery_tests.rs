//! Unit tests of `conductor::delivery`.

use super::*;

fn dispatch(deliveries: usize, deadline: &str) -> Dispatch {
    let mut d = Dispatch {
        handoff_id: "hof_20260101_abcdef".into(),
        workflow_id: "wf_x".into(),
        to_god: "thoth".into(),
        step: "s".into(),
        ..Default::default()
    };
    d.ack_wait = Some("10s".into());
    d.max_deliveries = Some(3);
    d.deliveries = (0..deliveries)
        .map(|_| Delivery {
            at: "2026-01-01T00:00:00Z".into(),
            to: "thoth".into(),
        })
        .collect();
    d.ack_deadline = Some(deadline.into());
    d
}

fn t(s: &str) -> DateTime<Utc> {
    parse_ts(s).unwrap()
}

#[test]
fn redelivers_to_the_same_god_then_fallbacks_then_dead() {
    let fb = vec!["anubis".to_string(), "ra".to_string()];
    let now = t("2026-01-01T00:00:11Z");
    assert_eq!(
        decide(&dispatch(1, "2026-01-01T00:00:12Z"), &fb, now),
        Due::NotYet(Some(t("2026-01-01T00:00:12Z")))
    );
    match decide(&dispatch(1, "2026-01-01T00:00:10Z"), &fb, now) {
        Due::Redeliver { n, to, deadline } => {
            assert_eq!((n, to.as_str()), (2, "thoth"));
            assert_eq!(deadline, Some(t("2026-01-01T00:00:21Z")));
        }
        other => panic!("{other:?}"),
    }
    match decide(&dispatch(2, "2026-01-01T00:00:10Z"), &fb, now) {
        Due::Redeliver { n, to, .. } => assert_eq!((n, to.as_str()), (3, "anubis")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        decide(&dispatch(3, "2026-01-01T00:00:10Z"), &fb, now),
        Due::DeadLetter { .. }
    ));
    let mut accepted = dispatch(1, "2026-01-01T00:00:10Z");
    accepted.ack_status = AckStatus::Accepted;
    assert_eq!(decide(&accepted, &fb, now), Due::NotYet(None));
    assert_eq!(target_of("thoth", &fb, 9), "ra");
}

#[test]
fn backoff_sets_the_waits_after_the_first_delivery() {
    let p = Policy {
        ack_wait: Duration::from_secs(5),
        max_deliveries: 5,
        backoff: vec![Duration::from_secs(10), Duration::from_secs(60)],
    };
    assert_eq!(
        [1, 2, 3, 4].map(|n| p.wait_for(n).as_secs()),
        [5, 10, 60, 60]
    );
}

#[test]
fn pending_with_eta_moves_the_deadline() {
    let d = dispatch(1, "2026-01-01T00:00:10Z");
    let now = t("2026-01-01T00:00:05Z");
    assert_eq!(
        deadline_after_ack(&d, &AckStatus::Pending, Some("2026-01-01T01:00:00Z"), now).as_deref(),
        Some("2026-01-01T01:00:00.000000Z")
    );
    assert_eq!(
        deadline_after_ack(&d, &AckStatus::Pending, None, now).as_deref(),
        Some("2026-01-01T00:00:15.000000Z")
    );
    assert_eq!(
        deadline_after_ack(&d, &AckStatus::Accepted, None, now),
        None
    );
}

#[test]
fn declared_policy_is_checked() {
    let m = |v: Value| v.as_object().cloned().unwrap();
    let p =
        DeclaredPolicy::from_map(&m(json!({"ack_wait": "30s", "backoff": ["1m", 120]}))).unwrap();
    assert_eq!(p.ack_wait, Some(Duration::from_secs(30)));
    assert_eq!(p.backoff.len(), 2);
    assert!(DeclaredPolicy::from_map(&m(json!({"ack_wait": "soon"}))).is_err());
    assert!(DeclaredPolicy::from_map(&m(json!({"max_deliveries": 0}))).is_err());
    let settings = Settings::default();
    assert_eq!(DeclaredPolicy::default().resolve(&settings), None);
    assert_eq!(p.resolve(&settings).map(|p| p.max_deliveries), Some(3));
}

#[test]
fn a_heartbeat_stamped_in_the_future_is_no_live_supervisor() {
    let d = tempfile::tempdir().unwrap();
    let root = Root::at(d.path());
    std::fs::create_dir_all(root.supervisor_dir()).unwrap();
    let now = t("2026-06-14T10:00:00Z");
    for (id, beat) in [
        ("fresh", "2026-06-14T09:59:50Z"),
        ("old", "2026-06-14T09:00:00Z"),
        ("skewed", "2026-06-14T10:00:20Z"),
        ("planted", "9999-12-31T23:59:59Z"),
    ] {
        std::fs::write(
            root.supervisor_dir().join(format!("{id}.json")),
            format!(r#"{{"supervisor": "{id}", "last_beat": "{beat}"}}"#),
        )
        .unwrap();
    }
    let mut alive: Vec<String> = live_supervisors(&root, now)
        .iter()
        .map(|v| v["supervisor"].as_str().unwrap().to_owned())
        .collect();
    alive.sort();
    assert_eq!(alive, vec!["fresh", "skewed"]);
    assert!(!supervisor_alive(t("9999-12-31T23:59:59Z"), now));
}
