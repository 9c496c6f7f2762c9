//! Tolerant readers: a file being rewritten by a non-atomic writer is retried briefly, then reported;
//! nothing here panics on bad input.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};

/// Largest JSON document the engine reads (a guard against runaway files).
pub(crate) const MAX_JSON_BYTES: u64 = super::limits::MAX_FILE_BYTES;

/// Reads and parses a JSON file. `Ok(None)` if it does not exist. A parse failure is retried a few
/// times over ~50 ms (a foreign writer may be mid-write), then returned as [`Error::Corrupt`].
pub fn read_json(path: &Path) -> Result<Option<Value>> {
    let delays = [0u64, 5, 15, 30];
    let mut last = String::new();
    for (i, d) in delays.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(*d));
        }
        let bytes = match read_bytes(path)? {
            Some(b) => b,
            None => return Ok(None),
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => return Ok(Some(v)),
            Err(e) => last = describe_json_error(&bytes, &e),
        }
    }
    Err(Error::Corrupt {
        path: path.to_path_buf(),
        message: last,
    })
}

/// Like [`read_json`], but parses once with no retry (for watchers that will see the next change anyway).
pub fn read_json_once(path: &Path) -> Result<Option<Value>> {
    let Some(bytes) = read_bytes(path)? else {
        return Ok(None);
    };
    serde_json::from_slice::<Value>(&bytes)
        .map(Some)
        .map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            message: describe_json_error(&bytes, &e),
        })
}

/// One read of a JSON file by [`read_json_nofollow`]: the metadata of the handle read (the version
/// the value is of) and the value, or why it is not one.
#[derive(Debug)]
pub struct JsonRead {
    /// The open handle's metadata: the version of the file the value was read from.
    pub metadata: std::fs::Metadata,
    /// The parsed JSON, or why the bytes read are not JSON (or could not be read whole).
    pub value: Result<Value>,
}

/// Reads a file's JSON once, as [`read_json_once`], with the metadata of the open handle: a caller
/// keeping a fingerprint of what it read takes it from here, with no `stat` before the open (the
/// first load of a large root reads every file once, and each path lookup saved is a syscall).
/// The open does not follow a final symbolic link and does not block. `Ok(None)` when the file is
/// missing or not a regular file; `Err` when it could not be opened (a link, no permission), for
/// the caller's own path to decide. The size is checked on the handle and the read is bounded and
/// sized from it (one read and the end-of-file probe, not a read per doubling of the buffer).
pub fn read_json_nofollow(path: &Path) -> Result<Option<JsonRead>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // The current act's own read of a file whose rename it holds (module `commit`).
    let held = super::commit::held_source(path);
    let Some(at) = held.as_ref().map_or(Some(path), |h| h.as_deref()) else {
        return Ok(None);
    };
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(at)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let metadata = f.metadata().map_err(|e| Error::io(path, e))?;
    if !metadata.is_file() {
        return Ok(None);
    }
    let too_big = |len: u64| Error::Corrupt {
        path: path.to_path_buf(),
        message: format!("file is {len} bytes, over the {MAX_JSON_BYTES} byte limit"),
    };
    if metadata.len() > MAX_JSON_BYTES {
        let value = Err(too_big(metadata.len()));
        return Ok(Some(JsonRead { metadata, value }));
    }
    let room = usize::try_from(metadata.len())
        .unwrap_or(0)
        .saturating_add(1);
    let mut bytes = Vec::with_capacity(room);
    let value = match f.take(MAX_JSON_BYTES + 1).read_to_end(&mut bytes) {
        Err(e) => Err(Error::io(path, e)),
        Ok(_) if bytes.len() as u64 > MAX_JSON_BYTES => Err(too_big(bytes.len() as u64)),
        Ok(_) => serde_json::from_slice::<Value>(&bytes).map_err(|e| Error::Corrupt {
            path: path.to_path_buf(),
            message: describe_json_error(&bytes, &e),
        }),
    };
    Ok(Some(JsonRead { metadata, value }))
}

/// Reads a JSON file that must hold an object; a missing file is an empty object.
pub(crate) fn read_json_object(path: &Path) -> Result<serde_json::Map<String, Value>> {
    match read_json(path)? {
        None => Ok(serde_json::Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!("expected a JSON object, found {}", kind(&other)),
        }),
    }
}

