//! Approval links end to end (docs/PROTOCOL.md §2.15): the real binary's `serve --approvals`,
//! `approve --link`, `approvals`, `approve --revoke`, driven by `curl` and by a real headless
//! Chromium (selenium) at a phone's width.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::observe::{Serve, free_port, http_get};

const GATE: &str = r#"
workflow:
  id: gate
  steps:
    - id: plan
      god: thoth
    - id: build
      god: hephaestus
      approval_required: true
"#;

fn held_env() -> Env {
    let env = Env::with_test_flow();
    env.write("conductor/workflows/gate.yaml", GATE);
    env
}

fn hold(env: &Env, n: u32) -> String {
    let hid = format!("hof_20261206_lk{n:04}");
    let mut h = def_handoff(
        handoff(&hid, &format!("wf_lk{n}"), "thoth", "x", "plan", &[]),
        "gate",
        None,
    );
    h["context"]["summary"] = "pay the supplier $82,000".into();
    env.submit(&h);
    hid
}

/// `serve --approvals 127.0.0.1:PORT --log FILE`, answering.
fn serve_approvals(env: &Env, port: u16) -> Serve {
    serve_approvals_with(env, port, &[])
}

/// [`serve_approvals`] with more arguments.
fn serve_approvals_with(env: &Env, port: u16, more: &[&str]) -> Serve {
    let log = env.dir.path().join("serve.log");
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "serve",
        "--approvals",
        &addr,
        "--log",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    let child = env
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let serve = Serve(child);
    let until = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/", None).is_none_or(|(c, _, _)| c != 200)
        || !env.exists("conductor/approvals/listener.json")
    {
        assert!(Instant::now() < until, "serve --approvals never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    serve
}

/// `curl` (the system's): (status, body).
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_owned())
}

fn inbox_has(env: &Env, hid: &str) -> bool {
    env.exists(&format!("conductor/pending/hephaestus/{hid}.json"))
}

#[test]
fn a_link_approves_over_http_once_and_every_later_tap_gets_a_receipt() {
    let env = held_env();
    let port = free_port();
    let _serve = serve_approvals(&env, port);
    let hid = hold(&env, 1);
    let link = env.ok(&["approve", &hid, "--link"], None);
    let approve_url = link["approve_url"].as_str().unwrap().to_owned();
    let reject_url = link["reject_url"].as_str().unwrap().to_owned();
    assert!(
        approve_url.starts_with(&format!("http://127.0.0.1:{port}/a/")),
        "{link:#}"
    );
    assert!(link["expires_at"].is_string());
    // The page: what is held, small, no script, no asset from elsewhere.
    let (code, page) = curl(&[&approve_url]);
    assert_eq!(code, 200, "{page}");
    assert!(page.len() < 20 * 1024, "{} bytes", page.len());
    for want in [
        "pay the supplier $82,000",
        "wf_lk1",
        "hephaestus",
        "build",
        link["content_sha256"].as_str().unwrap(),
        "Approve",
    ] {
        assert!(page.contains(want), "{want:?} in {page}");
    }
    for never in ["<script", "src=", "http://", "https://"] {
        assert!(!page.contains(never), "{never:?} in {page}");
    }
    // `approvals` lists the pair, without the tokens.
    let list = env.ok(&["approvals"], None);
    let listed = list.to_string();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list:#}");
    assert!(!listed.contains(approve_url.rsplit('/').next().unwrap()));
    // The tap.
    let form = format!(
        "handoff={hid}&digest={}",
        link["content_sha256"].as_str().unwrap()
    );
    let (code, receipt) = curl(&["-d", &form, &approve_url]);
    assert_eq!(code, 200, "{receipt}");
    assert!(receipt.contains("Approved"), "{receipt}");
    assert!(inbox_has(&env, &hid));
    // A second tap, and the reject link of the pair.
    let (code, again) = curl(&["-d", &form, &approve_url]);
    assert_eq!(code, 409, "{again}");
    assert!(
        again.contains("already approved by operator via http link"),
        "{again}"
    );
    let (code, pair) = curl(&["-d", &form, &reject_url]);
    assert_eq!(code, 409, "{pair}");
    assert!(pair.contains("already_decided"), "{pair}");
    // The journal says where it came from; no token reached the log.
    let entry = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "approve")
        .unwrap();
    assert_eq!(entry["targets"]["channel"], "http", "{entry:#}");
    let log = std::fs::read_to_string(env.dir.path().join("serve.log")).unwrap();
    assert!(log.contains("approval links at"), "{log}");
    assert!(!log.contains(approve_url.rsplit('/').next().unwrap()));
}

