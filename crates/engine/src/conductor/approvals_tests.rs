use super::*;
use crate::conductor::Conductor;

/// A root with workflow `gate` whose step `build` requires approval.
pub(crate) fn gate_root() -> (tempfile::TempDir, Conductor) {
    let d = tempfile::tempdir().unwrap();
    let c = Conductor::new(Root::at(d.path()));
    c.init().unwrap();
    for e in std::fs::read_dir(c.root().rules_dir()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    std::fs::write(
        c.root().workflows_dir().join("gate.yaml"),
        "workflow:\n  id: gate\n  steps:\n    - id: plan\n      god: thoth\n    - id: build\n      god: hephaestus\n      approval_required: true\n",
    )
    .unwrap();
    (d, c)
}

/// Submits handoff `n` of its own workflow, held at `build`.
pub(crate) fn held(c: &Conductor, n: u32) -> HandoffId {
    let hid = format!("hof_20261206_ap{n:04}");
    let h = serde_json::json!({"handoff_id": hid, "workflow_id": format!("wf_ap{n}"),
        "from_god": "thoth", "to_god": "hephaestus", "step": "plan",
        "routing": {"workflow_definition": "gate"},
        "context": {"summary": "ship $82,000", "decisions": ["pay"], "artifacts": []}});
    c.submit_handoff(&h).unwrap();
    HandoffId::parse(&hid).unwrap()
}

fn mint(c: &Conductor, hid: &HandoffId) -> MintedLink {
    c.mint_link(&LinkRequest {
        handoff_id: hid.clone(),
        ttl: DEFAULT_LINK_TTL,
        channel: Channel::Cli,
    })
    .unwrap()
}

fn redeem(c: &Conductor, token: &str) -> Receipt {
    c.redeem_link(&RedeemRequest {
        token: token.into(),
        channel: Some(Channel::Http),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn a_token_is_256_random_bits_in_base64url_and_only_its_hash_is_kept() {
    let (_d, c) = gate_root();
    let hid = held(&c, 1);
    let m = mint(&c, &hid);
    assert!(is_token_shaped(&m.approve_token) && is_token_shaped(&m.reject_token));
    assert_ne!(m.approve_token, m.reject_token);
    for e in std::fs::read_dir(c.root().approvals_dir()).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!text.contains(&m.approve_token) && !text.contains(&m.reject_token));
    }
    assert_eq!(base64url(b"\xfb\xff"), "-_8");
    assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
}

#[test]
fn an_approval_link_releases_the_held_dispatch_once_and_a_second_tap_says_by_whom() {
    let (_d, c) = gate_root();
    let hid = held(&c, 2);
    let m = mint(&c, &hid);
    let r = redeem(&c, &m.approve_token);
    assert_eq!(r.status, "approved", "{r:?}");
    let god = crate::store::GodName::parse("hephaestus").unwrap();
    assert!(
        c.root()
            .inbox_dir(&god)
            .join(format!("{hid}.json"))
            .is_file()
    );
    let again = redeem(&c, &m.approve_token);
    assert_eq!(again.refused, Some(Refusal::AlreadyDecided));
    assert!(
        again
            .message
            .contains("already approved by operator via http link"),
        "{}",
        again.message
    );
    let pair = redeem(&c, &m.reject_token);
    assert_eq!(pair.refused, Some(Refusal::AlreadyDecided), "{pair:?}");
    let journal =
        std::fs::read_to_string(c.root().state_dir().parent().unwrap().join("journal.jsonl"))
            .unwrap();
    assert!(journal.contains("\"channel\":\"http\""), "{journal}");
}

#[test]
fn every_change_between_mint_and_tap_is_refused_with_its_receipt() {
    let (_d, c) = gate_root();
    // Edited.
    let hid = held(&c, 3);
    let m = mint(&c, &hid);
    let p = c.root().quarantine_dir().join(format!("{hid}.json"));
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("$82,000", "$820,000");
    std::fs::write(&p, text).unwrap();
    assert_eq!(redeem(&c, &m.approve_token).refused, Some(Refusal::Edited));
    // Decided at the CLI first: the link names who.
    let hid = held(&c, 4);
    let m = mint(&c, &hid);
    c.approve(&hid, Actor::Operator).unwrap();
    let r = redeem(&c, &m.approve_token);
    assert_eq!(r.refused, Some(Refusal::AlreadyDecided), "{r:?}");
    // Expired.
    let hid = held(&c, 5);
    let m = c
        .mint_link(&LinkRequest {
            handoff_id: hid.clone(),
            ttl: std::time::Duration::from_millis(1),
            channel: Channel::Cli,
        })
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(redeem(&c, &m.approve_token).refused, Some(Refusal::Expired));
    // Wrong item, revoked, unknown.
    let other = held(&c, 6);
    let m = mint(&c, &other);
    let r = c
        .redeem_link(&RedeemRequest {
            token: m.approve_token.clone(),
            expect_handoff: Some(hid.to_string()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.refused, Some(Refusal::WrongItem));
    assert_eq!(c.revoke_links(&other).unwrap(), 2);
    assert_eq!(redeem(&c, &m.approve_token).refused, Some(Refusal::Revoked));
    assert_eq!(redeem(&c, &"A".repeat(43)).refused, Some(Refusal::Unknown));
    assert_eq!(redeem(&c, "../../etc").refused, Some(Refusal::Unknown));
}

#[test]
fn a_pause_held_item_gets_no_link_and_a_free_one_neither() {
    let (_d, c) = gate_root();
    let hid = held(&c, 7);
    c.approve(&hid, Actor::Operator).unwrap();
    let e = c
        .mint_link(&LinkRequest {
            handoff_id: hid,
            ttl: DEFAULT_LINK_TTL,
            channel: Channel::Cli,
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("only a held item gets a link"),
        "{e}"
    );
}

#[test]
fn ended_records_are_cleaned_a_day_later() {
    let (_d, c) = gate_root();
    let hid = held(&c, 8);
    let m = mint(&c, &hid);
    redeem(&c, &m.approve_token);
    assert_eq!(c.links().len(), 2);
    assert_eq!(c.sweep_links(Utc::now()), 0);
    assert_eq!(c.sweep_links(Utc::now() + Duration::hours(25)), 2);
    assert_eq!(redeem(&c, &m.approve_token).refused, Some(Refusal::Unknown));
}
