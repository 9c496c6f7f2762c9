//! Link-safe file-system access anchored at the root: the one place the engine creates, appends to,
//! renames or removes anything (docs/THREAT-MODEL.md).
//!
//! A path is split into an *anchor* (the root, or a `CONDUCTOR_BASE_DIR` / `CONDUCTOR_HANDOFFS_DIR` /
//! `PANTHEON_CLEANUP_ROOTS` directory configured outside it, each resolved once when the [`Root`] is
//! built) and the components below it. Every component is opened with `openat(…, O_NOFOLLOW |
//! O_DIRECTORY)` from the directory handle of its parent, and the file itself with `O_NOFOLLOW`, so a
//! symbolic link anywhere below the anchor is refused before anything is created, and a link swapped
//! in after a check cannot redirect the operation (there is no check-then-use on a path).

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::Root;
use super::layout::{TEMP_DIR, TEMP_PREFIX};
use crate::error::{Error, Result};

/// The mode new files are created with before the umask applies (what `open(…, "w")` uses).
const FILE_MODE: u32 = 0o666;
/// The mode new directories are created with before the umask applies.
const DIR_MODE: u32 = 0o777;
/// The mode of the root's temporary directory: its owner's alone.
const PRIVATE_DIR_MODE: u32 = 0o700;
/// Deepest directory tree [`remove_tree`] descends into.
const MAX_TREE_DEPTH: usize = 256;

fn io_err(path: &Path, e: Errno) -> Error {
    Error::io(path, std::io::Error::from(e))
}

fn link_refusal(path: &Path, link: &Path, anchor: &Path) -> Error {
    Error::refused(format!(
        "{} is refused: {} is a symbolic link, and the engine never writes through one (it leads \
         outside the root {} or could be made to); remove the link",
        path.display(),
        link.display(),
        anchor.display()
    ))
}

/// An open directory inside an anchor, with the path it was reached by (for messages).
#[derive(Debug)]
pub struct SafeDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
    anchor: PathBuf,
    /// The anchor is the root's own directory, whose [`TEMP_DIR`] replaces write their temporary
    /// files in.
    in_root: bool,
}

/// The anchor `path` lies under and the components below it.
fn split(root: &Root, path: &Path) -> Result<(PathBuf, Vec<OsString>)> {
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(Error::refused(format!(
            "{} contains a NUL byte",
            path.display()
        )));
    }
    let path = super::paths::absolute(path);
    let anchor = root
        .anchors()
        .into_iter()
        .filter(|a| path.starts_with(a))
        .max_by_key(|a| a.components().count())
        .ok_or_else(|| {
            Error::refused(format!(
                "{} is outside the root {}; the engine writes only inside it",
                path.display(),
                root.dir.display()
            ))
        })?;
    let rest = path
        .strip_prefix(&anchor)
        .map_err(|_| Error::refused(format!("{} lies outside its anchor", path.display())))?
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect();
    Ok((anchor, rest))
}

/// Opens (creating it when `create`) an anchor directory itself. Anchors were resolved when the root
/// was built; a dangling link in their place is refused.
fn open_anchor(anchor: &Path, create: bool) -> Result<Option<OwnedFd>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match rustix::fs::open(anchor, flags, Mode::empty()) {
        Ok(fd) => return Ok(Some(fd)),
        Err(Errno::NOENT) if !create => return Ok(None),
        Err(Errno::NOENT) => {}
        Err(e) => return Err(io_err(anchor, e)),
    }
    if let Ok(m) = std::fs::symlink_metadata(anchor)
        && m.file_type().is_symlink()
    {
        let to = std::fs::read_link(anchor).unwrap_or_default();
        return Err(Error::refused(format!(
            "{} is a symbolic link to {}, which does not exist; create {} or remove the link",
            anchor.display(),
            to.display(),
            to.display()
        )));
    }
    std::fs::create_dir_all(anchor).map_err(|e| Error::io(anchor, e))?;
    rustix::fs::open(anchor, flags, Mode::empty())
        .map(Some)
        .map_err(|e| io_err(anchor, e))
}

/// Opens `name` in `dir` as a directory without following a link, creating it when `create`.
fn open_child_dir(dir: &SafeDir, name: &OsStr, create: bool) -> Result<Option<OwnedFd>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let path = dir.path.join(name);
    for _ in 0..3 {
        match rustix::fs::openat(&dir.fd, name, flags, Mode::empty()) {
            Ok(fd) => return Ok(Some(fd)),
            Err(Errno::NOENT) if !create => return Ok(None),
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&dir.fd, name, Mode::from_raw_mode(DIR_MODE)) {
                    Ok(()) | Err(Errno::EXIST) => continue,
                    Err(e) => return Err(io_err(&path, e)),
                }
            }
            Err(Errno::LOOP | Errno::NOTDIR) => {
                if is_link(&dir.fd, name) {
                    return Err(link_refusal(&path, &path, &dir.anchor));
                }
                return Err(Error::refused(format!(
                    "{} is not a directory; remove or rename it",
                    path.display()
                )));
            }
            Err(e) => return Err(io_err(&path, e)),
        }
    }
    Err(Error::refused(format!(
        "{} keeps changing while it is created; retry",
        path.display()
    )))
}

