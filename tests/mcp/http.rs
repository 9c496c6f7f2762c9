//! `pantheon mcp --http`: the same tools over Streamable HTTP, driven by the official Python SDK's
//! `streamable_http_client` (per-request, `server/discover`: answers as JSON bodies) and the
//! official TypeScript SDK's `StreamableHTTPClientTransport` (the `initialize` handshake: a session,
//! answers as server-sent events); credentials (`--credentials FILE`) bind each request to a
//! principal's rights.

use std::io::{Read, Write};

use serde_json::json;

use crate::harness::*;
use crate::schemas::{all_fit, every_tool_steps};

const TRACK: &str = "remote";

/// A root with the test workflow and a track, served over HTTP with `extra` flags.
fn served(extra: &[&str]) -> (TestRoot, HttpServer) {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    root.init_track(TRACK);
    let mut args = vec!["mcp", "--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let server = HttpServer::start(root.path(), &args);
    (root, server)
}

#[test]
fn every_tool_answers_over_http_through_both_official_clients() {
    for sdk in BOTH_SDKS {
        let (root, server) = served(&[]);
        let items = root.operator_items(1);
        assert!(
            server.url.starts_with("http://127.0.0.1:"),
            "{}",
            server.url
        );
        let mut steps = vec![list_tools()];
        steps.extend(every_tool_steps(TRACK, &items));
        steps.push(call("ack_handoff", json!({"ack": {"status": "accepted"}})));
        steps.push(call("check_inbox", json!({"god_name": "thoth", "nope": 1})));
        steps.push(call("no_such_tool", json!({})));
        let report = http_session(sdk, &server.url, None, &[], &steps);
        let results = http_results(&report);
        assert_eq!(report["server"]["name"], "conductor", "{sdk:?}: {report:#}");
        let names: Vec<&str> = results[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, ALL_TOOLS, "{sdk:?}");
        let n = results.len();
        all_fit(&steps[1..n - 3], &results[1..n - 3]);
        // Bad arguments: the engine's refusal, the argument check's, and an unknown tool.
        let text = refused(&results[n - 3]);
        assert!(text.contains("ack_id"), "{sdk:?}: {text}");
        let text = refused(&results[n - 2]);
        assert_eq!(results[n - 2]["refusal"]["kind"], "invalid_arguments");
        assert!(text.contains("nope"), "{sdk:?}: {text}");
        assert_eq!(
            results[n - 1]["protocol_error"]["code"],
            json!(-32602),
            "{sdk:?}: {:#}",
            results[n - 1]
        );
    }
}

/// Two gods with their own credentials: each acts only as itself, an ack of the other's dispatch
/// is refused naming the right, and the journal records the principal.
#[test]
fn a_credential_binds_each_call_to_its_god() {
    for sdk in BOTH_SDKS {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("credentials");
        let root = TestRoot::new();
        root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
        root.init_track(TRACK);
        let thoth = add_credential(&root, &file, "thoth", "--god");
        let heph = add_credential(&root, &file, "hephaestus", "--god");
        let server = HttpServer::start(
            root.path(),
            &[
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--credentials",
                file.to_str().unwrap(),
            ],
        );
        let wf = "wf_bound_1";
        let h1 = handoff_id(0xb01);
        let thoth_steps = [
            call(
                "submit_handoff",
                json!({"handoff": handoff(&h1, wf, "thoth", "hephaestus", "research", &[])}),
            ),
            call(
                "submit_handoff",
                json!({"handoff": handoff(&handoff_id(0xb02), "wf_bound_2", "zeus", "hephaestus", "research", &[])}),
            ),
            call("check_inbox", json!({"god_name": "hephaestus"})),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0xb01), "handoff_id": h1, "status": "accepted"}}),
            ),
            call(
                "post_message",
                json!({"track": TRACK, "msg_type": "STATUS", "source": "hephaestus"}),
            ),
            call(
                "acquire_lock",
                json!({"track": TRACK, "filepath": "a.rs", "worker_id": "thoth-1"}),
            ),
            call("abort_workflow", json!({"workflow_id": wf, "reason": "no"})),
            call("list_pending", json!({})),
        ];
        let r = http_results(&http_session(
            sdk,
            &server.url,
            Some(&thoth),
            &[],
            &thoth_steps,
        ));
        assert_eq!(ok(&r[0])["status"], "dispatched", "{sdk:?}");
        let submit_as_zeus = refused(&r[1]);
        assert!(
            submit_as_zeus.contains("`submit`") && submit_as_zeus.contains("zeus"),
            "{submit_as_zeus}"
        );
        assert_eq!(r[1]["refusal"]["kind"], "forbidden");
        assert!(refused(&r[2]).contains("`read_inbox`"), "{:#}", r[2]);
        let ack_other = refused(&r[3]);
        assert!(
            ack_other.contains("hephaestus") && ack_other.contains("thoth cannot acknowledge"),
            "{sdk:?}: {ack_other}"
        );
        assert!(refused(&r[4]).contains("`post`"), "{:#}", r[4]);
        ok(&r[5]);
        assert!(
            refused(&r[6]).contains("needs the right `abort`"),
            "{:#}",
            r[6]
        );
        ok(&r[7]);

        let heph_steps = [
            call("check_inbox", json!({"god_name": "hephaestus"})),
            call(
                "ack_handoff",
                json!({"ack": {"ack_id": ack_id(0xb03), "handoff_id": h1, "status": "accepted"}}),
            ),
        ];
        let r = http_results(&http_session(
            sdk,
            &server.url,
            Some(&heph),
            &[],
            &heph_steps,
        ));
        assert_eq!(ok(&r[0])["count"], 1, "{sdk:?}");
        assert_eq!(ok(&r[1])["status"], "accepted", "{sdk:?}: {:#}", r[1]);
        drop(server);

        let j = root.cli_json(&["journal"]);
        let entries = j["entries"].as_array().unwrap();
        let actor_of = |action: &str| -> Vec<&str> {
            entries
                .iter()
                .filter(|e| e["action"] == action)
                .map(|e| e["actor"].as_str().unwrap())
                .collect()
        };
        assert_eq!(actor_of("submit"), ["thoth"], "{sdk:?}: {j:#}");
        assert!(actor_of("ack").contains(&"hephaestus"), "{sdk:?}: {j:#}");
        assert!(
            !actor_of("ack").contains(&"thoth") || {
                // A refused ack may be journaled as refused; never as accepted.
                entries
                    .iter()
                    .filter(|e| e["action"] == "ack" && e["actor"] == "thoth")
                    .all(|e| e["outcome"] != "accepted")
            }
        );
        let state = root.cli_json(&["state", wf]);
        let acks = state["acks"].as_array().cloned().unwrap_or_default();
        assert!(
            acks.iter().all(|a| a["by"] == "hephaestus"),
            "only hephaestus acked: {state:#}"
        );
    }
}