/// A budget hold approved from the page, with `curl`: the page shows each budget reached with its
/// usage and limit and asks for the raise; a tap without one is refused saying it needs one
/// (nothing decided); a tap with one raises and approves, journaled with its channel.
#[test]
fn a_budget_hold_tapped_on_the_page_needs_the_raise_and_takes_it() {
    let env = held_env();
    env.write(
        "conductor/workflows/paid.yaml",
        "workflow:\n  id: paid\n  budget: {cost_usd: 1.0}\n  steps:\n    - id: research\n      god: thoth\n    - id: build\n      god: hephaestus\n",
    );
    let hid = "hof_20261206_lkb001";
    let mut h = def_handoff(
        handoff(hid, "wf_lkb1", "thoth", "x", "research", &[]),
        "paid",
        None,
    );
    h["usage"] = serde_json::json!({"cost_usd": 1.2});
    env.submit(&h);
    assert!(env.exists(&format!("conductor/pending/_quarantine/{hid}.json")));
    let port = free_port();
    let _serve = serve_approvals(&env, port);
    let link = env.ok(&["approve", hid, "--link"], None);
    let url = link["approve_url"].as_str().unwrap().to_owned();
    let (code, page) = curl(&[&url]);
    assert_eq!(code, 200, "{page}");
    for want in [
        "Budgets reached",
        "$1.20 used of its $1.00 budget",
        "name=raise_usd",
        "needs a raise",
    ] {
        assert!(page.contains(want), "{want:?} in {page}");
    }
    assert!(page.len() < 20 * 1024, "{} bytes", page.len());
    let form = format!(
        "handoff={hid}&digest={}",
        link["content_sha256"].as_str().unwrap()
    );
    // No raise: refused, saying it needs one, naming the budget's usage.
    let (code, receipt) = curl(&["-d", &form, &url]);
    assert_ne!(code, 200, "{receipt}");
    assert!(receipt.contains("needs_raise"), "{receipt}");
    assert!(receipt.contains("$1.20"), "{receipt}");
    assert!(!inbox_has(&env, hid));
    // With the raise: approved, the budget raised first.
    let (code, receipt) = curl(&["-d", &format!("{form}&raise_usd=3"), &url]);
    assert_eq!(code, 200, "{receipt}");
    assert!(receipt.contains("Approved"), "{receipt}");
    assert!(inbox_has(&env, hid));
    let e = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "approve" && e["targets"]["handoff_id"] == hid)
        .unwrap();
    assert_eq!(e["targets"]["channel"], "http", "{e:#}");
}

#[test]
fn a_link_to_edited_content_is_refused_and_a_revoked_one_too() {
    let env = held_env();
    let port = free_port();
    let _serve = serve_approvals(&env, port);
    let hid = hold(&env, 2);
    let link = env.ok(&["approve", &hid, "--link", "--ttl", "5m"], None);
    let url = link["approve_url"].as_str().unwrap().to_owned();
    let rel = format!("conductor/pending/_quarantine/{hid}.json");
    let text = std::fs::read_to_string(env.path(&rel))
        .unwrap()
        .replace("$82,000", "$820,000");
    env.write(&rel, &text);
    let (code, receipt) = curl(&["-X", "POST", &url]);
    assert_eq!(code, 409, "{receipt}");
    assert!(receipt.contains("edited"), "{receipt}");
    assert!(!inbox_has(&env, &hid));
    // A fresh link for the content as it is now, revoked before the tap.
    let link = env.ok(&["approve", &hid, "--link"], None);
    let r = env.ok(&["approve", &hid, "--revoke"], None);
    // Both pairs: a refused link stays open (its binding refuses it anyway), and is revoked too.
    assert_eq!(r["revoked"], 4, "{r:#}");
    let (code, receipt) = curl(&["-X", "POST", link["approve_url"].as_str().unwrap()]);
    assert_eq!(code, 409, "{receipt}");
    assert!(receipt.contains("revoked"), "{receipt}");
    // Unknown tokens: a page that says so, nothing read from the path.
    let (code, _) = curl(&[&format!("http://127.0.0.1:{port}/a/{}", "A".repeat(43))]);
    assert_eq!(code, 404);
    // Without a listener recorded and no --base-url, `--link` says what to do.
    let other = held_env();
    let hid = hold(&other, 3);
    let e = other.refused(&["approve", &hid, "--link"], None);
    assert!(
        e.contains("serve --approvals") && e.contains("--base-url"),
        "{e}"
    );
    let v: Value = other.ok(
        &[
            "approve",
            &hid,
            "--link",
            "--base-url",
            "https://ops.example/",
        ],
        None,
    );
    assert!(
        v["approve_url"]
            .as_str()
            .unwrap()
            .starts_with("https://ops.example/a/")
    );
}

