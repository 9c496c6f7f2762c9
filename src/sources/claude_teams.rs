//! `claude-teams:DIR` (default `~/.claude`): the agent teams of Claude Code, read-only.
//!
//! - `teams/{team}/config.json`: the team (`members`: `name`, `agentId`, `agentType`, …; the lead
//!   as `leadAgentId`, `lead` or `leadName`).
//! - `teams/{team}/inboxes/{agent}.json`: the agent's inbox, a JSON array rewritten whole; each
//!   message `{from, text, timestamp, read, summary?}`, a structured one JSON-encoded in `text` with
//!   its `type` (`idle_notification`, `shutdown_request`, `plan_approval_request`,
//!   `permission_request`, their responses, …), camelCase or snake_case fields.
//! - `tasks/{team}/{N}.json`: a task (`subject`, `status`, `owner`, `blocks`, `blockedBy`).
//!
//! - `projects/*/*.jsonl` (and `projects/*/*/subagents/*.jsonl`): the session logs, whose usage
//!   lines give each teammate's cost (`claude_usage`).
//!
//! Attention: a permission request or plan approval request with no response of the same request
//! id in the team; a task blocked on a finished or missing task; a teammate idle with open tasks
//! of its own; a file that cannot be read. docs/SOURCES.md lists the layouts seen.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::files::{MAX_FILE_BYTES, MAX_TEXT, clean, clean_raw, list_dir, read_bounded};
use super::{Agent, Attention, Message, Snapshot, Source, SourceError, Task};

/// The claude-teams source.
pub struct ClaudeTeams {
    location: String,
    dir: PathBuf,
    /// Each file's fingerprint and parsed value (or why it could not be parsed), from the last
    /// read: a read parses again only the files that changed.
    cache: HashMap<PathBuf, (Fingerprint, Result<Value, String>)>,
    /// The session logs' usage lines (`projects/`), for each teammate's cost.
    logs: super::claude_usage::Logs,
}

/// Length, modification time and inode: a rewrite (temp + rename, or in place) changes one.
pub(crate) type Fingerprint = (u64, i64, i64, u64);

impl ClaudeTeams {
    /// The source at `location` (`~/…` from the home directory; empty: `~/.claude`).
    pub fn new(location: &str) -> Result<Self, SourceError> {
        let home = || {
            crate::engine::home_dir().ok_or_else(|| {
                SourceError::new("claude-teams: HOME is not set, so there is no ~/.claude; give the directory (claude-teams:DIR)")
            })
        };
        let dir = match location {
            "" | "~" if location.is_empty() => home()?.join(".claude"),
            "~" => home()?,
            l if l.starts_with("~/") => home()?.join(&l[2..]),
            l => PathBuf::from(l),
        };
        Ok(Self {
            location: location.to_owned(),
            dir: crate::engine::absolute_path(&dir),
            cache: HashMap::new(),
            logs: Default::default(),
        })
    }

    /// Reads `path` as JSON through the cache: `None` when it is missing.
    fn json(&mut self, path: &Path) -> Option<Result<Value, String>> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        let fp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
        if let Some((seen, v)) = self.cache.get(path)
            && *seen == fp
        {
            return Some(v.clone());
        }
        let parsed = match read_bounded(path, MAX_FILE_BYTES) {
            Ok(None) => return None,
            Ok(Some(bytes)) => serde_json::from_slice::<Value>(&bytes).map_err(|e| {
                if e.is_eof() {
                    format!("truncated JSON ({e}); being written?")
                } else {
                    format!("not valid JSON: {e}")
                }
            }),
            Err(e) => Err(e.reason),
        };
        self.cache.insert(path.to_path_buf(), (fp, parsed.clone()));
        Some(parsed)
    }
}

