//! Help, docs and behaviour agree. Every command of the clap tree answers `--help`
//! through the real binary, every argument has a description, and docs/PROTOCOL.md §5.1 lists every command
//! and every one of its long options, so a command or flag added without its documentation fails here.

use std::path::Path;
use std::process::Command as Proc;

use clap::CommandFactory;
use pantheon::testing::cli::Cli;

use crate::common::bin;

/// Options every command inherits from the top level: documented once, in §5.1's first lines.
const GLOBAL: [&str; 6] = ["root", "actor", "read-only", "poll", "help", "version"];

/// Every command path below the top level (`["bus", "lock"]`, …), skipping clap's generated `help`.
fn command_paths(
    cmd: &clap::Command,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, clap::Command)>,
) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let mut path = prefix.clone();
        path.push(sub.get_name().to_string());
        out.push((path.clone(), sub.clone()));
        command_paths(sub, path, out);
    }
}

pub(crate) fn all_commands() -> Vec<(Vec<String>, clap::Command)> {
    let mut out = Vec::new();
    command_paths(&Cli::command(), Vec::new(), &mut out);
    assert!(
        out.len() > 30,
        "the command tree looks too small: {}",
        out.len()
    );
    out
}

/// The CLI section of docs/PROTOCOL.md (from "### 5.1 CLI" to the next heading of its level).
fn cli_section() -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/PROTOCOL.md"))
            .unwrap();
    let start = doc
        .find("### 5.1 CLI")
        .expect("docs/PROTOCOL.md has a 5.1 CLI section");
    let rest = &doc[start + 1..];
    let end = rest.find("\n### ").map_or(rest.len(), |e| e + 1);
    rest[..end].to_string()
}

#[test]
fn every_command_answers_help_with_its_usage() {
    for (path, _) in all_commands() {
        let out = Proc::new(bin()).args(&path).arg("--help").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pantheon {} --help failed: {}",
            path.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        // `Usage: pantheon bus --track <TRACK> init …`: the usage line names the command itself.
        let usage = text
            .lines()
            .find(|l| l.starts_with("Usage: pantheon"))
            .unwrap_or_default();
        let name = path.last().unwrap();
        assert!(
            usage.split_whitespace().any(|w| w == name),
            "pantheon {} --help: usage line {usage:?} does not name {name}",
            path.join(" ")
        );
    }
}

#[test]
fn every_command_and_argument_has_a_description() {
    let mut missing = Vec::new();
    for (path, cmd) in all_commands() {
        if cmd.get_about().is_none() {
            missing.push(format!("pantheon {}: no description", path.join(" ")));
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if GLOBAL.contains(&id) || arg.is_hide_set() {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("pantheon {} {id}: no help text", path.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "undocumented in --help:\n{}",
        missing.join("\n")
    );
}

#[test]
fn docs_protocol_cli_section_lists_every_command_and_long_option() {
    let section = cli_section();
    let mut missing = Vec::new();
    for (path, cmd) in all_commands() {
        let name = path.last().unwrap();
        // A command is listed by its name as a word of the section (`pantheon bus --track T  lock PATH …`).
        let listed = section
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .any(|w| w == name);
        if !listed {
            missing.push(format!("command `{}`", path.join(" ")));
        }
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if GLOBAL.contains(&long) || arg.is_hide_set() {
                continue;
            }
            if !section.contains(&format!("--{long}")) {
                missing.push(format!("`pantheon {} --{long}`", path.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/PROTOCOL.md §5.1 does not mention:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_top_level_help_names_every_command_with_the_words_docs_use() {
    let out = Proc::new(bin()).arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for (path, _) in all_commands().iter().filter(|(p, _)| p.len() == 1) {
        assert!(
            text.contains(&format!("\n  {}", path[0])),
            "`pantheon --help` does not list {}",
            path[0]
        );
    }
    // `demo` makes a fresh temporary root; the help says so instead of claiming $PANTHEON_ROOT.
    let demo = Proc::new(bin()).args(["demo", "--help"]).output().unwrap();
    let demo = String::from_utf8_lossy(&demo.stdout);
    assert!(demo.contains("temporary root"), "demo --help:\n{demo}");
}
