//! `a2a:AGENT_CARD_URL`: an agent speaking A2A (JSON-RPC over HTTP), read as a source.
//!
//! The agent card (`/.well-known/agent-card.json`, else 0.3's `/.well-known/agent.json`, or the card
//! URL given) names the JSON-RPC endpoint and the protocol (1.0, else 0.3). Every task the agent
//! holds, those other clients started included, is found with `ListTasks` (0.3: `tasks/list`),
//! polled; when the card says the agent streams, each task still running is followed with
//! `SubscribeToTask` (0.3: `tasks/resubscribe`) so a change is seen as it happens. A task in
//! `input-required` or `auth-required` is an answerable attention item; `answer` sends the text as
//! the task's next message (`SendMessage` / `message/send` with its task and context ids).
//!
//! - [`map`]: the card, tasks and stream events to the snapshot (pure)
//! - [`wire`]: the bounded HTTP client, JSON-RPC calls and event-stream lines

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Answered, Snapshot, Source, SourceError};

pub(crate) mod map;
pub(crate) mod wire;

use map::Card;
use wire::{CallError, Dialect, Http, METHOD_NOT_FOUND, Method};

/// The most tasks kept from one agent (pages of `PAGE` tasks).
const MAX_TASKS: usize = 1000;
const PAGE: usize = 100;
/// The history asked per task.
const HISTORY_LENGTH: u64 = 50;
/// The most tasks followed by a stream at once (the rest are polled).
const MAX_STREAMS: usize = 32;
/// The longest answer sent.
const MAX_ANSWER: usize = 64 * 1024;
/// How often a streaming agent is listed (new tasks, tasks nobody follows).
const LIST_EVERY_STREAMING: Duration = Duration::from_millis(500);
/// How often the source is read while streams are open (a read then costs no call).
const POLL_STREAMING: Duration = Duration::from_millis(50);
/// How often it is read otherwise (each read lists the tasks).
const POLL_LISTING: Duration = Duration::from_millis(500);
/// Between two listings of a streaming 1.0 agent, the tasks whose status changed lately are asked
/// this often (`ListTasks` with `statusTimestampAfter`): a task that asks before any listing saw it
/// is found within this, not at the next listing.
const RECENT_EVERY: Duration = Duration::from_millis(100);
/// How far back the recent listing reaches before the last full listing (clock skew, slow calls).
const RECENT_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(2);
/// How long a task whose stream failed is left to the polling before it is subscribed again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(5);

/// An A2A agent as a source (see the module's documentation).
pub struct A2aSource {
    location: String,
    card_urls: Vec<String>,
    http: Http,
    card: Option<Card>,
    shared: Arc<Shared>,
    listing: Listing,
    last_list: Option<Instant>,
    /// When the last full listing started (wall clock), and when the recent tasks were last asked.
    listed_at: Option<chrono::DateTime<chrono::Utc>>,
    last_recent: Option<Instant>,
}

/// How the agent's tasks are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Not tried yet: the dialect's own name first, then the other generation's.
    Untried,
    /// This method answers.
    Method(&'static str),
    /// The agent lists no tasks: only the tasks answered from here are read (`GetTask`).
    NotOffered,
}

/// What the stream threads and the source share.
#[derive(Default)]
struct Shared {
    tasks: Mutex<BTreeMap<String, Value>>,
    /// Tasks followed by a stream now.
    following: Mutex<BTreeSet<String>>,
    /// Tasks whose stream failed, and when.
    failed: Mutex<BTreeMap<String, Instant>>,
    /// The agent refused a subscription outright: poll instead.
    no_streams: AtomicBool,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl A2aSource {
    /// A source for the agent whose card is at `card_url` (a URL ending in `.json`), or whose base URL
    /// it is (the well-known card names are tried under it). Nothing is fetched yet: a down agent is
    /// an `Err` of `read`, not of `new`.
    pub fn new(card_url: &str) -> Result<Self, SourceError> {
        let url = card_url.trim();
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .filter(|r| !r.is_empty() && !r.starts_with('/'))
            .ok_or_else(|| {
                SourceError::new(format!(
                    "a2a source {url:?}: give the agent's card URL or base URL (http:// or https://), \
                     e.g. a2a:http://127.0.0.1:9999/"
                ))
            })?;
        if rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(SourceError::new(format!(
                "a2a source {url:?}: the URL holds spaces or controls"
            )));
        }
        let card_urls = if url.ends_with(".json") {
            vec![url.to_owned()]
        } else {
            let base = url.trim_end_matches('/');
            vec![
                format!("{base}/.well-known/agent-card.json"),
                format!("{base}/.well-known/agent.json"),
            ]
        };
        Ok(Self {
            location: url.to_owned(),
            card_urls,
            http: Http::new(),
            card: None,
            shared: Arc::new(Shared::default()),
            listing: Listing::Untried,
            last_list: None,
            listed_at: None,
            last_recent: None,
        })
    }