impl Source for ClaudeTeams {
    fn kind(&self) -> &'static str {
        "claude-teams"
    }

    fn location(&self) -> &str {
        &self.location
    }

    fn read(&mut self) -> Result<Snapshot, SourceError> {
        let dir = self.dir.clone();
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(SourceError::new(format!(
                    "{}: not a directory; give Claude Code's directory (claude-teams:DIR, default ~/.claude)",
                    dir.display()
                )));
            }
            Err(e) => {
                return Err(SourceError::new(format!(
                    "{}: {e}; give Claude Code's directory (claude-teams:DIR, default ~/.claude)",
                    dir.display()
                )));
            }
        }
        let mut read = Read::default();
        let teams = list_dir(&dir.join("teams"))?.unwrap_or_default();
        let mut seen = BTreeSet::new();
        for (team, path, is_dir) in teams {
            if !is_dir {
                continue;
            }
            seen.insert(path.join("config.json"));
            self.read_team(&team, &path, &mut read, &mut seen)?;
        }
        for (team, path, is_dir) in list_dir(&dir.join("tasks"))?.unwrap_or_default() {
            if is_dir {
                self.read_tasks(&team, &path, &mut read, &mut seen)?;
            }
        }
        // Files gone since the last read leave the cache.
        self.cache.retain(|p, _| seen.contains(p));
        let leads = std::mem::take(&mut read.leads);
        let mut skipped = Vec::new();
        let costs = self.logs.costs(&dir, &leads, &mut skipped);
        for (path, why) in skipped {
            read.unreadable(&path, why);
        }
        let mut snap = read.finish();
        snap.costs = costs;
        Ok(snap)
    }

    fn watch_paths(&self) -> Vec<PathBuf> {
        vec![self.dir.join("teams"), self.dir.join("tasks")]
    }

    fn poll_every(&self) -> Duration {
        Duration::from_secs(2)
    }
}

impl ClaudeTeams {
    fn read_team(
        &mut self,
        team: &str,
        path: &Path,
        read: &mut Read,
        seen: &mut BTreeSet<PathBuf>,
    ) -> Result<(), SourceError> {
        let config = path.join("config.json");
        match self.json(&config) {
            None => {}
            Some(Err(why)) => read.unreadable(&config, why),
            Some(Ok(v)) => read.team(team, &v),
        }
        for (name, file, is_dir) in list_dir(&path.join("inboxes"))?.unwrap_or_default() {
            let Some(agent) = name.strip_suffix(".json") else {
                continue;
            };
            if is_dir {
                continue;
            }
            seen.insert(file.clone());
            match self.json(&file) {
                None => {}
                Some(Err(why)) => read.unreadable(&file, why),
                Some(Ok(Value::Array(msgs))) => read.inbox(team, agent, &msgs),
                Some(Ok(other)) => read.unreadable(
                    &file,
                    format!(
                        "an inbox is a JSON array of messages, this is {}",
                        crate::engine::json_kind(&other)
                    ),
                ),
            }
        }
        Ok(())
    }

    fn read_tasks(
        &mut self,
        team: &str,
        path: &Path,
        read: &mut Read,
        seen: &mut BTreeSet<PathBuf>,
    ) -> Result<(), SourceError> {
        for (name, file, is_dir) in list_dir(path)?.unwrap_or_default() {
            if is_dir || !name.ends_with(".json") {
                continue;
            }
            seen.insert(file.clone());
            match self.json(&file) {
                None => {}
                Some(Err(why)) => read.unreadable(&file, why),
                Some(Ok(v)) if v.is_object() => read.task(team, &name, v),
                Some(Ok(other)) => read.unreadable(
                    &file,
                    format!(
                        "a task is a JSON object, this is {}",
                        crate::engine::json_kind(&other)
                    ),
                ),
            }
        }
        Ok(())
    }
}

/// A string field under any of `names` (camelCase and snake_case spellings).
fn text<'a>(v: &'a Value, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| v.get(*n).and_then(Value::as_str))
}