/// Reads a whole file, `None` if missing; refuses files over [`MAX_JSON_BYTES`] and anything that is
/// not a regular file (a FIFO would block the reader, a device such as `/dev/zero` never ends). The size
/// is checked on the open handle and the read is bounded, so a file that grows meanwhile cannot push it
/// past the limit.
pub(crate) fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let too_big = |len: u64| Error::Corrupt {
        path: path.to_path_buf(),
        message: format!("file is {len} bytes, over the {MAX_JSON_BYTES} byte limit"),
    };
    let Some((f, m)) = open_regular_with_metadata(path)? else {
        return Ok(None);
    };
    if m.len() > MAX_JSON_BYTES {
        return Err(too_big(m.len()));
    }
    // Sized from the handle: one read and the end-of-file probe, not a read per doubling.
    let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0).saturating_add(1));
    f.take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > MAX_JSON_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Whether `path` exists (following a link, as [`Path::exists`]), as the current act sees it: a
/// file whose rename the act holds is there already, one a held move takes away is gone (module
/// `commit`).
pub(crate) fn exists(path: &Path) -> bool {
    match super::commit::held_source(path) {
        None => path.exists(),
        Some(None) => false,
        Some(Some(at)) => at.exists(),
    }
}

/// Opens `path` for reading, `None` if missing; refuses anything that is not a regular file. The open
/// does not block (`O_NONBLOCK`), so a FIFO planted in a root cannot hang the reader, and a device such
/// as `/dev/zero` is refused before it is read.
pub fn open_regular(path: &Path) -> Result<Option<std::fs::File>> {
    Ok(open_regular_with_metadata(path)?.map(|(f, _)| f))
}

/// [`open_regular`], with the metadata of the handle it checked (one `statx`, not one per question).
fn open_regular_with_metadata(path: &Path) -> Result<Option<(std::fs::File, std::fs::Metadata)>> {
    use std::os::unix::fs::OpenOptionsExt;
    // The current act's own read of a file whose rename it holds (module `commit`).
    let held = super::commit::held_source(path);
    let Some(at) = held.as_ref().map_or(Some(path), |h| h.as_deref()) else {
        return Ok(None);
    };
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(at)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let m = f.metadata().map_err(|e| Error::io(path, e))?;
    if !m.is_file() {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: "not a regular file".to_owned(),
        });
    }
    Ok(Some((f, m)))
}

fn describe_json_error(bytes: &[u8], e: &serde_json::Error) -> String {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        "file is empty (being written?)".to_owned()
    } else if e.is_eof() {
        format!("truncated JSON ({e}); a writer may have died mid-write")
    } else {
        format!("not valid JSON: {e}")
    }
}

/// A short name of a JSON value's kind for messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Largest YAML file (definition or rule) the engine reads.
pub(crate) const MAX_YAML_BYTES: u64 = 1024 * 1024;

/// Reads a YAML file into a JSON value (so one code path validates both). Bounded twice: the file
/// by [`MAX_YAML_BYTES`], what it expands to by [`super::yaml::MAX_YAML_NODES`]. Processes that
/// enabled [`super::yaml::enable_cache`] parse an unchanged file only once.
pub(crate) fn read_yaml(path: &Path) -> Result<Value> {
    let parsed = super::yaml::cached(path, || {
        let bytes = read_bytes(path)?
            .ok_or_else(|| Error::not_found(format!("{} does not exist", path.display())))?;
        let corrupt = |message: String| Error::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        if bytes.len() as u64 > MAX_YAML_BYTES {
            return Err(corrupt(format!(
                "YAML file over {} MiB",
                MAX_YAML_BYTES >> 20
            )));
        }
        super::yaml::parse_bounded(&bytes, super::yaml::MAX_YAML_NODES)
            .map(std::sync::Arc::new)
            .map_err(|e| corrupt(e.into()))
    })?;
    Ok(Value::clone(&parsed))
}

/// Whether directory entry `e` is what `kind` asks of the file it names, following a link as
/// `Path::is_file` / `Path::is_dir` do: from the type the directory listing gave when it is not a
/// link (no `stat`), else from a `stat` of its path.
pub(crate) fn entry_is(e: &std::fs::DirEntry, kind: fn(&std::fs::FileType) -> bool) -> bool {
    match e.file_type() {
        Ok(t) if !t.is_symlink() => kind(&t),
        _ => std::fs::metadata(e.path()).is_ok_and(|m| kind(&m.file_type())),
    }
}

/// At most this many directory entries are looked at to name the known ones in an error message.
pub(crate) const NAME_SCAN_LIMIT: usize = 10_000;
/// At most this many names are shown in an error message; the rest are counted.
pub(crate) const NAMES_SHOWN: usize = 8;

