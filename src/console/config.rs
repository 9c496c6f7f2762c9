//! The operator's own settings: a TOML file in the XDG config directory
//! (`$XDG_CONFIG_HOME/pantheon/config.toml`, else `~/.config/pantheon/config.toml`) or `--config PATH`.
//!
//! It holds presentation and notification settings only (key remaps, theme, time format, the
//! thresholds the console highlights, `[notify]`); protocol settings live in the root. The file is
//! the operator's, never the root's, so `notify.on_attention` may name a command.
//!
//! Every error names its line: TOML syntax and type errors (from the `toml` crate), an unknown
//! action, an unknown key name, a clash between two bindings.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crossterm::event::KeyCode;
use ratatui::style::Color;
use serde::Deserialize;
use toml::Spanned;

use super::keymap::{Action, Dialog, Key, Keymap, OperatorAction, Scope};

/// The largest config file read (it is the operator's, but a mistake should not eat memory).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Notification settings (`[notify]`), consumed by the attention queue's notifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    /// Ring the terminal bell when a new attention item appears.
    pub bell: bool,
    /// Send a desktop notification (OSC 9 / OSC 777) when a new attention item appears.
    pub desktop: bool,
    /// Run this command (through `sh -c`) with each new item as one JSON line on stdin.
    pub on_attention: Option<String>,
    /// At most one notification per this many seconds (a flapping cause notifies once).
    pub rate_limit_secs: u64,
}

impl Default for NotifySettings {
    fn default() -> Self {
        Self {
            bell: false,
            desktop: false,
            on_attention: None,
            rate_limit_secs: 5,
        }
    }
}

/// How times are shown at start (`t` still toggles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeFormat {
    /// "3m ago".
    #[default]
    Relative,
    /// Local wall-clock time, `HH:MM:SS`.
    Local,
}

/// When the console calls something late (presentation only: the protocol's deadlines are the root's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// A RUNNING/BLOCKED worker silent for longer is STALE.
    pub stale_secs: u64,
    /// An unacknowledged dispatch older than this is OVERDUE.
    pub overdue_secs: u64,
    /// A dispatch held for approval longer than this needs attention.
    pub held_secs: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            stale_secs: 600,
            overdue_secs: 300,
            held_secs: 1800,
        }
    }
}

/// The colour roles a theme (or a user skin) sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    pub title: Color,
    pub header: Color,
    pub ok: Color,
    pub warn: Color,
    pub alert: Color,
    pub info: Color,
    pub accent: Color,
    pub dim: Color,
    pub key: Color,
    /// The selected row's background.
    pub selected_bg: Color,
    /// The active tab's background (its text is `tab_fg`).
    pub tab_bg: Color,
    pub tab_fg: Color,
}

/// The names of the colour roles, as a skin spells them.
pub const ROLES: [&str; 12] = [
    "title",
    "header",
    "ok",
    "warn",
    "alert",
    "info",
    "accent",
    "dim",
    "key",
    "selected_bg",
    "tab_bg",
    "tab_fg",
];

impl Palette {
    pub const DARK: Palette = Palette {
        title: Color::Cyan,
        header: Color::Yellow,
        ok: Color::Green,
        warn: Color::Yellow,
        alert: Color::Red,
        info: Color::Blue,
        accent: Color::Magenta,
        dim: Color::DarkGray,
        key: Color::Cyan,
        selected_bg: Color::Rgb(40, 60, 90),
        tab_bg: Color::Cyan,
        tab_fg: Color::Black,
    };
    pub const LIGHT: Palette = Palette {
        title: Color::Blue,
        header: Color::Rgb(150, 80, 0),
        ok: Color::Rgb(0, 120, 0),
        warn: Color::Rgb(170, 100, 0),
        alert: Color::Rgb(190, 0, 0),
        info: Color::Rgb(0, 70, 170),
        accent: Color::Rgb(140, 0, 140),
        dim: Color::Rgb(110, 110, 110),
        key: Color::Blue,
        selected_bg: Color::Rgb(200, 215, 240),
        tab_bg: Color::Blue,
        tab_fg: Color::White,
    };
    pub const HIGH_CONTRAST: Palette = Palette {
        title: Color::White,
        header: Color::LightYellow,
        ok: Color::LightGreen,
        warn: Color::LightYellow,
        alert: Color::LightRed,
        info: Color::LightCyan,
        accent: Color::LightMagenta,
        dim: Color::Gray,
        key: Color::LightYellow,
        selected_bg: Color::Blue,
        tab_bg: Color::White,
        tab_fg: Color::Black,
    };

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Option<Palette> {
        match name {
            "dark" => Some(Self::DARK),
            "light" => Some(Self::LIGHT),
            "high-contrast" => Some(Self::HIGH_CONTRAST),
            _ => None,
        }
    }