/// The Python of the test venv with selenium (scripts/test-setup.sh installs it).
fn venv_python() -> std::path::PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new("bash")
        .arg(repo.join("scripts/test-setup.sh"))
        .output()
        .unwrap();
    assert!(
        setup.status.success(),
        "scripts/test-setup.sh: {}",
        String::from_utf8_lossy(&setup.stderr)
    );
    repo.join(".venv/bin/python")
}

const BROWSER: &str = r#"
import sys
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from selenium.common.exceptions import StaleElementReferenceException
o = Options()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=390,844",
          "--disable-dev-shm-usage"]:
    o.add_argument(a)
o.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(options=o, service=Service("/usr/bin/chromedriver"))
try:
    d.get(sys.argv[1])
    width = d.execute_script("return document.documentElement.scrollWidth")
    view = d.execute_script("return window.innerWidth")
    assert width <= view, f"the page scrolls sideways at a phone's width: {width} > {view}"
    assert "82,000" in d.find_element(By.TAG_NAME, "body").text
    before = [e.text for e in d.find_elements(By.TAG_NAME, "h1")]
    d.find_element(By.XPATH, "//button[text()='Approve']").click()
    # The click starts a navigation (the form's POST); wait for the receipt page's heading rather
    # than read a page that is still loading (a loaded machine takes its time).
    def receipt(drv):
        hs = drv.find_elements(By.TAG_NAME, "h1")
        return hs[0].text if hs and hs[0].text not in before else False
    print(WebDriverWait(d, 30, ignored_exceptions=(StaleElementReferenceException,)).until(receipt))
    print(d.find_element(By.TAG_NAME, "body").text)
finally:
    d.quit()
"#;

#[test]
fn a_phone_sized_headless_chromium_taps_approve_and_the_dispatch_reaches_the_inbox() {
    let python = venv_python();
    let env = held_env();
    let port = free_port();
    let _serve = serve_approvals(&env, port);
    let hid = hold(&env, 4);
    let link = env.ok(&["approve", &hid, "--link"], None);
    let script = env.dir.path().join("browser.py");
    std::fs::write(&script, BROWSER).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(link["approve_url"].as_str().unwrap())
        .env("HOME", &env.home)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser failed: {said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.starts_with("Approved"), "{said}");
    assert!(inbox_has(&env, &hid));
}

/// The ntfy hook of docs/CONSOLE.md ("Approving from a phone"), with the topic's URL from `$NTFY`.
const NTFY_HOOK: &str = r#"while read -r line; do
  a=$(printf '%s' "$line" | jq -r '.approve_url // empty')
  r=$(printf '%s' "$line" | jq -r '.reject_url // empty')
  msg=$(printf '%s' "$line" | jq -r '.reason')
  if [ -n "$a" ]; then
    curl -s -H "Actions: http, Approve, $a, method=POST, body=via=ntfy, clear=true; http, Reject, $r, method=POST, body=via=ntfy, clear=true; view, Open, $a" -d "$msg" "$NTFY"
  else
    curl -s -d "$msg" "$NTFY"
  fi
done"#;

/// A stand-in for ntfy: it takes one publish, parses its `Actions` header as ntfy does, and taps
/// the action labelled as asked the way ntfy's app does (its method, URL and body); prints what
/// the tap answered.
const NTFY_STANDIN: &str = r#"
import sys, urllib.request, http.server
tap = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        actions = [a.strip() for a in self.headers.get("Actions", "").split(";") if a.strip()]
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
        for a in actions:
            parts = [p.strip() for p in a.split(",")]
            kind, label, url = parts[0], parts[1], parts[2]
            opts = dict(p.split("=", 1) for p in parts[3:])
            if kind == "http" and label == tap:
                req = urllib.request.Request(url, data=opts.get("body", "").encode(),
                                             method=opts.get("method", "POST"))
                try:
                    with urllib.request.urlopen(req) as r:
                        print(r.status, r.read().decode())
                except urllib.error.HTTPError as e:
                    print(e.code, e.read().decode())
        sys.stdout.flush()
        raise SystemExit
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1]); sys.stdout.flush()
s.serve_forever()
"#;