/// A raw HTTP request to the endpoint: the status line and the headers.
fn raw_post(url: &str, authorization: Option<&str>) -> String {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_missing_or_wrong_credential_gets_401_from_both_official_clients() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    let root = TestRoot::new();
    let secret = add_credential(&root, &file, "thoth", "--god");
    let server = HttpServer::start(
        root.path(),
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--credentials",
            file.to_str().unwrap(),
        ],
    );
    for sdk in BOTH_SDKS {
        for token in [None, Some("pan_0123"), Some(&secret[..secret.len() - 1])] {
            let report = http_session(sdk, &server.url, token, &[], &[list_tools()]);
            let refusal = &report["connect_error"];
            // The TypeScript client reports the status; the Python client the JSON-RPC error the
            // 401 carries (it turns every HTTP error status into one).
            let said = refusal["message"].as_str().unwrap_or_default();
            match sdk {
                Sdk::TypeScript => {
                    assert_eq!(refusal["status"], json!(401), "{token:?}: {report:#}")
                }
                Sdk::Python => assert!(said.contains("-32001"), "{token:?}: {report:#}"),
            }
            let why = if token.is_none() {
                "Authorization: Bearer"
            } else {
                "not a credential"
            };
            assert!(said.contains(why), "{sdk:?} with {token:?}: {report:#}");
        }
        let report = http_session(sdk, &server.url, Some(&secret), &[], &[list_tools()]);
        assert_eq!(
            http_results(&report)[0]["tools"].as_array().unwrap().len(),
            ALL_TOOLS.len()
        );
    }
    let no = raw_post(&server.url, None);
    assert!(no.starts_with("HTTP/1.1 401"), "{no}");
    assert!(
        no.to_ascii_lowercase().contains("www-authenticate: bearer"),
        "{no}"
    );
    assert!(
        no.contains("Authorization: Bearer"),
        "the refusal says what to send: {no}"
    );
    let basic = raw_post(&server.url, Some("Basic dGhvdGg6eA=="));
    assert!(basic.starts_with("HTTP/1.1 401"), "{basic}");
    // Past the credential check, the transport answers: a tools/list with no session is its 400.
    let good = raw_post(&server.url, Some(&format!("Bearer {secret}")));
    assert!(
        good.starts_with("HTTP/1.1 400") && good.contains("Session ID is required"),
        "{good}"
    );
}