    fn role_mut(&mut self, role: &str) -> Option<&mut Color> {
        Some(match role {
            "title" => &mut self.title,
            "header" => &mut self.header,
            "ok" => &mut self.ok,
            "warn" => &mut self.warn,
            "alert" => &mut self.alert,
            "info" => &mut self.info,
            "accent" => &mut self.accent,
            "dim" => &mut self.dim,
            "key" => &mut self.key,
            "selected_bg" => &mut self.selected_bg,
            "tab_bg" => &mut self.tab_bg,
            "tab_fg" => &mut self.tab_fg,
            _ => return None,
        })
    }
}

/// The whole configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// The keymap with the remaps applied.
    pub keymap: Keymap,
    /// The theme's name (a built-in or a `[skins.NAME]`).
    pub theme_name: String,
    pub palette: Palette,
    pub time: TimeFormat,
    pub thresholds: Thresholds,
    pub notify: NotifySettings,
    /// The foreign sources the console opens beside the root (`[sources] list`, each
    /// `KIND:LOCATION`; the `--source` flags come first).
    pub sources: Vec<String>,
    /// Where it was read from (None: the defaults, no file).
    pub source: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            keymap: Keymap::default(),
            theme_name: "dark".into(),
            palette: Palette::DARK,
            time: TimeFormat::Relative,
            thresholds: Thresholds::default(),
            notify: NotifySettings::default(),
            sources: Vec::new(),
            source: None,
        }
    }
}

/// A configuration that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    /// 1-based line (None: the file as a whole).
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{} line {l}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

// ---- the file's shape ----

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    keys: BTreeMap<String, KeySpec>,
    #[serde(default)]
    theme: RawTheme,
    #[serde(default)]
    time: RawTime,
    #[serde(default)]
    thresholds: RawThresholds,
    #[serde(default)]
    notify: RawNotify,
    #[serde(default)]
    sources: RawSources,
    #[serde(default)]
    skins: BTreeMap<String, BTreeMap<String, String>>,
}

/// `[sources]`: the foreign sources to open, `list = ["claude-teams:~/.claude", …]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSources {
    #[serde(default)]
    list: Vec<toml::Spanned<String>>,
}

