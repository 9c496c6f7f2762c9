//! What the teammates of a Claude Code team cost, from Claude Code's own session logs, read-only.
//!
//! Claude Code logs every session as JSON Lines under `projects/{project}/{session}.jsonl` (and a
//! subagent's under `projects/{project}/{session}/subagents/*.jsonl`). Each `assistant` line has the
//! API's `message.usage` (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
//! `cache_creation_input_tokens`) and `message.model`; in a team's sessions each line also carries
//! `teamName`, and a teammate's its `agentName`. A streamed reply is logged as several lines of one
//! `requestId` whose counts grow: the line with the most output tokens stands for the request.
//!
//! A line maps to the engine's usage report (input, output, cache read, cache write, model) and is
//! priced by the engine's shipped price table (`pantheon cost --prices`), so a teammate's cost reads
//! as a god's does. A team line with no `agentName` is the lead's when its session is the team's
//! `leadSessionId`, else it is counted under `session:ID`.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::{PriceTable, Totals, Usage};

use super::files::{MAX_TEXT, clean, list_dir};

/// Most bytes read of one session log (the oldest lines of a longer one are left out).
pub(crate) const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;
/// Most session logs read in one pass, newest first.
pub(crate) const MAX_LOGS: usize = 2_000;
/// Most tokens one line may count in one field (the engine's bound on a report).
const MAX_TOKENS: u64 = 1_000_000_000_000;

/// What one teammate cost: its team, its name, its totals, the models it used and the sessions its
/// lines came from.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TeammateCost {
    pub team: String,
    pub agent: String,
    pub totals: Totals,
    pub models: Vec<String>,
    pub sessions: usize,
}

impl TeammateCost {
    /// As `pantheon sources --detail` and the raw view show it.
    pub fn to_json(&self) -> Value {
        let mut v = self.totals.to_json();
        if let Some(m) = v.as_object_mut() {
            m.insert("team".into(), self.team.clone().into());
            m.insert("agent".into(), self.agent.clone().into());
            m.insert("models".into(), self.models.clone().into());
            m.insert("sessions".into(), self.sessions.into());
        }
        v
    }
}

/// One request's usage as a session log has it: the team, who, the model and the counts.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    team: String,
    agent: Option<String>,
    session: String,
    usage: Usage,
}

/// The session logs' lines that count, each file parsed again only when it changed.
#[derive(Debug, Default)]
pub(crate) struct Logs {
    cache: HashMap<PathBuf, (super::claude_teams::Fingerprint, Vec<Line>)>,
}

impl Logs {
    /// Each teammate's cost over the logs under `dir/projects`, `leads` naming each team's lead
    /// (`team -> (leadSessionId, lead name)`). A log that cannot be read is left out (named in
    /// `skipped`), never an error of the source.
    pub(crate) fn costs(
        &mut self,
        dir: &Path,
        leads: &BTreeMap<String, (String, String)>,
        skipped: &mut Vec<(PathBuf, String)>,
    ) -> Vec<TeammateCost> {
        let files = logs_under(&dir.join("projects"));
        let mut seen = std::collections::HashSet::new();
        let prices = PriceTable::default();
        let mut by: BTreeMap<(String, String), (TeammateCost, std::collections::BTreeSet<String>)> =
            BTreeMap::new();
        for path in files {
            seen.insert(path.clone());
            let lines = match self.lines(&path) {
                Ok(l) => l,
                Err(why) => {
                    skipped.push((path, why.to_string()));
                    continue;
                }
            };
            for l in lines {
                let agent = match &l.agent {
                    Some(a) => a.clone(),
                    None => match leads.get(&l.team) {
                        Some((session, lead)) if *session == l.session => lead.clone(),
                        _ => format!("session:{}", l.session),
                    },
                };
                let (cost, priced) = prices.cost(&l.usage);
                let e = by
                    .entry((l.team.clone(), agent.clone()))
                    .or_insert_with(|| {
                        let c = TeammateCost {
                            team: l.team.clone(),
                            agent,
                            ..Default::default()
                        };
                        (c, Default::default())
                    });
                e.0.totals.add(&l.usage, cost, priced);
                if let Some(m) = &l.usage.model
                    && !e.0.models.contains(m)
                {
                    e.0.models.push(m.clone());
                }
                e.1.insert(l.session.clone());
            }
        }
        self.cache.retain(|p, _| seen.contains(p));
        by.into_values()
            .map(|(mut c, sessions)| {
                c.sessions = sessions.len();
                c
            })
            .collect()
    }

    /// The lines of `path` that count, through the cache.
    fn lines(&mut self, path: &Path) -> std::io::Result<Vec<Line>> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path)?;
        let fp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
        if let Some((seen, lines)) = self.cache.get(path)
            && *seen == fp
        {
            return Ok(lines.clone());
        }
        let lines = read_log(path)?;
        self.cache.insert(path.to_path_buf(), (fp, lines.clone()));
        Ok(lines)
    }
}