fn is_link(dir: impl AsFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink)
}

impl AsFd for SafeDir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl SafeDir {
    /// Opens directory `path` under `root` without following any link below its anchor; creates what
    /// is missing when `create` (nothing is created before every existing component was checked).
    /// `Ok(None)` when it does not exist and `create` is false.
    ///
    /// Inside [`reusing_walks`] (an act), a directory an earlier walk of the same act opened is
    /// taken from there, and the walk goes on from it: each directory is opened once per act, as
    /// checked, not once per file.
    pub fn open(root: &Root, path: &Path, create: bool) -> Result<Option<Self>> {
        let (anchor, rest) = split(root, path)?;
        let in_root = anchor == root.dir;
        let (mut dir, walked) = match walked(&anchor, &rest) {
            Some((fd, walked)) => {
                let mut path = anchor.clone();
                path.extend(&rest[..walked]);
                let dir = SafeDir {
                    fd,
                    path,
                    in_root,
                    anchor,
                };
                (dir, walked)
            }
            None => {
                let Some(fd) = open_anchor(&anchor, create)? else {
                    return Ok(None);
                };
                let dir = SafeDir {
                    fd: Arc::new(fd),
                    path: anchor.clone(),
                    in_root,
                    anchor,
                };
                remember(&dir);
                (dir, 0)
            }
        };
        for name in &rest[walked..] {
            let Some(fd) = open_child_dir(&dir, name, create)? else {
                return Ok(None);
            };
            dir.path.push(name);
            dir.fd = Arc::new(fd);
            remember(&dir);
        }
        Ok(Some(dir))
    }

    /// Opens the parent directory of `path` (see [`SafeDir::open`]) and returns it with the file name.
    pub fn parent_of(root: &Root, path: &Path, create: bool) -> Result<Option<(Self, OsString)>> {
        let path = super::paths::absolute(path);
        let name = path
            .file_name()
            .ok_or_else(|| Error::refused(format!("{} names no file", path.display())))?
            .to_os_string();
        let parent = path
            .parent()
            .ok_or_else(|| Error::refused(format!("{} has no parent", path.display())))?;
        Ok(Self::open(root, parent, create)?.map(|d| (d, name)))
    }

    /// The directory's path (for messages; every access goes through the open descriptor).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// fsyncs the directory (makes a rename or removal in it durable); inside an act
    /// ([`super::commit::act`]) the act's commit does, before the act returns.
    pub fn sync(&self) -> Result<()> {
        if super::commit::defer(self.fd.as_fd()) {
            return Ok(());
        }
        rustix::fs::fsync(&self.fd).map_err(|e| io_err(&self.path, e))
    }