/// A value of `[keys]` (the list view: everywhere, the panes, the detail view), or one of the
/// dialogs' tables: `[keys.in_confirm]`, `[keys.in_ack_menu]`, `[keys.in_prompt]`, `[keys.in_help]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum KeySpec {
    One(String),
    Many(Vec<String>),
    /// A dialog's own table (`[keys.in_confirm]`).
    Table(BTreeMap<String, KeySpecLeaf>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum KeySpecLeaf {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheme {
    name: Spanned<String>,
}

impl Default for RawTheme {
    fn default() -> Self {
        Self {
            name: Spanned::new(0..0, "dark".into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTime {
    format: Spanned<String>,
}

impl Default for RawTime {
    fn default() -> Self {
        Self {
            format: Spanned::new(0..0, "relative".into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawThresholds {
    stale_secs: u64,
    overdue_secs: u64,
    held_secs: u64,
}

impl Default for RawThresholds {
    fn default() -> Self {
        let t = Thresholds::default();
        Self {
            stale_secs: t.stale_secs,
            overdue_secs: t.overdue_secs,
            held_secs: t.held_secs,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawNotify {
    bell: bool,
    desktop: bool,
    on_attention: String,
    rate_limit_secs: u64,
}

impl Default for RawNotify {
    fn default() -> Self {
        let n = NotifySettings::default();
        Self {
            bell: n.bell,
            desktop: n.desktop,
            on_attention: String::new(),
            rate_limit_secs: n.rate_limit_secs,
        }
    }
}

// ---- names ----

/// The name of an action in `[keys]`: its snake_case name (`force_unlock`, `toggle_raw`),
/// `pane_N` for the pane keys and `sort_COLUMN` for sorting by a column.
pub fn action_name(a: &Action) -> String {
    match a {
        Action::GoPane(p) => format!("pane_{}", p.number()),
        Action::Operator(OperatorAction::Ack(Some(c))) => format!("ack_{}", c.as_str()),
        Action::Operator(op) => serde_name(op),
        // One name per column (`sort_age`), so each column's Shift-letter can be remapped.
        Action::Sort(Some(col)) => format!(
            "sort_{}",
            col.header()
                .to_ascii_lowercase()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ),
        other => serde_name(other),
    }
}

/// The `action` tag `a` serialises with (its snake_case variant name).
fn serde_name<T: serde::Serialize + std::fmt::Debug>(a: &T) -> String {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| v.get("action").and_then(|s| s.as_str()).map(str::to_owned))
        .unwrap_or_else(|| format!("{a:?}").to_ascii_lowercase())
}

/// The dialog tables of `[keys]`.
const DIALOG_TABLES: [(&str, Dialog); 4] = [
    ("in_confirm", Dialog::Confirm),
    ("in_ack_menu", Dialog::AckMenu),
    ("in_prompt", Dialog::Prompt),
    ("in_help", Dialog::Help),
];

fn in_table(scope: Scope, table: Option<Dialog>) -> bool {
    match (scope, table) {
        (Scope::Dialog(d), Some(t)) => d == t,
        (Scope::Dialog(_), None) | (_, Some(_)) => false,
        _ => true,
    }
}

/// Parses a key as the help writes it: `q`, `C-c`, `Enter`, `Esc`, `Tab`, `S-Tab`, `Space`, `Up`
/// (or `↑`), `PgDn`, `Home`, `F5`, `Backspace`, `Delete`.
pub fn parse_key(s: &str) -> Option<Key> {
    let (ctrl, base) = match s.strip_prefix("C-") {
        Some(rest) if !rest.is_empty() => (true, rest),
        _ => (false, s),
    };
    let code = match base {
        "Enter" => KeyCode::Enter,
        "Esc" => KeyCode::Esc,
        "Tab" => KeyCode::Tab,
        "S-Tab" | "BackTab" => KeyCode::BackTab,
        "Space" => KeyCode::Char(' '),
        "Up" | "↑" => KeyCode::Up,
        "Down" | "↓" => KeyCode::Down,
        "Left" | "←" => KeyCode::Left,
        "Right" | "→" => KeyCode::Right,
        "PgUp" | "PageUp" => KeyCode::PageUp,
        "PgDn" | "PageDown" => KeyCode::PageDown,
        "Home" => KeyCode::Home,
        "End" => KeyCode::End,
        "Backspace" => KeyCode::Backspace,
        "Delete" | "Del" => KeyCode::Delete,
        "Insert" => KeyCode::Insert,
        f if f.len() >= 2 && f.starts_with('F') && f[1..].chars().all(|c| c.is_ascii_digit()) => {
            KeyCode::F(f[1..].parse().ok().filter(|n| (1..=24).contains(n))?)
        }
        other => {
            let mut chars = other.chars();
            let c = chars.next()?;
            if chars.next().is_some() || c.is_control() {
                return None;
            }
            KeyCode::Char(c)
        }
    };
    Some(Key { code, ctrl })
}

/// A colour as a skin writes it: a name (`red`, `darkgray`, `lightcyan`…), `#rrggbb`, or an index `0`-`255`.
pub fn parse_color(s: &str) -> Option<Color> {
    if let Some(hex) = s.strip_prefix('#') {
        if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let v = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
    }
    if let Ok(i) = s.parse::<u8>() {
        return Some(Color::Indexed(i));
    }
    s.parse::<Color>().ok()
}

// ---- loading ----

/// The default config file: `$XDG_CONFIG_HOME/pantheon/config.toml`, else `~/.config/pantheon/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| crate::engine::home_dir().map(|h| h.join(".config")))?;
    Some(base.join("pantheon").join("config.toml"))
}

/// Loads the configuration: `explicit` must exist; the default path is optional (absent: defaults).
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => match default_path() {
            Some(p) => (p, false),
            None => return Ok(Config::default()),
        },
    };
    let shown = path.display().to_string();
    let err = |message: String| ConfigError {
        path: shown.clone(),
        line: None,
        message,
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(Config::default());
        }
        Err(e) => return Err(err(format!("cannot read it: {e}"))),
    };
    if !meta.is_file() {
        return Err(err("is not a regular file".into()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(err(format!(
            "is {} bytes; a config is at most {MAX_CONFIG_BYTES}",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read it: {e}")))?;
    let mut cfg = parse(&text, &shown)?;
    cfg.source = Some(path);
    Ok(cfg)
}

fn line_of(text: &str, span: &Range<usize>) -> usize {
    let end = span.start.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Parses and validates a config's text (`path` only names it in errors).
pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
    let at = |span: Option<Range<usize>>, message: String| ConfigError {
        path: path.to_owned(),
        line: span.map(|s| line_of(text, &s)),
        message,
    };
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().to_owned();
        at(e.span(), msg)
    })?;
    let keymap = keymap_of(raw.keys, text, path)?;
    let (palette, theme_name) = palette_of(&raw.theme, &raw.skins, text, path)?;
    let time = match raw.time.format.get_ref().as_str() {
        "relative" => TimeFormat::Relative,
        "local" => TimeFormat::Local,
        other => {
            return Err(at(
                Some(raw.time.format.span()),
                format!("unknown time format {other:?}: use relative or local"),
            ));
        }
    };
    let mut sources = Vec::new();
    for spec in &raw.sources.list {
        crate::sources::split_spec(spec.get_ref()).map_err(|e| {
            at(
                Some(spec.span()),
                e.reason.replacen("--source ", "[sources] ", 1),
            )
        })?;
        sources.push(spec.get_ref().clone());
    }
    let (t, n) = (raw.thresholds, raw.notify);
    Ok(Config {
        sources,
        keymap,
        theme_name,
        palette,
        time,
        thresholds: Thresholds {
            stale_secs: t.stale_secs,
            overdue_secs: t.overdue_secs,
            held_secs: t.held_secs,
        },
        notify: NotifySettings {
            bell: n.bell,
            desktop: n.desktop,
            on_attention: Some(n.on_attention.trim().to_owned()).filter(|c| !c.is_empty()),
            rate_limit_secs: n.rate_limit_secs,
        },
        ..Config::default()
    })
}

/// The key table: the defaults with the file's `[keys]` (and dialog tables) applied.
fn keymap_of(
    keys: BTreeMap<String, KeySpec>,
    text: &str,
    path: &str,
) -> Result<Keymap, ConfigError> {
    let mut remaps: Vec<Remap> = Vec::new();
    for (name, spec) in keys {
        let leaf = |spec: KeySpecLeaf| match spec {
            KeySpecLeaf::One(s) => vec![s],
            KeySpecLeaf::Many(v) => v,
        };
        match spec {
            KeySpec::One(s) => {
                let line = locate(text, &["keys"], &name);
                remaps.push(Remap::new(name, None, vec![s], line));
            }
            KeySpec::Many(v) => {
                let line = locate(text, &["keys"], &name);
                remaps.push(Remap::new(name, None, v, line));
            }
            KeySpec::Table(t) => {
                let Some((_, dialog)) = DIALOG_TABLES.iter().find(|(n, _)| *n == name) else {
                    return Err(ConfigError {
                        path: path.to_owned(),
                        line: locate_table(text, &["keys", &name]),
                        message: format!(
                            "[keys.{name}] is not a dialog: the dialog tables are {}",
                            DIALOG_TABLES.map(|(n, _)| n).join(", ")
                        ),
                    });
                };
                for (action, keys) in t {
                    let line = locate(text, &["keys", &name], &action);
                    remaps.push(Remap::new(action, Some(*dialog), leaf(keys), line));
                }
            }
        }
    }
    apply_remaps(Keymap::default(), &remaps).map_err(|(line, message)| ConfigError {
        path: path.to_owned(),
        line,
        message,
    })
}

/// The palette of the file's theme (a built-in one, or a `[skins.NAME]` over its base) and its name.
fn palette_of(
    theme: &RawTheme,
    skins: &BTreeMap<String, BTreeMap<String, String>>,
    text: &str,
    path: &str,
) -> Result<(Palette, String), ConfigError> {
    let at = |span: Option<Range<usize>>, message: String| ConfigError {
        path: path.to_owned(),
        line: span.map(|s| line_of(text, &s)),
        message,
    };
    let name = theme.name.get_ref().clone();
    let palette = match Palette::builtin(&name) {
        Some(p) => p,
        None => {
            let Some(skin) = skins.get(&name) else {
                let skins: Vec<&str> = skins.keys().map(String::as_str).collect();
                return Err(at(
                    Some(theme.name.span()),
                    format!(
                        "unknown theme {name:?}: use dark, light, high-contrast{}",
                        if skins.is_empty() {
                            " or a [skins.NAME] table".to_owned()
                        } else {
                            format!(" or a skin ({})", skins.join(", "))
                        }
                    ),
                ));
            };
            let skin_err = |key: &str, message: String| ConfigError {
                path: path.to_owned(),
                line: locate(text, &["skins", &name], key),
                message,
            };
            let base = skin.get("base").map(String::as_str).unwrap_or("dark");
            let mut p = Palette::builtin(base).ok_or_else(|| {
                skin_err(
                    "base",
                    format!("skin {name:?}: base {base:?} is not dark, light or high-contrast"),
                )
            })?;
            for (role, color) in skin.iter().filter(|(k, _)| *k != "base") {
                let slot = p.role_mut(role).ok_or_else(|| {
                    skin_err(
                        role,
                        format!(
                            "skin {name:?}: unknown colour role {role:?} (roles: base, {})",
                            ROLES.join(", ")
                        ),
                    )
                })?;
                *slot = parse_color(color).ok_or_else(|| {
                    skin_err(
                        role,
                        format!(
                            "skin {name:?}: {color:?} is not a colour (a name such as red, #rrggbb, or 0-255)"
                        ),
                    )
                })?;
            }
            p
        }
    };
    Ok((palette, name))
}

/// One `action = keys` line of the file.
#[derive(Debug, Clone)]
struct Remap {
    action: String,
    dialog: Option<Dialog>,
    keys: Vec<String>,
    line: Option<usize>,
}

impl Remap {
    fn new(action: String, dialog: Option<Dialog>, keys: Vec<String>, line: Option<usize>) -> Self {
        Self {
            action,
            dialog,
            keys,
            line,
        }
    }
}

/// Two bindings that would answer the same key where both apply: the same scope, or a pane and the
/// global keys (the pane's would silently win).
fn collide(a: Scope, b: Scope) -> bool {
    a == b
        || matches!(
            (a, b),
            (Scope::Global, Scope::Pane(_)) | (Scope::Pane(_), Scope::Global)
        )
}

/// The keymap with `remaps` applied: each replaces the keys of its action wherever the action is
/// bound (in the list view for `[keys]`, in that dialog for `[keys.DIALOG]`). A remap may not create a
/// collision the default keymap does not have. Errors carry the line.
fn apply_remaps(mut km: Keymap, remaps: &[Remap]) -> Result<Keymap, (Option<usize>, String)> {
    let pairs = |km: &Keymap| -> HashSet<(usize, usize)> {
        let mut out = HashSet::new();
        for (i, a) in km.bindings.iter().enumerate() {
            for (j, b) in km.bindings.iter().enumerate().skip(i + 1) {
                if a.action != b.action
                    && collide(a.scope, b.scope)
                    && a.keys.iter().any(|k| b.keys.contains(k))
                {
                    out.insert((i, j));
                }
            }
        }
        out
    };
    let before = pairs(&km);
    let mut line_of_binding: Vec<Option<usize>> = vec![None; km.bindings.len()];
    let mut seen: Vec<(String, Option<Dialog>)> = Vec::new();
    for r in remaps {
        if seen.iter().any(|(a, d)| *a == r.action && *d == r.dialog) {
            return Err((r.line, format!("{:?} is remapped twice", r.action)));
        }
        seen.push((r.action.clone(), r.dialog));
        let mut keys = Vec::new();
        for k in &r.keys {
            let key = parse_key(k).ok_or_else(|| {
                (
                    r.line,
                    format!(
                        "{k:?} is not a key (a character, C-x, Enter, Esc, Tab, S-Tab, Space, Up, Down, Left, Right, PgUp, PgDn, Home, End, F1-F24)"
                    ),
                )
            })?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Err((r.line, format!("{:?} is given no key", r.action)));
        }
        let mut found = false;
        for (i, b) in km.bindings.iter_mut().enumerate() {
            if in_table(b.scope, r.dialog) && action_name(&b.action) == r.action {
                b.keys = keys.clone();
                line_of_binding[i] = r.line;
                found = true;
            }
        }
        if !found {
            let mut known: Vec<String> = Vec::new();
            for b in km.bindings.iter().filter(|b| in_table(b.scope, r.dialog)) {
                let n = action_name(&b.action);
                if !known.contains(&n) {
                    known.push(n);
                }
            }
            let table = match r.dialog {
                Some(d) => format!(
                    "[keys.{}]",
                    DIALOG_TABLES
                        .iter()
                        .find(|(_, x)| *x == d)
                        .map_or("?", |(n, _)| n)
                ),
                None => "[keys]".to_owned(),
            };
            return Err((
                r.line,
                format!(
                    "unknown action {:?} in {table}; the actions are: {}",
                    r.action,
                    known.join(", ")
                ),
            ));
        }
    }
    let after = pairs(&km);
    let mut clashes: Vec<&(usize, usize)> = after.difference(&before).collect();
    clashes.sort();
    if let Some(&&(i, j)) = clashes.first() {
        let (a, b) = (&km.bindings[i], &km.bindings[j]);
        let key = a
            .keys
            .iter()
            .find(|k| b.keys.contains(k))
            .map(Key::label)
            .unwrap_or_default();
        let line = line_of_binding[j].or(line_of_binding[i]);
        let place = |s: Scope| match s {
            Scope::Global => "everywhere".to_owned(),
            Scope::Pane(p) => format!("in pane {} {}", p.number(), p.title()),
            Scope::Detail => "in a detail view".to_owned(),
            Scope::Replay => "in replay".to_owned(),
            Scope::Dialog(d) => format!("in the {}", d.title().to_ascii_lowercase()),
        };
        return Err((
            line,
            format!(
                "key {key:?} clashes: {} ({}) and {} ({})",
                action_name(&a.action),
                place(a.scope),
                action_name(&b.action),
                place(b.scope)
            ),
        ));
    }
    Ok(km)
}

impl Thresholds {
    /// The overdue threshold as the live model and the app take it (`None`: the default).
    pub fn overdue_after(&self) -> Option<chrono::Duration> {
        let d = crate::live::snapshot::threshold_secs(self.overdue_secs);
        (d != crate::live::snapshot::UNACKED_OVERDUE_AFTER).then_some(d)
    }

    /// The held-too-long threshold (`None`: the default).
    pub fn held_after(&self) -> Option<chrono::Duration> {
        let d = crate::live::snapshot::threshold_secs(self.held_secs);
        (d != crate::live::snapshot::HELD_OVERDUE_AFTER).then_some(d)
    }
}

/// Puts the stale threshold in force for this console as its own setting of `root` (never written
/// to the root; `PANTHEON_STALE_AFTER_SECS` in the environment, read into the root's settings,
/// wins). The overdue and held-too-long limits are this console's alone: the live model publishes
/// them with its snapshots ([`Thresholds::overdue_after`]) and the app applies them to each
/// snapshot it shows ([`crate::console::app::App::configure`]); nothing is process-wide.
pub fn apply_thresholds(root: crate::engine::Root, t: &Thresholds) -> crate::engine::Root {
    let stale = crate::engine::STALE_AFTER_ENV;
    if t.stale_secs != Thresholds::default().stale_secs
        && t.stale_secs > 0
        && std::env::var_os(stale).is_none()
    {
        let settings = crate::engine::Settings {
            stale_after: std::time::Duration::from_secs(t.stale_secs),
            ..root.settings.clone()
        };
        return root.with_settings(settings);
    }
    root
}

/// The header of a table line (`[keys.in_confirm]` -> `["keys", "confirm"]`), None for other lines.
fn table_header(line: &str) -> Option<Vec<String>> {
    let l = line.split('#').next().unwrap_or("").trim();
    let inner = l.strip_prefix('[')?.strip_suffix(']')?;
    if inner.starts_with('[') {
        return None;
    }
    Some(
        inner
            .split('.')
            .map(|p| p.trim().trim_matches('"').to_owned())
            .collect(),
    )
}

/// The 1-based line of the table `table`'s header.
fn locate_table(text: &str, table: &[&str]) -> Option<usize> {
    text.lines()
        .position(|l| table_header(l).is_some_and(|h| h == table))
        .map(|i| i + 1)
}

/// The 1-based line where `key` is set inside the table `table` (the last such line: TOML refuses
/// a repeated key before we see it). Written as `key = …`, `"key" = …` or `'key' = …`.
fn locate(text: &str, table: &[&str], key: &str) -> Option<usize> {
    let mut current: Vec<String> = Vec::new();
    let mut found = None;
    for (i, l) in text.lines().enumerate() {
        if let Some(h) = table_header(l) {
            current = h;
            continue;
        }
        if current != table {
            continue;
        }
        let Some((lhs, _)) = l.split_once('=') else {
            continue;
        };
        if lhs.trim().trim_matches('"').trim_matches('\'') == key {
            found = Some(i + 1);
        }
    }
    found
}

/// The full default configuration, commented: what `pantheon config --default` prints. Parsed
/// back, it gives the defaults.
pub fn default_toml() -> String {
    let km = Keymap::default();
    let mut out = String::new();
    out.push_str(
        "# Pantheon console configuration.\n\
         # Read from $XDG_CONFIG_HOME/pantheon/config.toml (else ~/.config/pantheon/config.toml),\n\
         # or from `pantheon console --config PATH`. Presentation and notifications only: the\n\
         # protocol's settings live in the root. Every line below shows the default.\n\n\
         # Keys: action = \"key\" or [\"key\", \"key\"]. A remap replaces the action's keys wherever\n\
         # it is bound; a key taken by another action in the same place is refused (with its line).\n\
         # Keys are written as in the help: a character, C-x, Enter, Esc, Tab, S-Tab, Space, Up,\n\
         # Down, Left, Right, PgUp, PgDn, Home, End, F1-F24.\n\
         [keys]\n",
    );
    let quote = |keys: &[Key]| -> String {
        let v: Vec<String> = keys.iter().map(|k| toml_str(&key_name(k))).collect();
        if v.len() == 1 {
            v[0].clone()
        } else {
            format!("[{}]", v.join(", "))
        }
    };
    let emit = |out: &mut String, table: Option<Dialog>| {
        let mut done: Vec<String> = Vec::new();
        for b in km.bindings.iter().filter(|b| in_table(b.scope, table)) {
            let name = action_name(&b.action);
            if done.contains(&name) {
                continue;
            }
            done.push(name.clone());
            let line = format!("{name} = {}", quote(&b.keys));
            out.push_str(&format!("{line:<40} # {}\n", b.describe()));
        }
    };
    emit(&mut out, None);
    for (n, d) in DIALOG_TABLES {
        out.push_str(&format!(
            "\n[keys.{n}]   # in the {}\n",
            d.title().to_ascii_lowercase()
        ));
        emit(&mut out, Some(d));
    }
    let t = Thresholds::default();
    let n = NotifySettings::default();
    out.push_str(&format!(
        "\n# Theme: dark, light, high-contrast, or the name of a [skins.NAME] table below.\n\
         [theme]\n\
         name = \"dark\"\n\n\
         # A skin starts from a built-in theme (base) and sets colour roles: {roles}.\n\
         # Colours: a name (red, lightcyan, darkgray...), #rrggbb, or 0-255.\n\
         # [skins.mine]\n\
         # base = \"dark\"\n\
         # alert = \"#ff5f5f\"\n\
         # selected_bg = \"236\"\n\n\
         # How times are shown at start (t toggles): relative (\"3m ago\") or local (HH:MM:SS).\n\
         [time]\n\
         format = \"relative\"\n\n\
         # When the console calls something late, in seconds.\n\
         [thresholds]\n\
         stale_secs = {}     # a RUNNING/BLOCKED worker silent this long is STALE\n\
         overdue_secs = {}   # an unacknowledged dispatch this old is OVERDUE\n\
         held_secs = {}     # a dispatch held for approval this long is flagged OVERDUE\n\n\
         # Notifications when something new needs a human.\n\
         [notify]\n\
         bell = {}           # ring the terminal bell\n\
         desktop = {}        # desktop notification (OSC 9 / OSC 777)\n\
         on_attention = \"\"   # a command run through sh -c, one JSON item per line on stdin\n\
         rate_limit_secs = {}  # at most one notification per this many seconds\n\n\
         # Foreign agents beside the root (docs/SOURCES.md), each KIND:LOCATION as --source takes it:\n\
         # claude-teams:~/.claude, agent-mail:ARCHIVE[,DB]. The --source flags are opened first.\n\
         [sources]\n\
         list = []\n",
        t.stale_secs,
        t.overdue_secs,
        t.held_secs,
        n.bell,
        n.desktop,
        n.rate_limit_secs,
        roles = ROLES.join(", "),
    ));
    out
}

/// A key as the config writes it (ASCII names: `Up`, not `↑`).
pub fn key_name(k: &Key) -> String {
    let base = match k.code {
        KeyCode::Up => "Up".to_owned(),
        KeyCode::Down => "Down".to_owned(),
        KeyCode::Left => "Left".to_owned(),
        KeyCode::Right => "Right".to_owned(),
        KeyCode::Backspace => "Backspace".to_owned(),
        KeyCode::Delete => "Delete".to_owned(),
        KeyCode::Insert => "Insert".to_owned(),
        KeyCode::F(n) => format!("F{n}"),
        _ => Key { ctrl: false, ..*k }.label(),
    };
    if k.ctrl { format!("C-{base}") } else { base }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::keymap::Pane;

    fn same_keymap(a: &Keymap, b: &Keymap) -> bool {
        a.bindings.len() == b.bindings.len()
            && a.bindings
                .iter()
                .zip(&b.bindings)
                .all(|(x, y)| x.keys == y.keys && x.action == y.action && x.scope == y.scope)
    }

    #[test]
    fn the_printed_default_parses_back_to_the_defaults() {
        let text = default_toml();
        let cfg = parse(&text, "default").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(same_keymap(&cfg.keymap, &Keymap::default()));
        assert_eq!(cfg.palette, Palette::DARK);
        assert_eq!(cfg.time, TimeFormat::Relative);
        assert_eq!(cfg.thresholds, Thresholds::default());
        assert_eq!(cfg.notify, NotifySettings::default());
        // Every action of the keymap is in it.
        for b in &Keymap::default().bindings {
            assert!(
                text.contains(&format!("\n{} = ", action_name(&b.action))),
                "{}",
                action_name(&b.action)
            );
        }
    }

    #[test]
    fn remaps_replace_keys_and_show_in_the_help() {
        let cfg = parse(
            "[keys]\nabort = \"X\"\nquit = [\"Q\", \"C-c\"]\n[keys.in_confirm]\ncancel = [\"Esc\"]\n",
            "c",
        )
        .unwrap();
        let km = &cfg.keymap;
        assert_eq!(
            km.lookup(Pane::Workflows, Key::ch('X')),
            Some(&Action::Operator(OperatorAction::Abort))
        );
        assert_eq!(km.lookup(Pane::Workflows, Key::ch('x')), None);
        assert_eq!(km.lookup(Pane::Bus, Key::ch('Q')), Some(&Action::Quit));
        assert_eq!(km.lookup(Pane::Bus, Key::ch('q')), None);
        assert_eq!(km.lookup_dialog(Dialog::Confirm, Key::ch('n')), None);
        let rows = km.help_rows(Pane::Workflows);
        assert!(rows.iter().any(|r| r.keys == "X" && r.text == "abort"));
        assert!(
            rows.iter()
                .any(|r| r.keys == "Q C-c" && r.text.starts_with("quit"))
        );
        // In a detail the remapped quit key is the one that goes back.
        assert!(rows.iter().any(|r| r.section.starts_with("In a detail")
            && r.keys == "Q"
            && r.text.starts_with("back")));
        let hints = km.hints(Pane::Workflows, false);
        assert!(hints.iter().any(|(k, d)| k == "X" && *d == "abort"));
        assert!(hints.iter().any(|(k, d)| k == "Q" && *d == "quit"));
    }

    #[test]
    fn errors_name_their_line() {
        let cases: [(&str, usize, &str); 9] = [
            (
                "[keys]\nquit = \"q\"\nfrobnicate = \"z\"\n",
                3,
                "unknown action \"frobnicate\"",
            ),
            (
                "# c\n[keys]\n\nabort = \"q\"\n",
                4,
                "clashes: quit (everywhere) and abort",
            ),
            ("[keys]\nabort = \"Ctrl+x\"\n", 2, "is not a key"),
            (
                "[theme]\nname = \"solarized\"\n",
                2,
                "unknown theme \"solarized\"",
            ),
            ("[time]\nformat = \"utc\"\n", 2, "unknown time format"),
            ("\n\n[notify]\nbell = \"yes\"\n", 4, "invalid type"),
            ("[thresholds]\nstale = 3\n", 2, "unknown field"),
            ("[keys\n", 1, ""),
            (
                "[theme]\nname = \"mine\"\n[skins.mine]\nbase = \"light\"\nalert = \"reddish\"\n",
                5,
                "not a colour",
            ),
        ];
        for (text, line, want) in cases {
            let e = parse(text, "cfg.toml").unwrap_err();
            assert_eq!(e.line, Some(line), "{text:?}: {e}");
            assert!(e.message.contains(want), "{text:?}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("cfg.toml line {line}: "))
            );
        }
    }

    #[test]
    fn a_pane_key_may_shadow_a_global_one_only_as_the_default_does() {
        // The board's `n` (next round) over the global `n` (next match) is the default: fine.
        assert!(parse("[keys]\nnext_match = \"n\"\n", "c").is_ok());
        // Moving `ack` onto `j` would hide `down` in pane 2: refused.
        let e = parse("[keys]\nack = \"j\"\n", "c").unwrap_err();
        assert!(
            e.message
                .contains("down (everywhere) and ack (in pane 2 Inboxes)"),
            "{e}"
        );
        let e = parse("[keys]\nabort = \"x\"\nabort = \"y\"\n", "c").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
    }

    #[test]
    fn skins_themes_notify_and_thresholds_are_read() {
        let cfg = parse(
            "[theme]\nname = \"mine\"\n[skins.mine]\nbase = \"light\"\nalert = \"#ff0000\"\nselected_bg = \"236\"\n\
             [time]\nformat = \"local\"\n[thresholds]\nstale_secs = 30\n\
             [notify]\nbell = true\non_attention = \"notify-send pantheon\"\nrate_limit_secs = 5\n",
            "c",
        )
        .unwrap();
        assert_eq!(cfg.palette.alert, Color::Rgb(255, 0, 0));
        assert_eq!(cfg.palette.selected_bg, Color::Indexed(236));
        assert_eq!(cfg.palette.ok, Palette::LIGHT.ok);
        assert_eq!(cfg.time, TimeFormat::Local);
        assert_eq!(cfg.thresholds.stale_secs, 30);
        assert_eq!(cfg.thresholds.overdue_secs, 300);
        assert_eq!(
            cfg.notify,
            NotifySettings {
                bell: true,
                desktop: false,
                on_attention: Some("notify-send pantheon".into()),
                rate_limit_secs: 5
            }
        );
        assert_eq!(
            parse("[theme]\nname = \"high-contrast\"\n", "c")
                .unwrap()
                .palette,
            Palette::HIGH_CONTRAST
        );
    }

    #[test]
    fn keys_parse_as_the_help_writes_them() {
        for k in Keymap::default()
            .bindings
            .iter()
            .flat_map(|b| b.keys.clone())
        {
            assert_eq!(parse_key(&key_name(&k)), Some(k), "{k:?}");
            assert_eq!(parse_key(&k.label()), Some(k), "{k:?}");
        }
        assert_eq!(parse_key("F5"), Some(Key::plain(KeyCode::F(5))));
        for bad in ["", "ab", "C-", "F99", "\u{7}"] {
            assert_eq!(parse_key(bad), None, "{bad:?}");
        }
    }
}
