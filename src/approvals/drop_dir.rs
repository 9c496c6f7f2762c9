//! `serve --approvals-drop DIR`: a file drop directory for local relays (docs/PROTOCOL.md §2.15, "File
//! drop"). A relay writes a decision (the page's form fields, as JSON or a form body: `token` or
//! `url`, `handoff`, `digest`, `reason`, `raise_usd`, `raise_tokens`) into a file of DIR, under a
//! name that does not start with `.` (write `.name` and rename it, so no half-written file is read).
//! DIR must lie outside the root: no token rests in the root.
//!
//! Each file is taken in this order, each step resumable:
//! 1. read: opened without following a link, to at most
//!    [`MAX_RELAYED_BYTES`](super::MAX_RELAYED_BYTES) (a link, a FIFO, anything not a regular file
//!    or too big decides nothing: its receipt says why);
//! 2. redeem, as the listener's `POST` is (channel `file`, the file's owner the approver): the
//!    decision and its journal intent are written under the workflow's lock;
//! 3. the receipt written beside it as `NAME.receipt.json` (temp and rename);
//! 4. the file removed.
//!
//! Killed anywhere before 4, the file is still there and the next scan (of this `serve` or the
//! next) takes it again: a redeem is idempotent (the token is stamped used with the decision, so a
//! repeat is refused as `already_decided`, naming who decided), so the decision is applied once,
//! journaled once (by its intent), and the receipt is rewritten saying it was decided already.
//! When the receipt cannot be written, the file stays for the next scan.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use notify::Watcher;

use super::{MAX_RELAYED_BYTES, redeem_relayed, relay_fields};
use crate::engine::{ApprovalChannel, LinkKey, Root};

/// The suffix of a receipt file (never read as a decision).
pub(crate) const RECEIPT_SUFFIX: &str = ".receipt.json";
/// Files taken in one scan; the rest wait for the next.
const PER_SCAN: usize = 256;
/// How often the directory is scanned when no event came (an event missed, a file kept back).
const RESCAN: Duration = Duration::from_secs(2);

/// The running drop directory's thread.
pub(crate) struct DropDir {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The directory, resolved.
    pub dir: PathBuf,
}

impl DropDir {
    /// Checks `dir` (a directory outside the root) and starts taking its files.
    pub(crate) fn start(root: &Root, dir: &Path, key: LinkKey) -> anyhow::Result<Self> {
        let resolved = dir.canonicalize().map_err(|e| {
            anyhow::anyhow!(
                "--approvals-drop {}: {e} (give an existing directory outside the root)",
                dir.display()
            )
        })?;
        if !resolved.is_dir() {
            anyhow::bail!("--approvals-drop {}: not a directory", dir.display());
        }
        let root_dir = root.dir.canonicalize()?;
        if resolved.starts_with(&root_dir) {
            anyhow::bail!(
                "--approvals-drop {} lies inside the root {}: a token must not rest where the gods \
                 can read it; give a directory outside the root",
                dir.display(),
                root.dir.display()
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut watcher = notify::recommended_watcher(move |_: notify::Result<notify::Event>| {
            let _ = tx.send(());
        })?;
        watcher.watch(&resolved, notify::RecursiveMode::NonRecursive)?;
        let (root, d, s) = (root.clone(), resolved.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("approvals-drop".into())
            .spawn(move || {
                let _watcher = watcher;
                while !s.load(Ordering::SeqCst) {
                    scan(&root, &d, &key);
                    let _ = rx.recv_timeout(RESCAN);
                    while rx.try_recv().is_ok() {}
                }
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
            dir: resolved,
        })
    }

    /// Stops the thread (the file under way is finished first).
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Takes every decision file of `dir` once: read, redeemed, its receipt written, then removed (the
/// module's order: a file is removed only once its receipt is written).
pub(crate) fn scan(root: &Root, dir: &Path, key: &LinkKey) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut names: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| !n.starts_with('.') && !n.ends_with(RECEIPT_SUFFIX))
        .take(PER_SCAN)
        .collect();
    names.sort();
    let n = names.len();
    for name in names {
        let answer = take(root, dir, &name, key);
        let body = serde_json::to_vec_pretty(&answer).unwrap_or_default();
        if write_beside(dir, &format!("{name}{RECEIPT_SUFFIX}"), &body).is_err() {
            // Kept for the next scan: its redeem is answered again, as already decided.
            continue;
        }
        crate::engine::crash_point("drop:after-receipt");
        // A link is removed itself, never its target.
        let _ = std::fs::remove_file(dir.join(&name));
    }
    n
}

/// One file: read (no link followed, bounded) and redeemed; its receipt or the error. The file is
/// left where it is (the caller removes it once the receipt is written).
fn take(root: &Root, dir: &Path, name: &str, key: &LinkKey) -> serde_json::Value {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let error = |m: String| serde_json::json!({"status": "error", "message": m});
    let path = dir.join(name);
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path);
    let read = opened.and_then(|f| {
        let meta = f.metadata()?;
        let mut bytes = Vec::new();
        if meta.is_file() {
            f.take(MAX_RELAYED_BYTES as u64 + 1)
                .read_to_end(&mut bytes)?;
        }
        Ok((meta, bytes))
    });
    let (meta, bytes) = match read {
        Ok(x) => x,
        Err(e) => {
            return error(format!(
                "error: {name} could not be read without following a link: {e}; nothing was decided"
            ));
        }
    };
    if !meta.is_file() {
        return error(format!(
            "error: {name} is not a regular file: nothing was decided"
        ));
    }
    let fields: HashMap<String, String> = match relay_fields(&bytes) {
        Ok(f) => f,
        Err(e) => return error(format!("error: {name}: {e}")),
    };
    let approver = Some(format!("uid {} (file owner)", meta.uid()));
    let answer = match redeem_relayed(root, key, ApprovalChannel::File, &fields, approver) {
        Ok(r) => serde_json::to_value(r).unwrap_or_else(|e| error(format!("error: {e}"))),
        Err(e) => error(e),
    };
    crate::engine::crash_point("drop:after-redeem");
    answer
}

/// Writes `dir/name` atomically: a hidden temporary file renamed over it.
fn write_beside(dir: &Path, name: &str, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(body)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))
}
