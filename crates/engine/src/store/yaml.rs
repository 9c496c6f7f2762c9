//! YAML for workflow definitions and rules: parsed with a bound on the nodes built (so aliases cannot
//! expand a small file into gigabytes), and cached by file identity for long-lived processes.

use crate::error::Refusal;
use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// Most YAML nodes (scalars, sequences, mappings and keys) one file may build, counting every copy an
/// alias makes. The largest sample definition has a few hundred; a file needs aliases to come near it.
pub const MAX_YAML_NODES: usize = 100_000;

/// Parses YAML into a JSON value, refusing a document that would build more than `max_nodes` nodes.
/// Errors are the message to show after the file's path.
pub fn parse_bounded(bytes: &[u8], max_nodes: usize) -> Result<Value, Refusal> {
    let budget = Budget {
        left: std::cell::Cell::new(max_nodes),
        exceeded: std::cell::Cell::new(false),
    };
    let de = serde_yaml::Deserializer::from_slice(bytes);
    match (Node { budget: &budget }).deserialize(de) {
        Ok(v) => Ok(v),
        Err(_) if budget.exceeded.get() => Err(format!(
            "YAML expands to more than {max_nodes} nodes, counting each copy an alias (`*name`) makes; \
             refused as an alias bomb. Write repeated parts out or use fewer aliases"
        ).into()),
        Err(e) => Err(format!("YAML does not parse: {e}").into()),
    }
}

struct Budget {
    left: std::cell::Cell<usize>,
    exceeded: std::cell::Cell<bool>,
}

impl Budget {
    fn take<E: de::Error>(&self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(n) => {
                self.left.set(n);
                Ok(())
            }
            None => {
                self.exceeded.set(true);
                Err(E::custom("node budget exceeded"))
            }
        }
    }
}

/// One node, built like `serde_json::Value`'s own `Deserialize` but charged against the budget before
/// anything is built.
#[derive(Clone, Copy)]
struct Node<'b> {
    budget: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.budget.take()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.take()?;
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.take()?;
        let mut out = Map::new();
        while let Some(k) = map.next_key_seed(Key {
            budget: self.budget,
        })? {
            let v = map.next_value_seed(self)?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// A mapping key: a string, as `serde_json::Value` requires.
struct Key<'b> {
    budget: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.budget.take()?;
        Ok(v.to_owned())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        self.budget.take()?;
        Ok(v)
    }
}

/// What identifies one version of a file without reading it: device, inode, size, mtime and ctime
/// (ctime moves on every write and cannot be set back by a writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileIdentity {
    /// The identity of the file at `path`, if it exists.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|m| Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// True when the file changed too recently for its timestamps to tell a later rewrite apart
    /// (file times advance in coarse clock ticks), so it must not be cached yet.
    pub(crate) fn racy(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(i64::MAX);
        self.mtime.0.max(self.ctime.0) >= now.saturating_sub(1)
    }
}

/// A parse remembered: the value, or the message of the `Corrupt` error it gave.
type Parsed = Result<Arc<Value>, String>;

static CACHE_ON: AtomicBool = AtomicBool::new(false);
static CACHE: OnceLock<Mutex<HashMap<PathBuf, (FileIdentity, Parsed)>>> = OnceLock::new();

/// Turns on the parse cache for this process (the console and the MCP server, which load the same
/// definitions and rules on every submit). One-shot commands leave it off.
pub fn enable_cache() {
    CACHE_ON.store(true, Ordering::Relaxed);
}