    fn fail(&self, what: impl std::fmt::Display) -> SourceError {
        SourceError::new(format!("a2a:{}: {what}", self.location))
    }

    /// The card, fetched when not known yet (first read, or after a failure).
    fn card(&mut self) -> Result<Card, SourceError> {
        if let Some(card) = &self.card {
            return Ok(card.clone());
        }
        let mut missing = Vec::new();
        for url in &self.card_urls {
            match self.http.get_json(url, wire::MAX_CARD_BYTES) {
                Ok(Some(raw)) => {
                    let card = map::read_card(raw, url).map_err(|e| self.fail(e))?;
                    self.card = Some(card.clone());
                    self.listing = Listing::Untried;
                    return Ok(card);
                }
                Ok(None) => missing.push(url.as_str()),
                Err(e) => return Err(self.fail(format!("fetching the agent card: {e}"))),
            }
        }
        Err(self.fail(format!(
            "no agent card (HTTP 404 at {}): give the card's URL",
            missing.join(" and ")
        )))
    }

    fn call(&self, card: &Card, method: &str, params: Value) -> Result<Value, CallError> {
        self.http.call(&card.rpc_url, method, params)
    }

    /// Lists the agent's tasks (every page up to `MAX_TASKS`), or, when it lists none, gets the
    /// tasks already known one by one; folds them into the shared tasks.
    fn refresh(&mut self, card: &Card) -> Result<(), SourceError> {
        let listed = match self.list_all(card) {
            Ok(Some(tasks)) => tasks,
            Ok(None) => return self.refresh_known(card),
            Err(e) => return Err(self.fail(e)),
        };
        let mut tasks = lock(&self.shared.tasks);
        let mut fresh = BTreeMap::new();
        for task in listed {
            let Some(id) = map::task_id(&task).map(str::to_owned) else {
                continue;
            };
            let newer = tasks.remove(&id).filter(|old| !map::not_older(old, &task));
            fresh.insert(id, newer.unwrap_or(task));
        }
        *tasks = fresh;
        Ok(())
    }