#[test]
fn a_credentials_file_inside_the_root_or_readable_by_others_is_refused_before_listening() {
    use std::os::unix::fs::PermissionsExt;
    let root = TestRoot::new();
    let inside = root.path().join("creds");
    let out = root.pantheon(&[
        "credentials",
        "add",
        "thoth",
        "--god",
        "--file",
        inside.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("inside the root"));

    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    add_credential(&root, &file, "thoth", "--god");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = root.pantheon(&[
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--credentials",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("chmod 600"),
        "{err}"
    );
    // `serve --mcp` loads the file the same way: readable by others, refused before it listens.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o604)).unwrap();
    let out = root.pantheon(&[
        "serve",
        "--mcp",
        "127.0.0.1:0",
        "--credentials",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mode 604") && err.contains("chmod 600"),
        "{err}"
    );
    // A private file moved inside the root (where every agent can write) is refused by both.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let inside = root.path().join("credentials");
    std::fs::copy(&file, &inside).unwrap();
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600)).unwrap();
    for command in [["mcp", "--http"], ["serve", "--mcp"]] {
        let out = root.pantheon(&[
            command[0],
            command[1],
            "127.0.0.1:0",
            "--credentials",
            inside.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // The refusal is the only thing said: nothing (the history recorder's thread) starts first.
        assert!(
            err.starts_with("error: ") && err.contains("lies inside the root"),
            "{command:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{command:?}: {err}");
    }
}

#[test]
fn mcp_as_a_god_binds_stdio_the_same_way() {
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    let h1 = handoff_id(0xa51);
    let steps = [
        call(
            "submit_handoff",
            json!({"handoff": handoff(&h1, "wf_as_1", "thoth", "hephaestus", "research", &[])}),
        ),
        call(
            "submit_handoff",
            json!({"handoff": handoff(&handoff_id(0xa52), "wf_as_2", "zeus", "hephaestus", "research", &[])}),
        ),
        call(
            "ack_handoff",
            json!({"ack": {"ack_id": ack_id(0xa51), "handoff_id": h1, "status": "accepted"}}),
        ),
    ];
    let report = root
        .start_session_env(
            "auto",
            &steps,
            &[("PANTHEON_MCP_ARGS", r#"["--as", "thoth"]"#)],
        )
        .finish();
    assert_eq!(ok(&report.results[0])["status"], "dispatched");
    assert!(refused(&report.results[1]).contains("`submit`"));
    assert!(refused(&report.results[2]).contains("thoth cannot acknowledge"));
    let j = root.cli_json(&["journal"]);
    assert_eq!(j["entries"][0]["actor"], "thoth", "{j:#}");
}

#[test]
fn an_endpoint_beyond_loopback_is_warned_about_and_shown_by_status() {
    let root = TestRoot::new();
    let server = HttpServer::start(root.path(), &["mcp", "--http", "0.0.0.0:0"]);
    assert!(
        server.log().contains("warning: --http 0.0.0.0:")
            && server.log().contains("acts as any god"),
        "{}",
        server.log()
    );
    let status = root.cli_json(&["status", "--format", "json"]);
    assert_eq!(
        status["mcp_exposed"].as_array().map(Vec::len),
        Some(1),
        "{status:#}"
    );
    let line = root.pantheon(&["status"]);
    assert!(String::from_utf8_lossy(&line.stdout).contains("⚠mcp"));
    assert!(server.stop().success());
    let status = root.cli_json(&["status", "--format", "json"]);
    assert_eq!(status["mcp_exposed"], json!([]), "gone at exit: {status:#}");
}

/// A self-signed certificate for 127.0.0.1 and its key, made by the `openssl` command-line tool.
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=pantheon-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl command-line tool is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn tls_from_a_certificate_and_key_serves_https_to_a_client_that_trusts_it() {
    let certs = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(certs.path());
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    let root = TestRoot::new();
    root.write("conductor/workflows/mcp-test.yaml", TEST_WORKFLOW);
    let secret = add_credential(&root, &file, "thoth", "--god");
    let server = HttpServer::start(
        root.path(),
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--credentials",
            file.to_str().unwrap(),
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let steps = [
        list_tools(),
        call(
            "submit_handoff",
            json!({"handoff": handoff(&handoff_id(0x71), "wf_tls_1", "thoth", "hephaestus", "research", &[])}),
        ),
    ];
    let ca = cert.to_str().unwrap();
    let r = http_results(&http_session(
        Sdk::Python,
        &server.url,
        Some(&secret),
        &[("PANTHEON_MCP_CA", ca)],
        &steps,
    ));
    assert_eq!(r[0]["tools"].as_array().unwrap().len(), ALL_TOOLS.len());
    assert_eq!(ok(&r[1])["status"], "dispatched");
    let r = http_results(&http_session(
        Sdk::TypeScript,
        &server.url,
        Some(&secret),
        &[("NODE_EXTRA_CA_CERTS", ca)],
        &steps[..1],
    ));
    assert_eq!(r[0]["tools"].as_array().unwrap().len(), ALL_TOOLS.len());
    // A client that does not trust the certificate does not get through.
    let untrusted = http_session(Sdk::Python, &server.url, Some(&secret), &[], &steps[..1]);
    let e = untrusted["connect_error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(e.to_lowercase().contains("certificate"), "{untrusted:#}");
    // Plain HTTP to the TLS port is not served.
    let plain = server.url.replace("https://", "http://");
    let r = http_session(Sdk::Python, &plain, Some(&secret), &[], &steps[..1]);
    assert!(r.get("connect_error").is_some(), "{r:#}");

    let bad = root.pantheon(&[
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--tls-cert",
        key.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.starts_with("error: --tls-cert "), "{err}");
}

/// 100 official Python clients at once, each its own connection: a submit and an ack each, no
/// error, and the journal holds each act exactly once.
#[test]
fn a_hundred_concurrent_http_clients_submit_and_ack_each_act_journaled_once() {
    const N: usize = 100;
    let (root, server) = served(&[]);
    let out = std::process::Command::new(python())
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python/swarm.py"))
        .arg(&server.url)
        .arg(N.to_string())
        .output()
        .expect("run the swarm");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], json!([]), "{report:#}\n{}", server.log());
    assert_eq!(report["ok"], json!(N), "{report:#}");
    eprintln!(
        "{N} clients, submit + ack each: {:.2} s",
        report["seconds"].as_f64().unwrap()
    );
    drop(server);

    let j = root.cli_json(&["journal"]);
    let entries = j["entries"].as_array().unwrap();
    let mut seen = std::collections::BTreeMap::<(String, String), usize>::new();
    for e in entries {
        let key = match e["action"].as_str().unwrap() {
            "submit" => e["targets"]["workflow_id"].as_str().unwrap().to_owned(),
            "ack" => e["targets"]["ack_id"].as_str().unwrap().to_owned(),
            other => panic!("unexpected act {other}: {e}"),
        };
        *seen
            .entry((e["action"].as_str().unwrap().to_owned(), key))
            .or_default() += 1;
    }
    assert_eq!(entries.len(), 2 * N, "{j:#}");
    assert_eq!(seen.len(), 2 * N, "no act doubled, none lost");
    assert!(seen.values().all(|n| *n == 1));
    assert_eq!(root.cli_json(&["journal", "--verify"])["valid"], true);
    for i in 0..N {
        let state = root.cli_json(&["state", &format!("wf_swarm_{i}")]);
        assert_eq!(state["acks"].as_array().map(Vec::len), Some(1), "{state:#}");
    }
}

/// A wait longer than the HTTP stack's default 10 s request limit is answered, as a JSON body (the
/// Python client, per request) and as an event stream (the TypeScript client, in a session).
#[test]
fn a_long_wait_for_event_is_answered_over_http() {
    let (_root, server) = served(&[]);
    for sdk in BOTH_SDKS {
        let started = std::time::Instant::now();
        let r = http_results(&http_session(
            sdk,
            &server.url,
            None,
            &[],
            &[call(
                "wait_for_event",
                json!({"track": TRACK, "event_pattern": "NEVER_*", "timeout": 12}),
            )],
        ));
        let waited = ok(&r[0]);
        assert_eq!(waited["matched"], json!(false), "{sdk:?}: {waited:#}");
        assert!(started.elapsed() >= std::time::Duration::from_secs(12));
    }
}