    /// Opens file `name` here without following a link.
    pub(crate) fn open_file(&self, name: &OsStr, flags: OFlags) -> Result<Option<File>> {
        let path = self.path.join(name);
        // An append comes after every rename the act holds (a journal line after the state it
        // records), and a file the act holds a rename of is opened once it is in place.
        if flags.contains(OFlags::APPEND) || super::commit::holds(&path) {
            super::commit::settle()?;
        }
        match rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        ) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::NOENT) if !flags.contains(OFlags::CREATE) => Ok(None),
            Err(Errno::LOOP) => Err(link_refusal(&path, &path, &self.anchor)),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    /// The mode of regular file `name` here, if it exists (never following a link).
    fn file_mode(&self, name: &OsStr) -> Option<u32> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .filter(|s| FileType::from_raw_mode(s.st_mode) == FileType::RegularFile)
            .map(|s| s.st_mode & 0o7777)
    }

    /// Replaces `name` with `bytes` atomically and durably: a fresh temp file here (mode as `open(…,
    /// "w")` gives under the umask, or the replaced file's mode), fsync, rename, directory fsync;
    /// inside an act ([`super::commit::act`]) fdatasync, rename, and the act's round for the rest.
    pub fn replace(&self, name: &OsStr, bytes: &[u8]) -> Result<()> {
        self.replace_with(name, bytes, true)
    }

    /// Replaces `name` with `bytes` atomically but not durably (no fsync): a killed process leaves
    /// the old or the new file, never a torn one; a power loss may leave the old one. For records
    /// that only guard against a killed process (the journal's intents).
    pub(crate) fn replace_volatile(&self, name: &OsStr, bytes: &[u8]) -> Result<()> {
        self.replace_with(name, bytes, false)
    }

    fn replace_with(&self, name: &OsStr, bytes: &[u8], durable: bool) -> Result<()> {
        let keep_mode = self.file_mode(name);
        // Inside an act a durable replace's rename waits for the act's data round (module
        // `commit`): its temporary file is written without a sync of its own.
        let held = durable && super::commit::holding();
        let sync = match (durable, held) {
            (false, _) | (true, true) => TempSync::No,
            (true, false) if super::commit::deferring() => TempSync::Data,
            (true, false) => TempSync::All,
        };
        if let Some(temps) = self.temp_dir() {
            let tmp_name = write_temp(&temps.fd, &temps.path, bytes, keep_mode, sync)?;
            if held {
                // The act's walks may keep the temporary directory: the held rename takes its
                // own handle.
                let from_dir = match temps.fd.try_clone() {
                    Ok(fd) => fd,
                    Err(e) => {
                        let _ =
                            rustix::fs::unlinkat(&*temps.fd, tmp_name.as_str(), AtFlags::empty());
                        return Err(Error::io(&temps.path, e));
                    }
                };
                return self.hold(from_dir, &temps.path, tmp_name, name, bytes, keep_mode);
            }
            match rustix::fs::renameat(&temps.fd, tmp_name.as_str(), &self.fd, name) {
                Ok(()) => return if durable { self.sync() } else { Ok(()) },
                // Another mount of the same file system (a bind mount inside the root): written
                // again here, below.
                Err(Errno::XDEV) => {
                    let _ = rustix::fs::unlinkat(&temps.fd, tmp_name.as_str(), AtFlags::empty());
                }
                Err(e) => {
                    let _ = rustix::fs::unlinkat(&temps.fd, tmp_name.as_str(), AtFlags::empty());
                    return Err(io_err(&self.path.join(name), e));
                }
            }
        }
        let tmp_name = write_temp(&self.fd, &self.path, bytes, keep_mode, sync)?;
        if held {
            let here = self.fd.try_clone().map_err(|e| Error::io(&self.path, e))?;
            return self.hold(here, &self.path, tmp_name, name, bytes, keep_mode);
        }
        if let Err(e) = rustix::fs::renameat(&self.fd, tmp_name.as_str(), &self.fd, name) {
            let _ = rustix::fs::unlinkat(&self.fd, tmp_name.as_str(), AtFlags::empty());
            return Err(io_err(&self.path.join(name), e));
        }
        if durable { self.sync() } else { Ok(()) }
    }

    /// Holds the rename of temporary file `tmp_name` (in `from_dir`) onto `name` here until the
    /// act's data round (see `commit::hold`).
    fn hold(
        &self,
        from_dir: OwnedFd,
        from_dir_path: &Path,
        tmp_name: String,
        name: &OsStr,
        bytes: &[u8],
        keep_mode: Option<u32>,
    ) -> Result<()> {
        let to_dir = match self.fd.try_clone() {
            Ok(fd) => fd,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&from_dir, tmp_name.as_str(), AtFlags::empty());
                return Err(Error::io(&self.path, e));
            }
        };
        let rename = super::commit::Held {
            from_path: from_dir_path.join(&tmp_name),
            from: tmp_name.into(),
            from_dir,
            to_dir,
            to: name.to_os_string(),
            to_path: self.path.join(name),
            written: Some((bytes.to_vec(), keep_mode)),
        };
        match super::commit::hold(rename) {
            None => Ok(()),
            // Not in an act after all: renamed now, durably.
            Some(h) => {
                rustix::fs::renameat(&h.from_dir, &h.from, &self.fd, name)
                    .map_err(|e| io_err(&h.to_path, e))?;
                self.sync()
            }
        }
    }

    /// The root's temporary directory ([`TEMP_DIR`], created `0700` when missing), when a replace
    /// here may write its temporary file there: this directory is in the root's own anchor, and the
    /// temporary directory is a directory (not a link) of this user on the same file system that
    /// nobody else may enter (whoever may write in it could swap a temporary file before its
    /// rename; whoever may read it could read what is being written into a directory they may not
    /// read). `None` means "in this directory".
    ///
    /// A temporary file in the directory it replaces a file in is a change to every watcher of that
    /// directory (its creation, writes, close and rename); written there, a watcher of this
    /// directory sees one rename.
    fn temp_dir(&self) -> Option<TempDir> {
        if !self.in_root {
            return None;
        }
        let here = device_of(&self.fd)?;
        let (temps, dev) = act_temp_dir(&self.anchor)?;
        (dev == here).then_some(temps)
    }

    /// Removes file (or link) `name` here; `Ok(false)` when it was not there.
    pub fn remove_file(&self, name: &OsStr) -> Result<bool> {
        // After the renames the act holds, in the order it asked for them.
        super::commit::settle()?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(&self.path.join(name), e)),
        }
    }

    /// Removes `name` here whatever it is: a file or link is unlinked (a link is never followed), a
    /// directory is emptied by walking it from its own opened handle, then removed. `Ok(false)` when
    /// it was not there.
    pub(crate) fn remove_tree(&self, name: &OsStr) -> Result<bool> {
        super::commit::settle()?;
        // A directory removed here may be one the act's walks keep open.
        forget_walks();
        remove_entry(&self.fd, &self.path, name, 0)
    }
}