#[test]
fn the_documented_ntfy_hook_gets_action_buttons_that_approve_through_the_listener() {
    use std::io::{BufRead, BufReader, Write};
    let env = held_env();
    let port = free_port();
    let _serve = serve_approvals(&env, port);
    let hid = hold(&env, 5);
    let script = env.dir.path().join("ntfy.py");
    std::fs::write(&script, NTFY_STANDIN).unwrap();
    let mut ntfy = Command::new("python3")
        .arg(&script)
        .arg("Approve")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(ntfy.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let ntfy_port: u16 = first.trim().parse().unwrap();
    // The console's hook line for the held item, links included.
    let root = pantheon::engine::Root::at(&env.root);
    let snap =
        pantheon::testing::live::LiveModel::open(root.clone(), Default::default()).snapshot();
    let items: Vec<_> = pantheon::testing::live::attention::items(&snap, chrono::Utc::now())
        .into_iter()
        .filter(|i| i.kind == pantheon::testing::live::attention::Kind::Held)
        .collect();
    let line = pantheon::testing::console::notify::hook_input_with(
        &items,
        Some(&pantheon::testing::approvals::hook_links(
            root.clone(),
            // The operator's key, where the listener (run with this HOME) keeps it.
            Some(
                pantheon::testing::approvals::link_key_at(
                    &env.home.join(".config/pantheon/link-key"),
                    &root,
                )
                .unwrap(),
            ),
        )),
    );
    assert!(line.contains("approve_url"), "{line}");
    let mut hook = Command::new("sh")
        .args(["-c", NTFY_HOOK])
        .env("NTFY", format!("http://127.0.0.1:{ntfy_port}/ops"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    hook.stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    assert!(hook.wait().unwrap().success());
    let mut tapped = String::new();
    // Everything until the stand-in exits after its one tap.
    std::io::Read::read_to_string(&mut out, &mut tapped).unwrap();
    let _ = ntfy.kill();
    let _ = ntfy.wait();
    assert!(tapped.starts_with("200"), "{tapped}");
    assert!(tapped.contains("Approved"), "{tapped}");
    assert!(inbox_has(&env, &hid));
    let entry = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "approve")
        .unwrap();
    assert_eq!(entry["targets"]["channel"], "ntfy", "{entry:#}");
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn with_a_signers_file_a_decision_needs_an_ssh_signature_over_the_token_and_digest() {
    let env = held_env();
    let key = env.dir.path().join("op_key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "op", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let signers = env.dir.path().join("allowed_signers");
    std::fs::write(
        &signers,
        format!(
            "alice@ops namespaces=\"pantheon-approve\" {}",
            public.trim()
        ),
    )
    .unwrap();
    let port = free_port();
    let _serve = serve_approvals_with(
        &env,
        port,
        &["--approvals-signers", signers.to_str().unwrap()],
    );
    let hid = hold(&env, 6);
    let link = env.ok(&["approve", &hid, "--link"], None);
    let url = link["approve_url"].as_str().unwrap();
    let token = url.rsplit('/').next().unwrap();
    let digest = link["content_sha256"].as_str().unwrap();
    // Unsigned: refused, nothing decided.
    let (code, page) = curl(&["-d", "x=1", url]);
    assert_eq!(code, 403, "{page}");
    assert!(page.contains("requires a signed decision"), "{page}");
    // Signed by the listed key over the token and the digest.
    let msg = env.dir.path().join("decision.txt");
    std::fs::write(&msg, format!("{token}\n{digest}\n")).unwrap();
    let signed = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "pantheon-approve", "-f"])
        .arg(&key)
        .arg(&msg)
        .output()
        .unwrap();
    assert!(
        signed.status.success(),
        "{}",
        String::from_utf8_lossy(&signed.stderr)
    );
    let sig = std::fs::read_to_string(msg.with_extension("txt.sig")).unwrap();
    let (code, page) = curl(&[
        "-d",
        &format!("principal=mallory@ops&signature={}", form_encode(&sig)),
        url,
    ]);
    assert_eq!(code, 403, "another principal: {page}");
    assert!(!inbox_has(&env, &hid));
    let (code, page) = curl(&[
        "-d",
        &format!("principal=alice@ops&signature={}", form_encode(&sig)),
        url,
    ]);
    assert_eq!(code, 200, "{page}");
    assert!(inbox_has(&env, &hid));
    let entry = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "approve")
        .unwrap();
    assert_eq!(
        entry["targets"]["approver"], "alice@ops (ssh signature)",
        "{entry:#}"
    );
}

#[test]
fn two_listeners_on_one_root_tapped_at_once_decide_each_item_once() {
    let env = held_env();
    let (p1, p2) = (free_port(), free_port());
    let _a = serve_approvals(&env, p1);
    let _b = serve_approvals_with(&env, p2, &[]);
    let items: Vec<(String, String)> = (10..20)
        .map(|n| {
            let hid = hold(&env, n);
            let link = env.ok(&["approve", &hid, "--link", "--base-url", "http://x"], None);
            let token = link["approve_url"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            (hid, token)
        })
        .collect();
    for (hid, token) in &items {
        let codes: Vec<u16> = std::thread::scope(|s| {
            let taps: Vec<_> = [p1, p2, p1, p2]
                .into_iter()
                .map(|p| {
                    let url = format!("http://127.0.0.1:{p}/a/{token}");
                    s.spawn(move || curl(&["-X", "POST", &url]).0)
                })
                .collect();
            taps.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(
            codes.iter().filter(|c| **c == 200).count(),
            1,
            "{hid}: {codes:?}"
        );
        assert_eq!(
            codes.iter().filter(|c| **c == 409).count(),
            3,
            "{hid}: {codes:?}"
        );
        assert!(inbox_has(&env, hid));
    }
    let approvals = env
        .journal_entries()
        .into_iter()
        .filter(|e| e["action"] == "approve")
        .count();
    assert_eq!(approvals, items.len());
}

#[test]
fn a_listener_beyond_loopback_warns_and_status_shows_its_badge() {
    let env = held_env();
    let port = free_port();
    let err = env.dir.path().join("serve.err");
    let child = env
        .command(&["serve", "--approvals", &format!("0.0.0.0:{port}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    let until = Instant::now() + Duration::from_secs(30);
    let badge = || {
        let out = env.run(&["status", "--format", "line"], None);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    while !badge().contains("⚠approvals") {
        assert!(Instant::now() < until, "no badge: {}", badge());
        std::thread::sleep(Duration::from_millis(100));
    }
    let v: Value =
        serde_json::from_slice(&env.run(&["status", "--format", "json"], None).stdout).unwrap();
    assert_eq!(
        v["approvals_exposed"],
        serde_json::json!([format!("0.0.0.0:{port}")])
    );
    let warned = std::fs::read_to_string(&err).unwrap();
    assert!(
        warned.contains("warning: --approvals 0.0.0.0:")
            && warned.contains("not a loopback address"),
        "{warned}"
    );
}

#[test]
fn a_redeem_killed_before_its_journal_entry_is_journaled_once_by_the_next_tick() {
    use std::os::unix::process::ExitStatusExt;
    let env = held_env();
    let port = free_port();
    let hid = hold(&env, 7);
    let base = format!("http://127.0.0.1:{port}");
    let link = env.ok(&["approve", &hid, "--link", "--base-url", &base], None);
    let approve_url = link["approve_url"].as_str().unwrap().to_owned();
    // The listener kills itself after the decision, before its journal entry.
    let mut c = env.command(&["serve", "--approvals", &format!("127.0.0.1:{port}")]);
    c.env("PANTHEON_TEST_CRASH_AT", "journal:before-append:approve")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut serve = Serve(c.spawn().unwrap());
    let until = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/", None).is_none_or(|(c, _, _)| c != 200) {
        assert!(Instant::now() < until, "serve --approvals never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let form = format!(
        "handoff={hid}&digest={}",
        link["content_sha256"].as_str().unwrap()
    );
    let (code, _) = curl(&["-d", &form, &approve_url]);
    assert_eq!(code, 0, "the listener died mid-answer");
    let status = serve.0.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the crash point was reached"
    );
    // The decision is made, its entry is not; the intent says what was done.
    assert!(inbox_has(&env, &hid));
    let approvals = |env: &Env| -> Vec<Value> {
        env.journal_entries()
            .into_iter()
            .filter(|e| e["action"] == "approve" && e["targets"]["handoff_id"] == hid.as_str())
            .collect()
    };
    assert!(approvals(&env).is_empty());
    assert_eq!(
        env.names("conductor/journal-intents"),
        vec![format!("held-{hid}.json")]
    );
    // The next supervisor pass journals it once, with its channel; the pass after, nothing.
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 1, "{r:#}");
    let e = approvals(&env);
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["outcome"], "approved");
    assert_eq!(e[0]["targets"]["channel"], "http", "{:#}", e[0]);
    assert_eq!(e[0]["targets"]["intent"], format!("held-{hid}"));
    assert_eq!(env.names("conductor/journal-intents"), Vec::<String>::new());
    let r = env.ok(&["tick"], None);
    assert_eq!(r["journaled_late"], 0);
    assert_eq!(approvals(&env).len(), 1);
    let out = env.run(&["journal", "--verify"], None);
    assert!(out.status.success(), "{out:?}");
}

/// A plain Python writer (not our code) drops `body` into `dir` as `name` (a hidden temp file
/// renamed), then waits for the receipt written beside it; the receipt's JSON.
fn drop_and_wait(dir: &std::path::Path, name: &str, body: &str) -> Value {
    let script = r#"
import json, os, sys, time
d, name, body = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = os.path.join(d, "." + name)
with open(tmp, "w") as f:
    f.write(body)
os.rename(tmp, os.path.join(d, name))
receipt = os.path.join(d, name + ".receipt.json")
until = time.time() + 20
while not os.path.exists(receipt):
    if time.time() > until:
        sys.exit("no receipt")
    time.sleep(0.05)
print(open(receipt).read())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .args([name, body])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until `path` is gone (a dropped file is removed just after its receipt is written); a
/// link is seen as itself.
fn gone(path: &std::path::Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while std::fs::symlink_metadata(path).is_ok() {
        assert!(Instant::now() < until, "{} stayed", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve --approvals-drop DIR` (with `crash_at`: killed there); the process.
fn serve_drop(env: &Env, dir: &std::path::Path, crash_at: Option<&str>) -> Serve {
    let log = env.dir.path().join("serve.log");
    let mut c = env.command(&[
        "serve",
        "--approvals-drop",
        dir.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    if let Some(at) = crash_at {
        c.env("PANTHEON_TEST_CRASH_AT", at);
    }
    Serve(
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits for `serve` to die; true when it was killed by SIGKILL (its crash point).
fn killed(serve: &mut Serve) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = serve.0.try_wait().unwrap() {
            return st.signal() == Some(libc::SIGKILL);
        }
        assert!(
            Instant::now() < until,
            "serve never reached its crash point"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// kill -9 at the drop's crash points, between the redeem and the removal: the file stays, the next
/// `serve` takes it again, its receipt says the item was decided already, and the decision was
/// applied and journaled once.
#[test]
fn a_drop_killed_between_its_redeem_and_its_removal_is_taken_again_and_decided_once() {
    let env = held_env();
    let dir = env.dir.path().join("drop");
    std::fs::create_dir_all(&dir).unwrap();
    let uid = std::fs::metadata(&dir)
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    for (n, at) in [(51, "drop:after-redeem"), (52, "drop:after-receipt")] {
        let hid = hold(&env, n);
        let link = env.ok(
            &[
                "approve",
                &hid,
                "--link",
                "--base-url",
                "http://127.0.0.1:9",
            ],
            None,
        );
        let token = link["approve_url"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        let body = serde_json::json!({"token": token, "handoff": hid,
            "digest": link["content_sha256"]})
        .to_string();
        // Dropped as a relay does (a hidden file renamed), before serve starts: its first scan
        // takes it and dies at the crash point.
        let name = format!("d{n}.json");
        std::fs::write(dir.join(format!(".{name}")), &body).unwrap();
        std::fs::rename(dir.join(format!(".{name}")), dir.join(&name)).unwrap();
        let receipt = dir.join(format!("{name}.receipt.json"));
        let mut serve = serve_drop(&env, &dir, Some(at));
        assert!(killed(&mut serve), "{at} was reached");
        let approvals = |env: &Env| -> Vec<Value> {
            env.journal_entries()
                .into_iter()
                .filter(|e| e["action"] == "approve" && e["targets"]["handoff_id"] == hid.as_str())
                .collect()
        };
        // Decided and journaled; the file is still there (with the receipt only after it).
        assert!(inbox_has(&env, &hid), "{at}");
        assert_eq!(approvals(&env).len(), 1, "{at}");
        assert!(
            dir.join(&name).exists(),
            "{at}: the file stays until its receipt is written"
        );
        assert_eq!(receipt.exists(), at == "drop:after-receipt", "{at}");
        if at == "drop:after-receipt" {
            let r: Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
            assert_eq!(r["status"], "approved", "{r:#}");
            std::fs::remove_file(&receipt).unwrap();
        }
        // The next serve takes it again: answered "already decided", then removed.
        let serve = serve_drop(&env, &dir, None);
        let until = Instant::now() + Duration::from_secs(30);
        while !receipt.exists() {
            assert!(Instant::now() < until, "{at}: no receipt after the restart");
            std::thread::sleep(Duration::from_millis(20));
        }
        gone(&dir.join(&name));
        drop(serve);
        let r: Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
        assert_eq!(r["status"], "refused", "{at}: {r:#}");
        assert_eq!(r["refused"], "already_decided", "{at}: {r:#}");
        let said = r["message"].as_str().unwrap();
        assert!(
            said.contains(&format!("already approved by uid {uid} (file owner)")),
            "{at}: {said}"
        );
        // Once: one decision, one entry, with its channel.
        let e = approvals(&env);
        assert_eq!(e.len(), 1, "{at}: {e:#?}");
        assert_eq!(e[0]["targets"]["channel"], "file");
        assert!(inbox_has(&env, &hid));
    }
    let out = env.run(&["journal", "--verify"], None);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_decision_dropped_as_a_file_is_read_once_removed_and_answered_with_a_receipt_beside_it() {
    let env = held_env();
    let (h1, h2) = (hold(&env, 21), hold(&env, 22));
    let base = "http://127.0.0.1:9";
    let l1 = env.ok(&["approve", &h1, "--link", "--base-url", base], None);
    let l2 = env.ok(&["approve", &h2, "--link", "--base-url", base], None);
    // A drop directory inside the root is refused, saying why.
    let inside = env.root.join("drop");
    std::fs::create_dir_all(&inside).unwrap();
    let out = env.run(
        &["serve", "--approvals-drop", inside.to_str().unwrap()],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lies inside the root"), "{err}");
    // One outside it.
    let dir = env.dir.path().join("drop");
    std::fs::create_dir_all(&dir).unwrap();
    let log = env.dir.path().join("serve.log");
    let child = env
        .command(&[
            "serve",
            "--approvals-drop",
            dir.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    let until = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("approval decisions taken from files")
    {
        assert!(
            Instant::now() < until,
            "serve never took the drop directory"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = |l: &Value, k: &str| {
        l[k].as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    };
    let body = serde_json::json!({"token": token(&l1, "approve_url"), "handoff": h1,
        "digest": l1["content_sha256"]})
    .to_string();
    let r = drop_and_wait(&dir, "d1.json", &body);
    assert_eq!(r["status"], "approved", "{r:#}");
    let uid = std::fs::metadata(&dir)
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    assert_eq!(
        r["decided_by"],
        format!("uid {uid} (file owner) via file link"),
        "{r:#}"
    );
    // Removed once its receipt is written.
    gone(&dir.join("d1.json"));
    assert!(inbox_has(&env, &h1));
    let e: Vec<Value> = env
        .journal_entries()
        .into_iter()
        .filter(|e| e["action"] == "approve" && e["targets"]["handoff_id"] == h1.as_str())
        .collect();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["targets"]["channel"], "file");
    assert_eq!(
        e[0]["targets"]["approver"],
        format!("uid {uid} (file owner)")
    );
    // The same token again: a receipt saying who decided.
    let r = drop_and_wait(&dir, "d2.json", &body);
    assert_eq!(r["refused"], "already_decided", "{r:#}");
    // A link in the drop directory is not followed: removed, refused, its target untouched.
    let target = env.dir.path().join("elsewhere.txt");
    std::fs::write(&target, format!("token={}", token(&l2, "reject_url"))).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("evil.txt")).unwrap();
    let receipt = dir.join("evil.txt.receipt.json");
    let until = Instant::now() + Duration::from_secs(20);
    while !receipt.exists() {
        assert!(Instant::now() < until, "no receipt for the link");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    assert_eq!(r["status"], "error", "{r:#}");
    gone(&dir.join("evil.txt"));
    assert!(target.exists());
    assert!(env.exists(&format!("conductor/pending/_quarantine/{h2}.json")));
}

#[test]
fn a_listener_that_requires_an_operator_asks_for_basic_auth_and_records_who_approved() {
    let env = held_env();
    let creds = env.dir.path().join("credentials.jsonl");
    let add = |name: &str, kind: &str| {
        env.ok(
            &[
                "credentials",
                "add",
                name,
                kind,
                "--file",
                creds.to_str().unwrap(),
            ],
            None,
        )["secret"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (alice, hermes) = (add("alice", "--operator"), add("hermes", "--god"));
    let port = free_port();
    let _serve = serve_approvals_with(
        &env,
        port,
        &[
            "--approvals-require",
            "operator",
            "--credentials",
            creds.to_str().unwrap(),
        ],
    );
    let (h1, h2) = (hold(&env, 31), hold(&env, 32));
    let l1 = env.ok(&["approve", &h1, "--link"], None);
    let url = l1["approve_url"].as_str().unwrap().to_owned();
    let form = format!(
        "handoff={h1}&digest={}",
        l1["content_sha256"].as_str().unwrap()
    );
    // Without a credential: 401 and the challenge a browser answers with its sign-in prompt.
    let out = Command::new("curl")
        .args(["-s", "-i", "-m", "20", &url])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout);
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.contains("Basic realm=\"pantheon approvals\""),
        "{head}"
    );
    let (code, _) = curl(&["-d", &form, &url]);
    assert_eq!(code, 401);
    // A god's secret, or a wrong one, is no operator.
    let (code, body) = curl(&["-u", &format!("x:{hermes}"), "-d", &form, &url]);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("not an operator"), "{body}");
    let (code, _) = curl(&["-u", "alice:pan_nope", "-d", &form, &url]);
    assert_eq!(code, 401);
    assert!(!inbox_has(&env, &h1));
    // The operator's secret as Basic's password (curl -u) decides, and is the approver.
    let (code, page) = curl(&["-u", &format!("alice:{alice}"), &url]);
    assert_eq!(code, 200, "{page}");
    let (code, receipt) = curl(&["-u", &format!("alice:{alice}"), "-d", &form, &url]);
    assert_eq!(code, 200, "{receipt}");
    assert!(
        receipt.contains("alice (operator credential) via http link"),
        "{receipt}"
    );
    let e = env
        .journal_entries()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "approve" && e["targets"]["handoff_id"] == h1.as_str())
        .unwrap();
    assert_eq!(
        e["targets"]["approver"], "alice (operator credential)",
        "{e:#}"
    );
    // A phone's browser: the credential in the link's URL (as a password manager fills it).
    let python = venv_python();
    let l2 = env.ok(&["approve", &h2, "--link"], None);
    let with_auth = l2["approve_url"].as_str().unwrap().replacen(
        "http://",
        &format!("http://alice:{alice}@"),
        1,
    );
    let script = env.dir.path().join("browser.py");
    std::fs::write(&script, BROWSER).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .arg(&with_auth)
        .env("HOME", &env.home)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser failed: {said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.starts_with("Approved"), "{said}");
    assert!(said.contains("alice (operator credential)"), "{said}");
    assert!(inbox_has(&env, &h2));
}

#[test]
fn the_root_config_sets_how_long_a_link_lives_unless_ttl_says_otherwise() {
    let env = held_env();
    env.write("conductor/config.yaml", "approvals:\n  ttl: 2h\n");
    let hid = hold(&env, 41);
    let base = "http://127.0.0.1:9";
    let lives = |v: &Value| {
        let at = |s: &Value| chrono::DateTime::parse_from_rfc3339(s.as_str().unwrap()).unwrap();
        let listed = env.ok(&["approvals"], None);
        let minted = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["expires_at"] == v["expires_at"])
            .map(|l| at(&l["minted_at"]))
            .unwrap();
        (at(&v["expires_at"]) - minted).num_seconds()
    };
    let l = env.ok(&["approve", &hid, "--link", "--base-url", base], None);
    assert_eq!(lives(&l), 7200, "{l:#}");
    let l = env.ok(
        &["approve", &hid, "--link", "--base-url", base, "--ttl", "5m"],
        None,
    );
    assert_eq!(lives(&l), 300, "{l:#}");
    // A bad value is a warning and keeps the built-in 15 minutes.
    env.write("conductor/config.yaml", "approvals:\n  ttl: 9d\n");
    let l = env.ok(&["approve", &hid, "--link", "--base-url", base], None);
    assert_eq!(lives(&l), 900, "{l:#}");
}