    /// Between two listings of a streaming 1.0 agent (at most every [`RECENT_EVERY`]): one page of
    /// the tasks whose status changed since shortly before the last listing, folded in, so a task
    /// that asks at once is found now. An agent that refuses the filter keeps its listings.
    fn list_recent(&mut self, card: &Card) {
        if card.dialect != Dialect::V1
            || !matches!(self.listing, Listing::Method(_))
            || self.last_recent.is_some_and(|t| t.elapsed() < RECENT_EVERY)
        {
            return;
        }
        let Some(since) = self.listed_at.map(|t| t - RECENT_MARGIN) else {
            return;
        };
        self.last_recent = Some(Instant::now());
        let params = json!({
            "pageSize": PAGE,
            "historyLength": HISTORY_LENGTH,
            "includeArtifacts": true,
            "statusTimestampAfter": since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        if let Ok(Some(page)) = self.list_page(card, params) {
            for task in page
                .get("tasks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                fold_task(&self.shared, task);
            }
        }
    }

    /// Every page of the listing; `Ok(None)` when the agent offers no listing method.
    fn list_all(&mut self, card: &Card) -> Result<Option<Vec<Value>>, String> {
        let mut out = Vec::new();
        let mut token = String::new();
        while out.len() < MAX_TASKS {
            let mut params = json!({
                "pageSize": PAGE,
                "historyLength": HISTORY_LENGTH,
                "includeArtifacts": true,
            });
            if !token.is_empty() {
                params["pageToken"] = Value::String(token.clone());
            }
            let Some(page) = self.list_page(card, params)? else {
                return Ok(None);
            };
            let tasks = page
                .get("tasks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let n = tasks.len();
            out.extend(tasks.into_iter().take(MAX_TASKS - out.len()));
            token = page
                .get("nextPageToken")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(1024)
                .collect();
            if token.is_empty() || n == 0 {
                break;
            }
        }
        Ok(Some(out))
    }

    /// One page, through the listing method that answers (found on the first call).
    fn list_page(&mut self, card: &Card, params: Value) -> Result<Option<Value>, String> {
        let names: Vec<&'static str> = match self.listing {
            Listing::NotOffered => return Ok(None),
            Listing::Method(m) => vec![m],
            Listing::Untried => {
                let own = card.dialect.method(Method::List);
                let other = match card.dialect {
                    Dialect::V1 => Dialect::V03.method(Method::List),
                    Dialect::V03 => Dialect::V1.method(Method::List),
                };
                vec![own, other]
            }
        };
        for name in names {
            match self.call(card, name, params.clone()) {
                Ok(page) => {
                    self.listing = Listing::Method(name);
                    return Ok(Some(page));
                }
                Err(CallError::Rpc {
                    code: METHOD_NOT_FOUND,
                    ..
                }) if self.listing == Listing::Untried => {}
                Err(e) => return Err(format!("listing its tasks: {e}")),
            }
        }
        self.listing = Listing::NotOffered;
        Ok(None)
    }

    /// Without a listing: each known task still open, through `GetTask`.
    fn refresh_known(&mut self, card: &Card) -> Result<(), SourceError> {
        let open: Vec<String> = lock(&self.shared.tasks)
            .iter()
            .filter(|(_, t)| !map::is_final(&map::task_state(t)))
            .map(|(id, _)| id.clone())
            .take(PAGE)
            .collect();
        for id in open {
            let task = self.get_task(card, &id)?;
            fold_task(&self.shared, task);
        }
        Ok(())
    }

    fn get_task(&self, card: &Card, id: &str) -> Result<Value, SourceError> {
        let params = json!({"id": id, "historyLength": HISTORY_LENGTH});
        self.call(card, card.dialect.method(Method::Get), params)
            .map_err(|e| self.fail(format!("reading task {}: {e}", map::clean_line(id, 80))))
    }

    /// Opens a stream for each open task nobody follows yet (up to `MAX_STREAMS`).
    fn follow_open_tasks(&self, card: &Card) {
        if !card.streaming || self.shared.no_streams.load(Ordering::Relaxed) {
            return;
        }
        let open: Vec<String> = lock(&self.shared.tasks)
            .iter()
            .filter(|(_, t)| !map::is_final(&map::task_state(t)))
            .map(|(id, _)| id.clone())
            .collect();
        let mut following = lock(&self.shared.following);
        let mut failed = lock(&self.shared.failed);
        failed.retain(|_, at| at.elapsed() < RESUBSCRIBE_AFTER);
        for id in open {
            if following.len() >= MAX_STREAMS {
                break;
            }
            if following.contains(&id) || failed.contains_key(&id) {
                continue;
            }
            following.insert(id.clone());
            let follower = Follower {
                http: self.http.clone(),
                url: card.rpc_url.clone(),
                dialect: card.dialect,
                id,
                shared: Arc::clone(&self.shared),
            };
            let spawned = std::thread::Builder::new()
                .name("a2a-stream".into())
                .spawn(move || follower.run());
            if spawned.is_err() {
                break;
            }
        }
    }

    fn streams_open(&self) -> bool {
        !lock(&self.shared.following).is_empty()
    }

    /// The task id an answer is for: the attention key's task (`ID#STATE@SINCE`), or the key itself.
    fn task_of(key: &str) -> &str {
        match key.rsplit_once('#') {
            Some((id, wait))
                if ["input-required@", "auth-required@"]
                    .iter()
                    .any(|w| wait.starts_with(w)) =>
            {
                id
            }
            _ => key,
        }
    }
}

impl Drop for A2aSource {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Folds a task read from the agent into the shared tasks (unless a stream already holds a newer
/// state of it).
fn fold_task(shared: &Shared, task: Value) {
    let Some(id) = map::task_id(&task).map(str::to_owned) else {
        return;
    };
    let mut tasks = lock(&shared.tasks);
    if tasks.get(&id).is_none_or(|old| map::not_older(old, &task)) {
        tasks.insert(id, task);
    }
}

/// One task's stream, on its own thread: each event folded into the shared tasks as it arrives.
struct Follower {
    http: Http,
    url: String,
    dialect: Dialect,
    id: String,
    shared: Arc<Shared>,
}

impl Follower {
    fn run(self) {
        let method = self.dialect.method(Method::Subscribe);
        let ok = match self.http.stream(&self.url, method, json!({"id": self.id})) {
            Ok(mut lines) => self.follow(&mut lines),
            Err(_) => false,
        };
        lock(&self.shared.following).remove(&self.id);
        if !ok {
            lock(&self.shared.failed).insert(self.id.clone(), Instant::now());
        }
    }

    /// Reads events until the stream ends; whether it ended cleanly.
    fn follow(&self, lines: &mut wire::SseLines) -> bool {
        loop {
            if self.shared.stop.load(Ordering::Relaxed) {
                return true;
            }
            let data = match lines.next_event() {
                Ok(Some(data)) => data,
                Ok(None) => return true,
                Err(_) => return false,
            };
            let Ok(reply) = serde_json::from_str::<Value>(&data) else {
                return false;
            };
            match wire::rpc_result(reply) {
                Ok(event) => {
                    map::apply_event(&mut lock(&self.shared.tasks), &event);
                }
                Err(CallError::Rpc { code, .. }) => {
                    if code == METHOD_NOT_FOUND {
                        self.shared.no_streams.store(true, Ordering::Relaxed);
                    }
                    return false;
                }
                Err(CallError::Transport(_)) => return false,
            }
        }
    }
}

impl Source for A2aSource {
    fn kind(&self) -> &'static str {
        "a2a"
    }

    fn location(&self) -> &str {
        &self.location
    }

    fn read(&mut self) -> Result<Snapshot, SourceError> {
        let card = self.card()?;
        let streaming = card.streaming && !self.shared.no_streams.load(Ordering::Relaxed);
        let due = match self.last_list {
            None => true,
            Some(at) => !streaming || at.elapsed() >= LIST_EVERY_STREAMING,
        };
        if due {
            let started = chrono::Utc::now();
            if let Err(e) = self.refresh(&card) {
                // The agent may have restarted with another card: fetch it again next time.
                self.card = None;
                return Err(e);
            }
            self.last_list = Some(Instant::now());
            self.listed_at = Some(started);
        } else if streaming {
            self.list_recent(&card);
        }
        self.follow_open_tasks(&card);
        let status = format!(
            "A2A {} · {} · {}",
            card.dialect.version(),
            if streaming { "streaming" } else { "polled" },
            match self.listing {
                Listing::NotOffered => "no task listing: only tasks answered here",
                _ => "every task listed",
            }
        );
        let tasks = lock(&self.shared.tasks);
        Ok(map::snapshot(&card, &status, tasks.values()))
    }

    fn poll_every(&self) -> Duration {
        let recent = self.card.as_ref().is_some_and(|c| {
            c.streaming && c.dialect == Dialect::V1 && matches!(self.listing, Listing::Method(_))
        }) && !self.shared.no_streams.load(Ordering::Relaxed);
        if self.streams_open() {
            POLL_STREAMING
        } else if recent {
            RECENT_EVERY
        } else {
            POLL_LISTING
        }
    }

    fn answer(&mut self, key: &str, text: &str) -> Result<Answered, SourceError> {
        if text.trim().is_empty() {
            return Err(self.fail("the answer is empty: nothing sent"));
        }
        if text.len() > MAX_ANSWER {
            return Err(self.fail(format!(
                "the answer is over {} KiB: nothing sent",
                MAX_ANSWER / 1024
            )));
        }
        let card = self.card()?;
        let id = Self::task_of(key);
        let shown = map::clean_line(id, 80);
        // Read afresh: the answer is for the wait the operator saw, and only while it lasts.
        let task = self.get_task(&card, id)?;
        let state = map::task_state(&task);
        if !map::is_waiting(&state) {
            return Err(self.fail(format!(
                "task {shown} is {state}, not waiting for input: nothing sent"
            )));
        }
        let now_key = map::attention_key(&task).unwrap_or_default();
        if key != id && key != now_key {
            return Err(self.fail(format!(
                "task {shown} has asked again since ({now_key}): nothing sent; read its question first"
            )));
        }
        let context = task.get("contextId").and_then(Value::as_str).unwrap_or("");
        let params = send_params(card.dialect, id, context, text);
        let reply = self
            .call(&card, card.dialect.method(Method::Send), params)
            .map_err(|e| self.fail(format!("sending the answer to task {shown}: {e}")))?;
        let after = reply.get("task").cloned().or_else(|| {
            (reply.get("kind").and_then(Value::as_str) == Some("task")).then(|| reply.clone())
        });
        let now = after
            .as_ref()
            .map_or_else(|| "answered".to_owned(), map::task_state);
        if let Some(task) = after {
            fold_task(&self.shared, task);
        }
        Ok(Answered {
            key: key.to_owned(),
            detail: format!(
                "sent {} characters to task {shown}; it is now {now}",
                text.chars().count()
            ),
        })
    }
}

/// The next message of a task, in the agent's dialect, asking the agent not to hold the reply
/// until the task stops again (1.0 `returnImmediately`, 0.3 `blocking: false`).
fn send_params(dialect: Dialect, task: &str, context: &str, text: &str) -> Value {
    let message_id = format!("pantheon-{:032x}", rand::random::<u128>());
    match dialect {
        Dialect::V1 => json!({
            "message": {
                "messageId": message_id, "taskId": task, "contextId": context,
                "role": "ROLE_USER", "parts": [{"text": text}],
            },
            "configuration": {"returnImmediately": true},
        }),
        Dialect::V03 => json!({
            "message": {
                "kind": "message", "messageId": message_id, "taskId": task, "contextId": context,
                "role": "user", "parts": [{"kind": "text", "text": text}],
            },
            "configuration": {"blocking": false},
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_a_card_url_or_a_base_url() {
        let s = A2aSource::new("http://127.0.0.1:9/").unwrap();
        assert_eq!(
            s.card_urls,
            [
                "http://127.0.0.1:9/.well-known/agent-card.json",
                "http://127.0.0.1:9/.well-known/agent.json"
            ]
        );
        let s = A2aSource::new("https://a.example/cards/x.json").unwrap();
        assert_eq!(s.card_urls, ["https://a.example/cards/x.json"]);
        for bad in ["", "ftp://x/", "http://", "127.0.0.1:9", "http://a b/"] {
            let err = A2aSource::new(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(err.reason.contains("a2a source"), "{err}");
        }
    }

    #[test]
    fn an_answer_key_names_its_task() {
        assert_eq!(
            A2aSource::task_of("t-1#input-required@2026-01-01T00:00:00Z"),
            "t-1"
        );
        assert_eq!(A2aSource::task_of("a#b#auth-required@x"), "a#b");
        assert_eq!(A2aSource::task_of("t#2"), "t#2");
        assert_eq!(A2aSource::task_of("t-1"), "t-1");
    }

    #[test]
    fn a_down_agent_is_an_error_with_its_reason_quickly() {
        // A port nothing listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = A2aSource::new(&format!("http://127.0.0.1:{port}/")).unwrap();
        let t = Instant::now();
        let err = s.read().unwrap_err();
        assert!(err.reason.contains("refused the connection"), "{err}");
        assert!(
            err.reason
                .starts_with(&format!("a2a:http://127.0.0.1:{port}/")),
            "{err}"
        );
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let err = s.answer("t-1", "hello").unwrap_err();
        assert!(err.reason.contains("refused the connection"), "{err}");
    }

    #[test]
    fn answers_are_the_next_message_in_either_dialect() {
        let v1 = send_params(Dialect::V1, "t", "c", "Ada");
        assert_eq!(v1["message"]["role"], "ROLE_USER");
        assert_eq!(v1["message"]["taskId"], "t");
        assert_eq!(v1["message"]["contextId"], "c");
        assert_eq!(v1["message"]["parts"][0]["text"], "Ada");
        let v03 = send_params(Dialect::V03, "t", "c", "Ada");
        assert_eq!(v03["message"]["role"], "user");
        assert_eq!(v03["message"]["parts"][0]["kind"], "text");
        assert_ne!(v1["message"]["messageId"], v03["message"]["messageId"]);
    }
}