/// The root's temporary directory ([`TEMP_DIR`] in `root_dir`, created `0700` when missing), opened,
/// with its path and its file system's device, when it is a directory (not a link) of this user that
/// nobody else may enter and its owner may create files in (a mode changed by hand, or an umask
/// without the owner's write bit, would refuse every temporary file). `None` otherwise.
pub(crate) fn private_temp_dir(root_dir: &Path) -> Option<(OwnedFd, PathBuf, u64)> {
    let path = root_dir.join(TEMP_DIR);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(&path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            match rustix::fs::mkdir(&path, Mode::from_raw_mode(PRIVATE_DIR_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(_) => return None,
            }
            rustix::fs::open(&path, flags, Mode::empty()).ok()?
        }
        Err(_) => return None,
    };
    let temps = rustix::fs::fstat(&fd).ok()?;
    let private = temps.st_uid == rustix::process::geteuid().as_raw()
        && temps.st_mode & 0o777 & !0o400 == 0o300;
    #[allow(clippy::useless_conversion)]
    let dev = u64::from(temps.st_dev);
    private.then_some((fd, path, dev))
}

/// How old a temporary file in the root's temporary directory must be for [`sweep_temps`] to take
/// it for a killed writer's leftover. A write takes milliseconds; a writer stopped for longer than
/// this finds its temporary file gone and fails, leaving the file it replaced as it was.
pub(crate) const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);
/// Most entries of the temporary directory one sweep looks at.
const SWEEP_MAX: usize = 10_000;

/// The root's temporary directory ([`TEMP_DIR`]), opened, with the temporary files in it
/// (`.tmp-*.part`, regular files) last written [`STALE_TEMP`] or more before `now`: what writers
/// killed in the middle of a replace left. `None` when there is no such directory. Nothing is
/// followed through a link.
pub(crate) fn stale_temps(
    root: &Root,
    now: std::time::SystemTime,
) -> Option<(OwnedFd, Vec<OsString>)> {
    let path = root.dir.join(TEMP_DIR);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(&path, flags, Mode::empty()).ok()?;
    let dir = rustix::fs::Dir::read_from(&fd).ok()?;
    let mut stale = Vec::new();
    for e in dir.filter_map(|e| e.ok()).take(SWEEP_MAX) {
        let name = OsStr::from_bytes(e.file_name().to_bytes());
        let bytes = name.as_bytes();
        if !bytes.starts_with(TEMP_PREFIX.as_bytes()) || !bytes.ends_with(b".part") {
            continue;
        }
        let Ok(st) = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let written = u64::try_from(st.st_mtime)
            .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s))
            .unwrap_or(std::time::UNIX_EPOCH);
        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && now
                .duration_since(written)
                .is_ok_and(|age| age >= STALE_TEMP)
        {
            stale.push(name.to_os_string());
        }
    }
    Some((fd, stale))
}

/// Removes the [`stale_temps`]; returns how many were removed.
pub(crate) fn sweep_temps(root: &Root, now: std::time::SystemTime) -> usize {
    let Some((fd, stale)) = stale_temps(root, now) else {
        return 0;
    };
    stale
        .iter()
        .filter(|n| rustix::fs::unlinkat(&fd, n.as_os_str(), AtFlags::empty()).is_ok())
        .count()
}

/// The root's temporary directory, opened.
#[derive(Clone)]
struct TempDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

/// Most directories one act's walks keep open.
const MAX_WALKED: usize = 64;

/// What the current thread's act ([`reusing_walks`]) has opened and checked so far.
#[derive(Default)]
struct Walks {
    /// How many [`reusing_walks`] are open on this thread (one may run inside another).
    depth: u32,
    /// Each directory a walk opened: its anchor, its path, its handle and, once asked, its device.
    dirs: Vec<Walked>,
    /// The root's temporary directory as [`private_temp_dir`] found it, by root directory.
    temps: Option<(PathBuf, Option<(TempDir, u64)>)>,
}

