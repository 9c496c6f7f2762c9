//! Terminal lifecycle: raw mode + alternate screen on entry, and always restored (on quit, on error via
//! `Drop`, and on panic via a chained panic hook).

use std::io::{self, Stdout, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::cursor::{Hide, Show};
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal the console draws on; restored when dropped.
pub(crate) struct TerminalGuard {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// True between entering the alternate screen and restoring it.
static ENTERED: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back: leaves the alternate screen, shows the cursor, disables raw mode.
/// Safe to call more than once: only the first call after [`TerminalGuard::enter`] acts. (A second
/// "leave alternate screen" would move the cursor back to where the console started, and whatever
/// is printed next, such as a panic's backtrace, would overwrite the lines above it.)
pub(crate) fn restore() {
    if !ENTERED.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = io::stdout();
    let _ = execute!(
        out,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            tracing::error!("panic: {info}");
            previous(info);
        }));
    });
}

/// Refuses to start a full-screen view when standard output is not a terminal (a pipe, a file, a job
/// without a terminal): the screen would go into the pipe, or raw mode fails with a bare `os error 6`.
/// `what` names the command for the message; `instead` says what to run without a terminal.
pub(crate) fn require_terminal(what: &str, instead: &str) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if io::stdout().is_terminal() {
        Ok(())
    } else {
        anyhow::bail!("{what} needs a terminal and standard output is not one; {instead}")
    }
}

impl TerminalGuard {
    /// Enters raw mode and the alternate screen. If any step fails, what was done is undone.
    pub(crate) fn enter() -> io::Result<Self> {
        install_panic_hook();
        enable_raw_mode()?;
        ENTERED.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        if let Err(e) = execute!(
            out,
            EnterAlternateScreen,
            Hide,
            EnableBracketedPaste,
            EnableMouseCapture
        ) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(out)) {
            Ok(terminal) => Ok(Self { terminal }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// How to run this program again from a shell: `pantheon` when that name on `PATH` is this very
/// executable, else its full path (after `cargo run`, `target/debug/pantheon`), so a printed hint
/// is a command that runs.
pub(crate) fn program_name() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "pantheon".into();
    };
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("pantheon"))
            .find(|c| c.is_file())
    });
    match on_path.and_then(|p| std::fs::canonicalize(p).ok()) {
        Some(p) if p == me => "pantheon".into(),
        _ => me.display().to_string(),
    }
}
