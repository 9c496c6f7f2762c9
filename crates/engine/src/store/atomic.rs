//! Atomic writes: temp file in the same directory, fsync, rename over the target, fsync the directory.
//!
//! Every write, move and removal names the [`Root`] it works in and is refused when a symbolic link
//! planted in the root would lead it outside ([`Root::check_write`]).

use std::fs::File;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::OFlags;

use serde::Serialize;

use super::Root;
use super::safe::SafeDir;
use crate::error::{Error, Result};

/// Refuses `path` when it lies outside the root or a symbolic link below the root is on its way (see
/// [`Root::check_write`]). Creates nothing.
pub(crate) fn confined(root: &Root, path: &Path) -> Result<()> {
    root.check_write(path).map_err(Error::from)
}

/// Serialises `value` as pretty JSON (2-space indent, trailing newline).
pub fn to_pretty_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = super::json_text(value, true);
    out.push(b'\n');
    out
}

/// Writes pretty JSON to `path` atomically (see [`write_atomic`]).
pub(crate) fn write_json<T: Serialize + ?Sized>(root: &Root, path: &Path, value: &T) -> Result<()> {
    write_atomic(root, path, &to_pretty_json(value))
}

fn parent_dir(root: &Root, path: &Path) -> Result<(SafeDir, std::ffi::OsString)> {
    SafeDir::parent_of(root, path, true)?
        .ok_or_else(|| Error::refused(format!("{} has no parent directory", path.display())))
}

/// Replaces `path` with `bytes` atomically and durably; readers see the old or the new file, never a
/// mix. A new file gets the mode `open(…, "w")` gives under the umask; a replaced one keeps its mode.
pub fn write_atomic(root: &Root, path: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, name) = parent_dir(root, path)?;
    dir.replace(&name, bytes)
}

/// Creates `path` (empty) if it does not exist; never truncates an existing file.
pub(crate) fn ensure_file(root: &Root, path: &Path) -> Result<()> {
    open_append(root, path).map(|_| ())
}

/// Opens `path` for appending (and reading), creating it and its directory when missing, never
/// following a link (see [`super::safe`]).
pub(crate) fn open_append(root: &Root, path: &Path) -> Result<File> {
    let (dir, name) = parent_dir(root, path)?;
    dir.open_file(&name, OFlags::RDWR | OFlags::APPEND | OFlags::CREATE)?
        .ok_or_else(|| Error::not_found(format!("{} does not exist", path.display())))
}

/// Opens lock file `path` (created with its directory when missing, never truncated, never through
/// a link) for reading only, or for appending when `writable`.
pub(crate) fn open_lock_file(root: &Root, path: &Path, writable: bool) -> Result<File> {
    let (dir, name) = parent_dir(root, path)?;
    let access = if writable {
        OFlags::RDWR | OFlags::APPEND
    } else {
        OFlags::RDONLY
    };
    dir.open_file(&name, access | OFlags::CREATE)?
        .ok_or_else(|| Error::not_found(format!("{} does not exist", path.display())))
}

/// Like [`open_append`], but the directory must exist (only the file is created when missing).
pub(crate) fn open_append_in_place(root: &Root, path: &Path) -> Result<File> {
    let (dir, name) = SafeDir::parent_of(root, path, false)?
        .ok_or_else(|| Error::io(path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
    dir.open_file(&name, OFlags::RDWR | OFlags::APPEND | OFlags::CREATE)?
        .ok_or_else(|| Error::not_found(format!("{} does not exist", path.display())))
}

/// Creates a directory and its parents.
pub(crate) fn ensure_dir(root: &Root, path: &Path) -> Result<()> {
    SafeDir::open(root, path, true).map(|_| ())
}

/// Moves `from` to `to` (same file system) and makes the move durable; neither path's directories
/// are reached through a link.
pub(crate) fn rename_durable(root: &Root, from: &Path, to: &Path) -> Result<()> {
    let (from_dir, from_name) = SafeDir::parent_of(root, from, false)?
        .ok_or_else(|| Error::not_found(format!("{} does not exist", from.display())))?;
    let (to_dir, to_name) = parent_dir(root, to)?;
    // A move of a file the act holds a replace of waits with it, in order (module `commit`);
    // any other move comes after every rename the act holds.
    let from_path = from_dir.path().join(&from_name);
    if super::commit::holds(&from_path) {
        let dup = |d: &SafeDir| {
            d.as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io(d.path(), e))
        };
        let held = super::commit::Held {
            from_dir: dup(&from_dir)?,
            from: from_name.clone(),
            from_path,
            to_dir: dup(&to_dir)?,
            to_path: to_dir.path().join(&to_name),
            to: to_name.clone(),
            written: None,
        };
        if super::commit::hold(held).is_none() {
            return Ok(());
        }
    }
    super::commit::settle()?;
    rustix::fs::renameat(&from_dir, &from_name, &to_dir, &to_name)
        .map_err(|e| Error::io(from, std::io::Error::from(e)))?;
    to_dir.sync()?;
    from_dir.sync()
}

/// Removes a file (or a link, never followed) if it exists, durably. `Ok(false)` if it was missing.
pub(crate) fn remove_file(root: &Root, path: &Path) -> Result<bool> {
    let Some((dir, name)) = SafeDir::parent_of(root, path, false)? else {
        return Ok(false);
    };
    let removed = dir.remove_file(&name)?;
    if removed {
        dir.sync()?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_pretty_json_with_newline_and_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let p = dir.path().join("sub/x.json");
        write_json(&root, &p, &serde_json::json!({"a": [1, 2]})).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text, "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
        write_json(&root, &p, &serde_json::json!({"a": 3})).unwrap();
        let names: Vec<_> = fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn ensure_file_never_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        fs::write(&p, "keep").unwrap();
        ensure_file(&Root::at(dir.path()), &p).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "keep");
    }

    #[test]
    fn a_link_planted_in_the_root_never_leads_a_write_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path().join("root"));
        fs::create_dir_all(&root.dir).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.dir.join("link")).unwrap();
        let via_link = root.dir.join("link/new/x.json");
        let err = write_json(&root, &via_link, &1).unwrap_err();
        assert!(err.to_string().contains("leads outside the root"), "{err}");
        assert!(ensure_dir(&root, &root.dir.join("link/d")).is_err());
        assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
        // A link to a file as the file itself is refused for in-place writes.
        std::os::unix::fs::symlink(outside.path().join("f"), root.dir.join("f")).unwrap();
        assert!(ensure_file(&root, &root.dir.join("f")).is_err());
        // Paths outside the root are refused; inside and link-free is fine.
        assert!(write_json(&root, &outside.path().join("ok.json"), &1).is_err());
        write_json(&root, &root.dir.join("a/b.json"), &1).unwrap();
    }

    #[test]
    fn a_replace_keeping_the_mode_it_was_given_changes_no_attribute() {
        // `fchmod` to the mode the file already has is still an `IN_ATTRIB` to every watcher.
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let p = dir.path().join("x.json");
        write_atomic(&root, &p, b"{}\n").unwrap();
        let seen = crate::store::watched_events(dir.path(), || {
            write_atomic(&root, &p, b"{\"a\": 1}\n").unwrap();
        });
        assert!(
            seen.iter().all(|(mask, _)| !mask.contains("ATTRIB")),
            "{seen:?}"
        );
        assert!(
            seen.iter()
                .any(|(mask, name)| mask.contains("MOVED_TO") && name == "x.json")
        );
        // A mode of its own is still kept.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&root, &p, b"{}\n").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