struct Walked {
    anchor: PathBuf,
    path: PathBuf,
    fd: Arc<OwnedFd>,
    dev: Option<u64>,
}

thread_local! {
    static WALKS: RefCell<Walks> = RefCell::new(Walks::default());
}

/// Runs `work` with the directories its walks open kept and reused until it returns: each
/// directory of an act is opened (component by component, without following a link, as
/// [`SafeDir::open`] does) once per act instead of once per file, and the root's temporary
/// directory is opened and checked once. Nothing is kept past the outermost call, so the next act
/// walks and checks every path again: a link planted between two acts is refused by the second.
/// Within one act a directory is reached as it was when the act first walked to it, as a single
/// write reached it when its walk began.
pub(crate) fn reusing_walks<T>(work: impl FnOnce() -> T) -> T {
    struct Open;
    impl Drop for Open {
        fn drop(&mut self) {
            WALKS.with(|w| {
                let mut w = w.borrow_mut();
                w.depth = w.depth.saturating_sub(1);
                if w.depth == 0 {
                    w.dirs.clear();
                    w.temps = None;
                }
            });
        }
    }
    WALKS.with(|w| {
        let mut w = w.borrow_mut();
        w.depth = w.depth.saturating_add(1);
    });
    let _open = Open;
    work()
}

/// Forgets the directories the current act's walks opened (one of them may be removed).
pub(crate) fn forget_walks() {
    WALKS.with(|w| w.borrow_mut().dirs.clear());
}

/// The deepest directory on the way from `anchor` through `rest` that the current act's walks
/// opened, and how many components of `rest` it covers.
fn walked(anchor: &Path, rest: &[OsString]) -> Option<(Arc<OwnedFd>, usize)> {
    WALKS.with(|w| {
        let w = w.borrow();
        if w.depth == 0 || w.dirs.is_empty() {
            return None;
        }
        let mut best: Option<(Arc<OwnedFd>, usize)> = None;
        for d in w.dirs.iter().filter(|d| d.anchor == anchor) {
            let Ok(below) = d.path.strip_prefix(anchor) else {
                continue;
            };
            let n = below.components().count();
            let covers = n <= rest.len()
                && below
                    .components()
                    .zip(rest)
                    .all(|(c, r)| c.as_os_str() == r);
            if covers && best.as_ref().is_none_or(|(_, k)| n > *k) {
                best = Some((d.fd.clone(), n));
            }
        }
        best
    })
}

/// Keeps `dir` for the current act's later walks (nothing outside an act).
fn remember(dir: &SafeDir) {
    WALKS.with(|w| {
        let mut w = w.borrow_mut();
        if w.depth == 0 || w.dirs.len() >= MAX_WALKED {
            return;
        }
        w.dirs.push(Walked {
            anchor: dir.anchor.clone(),
            path: dir.path.clone(),
            fd: dir.fd.clone(),
            dev: None,
        });
    });
}

/// The device of the file system `fd` is on, asked once per act for a directory its walks keep.
fn device_of(fd: &Arc<OwnedFd>) -> Option<u64> {
    let kept = WALKS.with(|w| {
        w.borrow()
            .dirs
            .iter()
            .find(|d| Arc::ptr_eq(&d.fd, fd))
            .and_then(|d| d.dev)
    });
    if kept.is_some() {
        return kept;
    }
    #[allow(clippy::useless_conversion)]
    let dev = u64::from(rustix::fs::fstat(fd.as_ref()).ok()?.st_dev);
    WALKS.with(|w| {
        if let Some(d) = w
            .borrow_mut()
            .dirs
            .iter_mut()
            .find(|d| Arc::ptr_eq(&d.fd, fd))
        {
            d.dev = Some(dev);
        }
    });
    Some(dev)
}

/// [`private_temp_dir`] of `root_dir`, opened and checked once per act.
fn act_temp_dir(root_dir: &Path) -> Option<(TempDir, u64)> {
    let kept = WALKS.with(|w| {
        let w = w.borrow();
        match &w.temps {
            Some((dir, found)) if w.depth > 0 && dir == root_dir => Some(found.clone()),
            _ => None,
        }
    });
    if let Some(found) = kept {
        return found;
    }
    let found = private_temp_dir(root_dir).map(|(fd, path, dev)| {
        let temps = TempDir {
            fd: Arc::new(fd),
            path,
        };
        (temps, dev)
    });
    WALKS.with(|w| {
        let mut w = w.borrow_mut();
        if w.depth > 0 {
            w.temps = Some((root_dir.to_path_buf(), found.clone()));
        }
    });
    found
}

/// What a temporary file's writer syncs before closing it.
#[derive(Clone, Copy)]
enum TempSync {
    /// Nothing: not durable, or an act's data round covers it.
    No,
    /// Its data (`fdatasync`).
    Data,
    /// Its data and metadata (`fsync`).
    All,
}