/// `names` sorted and shown as `a, b, c and 5 more` (at most [`NAMES_SHOWN`] of them, each cut to 80
/// characters); `None` when there are none. For errors that say which ids exist.
pub(crate) fn name_list(mut names: Vec<String>) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    names.sort();
    names.dedup();
    let more = names.len().saturating_sub(NAMES_SHOWN);
    let shown: Vec<String> = names
        .iter()
        .take(NAMES_SHOWN)
        .map(|n| n.chars().take(80).collect())
        .collect();
    let mut out = shown.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    Some(out)
}

/// The names `keep` maps among the first [`NAME_SCAN_LIMIT`] entries of `dir`, as [`name_list`]
/// shows them (`… and more` when the scan stopped early); `None` when there are none or `dir`
/// cannot be read.
pub(crate) fn known_names(dir: &Path, keep: impl Fn(&str) -> Option<String>) -> Option<String> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut names = Vec::new();
    let mut cut = false;
    for (scanned, e) in rd.flatten().enumerate() {
        if scanned == NAME_SCAN_LIMIT {
            cut = true;
            break;
        }
        if let Some(n) = keep(&e.file_name().to_string_lossy()) {
            names.push(n);
        }
    }
    let list = name_list(names)?;
    Some(if cut {
        format!("{list} and more")
    } else {
        list
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_is_none_and_truncated_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_json(&dir.path().join("nope.json")).unwrap().is_none());
        let p = dir.path().join("t.json");
        std::fs::write(&p, "{\"dispatch_id\": \"disp_2026").unwrap();
        let err = read_json(&p).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn a_read_without_following_gives_the_handles_metadata_and_refuses_a_link() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_json_nofollow(&dir.path().join("nope.json"))
                .unwrap()
                .is_none()
        );
        let p = dir.path().join("s.json");
        std::fs::write(&p, r#"{"workflow_id": "wf_1"}"#).unwrap();
        let r = read_json_nofollow(&p).unwrap().unwrap();
        assert_eq!(r.value.unwrap()["workflow_id"], "wf_1");
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((r.metadata.ino(), r.metadata.len()), (m.ino(), m.len()));
        // Truncated: the same words as the other readers, with the metadata of what was read.
        std::fs::write(&p, "{\"dispatch_id\": \"disp_2026").unwrap();
        let r = read_json_nofollow(&p).unwrap().unwrap();
        assert!(r.value.unwrap_err().to_string().contains("truncated"));
        assert_eq!(r.metadata.len(), 26);
        // A directory is not a file to read; a link is not followed.
        assert!(read_json_nofollow(dir.path()).unwrap().is_none());
        let link = dir.path().join("l.json");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(read_json_nofollow(&link).is_err());
    }

    #[test]
    fn yaml_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("broken.yaml");
        std::fs::write(&p, "workflow:\n  steps: [ {id: a, god: thoth\n").unwrap();
        let err = read_yaml(&p).unwrap_err().to_string();
        assert!(err.contains("broken.yaml") && err.contains("YAML"), "{err}");
    }
}

#[cfg(test)]
mod read_bytes_tests {
    use super::*;

    #[test]
    fn a_device_or_a_fifo_is_refused_without_blocking_or_reading_forever() {
        let started = std::time::Instant::now();
        let e = read_bytes(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("x.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = read_bytes(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // A link to the device is followed to it and refused the same way.
        let link = d.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_bytes(&link).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(read_bytes(&d.path().join("missing.json")).unwrap(), None);
        std::fs::write(d.path().join("ok.json"), b"{}").unwrap();
        assert_eq!(
            read_bytes(&d.path().join("ok.json")).unwrap().unwrap(),
            b"{}"
        );
    }
}

#[cfg(test)]
mod name_list_tests {
    use super::*;

    #[test]
    fn names_are_sorted_bounded_and_counted() {
        assert_eq!(name_list(Vec::new()), None);
        assert_eq!(name_list(vec!["b".into(), "a".into()]).unwrap(), "a, b");
        let many: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        assert_eq!(
            name_list(many).unwrap(),
            "n00, n01, n02, n03, n04, n05, n06, n07 and 12 more"
        );
        let d = tempfile::tempdir().unwrap();
        assert_eq!(known_names(d.path(), |n| Some(n.to_owned())), None);
        std::fs::write(d.path().join("wf_b.json"), b"{}").unwrap();
        std::fs::write(d.path().join("wf_a.json"), b"{}").unwrap();
        std::fs::write(d.path().join(".wf_c.lock"), b"").unwrap();
        let keep = |n: &str| n.strip_suffix(".json").map(str::to_owned);
        assert_eq!(known_names(d.path(), keep).unwrap(), "wf_a, wf_b");
        assert_eq!(known_names(&d.path().join("missing"), keep), None);
    }
}
