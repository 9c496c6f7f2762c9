//! Regenerates `screenshots/*.png` from the real render path: the foreign fixture root (a temp
//! copy) is drawn by `console::views::draw` on a `TestBackend`, exported as SVG and converted with
//! `rsvg-convert`. Run `scripts/screenshots.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use pantheon::Root;
use pantheon::console::action::{Action, Pane};
use pantheon::console::app::App;
use pantheon::console::screenshot::buffer_to_svg;
use pantheon::console::theme::Theme;
use pantheon::console::views;
use pantheon::live::{LiveModel, ModelOptions};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// One screenshot: its file name and the steps that bring the console there from the previous one.
type Shot = (&'static str, Box<dyn Fn(&mut App)>);

fn key(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

fn main() {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "screenshots".into()));
    let fixture = args
        .next()
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("PANTHEON_FIXTURE_ROOT").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/foreign-root"
            ))
        });
    std::fs::create_dir_all(&out).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture, tmp.path());
    let model = LiveModel::open(Root::at(tmp.path()), ModelOptions::default());
    let mut snap = (*model.snapshot()).clone();
    snap.root = PathBuf::from("/home/ops/pantheon");
    snap.watch = "notify".into();
    let now = "2026-06-14T10:36:00Z".parse().unwrap();
    let mut app = App::new(std::sync::Arc::new(snap), false, now);
    let theme = Theme { color: true };

    let shots: Vec<Shot> = vec![
        (
            "1-workflows",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Workflows));
                a.dispatch(Action::Down);
                a.dispatch(Action::Down);
            }),
        ),
        (
            "1-workflow-detail",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Open);
            }),
        ),
        (
            "2-inboxes",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Back);
                a.dispatch(Action::GoPane(Pane::Inboxes));
            }),
        ),
        (
            "2-dispatch-detail",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Open);
            }),
        ),
        (
            "3-bus",
            Box::new(|a: &mut App| {
                a.dispatch(Action::Back);
                a.dispatch(Action::GoPane(Pane::Bus));
            }),
        ),
        (
            "4-locks",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Locks));
            }),
        ),
        (
            "5-workers",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Workers));
            }),
        ),
        (
            "6-board",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Board));
                a.dispatch(Action::Down);
                a.dispatch(Action::Down);
            }),
        ),
        (
            "dialog-resolve",
            Box::new(|a: &mut App| {
                a.dispatch(Action::BoardResolve);
            }),
        ),
        (
            "dialog-abort",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Workflows));
                a.dispatch(Action::Abort);
                for c in "superseded by v2".chars() {
                    key(a, KeyCode::Char(c));
                }
                key(a, KeyCode::Enter);
            }),
        ),
        (
            "dialog-ack",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Inboxes));
                a.dispatch(Action::Ack(None));
            }),
        ),
        (
            "help",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::Help);
            }),
        ),
        (
            "7-attention",
            Box::new(|a: &mut App| {
                key(a, KeyCode::Esc);
                a.dispatch(Action::GoPane(Pane::Attention));
            }),
        ),
        (
            "8-journal",
            Box::new(|a: &mut App| {
                a.dispatch(Action::GoPane(Pane::Journal));
            }),
        ),
    ];
    let have_rsvg = Command::new("rsvg-convert")
        .arg("--version")
        .output()
        .is_ok();
    for (name, step) in shots.iter() {
        step(&mut app);
        let mut term = Terminal::new(TestBackend::new(150, 38)).unwrap();
        term.draw(|f| views::draw(f, &app, &theme)).unwrap();
        let svg = buffer_to_svg(term.backend().buffer());
        let svg_path = out.join(format!("{name}.svg"));
        std::fs::write(&svg_path, svg).unwrap();
        if have_rsvg {
            let png = out.join(format!("{name}.png"));
            let ok = Command::new("rsvg-convert")
                .arg("-o")
                .arg(&png)
                .arg(&svg_path)
                .status()
                .unwrap();
            assert!(
                ok.success(),
                "rsvg-convert failed on {}",
                svg_path.display()
            );
            if std::env::var_os("KEEP_SVG").is_none() {
                std::fs::remove_file(&svg_path).unwrap();
            }
            println!("{}", png.display());
        } else {
            println!("{} (install librsvg2-bin for PNGs)", svg_path.display());
        }
    }
}