/// Writes `bytes` afresh beside `name` in `dir` (at `dir_path`), its data synced, and renames it
/// into place: an act's held replace whose rename crossed a mount. The rename is covered by the
/// act's names round.
pub(crate) fn replace_beside(
    dir: &OwnedFd,
    dir_path: &Path,
    name: &OsStr,
    bytes: &[u8],
    keep_mode: Option<u32>,
) -> Result<()> {
    let tmp_name = write_temp(dir, dir_path, bytes, keep_mode, TempSync::Data)?;
    if let Err(e) = rustix::fs::renameat(dir, tmp_name.as_str(), dir, name) {
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        return Err(io_err(&dir_path.join(name), e));
    }
    Ok(())
}

/// Writes `bytes` to a new temporary file in `dir` (mode as `open(…, "w")` gives under the umask,
/// or `keep_mode`), synced as `sync` says, closed; returns its name. Nothing is left on an error.
fn write_temp(
    dir: &OwnedFd,
    dir_path: &Path,
    bytes: &[u8],
    keep_mode: Option<u32>,
    sync: TempSync,
) -> Result<String> {
    use std::io::Write;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let (tmp_name, mut tmp) = loop {
        let candidate = format!("{TEMP_PREFIX}{}.part", super::ids::random_hex(12));
        match rustix::fs::openat(
            dir,
            candidate.as_str(),
            flags,
            Mode::from_raw_mode(FILE_MODE),
        ) {
            Ok(fd) => break (candidate, File::from(fd)),
            Err(Errno::EXIST) => {}
            Err(e) => return Err(io_err(&dir_path.join(&candidate), e)),
        }
    };
    let tmp_path = dir_path.join(&tmp_name);
    let written = (|| {
        // Only when the umask gave the new file another mode: a change of mode is an event to
        // every watcher of the directory, even to the mode it had.
        if let Some(mode) = keep_mode
            && rustix::fs::fstat(&tmp).map_or(true, |st| st.st_mode & 0o7777 != mode)
        {
            rustix::fs::fchmod(&tmp, Mode::from_raw_mode(mode))
                .map_err(|e| io_err(&tmp_path, e))?;
        }
        tmp.write_all(bytes).map_err(|e| Error::io(&tmp_path, e))?;
        // Inside an act that holds its renames nothing is synced here: the act's data round covers
        // the file before its held rename is made (module `commit`); inside another act its data
        // is synced here. Either way a crash of the machine never leaves a name on an empty or
        // torn file (a rename can reach the disk before the data of the file it names).
        match sync {
            TempSync::No => {}
            TempSync::Data => tmp.sync_data().map_err(|e| Error::io(&tmp_path, e))?,
            TempSync::All => tmp.sync_all().map_err(|e| Error::io(&tmp_path, e))?,
        }
        Ok(())
    })();
    // Closed before it is renamed: its close is then no change to the target directory's watchers.
    drop(tmp);
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        return Err(e);
    }
    Ok(tmp_name)
}

fn remove_entry(dir: &OwnedFd, dir_path: &Path, name: &OsStr, depth: usize) -> Result<bool> {
    let path = dir_path.join(name);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(child) => {
            if depth >= MAX_TREE_DEPTH {
                return Err(Error::refused(format!(
                    "{} is nested deeper than {MAX_TREE_DEPTH} directories; remove it by hand",
                    path.display()
                )));
            }
            let names: Vec<OsString> = rustix::fs::Dir::read_from(&child)
                .map_err(|e| io_err(&path, e))?
                .filter_map(|e| e.ok())
                .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
                .filter(|n| n != "." && n != "..")
                .collect();
            for n in names {
                remove_entry(&child, &path, &n, depth + 1)?;
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
                Ok(()) | Err(Errno::NOENT) => Ok(true),
                Err(e) => Err(io_err(&path, e)),
            }
        }
        Err(Errno::NOENT) => Ok(false),
        Err(Errno::NOTDIR | Errno::LOOP) => match rustix::fs::unlinkat(dir, name, AtFlags::empty())
        {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(&path, e)),
        },
        Err(e) => Err(io_err(&path, e)),
    }
}

/// Opens file `path` under `root` with `flags` (plus `O_NOFOLLOW`), creating its directory first when
/// `flags` holds `CREATE`. `Ok(None)` when it (or its directory) does not exist and is not created.
pub(crate) fn open_file(root: &Root, path: &Path, flags: OFlags) -> Result<Option<File>> {
    let create = flags.contains(OFlags::CREATE);
    let Some((dir, name)) = SafeDir::parent_of(root, path, create)? else {
        return Ok(None);
    };
    dir.open_file(&name, flags)
}