/// A time as Claude Code writes them: RFC 3339 text, or milliseconds since the epoch.
fn time(v: &Value, names: &[&str]) -> Option<DateTime<Utc>> {
    names.iter().find_map(|n| match v.get(*n)? {
        Value::String(s) => crate::engine::time::parse_ts(s),
        Value::Number(n) => n
            .as_i64()
            .and_then(DateTime::<Utc>::from_timestamp_millis)
            .filter(|t| (1970..=9999).contains(&chrono::Datelike::year(t))),
        _ => None,
    })
}

/// A list of task ids (`blockedBy`, `blocks`): strings or numbers.
fn ids(v: &Value, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .find_map(|n| v.get(*n).and_then(Value::as_array))
        .map(|a| {
            a.iter()
                .filter_map(|x| match x {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A structured request waiting for its response.
struct Request {
    team: String,
    id: String,
    agent: String,
    what: String,
    since: Option<DateTime<Utc>>,
    raw: Value,
}

/// Where a message lies: its team, inbox and place in it, its sender and time.
#[derive(Clone, Copy)]
struct Place<'a> {
    team: &'a str,
    recipient: &'a str,
    index: usize,
    sender: &'a str,
    at: Option<DateTime<Utc>>,
}

/// When an agent last said something, and whether that was an idle notice.
type LastSaid = (Option<DateTime<Utc>>, bool);

/// What one read gathers, team by team.
#[derive(Default)]
struct Read {
    agents: BTreeMap<(String, String), Agent>,
    messages: Vec<Message>,
    tasks: Vec<Task>,
    requests: Vec<Request>,
    /// `(team, request id)` of every response seen.
    responses: BTreeSet<(String, String)>,
    /// Per `(team, agent)`: the time and kind of its newest message, idle or not.
    last_said: BTreeMap<(String, String), LastSaid>,
    attention: Vec<Attention>,
    /// Per team: its lead's session id and name (a session log line of the lead names no agent).
    leads: BTreeMap<String, (String, String)>,
}

/// The request types that wait on a human, with their response type and a word for the item.
const REQUESTS: [(&str, &str, &str); 2] = [
    (
        "permission_request",
        "permission_response",
        "permission request",
    ),
    (
        "plan_approval_request",
        "plan_approval_response",
        "plan approval request",
    ),
];

impl Read {
    fn unreadable(&mut self, path: &Path, why: String) {
        self.attention.push(Attention {
            key: format!("unreadable/{}", path.display()),
            agent: String::new(),
            what: clean(&format!("cannot read {}: {why}", path.display()), MAX_TEXT),
            since: None,
            answerable: false,
            raw: Value::Null,
        });
    }

    fn team(&mut self, team: &str, v: &Value) {
        let lead = text(v, &["leadAgentId", "lead_agent_id", "lead", "leadName"])
            .map(|l| l.split('@').next().unwrap_or(l).to_owned());
        if let (Some(session), Some(lead)) = (text(v, &["leadSessionId", "lead_session_id"]), &lead)
        {
            self.leads
                .insert(clean(team, 200), (clean(session, 200), clean(lead, 200)));
        }
        let members = v.get("members").and_then(Value::as_array);
        let Some(members) = members else {
            self.unreadable(
                Path::new(&format!("teams/{team}/config.json")),
                "no `members` array; a format this reader does not know".into(),
            );
            return;
        };
        for m in members {
            let Some(name) = text(m, &["name"])
                .or_else(|| text(m, &["agentId", "agent_id"]).and_then(|a| a.split('@').next()))
            else {
                continue;
            };
            let name = clean(name, 200);
            let status = if lead.as_deref() == Some(name.as_str()) {
                Some("lead".to_owned())
            } else {
                m.get("isActive")
                    .and_then(Value::as_bool)
                    .map(|a| if a { "active" } else { "inactive" }.to_owned())
            };
            self.agents.insert(
                (team.to_owned(), name.clone()),
                Agent {
                    name,
                    group: Some(clean(team, 200)),
                    status,
                    raw: m.clone(),
                },
            );
        }
    }

    fn inbox(&mut self, team: &str, recipient: &str, msgs: &[Value]) {
        for (i, m) in msgs.iter().enumerate() {
            let from = text(m, &["from"]).unwrap_or("?").to_owned();
            let at = time(m, &["timestamp", "createdAt", "created_at"]);
            let body = match m.get("text").or_else(|| m.get("content")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let structured = body
                .trim_start()
                .starts_with('{')
                .then(|| serde_json::from_str::<Value>(&body).ok())
                .flatten()
                .filter(|s| s.get("type").and_then(Value::as_str).is_some());
            let kind = structured
                .as_ref()
                .and_then(|s| s.get("type").and_then(Value::as_str))
                .map(str::to_owned);
            let sender = structured
                .as_ref()
                .and_then(|s| text(s, &["from", "workerName", "worker_name"]))
                .unwrap_or(&from)
                .to_owned();
            let at = at.or_else(|| {
                structured
                    .as_ref()
                    .and_then(|s| time(s, &["timestamp", "createdAt", "created_at"]))
            });
            let key = (team.to_owned(), sender.clone());
            let newer = self.last_said.get(&key).is_none_or(|(t, _)| at >= *t);
            if newer {
                self.last_said
                    .insert(key, (at, kind.as_deref() == Some("idle_notification")));
            }
            if let (Some(s), Some(k)) = (&structured, &kind) {
                let place = Place {
                    team,
                    recipient,
                    index: i,
                    sender: &sender,
                    at,
                };
                self.structured(&place, k, s);
            }
            let summary = text(m, &["summary"])
                .map(str::to_owned)
                .or_else(|| kind.clone());
            self.messages.push(Message {
                id: format!("{team}/{recipient}/{i}"),
                group: Some(clean(team, 200)),
                from: clean(&sender, 200),
                to: vec![clean(recipient, 200)],
                at,
                subject: summary.map(|s| clean(&s, 200)),
                body: clean(&body, MAX_TEXT),
                raw: m.clone(),
            });
        }
    }

    /// A structured message: a request is remembered (it waits for its response), a response
    /// closes its request.
    fn structured(&mut self, place: &Place<'_>, kind: &str, s: &Value) {
        let Place {
            team,
            recipient,
            index,
            sender,
            at,
        } = *place;
        let request_id = text(s, &["requestId", "request_id"]);
        if REQUESTS.iter().any(|(_, resp, _)| *resp == kind) {
            if let Some(id) = request_id {
                self.responses.insert((team.to_owned(), id.to_owned()));
            }
            return;
        }
        let Some((_, _, word)) = REQUESTS.iter().find(|(req, _, _)| *req == kind) else {
            return;
        };
        let id = request_id
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{recipient}/{index}"));
        let what = if kind == "permission_request" {
            let tool = text(s, &["toolName", "tool_name", "tool"]).unwrap_or("?");
            let input = s
                .get("input")
                .map(|v| clean_raw(v, 300))
                .unwrap_or_default();
            let desc = text(s, &["description"])
                .map(|d| format!(" ({})", clean(d, 200)))
                .unwrap_or_default();
            format!(
                "{} asks permission to use {}{desc}: {input}",
                clean(sender, 200),
                clean(tool, 100)
            )
        } else {
            let plan = text(s, &["planContent", "plan_content", "plan"]).unwrap_or("");
            format!(
                "{} asks the lead to approve its plan: {}",
                clean(sender, 200),
                clean(plan, 300)
            )
        };
        self.requests.push(Request {
            team: team.to_owned(),
            id,
            agent: sender.to_owned(),
            what: format!("{word} in team {}: {what}", clean(team, 200)),
            since: at,
            raw: s.clone(),
        });
    }

    fn task(&mut self, team: &str, file: &str, v: Value) {
        let id = match v.get("id").or_else(|| v.get("taskId")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => file.trim_end_matches(".json").to_owned(),
        };
        self.tasks.push(Task {
            id: clean(&id, 200),
            group: Some(clean(team, 200)),
            title: clean(text(&v, &["subject", "title"]).unwrap_or(""), MAX_TEXT),
            state: clean(text(&v, &["status", "state"]).unwrap_or("unknown"), 100),
            owner: text(&v, &["owner"]).map(|o| clean(o, 200)),
            raw: v,
        });
    }

    /// The items that need the whole team read: open requests, blocked tasks, idle owners.
    fn finish(mut self) -> Snapshot {
        for r in std::mem::take(&mut self.requests) {
            if self.responses.contains(&(r.team.clone(), r.id.clone())) {
                continue;
            }
            self.attention.push(Attention {
                key: format!("request/{}/{}", r.team, r.id),
                agent: clean(&r.agent, 200),
                what: r.what,
                since: r.since,
                answerable: false,
                raw: r.raw,
            });
        }
        self.blocked_tasks();
        self.idle_owners();
        let mut agents: Vec<Agent> = std::mem::take(&mut self.agents).into_values().collect();
        for a in &mut agents {
            let key = (a.group.clone().unwrap_or_default(), a.name.clone());
            if a.status.as_deref() != Some("lead")
                && let Some((_, true)) = self.last_said.get(&key)
            {
                a.status = Some("idle".into());
            }
        }
        // A key is shown (the item's record): foreign ids in it are cleaned like any text.
        for a in &mut self.attention {
            a.key = clean(&a.key, MAX_TEXT);
        }
        Snapshot {
            agents,
            messages: self.messages,
            tasks: self.tasks,
            locks: Vec::new(),
            attention: self.attention,
            costs: Vec::new(),
        }
    }

    fn blocked_tasks(&mut self) {
        let state: BTreeMap<(Option<String>, String), String> = self
            .tasks
            .iter()
            .map(|t| ((t.group.clone(), t.id.clone()), t.state.clone()))
            .collect();
        for t in &self.tasks {
            if is_closed(&t.state) {
                continue;
            }
            for b in ids(&t.raw, &["blockedBy", "blocked_by"]) {
                let why = match state.get(&(t.group.clone(), b.clone())) {
                    None => "missing",
                    Some(s) if is_closed(s) => "finished",
                    Some(_) => continue,
                };
                let team = t.group.clone().unwrap_or_default();
                self.attention.push(Attention {
                    key: format!("blocked/{team}/{}/{}", t.id, clean(&b, 200)),
                    agent: t.owner.clone().unwrap_or_default(),
                    what: format!(
                        "task {} \"{}\" in team {team} is blocked by task {} which is {why}",
                        t.id,
                        clean(&t.title, 200),
                        clean(&b, 200)
                    ),
                    since: None,
                    answerable: false,
                    raw: t.raw.clone(),
                });
            }
        }
    }

    fn idle_owners(&mut self) {
        for ((team, agent), (since, idle)) in &self.last_said {
            if !idle
                || self
                    .agents
                    .get(&(team.clone(), agent.clone()))
                    .is_some_and(|a| a.status.as_deref() == Some("lead"))
            {
                continue;
            }
            let open: Vec<&Task> = self
                .tasks
                .iter()
                .filter(|t| {
                    t.group.as_deref() == Some(team.as_str())
                        && t.owner.as_deref() == Some(agent.as_str())
                        && !is_closed(&t.state)
                })
                .collect();
            if open.is_empty() {
                continue;
            }
            let list: Vec<String> = open
                .iter()
                .map(|t| format!("{} ({})", t.id, t.state))
                .collect();
            self.attention.push(Attention {
                key: format!("idle/{team}/{agent}"),
                agent: clean(agent, 200),
                what: format!(
                    "{} in team {} is idle with {} open task(s) of its own: {}",
                    clean(agent, 200),
                    clean(team, 200),
                    open.len(),
                    list.join(", ")
                ),
                since: *since,
                answerable: false,
                raw: Value::Null,
            });
        }
    }
}

/// A task that no longer waits: completed or deleted.
fn is_closed(state: &str) -> bool {
    matches!(state, "completed" | "deleted" | "done" | "cancelled")
}

#[cfg(test)]
#[path = "claude_teams_tests.rs"]
mod tests;