/// The cached parse of `path` when its identity is unchanged, else `parse()`'s, remembered under the
/// identity seen before reading (a file changed in between is parsed again on the next call). Only
/// values and [`Error::Corrupt`] are remembered; a failed read is tried again next time.
pub(crate) fn cached(
    path: &Path,
    parse: impl FnOnce() -> Result<Arc<Value>>,
) -> Result<Arc<Value>> {
    if !CACHE_ON.load(Ordering::Relaxed) {
        return parse();
    }
    let Some(id) = FileIdentity::of(path) else {
        return parse();
    };
    let cache = CACHE.get_or_init(Default::default);
    let hit = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(path)
        .filter(|(seen, _)| *seen == id)
        .map(|(_, parsed)| parsed.clone());
    let parsed: Parsed = match hit {
        Some(p) => p,
        None => {
            let parsed = match parse() {
                Ok(v) => Ok(v),
                Err(Error::Corrupt { message, .. }) => Err(message),
                Err(other) => return Err(other),
            };
            if id.racy() {
                // Changed within the clock's granularity: a same-size rewrite could keep this identity.
                return parsed.map_err(|message| Error::Corrupt {
                    path: path.to_path_buf(),
                    message,
                });
            }
            let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
            // Files that vanished leave entries behind; drop them once the map grows past any real use.
            if map.len() > 4096 {
                map.retain(|p, _| p.exists());
            }
            map.insert(path.to_path_buf(), (id, parsed.clone()));
            parsed
        }
    };
    parsed.map_err(|message| Error::Corrupt {
        path: path.to_path_buf(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bomb(items: usize, aliases: usize) -> String {
        let list = vec!["x"; items].join(",");
        let refs = vec!["*a"; aliases].join(",");
        format!("a: &a [{list}]\nb: [{refs}]\n")
    }

    #[test]
    fn aliases_are_charged_for_every_copy() {
        let v = parse_bounded(bomb(10, 10).as_bytes(), 1000).unwrap();
        assert_eq!(v["b"].as_array().unwrap().len(), 10);
        let err = parse_bounded(bomb(10_000, 10_000).as_bytes(), MAX_YAML_NODES).unwrap_err();
        assert!(err.to_string().contains("alias"), "{err}");
    }

    #[test]
    fn the_budget_counts_nodes_exactly() {
        // {a: [1, 2]} is a mapping, a key, a sequence and two scalars.
        assert!(parse_bounded(b"a: [1, 2]", 5).is_ok());
        assert!(parse_bounded(b"a: [1, 2]", 4).is_err());
    }

    #[test]
    fn values_match_an_unbounded_parse() {
        let text = "a: &x {k: [1, -2, 3.5, true, null, ~, 'q']}\nb: *x\nc: !!str 12\n";
        let plain: Value = serde_yaml::from_str(text).unwrap();
        assert_eq!(parse_bounded(text.as_bytes(), 1000).unwrap(), plain);
        for bad in ["a: [1", "{1: x}", "!custom x"] {
            let plain = serde_yaml::from_str::<Value>(bad).is_ok();
            assert_eq!(parse_bounded(bad.as_bytes(), 1000).is_ok(), plain, "{bad}");
        }
    }

    proptest::proptest! {
        /// Any document built from anchors and aliases either parses within the budget (and equals an
        /// unbounded parse) or is refused by it: never more nodes than the budget.
        #[test]
        fn expansion_never_passes_the_budget(widths in proptest::collection::vec(1usize..40, 1..6)) {
            let mut text = String::from("l0: &l0 [x]\n");
            for (i, w) in widths.iter().enumerate() {
                let refs = vec![format!("*l{i}"); *w].join(",");
                text.push_str(&format!("l{}: &l{} [{refs}]\n", i + 1, i + 1));
            }
            let budget = 2_000;
            match parse_bounded(text.as_bytes(), budget) {
                Ok(v) => {
                    proptest::prop_assert!(count(&v) <= budget);
                    let plain: Value = serde_yaml::from_str(&text).unwrap();
                    proptest::prop_assert_eq!(v, plain);
                }
                Err(e) => proptest::prop_assert!(e.to_string().contains("alias"), "{}", e),
            }
        }
    }

    #[test]
    fn the_cache_parses_an_unchanged_file_once_and_a_changed_one_again() {
        enable_cache();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.yaml");
        std::fs::write(&p, "a: 1\n").unwrap();
        let parses = std::cell::Cell::new(0);
        let load = |path: &Path| {
            cached(path, || {
                parses.set(parses.get() + 1);
                let bytes = std::fs::read(path).unwrap();
                parse_bounded(&bytes, 100)
                    .map(Arc::new)
                    .map_err(|message| Error::Corrupt {
                        path: path.to_path_buf(),
                        message: message.into(),
                    })
            })
        };
        // A file written just now is racy: parsed every time until its times are in the past.
        load(&p).unwrap();
        load(&p).unwrap();
        assert_eq!(parses.get(), 2);
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // ctime moved with set_modified; wait until it is out of the racy window.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert_eq!(load(&p).unwrap()["a"], 1);
        assert_eq!(load(&p).unwrap()["a"], 1);
        assert_eq!(parses.get(), 3, "an unchanged file is parsed once");
        // Same size, mtime set back: the new content is read.
        std::fs::write(&p, "a: 2\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(load(&p).unwrap()["a"], 2);
        assert_eq!(parses.get(), 4);
    }

    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(m) => m.values().map(|v| 1 + count(v)).sum(),
            _ => 0,
        }
    }
}