/// Refuses `file` (opened at `path`) unless it has exactly one link: a hard link to a file elsewhere
/// would make an append or a lock land outside the root. Returns the metadata it checked.
pub(crate) fn require_single_link(file: &File, path: &Path) -> Result<std::fs::Metadata> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(Error::refused(format!(
            "{} is not a regular file; remove it",
            path.display()
        )));
    }
    if meta.nlink() != 1 {
        return Err(Error::refused(format!(
            "{} has {} hard links; a protocol file the engine appends to must have exactly one (a hard \
             link can lead outside the root); replace it with a copy",
            path.display(),
            meta.nlink()
        )));
    }
    Ok(meta)
}

/// [`require_single_link`], and the file belongs to this process's user: what the history's writer
/// appends to or cuts (a segment, a pack) is a file it made itself, never one another user planted
/// under the name.
pub(crate) fn require_own_single_link(file: &File, path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let owner = require_single_link(file, path)?.uid();
    let me = rustix::process::geteuid().as_raw();
    if owner != me {
        return Err(Error::refused(format!(
            "{} belongs to user {owner}, not to user {me} who writes it; the history's writer only \
             writes files it made",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The changes (not opens, reads or closes after reading) a watcher of `dir` is told of.
    fn changes_in(dir: &Path, act: impl FnOnce()) -> Vec<(String, String)> {
        crate::store::watched_events(dir, act)
            .into_iter()
            .filter(|(m, _)| {
                !["OPEN", "ACCESS", "CLOSE_NOWRITE"]
                    .iter()
                    .any(|k| m.contains(k))
            })
            .collect()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_replace_is_one_rename_to_a_watcher_of_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let sub = dir.path().join("conductor/state");
        let p = sub.join("wf_a.json");
        crate::store::atomic::write_atomic(&root, &p, b"{}\n").unwrap();
        let seen = changes_in(&sub, || {
            crate::store::atomic::write_atomic(&root, &p, b"{\"a\": 1}\n").unwrap();
        });
        assert_eq!(
            seen,
            [("EventMask(MOVED_TO)".to_owned(), "wf_a.json".to_owned())]
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"{\"a\": 1}\n");
        // Nothing is left in the temporary directory, the root's and its owner's alone.
        let temps = dir.path().join(TEMP_DIR);
        assert!(names(&temps).is_empty());
        let mode = std::fs::metadata(&temps).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        assert_eq!(names(&sub), ["wf_a.json"]);
    }

    #[test]
    fn a_temporary_directory_others_could_tamper_with_is_not_used() {
        // A link, a file, or a directory others may enter (they could swap a temporary file before
        // its rename, or read what is written into a directory they may not read) or its owner may
        // not write in: the temporary file is written beside its target, as any writer does.
        let outside = tempfile::tempdir().unwrap();
        type Make<'a> = &'a dyn Fn(&Path);
        let setups: [(&str, Make); 5] = [
            ("a link", &|t: &Path| {
                std::os::unix::fs::symlink(outside.path(), t).unwrap()
            }),
            ("a file", &|t: &Path| std::fs::write(t, b"x").unwrap()),
            ("writable by all", &|t: &Path| {
                std::fs::create_dir(t).unwrap();
                std::fs::set_permissions(t, std::fs::Permissions::from_mode(0o777)).unwrap();
            }),
            ("readable by its group", &|t: &Path| {
                std::fs::create_dir(t).unwrap();
                std::fs::set_permissions(t, std::fs::Permissions::from_mode(0o750)).unwrap();
            }),
            // Not others' to tamper with, but not writable by its owner either (a mode changed by
            // hand): every write would fail there.
            ("not writable by its owner", &|t: &Path| {
                std::fs::create_dir(t).unwrap();
                std::fs::set_permissions(t, std::fs::Permissions::from_mode(0o500)).unwrap();
            }),
        ];
        for (what, make) in setups {
            let dir = tempfile::tempdir().unwrap();
            let root = Root::at(dir.path());
            let sub = dir.path().join("conductor");
            std::fs::create_dir(&sub).unwrap();
            make(&dir.path().join(TEMP_DIR));
            let p = sub.join("x.json");
            let seen = changes_in(&sub, || {
                crate::store::atomic::write_atomic(&root, &p, b"{}\n").unwrap();
            });
            assert!(
                seen.iter()
                    .any(|(m, n)| m.contains("CREATE") && n.starts_with(TEMP_PREFIX)),
                "{what}: {seen:?}"
            );
            assert_eq!(std::fs::read(&p).unwrap(), b"{}\n", "{what}");
            assert_eq!(names(&sub), ["x.json"], "{what}");
            assert!(names(outside.path()).is_empty(), "{what}");
        }
    }

    #[test]
    fn an_act_opens_each_directory_once_and_the_next_act_walks_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let sub = dir.path().join("conductor/state");
        let rest: Vec<OsString> = ["conductor", "state"].map(OsString::from).into();
        let anchor = root.dir.clone();
        reusing_walks(|| {
            let first = SafeDir::open(&root, &sub, true).unwrap().unwrap();
            // The same handle for the directory and its parents, not a new walk.
            let (kept, covered) = walked(&anchor, &rest).unwrap();
            assert!(Arc::ptr_eq(&kept, &first.fd));
            assert_eq!(covered, 2);
            let again = SafeDir::open(&root, &sub, false).unwrap().unwrap();
            assert!(Arc::ptr_eq(&again.fd, &first.fd));
            // A nested act shares the outer one's walks.
            reusing_walks(|| assert!(walked(&anchor, &rest).is_some()));
            assert!(walked(&anchor, &rest).is_some());
            // The temporary directory is opened and checked once.
            let (t1, _) = act_temp_dir(&anchor).unwrap();
            let (t2, _) = act_temp_dir(&anchor).unwrap();
            assert!(Arc::ptr_eq(&t1.fd, &t2.fd));
            // A removed tree may be a kept directory: nothing is kept past it.
            SafeDir::open(&root, &dir.path().join("conductor"), false)
                .unwrap()
                .unwrap()
                .remove_tree(OsStr::new("nothing-here"))
                .unwrap();
            assert!(walked(&anchor, &rest).is_none());
        });
        // Outside an act nothing is kept.
        assert!(walked(&anchor, &rest).is_none());
        SafeDir::open(&root, &sub, false).unwrap().unwrap();
        assert!(walked(&anchor, &rest).is_none());
    }

    #[test]
    fn a_directory_swapped_for_a_link_between_two_acts_of_one_process_is_refused() {
        // One process (a god's `pantheon mcp`) acts twice; between the acts its inbox directory is
        // moved outside the root and a link to it planted in its place. The second act walks again
        // and refuses the link: nothing is written outside.
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        let c = crate::Conductor::new(root.clone());
        let handoff = |hid: &str, wf: &str| {
            serde_json::json!({"handoff_id": hid, "workflow_id": wf, "from_god": "thoth",
                "to_god": "hephaestus", "step": "scratch",
                "context": {"summary": "s", "decisions": [], "artifacts": []}})
        };
        c.submit_handoff(&handoff("hof_20260614_aa0001", "wf_swap_1"))
            .unwrap();
        let inbox = dir.path().join("conductor/pending/hephaestus");
        assert!(inbox.join("hof_20260614_aa0001.json").is_file());
        let outside = tempfile::tempdir().unwrap();
        let moved = outside.path().join("inbox");
        std::fs::rename(&inbox, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &inbox).unwrap();
        let err = c
            .submit_handoff(&handoff("hof_20260614_aa0002", "wf_swap_2"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(names(&moved), ["hof_20260614_aa0001.json"]);
        // The same inside one act: a link planted before the act's first walk to it is refused.
        let err = reusing_walks(|| {
            crate::store::atomic::write_atomic(&root, &inbox.join("x.json"), b"{}\n")
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(names(&moved), ["hof_20260614_aa0001.json"]);
    }

    #[test]
    fn killed_writers_leftovers_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        crate::store::atomic::write_atomic(&root, &dir.path().join("conductor/x.json"), b"{}\n")
            .unwrap();
        let temps = dir.path().join(TEMP_DIR);
        let outside = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - STALE_TEMP - std::time::Duration::from_secs(5);
        let make = |p: &Path, when: std::time::SystemTime| {
            let f = File::create(p).unwrap();
            f.set_modified(when).unwrap();
        };
        make(&temps.join(".tmp-0123456789ab.part"), old);
        make(
            &temps.join(".tmp-fresh00000000.part"),
            std::time::SystemTime::now(),
        );
        make(&temps.join("notes.txt"), old);
        make(&outside.path().join("target"), old);
        std::os::unix::fs::symlink(outside.path().join("target"), temps.join(".tmp-link.part"))
            .unwrap();
        let report = crate::validate_root(&root).unwrap();
        assert!(
            report.problems.iter().any(|p| p
                .message
                .starts_with("1 temporary file(s) an hour or more old")),
            "{:?}",
            report.problems
        );
        let c = crate::Conductor::new(root.clone());
        assert_eq!(c.tick(chrono::Utc::now()).temps_removed, 1);
        assert_eq!(
            names(&temps),
            [".tmp-fresh00000000.part", ".tmp-link.part", "notes.txt"]
        );
        assert!(outside.path().join("target").exists());
        assert_eq!(c.sweep_temps(), 0);
    }
}