/// The session logs under `projects`: `{project}/*.jsonl` and `{project}/*/subagents/*.jsonl`,
/// newest first, at most [`MAX_LOGS`].
fn logs_under(projects: &Path) -> Vec<PathBuf> {
    let mut out: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    let mut take = |p: PathBuf| {
        if let Ok(m) = std::fs::symlink_metadata(&p)
            && m.is_file()
        {
            out.push((m.modified().unwrap_or(std::time::UNIX_EPOCH), p));
        }
    };
    for (_, project, is_dir) in list_dir(projects).ok().flatten().unwrap_or_default() {
        if !is_dir {
            continue;
        }
        for (name, path, is_dir) in list_dir(&project).ok().flatten().unwrap_or_default() {
            if !is_dir && name.ends_with(".jsonl") {
                take(path);
            } else if is_dir {
                let sub = path.join("subagents");
                for (name, p, d) in list_dir(&sub).ok().flatten().unwrap_or_default() {
                    if !d && name.ends_with(".jsonl") {
                        take(p);
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    out.truncate(MAX_LOGS);
    out.into_iter().map(|(_, p)| p).collect()
}

/// Opens `path` without following a link, a regular file only.
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(e.kind(), "a symbolic link (never followed)"),
            _ => e,
        })?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// The team lines of one log with usage, one per request (the line with the most output tokens).
fn read_log(path: &Path) -> std::io::Result<Vec<Line>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = open_log(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(MAX_LOG_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut reader = std::io::BufReader::new(f.take(MAX_LOG_BYTES));
    if start > 0 {
        // Past a cut the first line is a tail: skipped.
        let mut skip = Vec::new();
        let _ = reader.read_until(b'\n', &mut skip);
    }
    let mut by_request: Vec<(String, Line)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        // Cheap test before parsing: only a team's lines with usage count.
        let has = |needle: &[u8]| buf.windows(needle.len()).any(|w| w == needle);
        if !has(b"\"teamName\"") || !has(b"\"usage\"") {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        let Some((request, line)) = line_of(&v) else {
            continue;
        };
        match index.get(&request) {
            Some(&i) if by_request[i].1.usage.output_tokens >= line.usage.output_tokens => {}
            Some(&i) => by_request[i].1 = line,
            None => {
                index.insert(request.clone(), by_request.len());
                by_request.push((request, line));
            }
        }
    }
    Ok(by_request.into_iter().map(|(_, l)| l).collect())
}

/// A count under `k` of `u`, bounded.
fn count(u: &Value, k: &str) -> u64 {
    u.get(k)
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(MAX_TOKENS)
}

/// One log line as a request's usage: `(requestId or message id, line)`; `None` for a line that is
/// not an assistant's reply of a team with usage.
fn line_of(v: &Value) -> Option<(String, Line)> {
    if v.get("type").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let s = |k: &str| v.get(k).and_then(Value::as_str).filter(|t| !t.is_empty());
    let team = s("teamName")?;
    let msg = v.get("message")?;
    let u = msg.get("usage").filter(|u| u.is_object())?;
    let usage = Usage {
        input_tokens: count(u, "input_tokens"),
        output_tokens: count(u, "output_tokens"),
        cache_read_tokens: count(u, "cache_read_input_tokens"),
        cache_write_tokens: count(u, "cache_creation_input_tokens"),
        cost_micros: None,
        model: msg
            .get("model")
            .and_then(Value::as_str)
            .map(|m| clean(m, 128)),
    };
    let request = s("requestId")
        .or_else(|| msg.get("id").and_then(Value::as_str))
        .or_else(|| s("uuid"))?;
    Some((
        clean(request, MAX_TEXT),
        Line {
            team: clean(team, 200),
            agent: s("agentName").map(|a| clean(a, 200)),
            session: clean(s("sessionId").unwrap_or("unknown"), 200),
            usage,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(team: &str, agent: Option<&str>, req: &str, out: u64) -> String {
        let mut v = serde_json::json!({
            "type": "assistant", "teamName": team, "sessionId": "s1", "requestId": req,
            "message": {"model": "claude-opus-4-6", "usage": {"input_tokens": 10,
                "output_tokens": out, "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 100}}
        });
        if let Some(a) = agent {
            v["agentName"] = a.into();
        }
        v.to_string()
    }

    #[test]
    fn a_streamed_request_counts_once_and_each_teammate_gets_its_own_totals() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("projects/-w");
        std::fs::create_dir_all(&p).unwrap();
        let log = [
            line("t", Some("poet"), "r1", 5),
            line("t", Some("poet"), "r1", 50),
            line("t", Some("poet"), "r2", 7),
            line("t", None, "r3", 9),
            r#"{"type":"user","teamName":"t","message":{"usage":{}}}"#.to_owned(),
            "{not json \"teamName\" \"usage\"".to_owned(),
            line("other", Some("x"), "r4", 1),
        ]
        .join("\n");
        std::fs::write(p.join("s1.jsonl"), log).unwrap();
        let mut leads = BTreeMap::new();
        leads.insert("t".to_owned(), ("s1".to_owned(), "team-lead".to_owned()));
        let mut skipped = Vec::new();
        let costs = Logs::default().costs(d.path(), &leads, &mut skipped);
        assert!(skipped.is_empty(), "{skipped:?}");
        let poet = costs.iter().find(|c| c.agent == "poet").unwrap();
        assert_eq!(poet.totals.output_tokens, 57);
        assert_eq!(poet.totals.reports, 2);
        assert_eq!(poet.totals.cache_read_tokens, 2000);
        assert!(poet.totals.cost_micros > 0, "{poet:?}");
        assert_eq!(poet.totals.unpriced, 0);
        let lead = costs.iter().find(|c| c.agent == "team-lead").unwrap();
        assert_eq!(lead.totals.output_tokens, 9);
        assert_eq!(costs.len(), 3);
    }

    #[test]
    fn a_link_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("projects/-w");
        std::fs::create_dir_all(&p).unwrap();
        let real = d.path().join("real.jsonl");
        std::fs::write(&real, line("t", Some("a"), "r", 1)).unwrap();
        std::os::unix::fs::symlink(&real, p.join("s.jsonl")).unwrap();
        let mut skipped = Vec::new();
        let costs = Logs::default().costs(d.path(), &BTreeMap::new(), &mut skipped);
        assert!(costs.is_empty(), "{costs:?}");
    }
}
