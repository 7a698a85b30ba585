//! The workbench's settings (config, keys, theme), watched for edits, and the terminal it
//! takes over.

use std::collections::HashSet;
use std::io::Stdout;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::kiln::Kiln;
use crate::tui::{Keymap, KeymapError, Theme};

/// The settings the workbench uses, loaded together so that a broken edit keeps the
/// previous ones whole.
pub(super) struct Settings {
    pub(super) config: Config,
    pub(super) keymap: Keymap,
    pub(super) theme: Theme,
    /// False for the built-in defaults of a workbench whose files have not loaded yet:
    /// then nothing is known of the profiles the files name.
    pub(super) from_files: bool,
}

impl Settings {
    /// The settings of the files, or what is wrong with them, on one line (the file, the
    /// key or line, the reason).
    pub(super) fn load(kiln: &Kiln) -> Result<Self, SettingsError> {
        let config =
            Config::load(&kiln.settings_path()).map_err(|source| SettingsError::Config {
                brief: source.brief(kiln.root()),
                source,
            })?;
        let keymap = Keymap::with_overrides(&config.tui.keys)?;
        let theme = find_theme(kiln, &config.tui.theme).map_err(SettingsError::Theme)?;
        Ok(Self {
            config,
            keymap,
            theme,
            from_files: true,
        })
    }

    /// The built-in keys, theme and settings, for a workbench started while the files
    /// do not load (the daemon keeps its last good settings meanwhile).
    pub(super) fn defaults() -> Self {
        Self {
            config: Config::default(),
            keymap: Keymap::default(),
            theme: Theme::default(),
            from_files: false,
        }
    }
}

/// Why the workbench's settings do not load, on one line (the file, the key or line, the
/// reason).
#[derive(Debug, thiserror::Error)]
pub(super) enum SettingsError {
    /// The settings file: `brief` names it from the kiln.
    #[error("{brief}")]
    Config {
        brief: String,
        source: crate::config::ConfigError,
    },
    /// `[tui.keys]`.
    #[error("invalid settings: [tui.keys]: {0}")]
    Keys(#[from] KeymapError),
    /// The theme `tui.theme` names.
    #[error("{}", one_line(&format!("{:#}", .0)))]
    Theme(#[source] anyhow::Error),
}

/// Folders a theme file may be in, most specific first.
pub(super) fn theme_dirs(kiln: &Kiln) -> Vec<PathBuf> {
    let mut dirs = vec![kiln.root().join("themes")];
    if let Some(user) =
        crate::config::user_settings_path().and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(user.join("themes"));
    }
    dirs
}

/// `<name>.toml` from a theme folder, else the built-in theme of that name.
pub(super) fn find_theme(kiln: &Kiln, name: &str) -> anyhow::Result<Theme> {
    for dir in theme_dirs(kiln) {
        let path = dir.join(format!("{name}.toml"));
        if path.is_file() {
            return Theme::load(&path).map_err(|e| anyhow::anyhow!("{e}"));
        }
    }
    Theme::builtin(name).map_err(|e| anyhow::anyhow!("tui.theme: {e}"))
}

/// The terminal in raw mode on the alternate screen; restored when dropped and on panic.
pub(super) struct Screen {
    pub(super) terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    /// Names the terminal (its window or tab) after what the workbench shows.
    pub(super) fn set_title(&mut self, title: &str) {
        let _ = crossterm::execute!(std::io::stdout(), crossterm::terminal::SetTitle(title));
    }

    pub(super) fn enter() -> anyhow::Result<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        enable_raw_mode().context("cannot put the terminal in raw mode")?;
        let mut stdout = std::io::stdout();
        if let Err(e) = crossterm::execute!(
            stdout,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste
        ) {
            restore_terminal();
            return Err(e).context("cannot set up the terminal");
        }
        let terminal = Terminal::new(CrosstermBackend::new(stdout)).inspect_err(|_| {
            restore_terminal();
        })?;
        Ok(Self { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore_terminal();
        let _ = self.terminal.show_cursor();
    }
}

/// Leaves the terminal as the shell had it. Safe to call more than once.
pub(super) fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Watches the settings files and theme folders; sends `()` when one changes.
pub(super) fn watch_settings(
    kiln: &Kiln,
    changed: mpsc::UnboundedSender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let files = crate::config::settings_files(&kiln.settings_path());
    let dirs = theme_dirs(kiln);
    let relevant = {
        let files = files.clone();
        let dirs = dirs.clone();
        move |path: &Path| {
            files.iter().any(|f| f == path)
                || path.parent().is_some_and(|p| dirs.iter().any(|d| d == p))
        }
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reads (the daemon reading the settings) are not changes.
        if let Ok(event) = event
            && !event.kind.is_access()
            && event.paths.iter().any(|p| relevant(p))
        {
            let _ = changed.send(());
        }
    })?;
    // Folders are watched, not files: editors replace a file rather than write it.
    let mut watched = HashSet::new();
    for folder in files
        .iter()
        .filter_map(|f| f.parent())
        .chain(dirs.iter().map(PathBuf::as_path))
    {
        if folder.is_dir() && watched.insert(folder.to_path_buf()) {
            watcher.watch(folder, RecursiveMode::NonRecursive)?;
        }
    }
    Ok(watcher)
}

/// A multi-line error (TOML's show the offending line) as one line, the reason first:
/// its last line, then its first.
fn one_line(error: &str) -> String {
    let lines: Vec<&str> = error
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    match lines.as_slice() {
        [] => String::new(),
        [only] => (*only).to_string(),
        [first, .., last] => format!("{last} ({first})"),
    }
}
