use super::*;
use std::os::unix::fs::PermissionsExt;

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

#[test]
fn an_added_secret_authenticates_its_principal_and_nothing_else() {
    let (home, root) = dirs();
    let file = home.path().join("credentials");
    let hermes = add(&file, root.path(), Principal::god("hermes").unwrap()).unwrap();
    let mut op = Principal::god("alice").unwrap();
    op.kind = Kind::Operator;
    op.rights = Right::defaults(Kind::Operator);
    let alice = add(&file, root.path(), op).unwrap();
    assert!(hermes.secret.starts_with("pan_") && hermes.secret.len() == 68);
    assert_ne!(hermes.secret, alice.secret);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&hermes.secret), "stored hashed: {text}");
    assert_eq!(text.lines().count(), 2);

    let creds = Credentials::load(&file, root.path()).unwrap();
    assert_eq!(creds.len(), 2);
    let who = creds.authenticate(&hermes.secret).unwrap();
    assert_eq!((who.name.as_str(), who.kind), ("hermes", Kind::God));
    assert!(who.may(Right::Ack) && !who.may(Right::Approve));
    let who = creds.authenticate(&alice.secret).unwrap();
    assert_eq!((who.name.as_str(), who.kind), ("alice", Kind::Operator));
    assert!(who.may(Right::Approve) && !who.may(Right::Submit));
    assert!(creds.authenticate("pan_0000").is_none());
    let mut near = hermes.secret.clone();
    near.pop();
    near.push('x');
    assert!(creds.authenticate(&near).is_none());
    assert!(creds.authenticate("").is_none());

    let again = add(&file, root.path(), Principal::god("hermes").unwrap()).unwrap_err();
    assert!(
        format!("{again:#}").contains("has a credential already"),
        "{again:#}"
    );
}

#[test]
fn a_file_inside_the_root_or_readable_by_others_or_a_link_is_refused() {
    let (home, root) = dirs();
    let inside = root.path().join("creds");
    let e = add(&inside, root.path(), Principal::god("hermes").unwrap()).unwrap_err();
    assert!(format!("{e:#}").contains("inside the root"), "{e:#}");

    let file = home.path().join("credentials");
    add(&file, root.path(), Principal::god("hermes").unwrap()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Credentials::load(&file, root.path()).unwrap_err();
    assert!(format!("{e:#}").contains("chmod 600"), "{e:#}");
    let e = add(&file, root.path(), Principal::god("athena").unwrap()).unwrap_err();
    assert!(format!("{e:#}").contains("mode 644"), "{e:#}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = home.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let e = Credentials::load(&link, root.path()).unwrap_err();
    assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");

    let missing = Credentials::load(&home.path().join("none"), root.path()).unwrap_err();
    assert!(
        format!("{missing:#}").contains("pantheon credentials add"),
        "{missing:#}"
    );
}

#[test]
fn a_bad_line_is_named_by_its_number() {
    let good = format!(
        r#"{{"name":"hermes","kind":"god","rights":["ack"],"sha256":"{}"}}"#,
        "ab".repeat(32)
    );
    let c = Credentials::parse(&format!("# a comment\n\n{good}\n")).unwrap();
    assert_eq!(c.len(), 1);
    for (text, says) in [
        (format!("{good}\nnot json"), "line 2 is not a credential"),
        (
            good.replace("\"ack\"", "\"fly\""),
            "line 1 is not a credential",
        ),
        (good.replace(&"ab".repeat(32), "abc"), "line 1: sha256"),
        (good.replace("hermes", "../x"), "line 1"),
        (
            format!("{good}\n{good}"),
            "line 2: \"hermes\" has a credential already",
        ),
    ] {
        let e = Credentials::parse(&text).unwrap_err();
        assert!(format!("{e:#}").contains(says), "{says}: {e:#}");
    }
}

#[test]
fn a_bearer_header_is_read_and_rights_are_verbs() {
    assert_eq!(bearer("Bearer pan_1"), Some("pan_1"));
    assert_eq!(bearer("bearer   pan_1 "), Some("pan_1"));
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer "), None);
    for r in Right::ALL {
        assert_eq!(Right::parse(r.as_str()), Some(r));
    }
    assert_eq!(Right::parse("fly"), None);
    let mut p = Principal::god("hermes").unwrap();
    assert!(p.may_read_inbox_of("hermes") && !p.may_read_inbox_of("athena"));
    p.inboxes = vec!["athena".into()];
    assert!(p.may_read_inbox_of("athena") && !p.may_read_inbox_of("zeus"));
    p.inboxes = vec!["*".into()];
    assert!(p.may_read_inbox_of("zeus"));
}
