//! What every source reads through: bounded, no-follow reads of regular files and directories
//! (every file a source names is hostile input), and the cleaning of foreign text for a terminal.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::SourceError;

/// The largest foreign file read (an inbox of 10,000 messages is a few MiB).
pub(crate) const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// The most entries read from one foreign directory.
pub(crate) const MAX_DIR_ENTRIES: usize = 100_000;
/// The longest text kept of a foreign field shown in a row (the raw value keeps the whole).
pub(crate) const MAX_TEXT: usize = 4096;
/// The longest reason kept of a source's error.
pub(crate) const MAX_REASON: usize = 512;

/// Reads the regular file `path` whole, `Ok(None)` when it is missing. Refuses a link (the last
/// component is opened with `O_NOFOLLOW`), anything that is not a regular file (a FIFO cannot hang
/// the reader: the open does not block), and a file over `max` bytes; the read itself is bounded.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, SourceError> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(SourceError::new(format!(
                "{}: a symbolic link, not followed; point the source at the real directory",
                path.display()
            )));
        }
        Err(e) => return Err(SourceError::new(format!("{}: {e}", path.display()))),
    };
    let meta = f
        .metadata()
        .map_err(|e| SourceError::new(format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(SourceError::new(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    if meta.len() > max {
        return Err(SourceError::new(format!(
            "{}: {} bytes, over the {max} byte limit of a foreign file",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| SourceError::new(format!("{}: {e}", path.display())))?;
    if bytes.len() as u64 > max {
        return Err(SourceError::new(format!(
            "{}: grew over the {max} byte limit while read",
            path.display()
        )));
    }
    Ok(Some(bytes))
}

/// A directory entry: its name, its path, and whether it is a directory.
pub(crate) type Entry = (String, PathBuf, bool);

/// The entries of directory `dir` (sorted by name; `Ok(None)` when it is missing), at most
/// [`MAX_DIR_ENTRIES`]; each with whether it is a directory (links are neither: not followed).
pub(crate) fn list_dir(dir: &Path) -> Result<Option<Vec<Entry>>, SourceError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SourceError::new(format!("{}: {e}", dir.display()))),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(SourceError::new(format!(
                "{}: a symbolic link, not followed; point the source at the real directory",
                dir.display()
            )));
        }
        Ok(m) if !m.is_dir() => {
            return Err(SourceError::new(format!(
                "{}: not a directory",
                dir.display()
            )));
        }
        Ok(_) => {}
    }
    let rd =
        std::fs::read_dir(dir).map_err(|e| SourceError::new(format!("{}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for entry in rd.flatten().take(MAX_DIR_ENTRIES) {
        let Ok(ft) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((name, entry.path(), ft.is_dir()));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(out))
}

/// `s` fit for a terminal: every control character (C0, DEL, C1: what starts an escape sequence)
/// and every bidirectional control written out as its escape (`\u{1b}`), cut to `max` characters
/// with `…`. Every foreign string a source puts into a row passes through here.
pub(crate) fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 8));
    for (n, c) in s.chars().enumerate() {
        if n >= max {
            out.push('…');
            break;
        }
        if c.is_control() || crate::text::is_bidi_control(c) {
            // Newlines and tabs of a message body read as one line in a row.
            match c {
                '\n' | '\r' | '\t' => out.push(' '),
                _ => out.extend(c.escape_unicode()),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A raw value as text for a terminal: its JSON, cleaned (JSON escapes C0 controls but keeps C1
/// and bidirectional ones as they are), cut to `max` characters.
pub(crate) fn clean_raw(v: &serde_json::Value, max: usize) -> String {
    clean(&v.to_string(), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_leaves_no_escape_sequence_and_cuts_long_text() {
        let hostile = "a\x1b[2Jb\u{9b}31mc\u{202e}d\x07\ne";
        let c = clean(hostile, 100);
        assert!(
            !c.chars()
                .any(|c| c.is_control() || crate::text::is_bidi_control(c)),
            "{c:?}"
        );
        assert!(
            c.starts_with("a\\u{1b}[2Jb\\u{9b}31mc\\u{202e}d\\u{7} e"),
            "{c:?}"
        );
        assert_eq!(clean(&"x".repeat(10), 4), "xxxx…");
        let raw = serde_json::json!({"t": "\u{9b}2J"});
        assert!(!clean_raw(&raw, 100).contains('\u{9b}'));
    }

    #[test]
    fn a_link_a_fifo_and_a_huge_file_are_refused_and_a_missing_one_is_none() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.json");
        std::fs::write(&real, b"[]").unwrap();
        std::os::unix::fs::symlink(&real, d.path().join("link.json")).unwrap();
        assert!(
            read_bounded(&d.path().join("link.json"), 100)
                .unwrap_err()
                .reason
                .contains("symbolic link")
        );
        assert_eq!(read_bounded(&real, 100).unwrap().unwrap(), b"[]");
        assert!(
            read_bounded(&real, 1)
                .unwrap_err()
                .reason
                .contains("over the 1 byte limit")
        );
        assert!(read_bounded(&d.path().join("none"), 1).unwrap().is_none());
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo takes a valid NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            read_bounded(&fifo, 100)
                .unwrap_err()
                .reason
                .contains("not a regular file")
        );
    }
}
