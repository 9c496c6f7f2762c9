//! The MCP Inspector (npm `@modelcontextprotocol/inspector`, pinned in `node/package-lock.json`) in
//! CLI mode against `pantheon mcp --http`: a third-party client listing and calling the tools over
//! Streamable HTTP, with and without the credential.

use serde_json::{Value, json};

use crate::harness::*;

/// Runs `mcp-inspector --cli URL ARGS…` and returns its exit success and standard output.
fn inspector(url: &str, args: &[&str]) -> (bool, String, String) {
    let dir = crate::setup::node_client_dir();
    let catalog = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("node")
        .arg(dir.join("node_modules/.bin/mcp-inspector"))
        .arg("--cli")
        .arg(url)
        .args(args)
        // Its catalog of servers goes to a scratch file, not the user's home.
        .env("MCP_CATALOG_PATH", catalog.path().join("mcp.json"))
        .output()
        .expect("run the MCP Inspector");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_mcp_inspector_lists_and_calls_the_tools_over_http_with_a_credential() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("credentials");
    let root = TestRoot::new();
    root.init_track("t1");
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
    let auth = format!("Authorization: Bearer {secret}");

    let (ok_, out, err) = inspector(&server.url, &["--header", &auth, "--method", "tools/list"]);
    assert!(ok_, "{err}");
    let listing: Value = serde_json::from_str(&out).unwrap();
    let mut names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ALL_TOOLS);
    assert!(
        listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["outputSchema"]["type"] == "object")
    );

    let (ok_, out, err) = inspector(
        &server.url,
        &[
            "--header",
            &auth,
            "--method",
            "tools/call",
            "--tool-name",
            "check_inbox",
            "--tool-arg",
            "god_name=thoth",
        ],
    );
    assert!(ok_, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["structuredContent"]["god"], json!("thoth"), "{r:#}");
    assert_eq!(r["isError"], json!(false), "{r:#}");

    // Another god's inbox: an isError result, which the Inspector's CLI reports as a failure.
    let (ok_, out, err) = inspector(
        &server.url,
        &[
            "--header",
            &auth,
            "--method",
            "tools/call",
            "--tool-name",
            "check_inbox",
            "--tool-arg",
            "god_name=athena",
        ],
    );
    assert!(!ok_, "{out}");
    assert!(err.contains("tool_is_error"), "{out}{err}");

    // No credential: the 401 (`WWW-Authenticate: Bearer`) sends the Inspector to its OAuth flow,
    // which a test has no terminal for: it fails, asking for authentication.
    let (ok_, out, err) = inspector(&server.url, &["--method", "tools/list"]);
    assert!(!ok_, "{out}");
    assert!(err.contains("auth_required"), "{out}{err}");
}
