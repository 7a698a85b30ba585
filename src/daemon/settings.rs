//! The daemon's settings, followed live. One watcher notices edits of the settings files
//! (the kiln's and the user's), waits for a quiet pause (editors write in steps), reads
//! them again and publishes the result on a `watch` channel the daemon's components
//! follow. Settings that fail to load leave the last good ones in use, and say why: in
//! the log, and to `cron.list` and `daemon.status`. Nothing wakes while no file changes
//! (inotify, through `notify`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::config::{Config, ConfigError};
use crate::kiln::Kiln;

/// How long the files must stay still before they are read again.
const QUIET: Duration = Duration::from_millis(150);

/// The settings in use, and what the daemon has to say about them.
pub(crate) struct LiveSettings {
    config: watch::Sender<Arc<Config>>,
    /// Why the settings on disk are not the ones in use.
    error: Mutex<Option<String>>,
    /// Changes the daemon has not applied, each saying what to do about it.
    pending: Mutex<Vec<String>>,
}

impl LiveSettings {
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(Self {
            config: watch::channel(Arc::new(config)).0,
            error: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Follows the settings in use; it changes only when they do.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Config>> {
        self.config.subscribe()
    }

    /// The settings in use now.
    pub fn current(&self) -> Arc<Config> {
        Arc::clone(&self.config.borrow())
    }

    /// Why the settings files cannot be used (the last good ones are), if they cannot.
    pub fn error(&self) -> Option<String> {
        lock(&self.error).clone()
    }

    /// Changes of the settings the daemon has not applied, and what to do about each.
    pub fn pending(&self) -> Vec<String> {
        lock(&self.pending).clone()
    }

    pub(super) fn set_pending(&self, notes: Vec<String>) {
        let mut pending = lock(&self.pending);
        for note in notes.iter().filter(|n| !pending.contains(n)) {
            tracing::warn!("settings: {note}");
        }
        *pending = notes;
    }

    /// Takes a fresh read of the files: publishes good settings that differ from the
    /// ones in use, and keeps the ones in use, saying why, when the read failed.
    pub(super) fn reload(&self, read: Result<Config, ConfigError>) {
        match read {
            Ok(config) => {
                if lock(&self.error).take().is_some() {
                    tracing::info!("settings: the files load again");
                }
                let changed = self.config.send_if_modified(|now| {
                    let differs = **now != config;
                    if differs {
                        *now = Arc::new(config);
                    }
                    differs
                });
                if changed {
                    tracing::info!("settings: changed; applying them");
                }
            }
            Err(e) => {
                let why = e.to_string();
                tracing::warn!("settings: {why}; the last good settings stay in use");
                *lock(&self.error) = Some(why);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The watcher of the settings files; dropping it stops following them.
pub(super) struct SettingsWatch {
    _watcher: Option<notify::RecommendedWatcher>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SettingsWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SettingsWatch {
    /// Follows the kiln's settings files into `live`.
    pub fn start(kiln: &Kiln, live: Arc<LiveSettings>) -> Self {
        let files = crate::config::settings_files(&kiln.settings_path());
        let (tx, changes) = mpsc::unbounded_channel();
        let watcher = match watch_files(&files, tx) {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!(
                    "settings: cannot watch the settings files ({e}); edits apply when the daemon restarts"
                );
                None
            }
        };
        let settings_path = kiln.settings_path();
        let task = tokio::spawn(follow(changes, live, move || Config::load(&settings_path)));
        Self {
            _watcher: watcher,
            task,
        }
    }
}

/// Reads the settings again after each burst of changes, until the watcher is dropped.
async fn follow(
    mut changes: mpsc::UnboundedReceiver<()>,
    live: Arc<LiveSettings>,
    read: impl Fn() -> Result<Config, ConfigError>,
) {
    while changes.recv().await.is_some() {
        while let Ok(Some(())) = tokio::time::timeout(QUIET, changes.recv()).await {}
        live.reload(read());
    }
}

/// Watches the folders of `files` (editors replace a file rather than write it) and
/// sends `()` for every change of one of them.
fn watch_files(
    files: &[PathBuf],
    changed: mpsc::UnboundedSender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let wanted = files.to_vec();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reads (the daemon's own) are not changes.
        if let Ok(event) = event
            && !event.kind.is_access()
            && event.paths.iter().any(|p| wanted.iter().any(|f| f == p))
        {
            let _ = changed.send(());
        }
    })?;
    let mut watched = HashSet::new();
    for folder in files.iter().filter_map(|f| f.parent()) {
        if folder.is_dir() && watched.insert(folder.to_path_buf()) {
            watcher.watch(folder, RecursiveMode::NonRecursive)?;
        }
    }
    Ok(watcher)
}

/// What changed between the settings the daemon started with and `now` that only a
/// restart applies.
pub(super) fn restart_needed(started: &Config, now: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    let mut section = |name: &str, differs: bool| {
        if differs {
            notes.push(format!(
                "[{name}] changed: restart the daemon (cru daemon stop) to use it"
            ));
        }
    };
    section("store", started.store != now.store);
    section("inbox", started.inbox != now.inbox);
    let daemon = |c: &Config| {
        let mut d = c.daemon.clone();
        // Followed live.
        d.grace_period_secs = 0;
        d
    };
    section("daemon", daemon(started) != daemon(now));
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_bad_read_keeps_the_settings_in_use_and_says_why() {
        let live = LiveSettings::new(config(
            "[[cron]]\nid = \"a\"\nschedule = \"* * * * *\"\nagent = \"x\"\ninstructions = \"go\"\n",
        ));
        let mut rx = live.subscribe();

        live.reload(Err(ConfigError::Invalid {
            path: PathBuf::from("/k/.crucible.toml"),
            message: "unknown field `cronn`".into(),
        }));
        assert!(!rx.has_changed().unwrap(), "nothing new to apply");
        assert_eq!(rx.borrow().cron.len(), 1);
        let why = live.error().unwrap();
        assert!(
            why.contains(".crucible.toml") && why.contains("cronn"),
            "{why}"
        );

        // The same settings again: the error clears, nothing wakes the components.
        let same = Config::clone(&rx.borrow());
        live.reload(Ok(same));
        assert_eq!(live.error(), None);
        assert!(!rx.has_changed().unwrap());

        live.reload(Ok(Config::default()));
        assert!(rx.has_changed().unwrap());
        assert!(rx.borrow_and_update().cron.is_empty());
    }

    #[test]
    fn what_only_a_restart_applies_is_named() {
        let started = Config::default();
        let mut now = Config::default();
        now.daemon.grace_period_secs = 99;
        now.cron = Vec::new();
        assert!(restart_needed(&started, &now).is_empty());
        now.store.cache_mb = 99;
        now.inbox.default_limit = 7;
        let notes = restart_needed(&started, &now);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("[store]") && notes[0].contains("cru daemon stop"));
        assert!(notes[1].contains("[inbox]"));
    }

    #[tokio::test]
    async fn a_burst_of_changes_is_read_once_after_it() {
        let live = LiveSettings::new(Config::default());
        let mut rx = live.subscribe();
        let (tx, changes) = mpsc::unbounded_channel();
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&reads);
        let task = tokio::spawn(follow(changes, Arc::clone(&live), move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut c = Config::default();
            c.notify.max_per_minute = 1;
            Ok(c)
        }));
        for _ in 0..5 {
            tx.send(()).unwrap();
        }
        rx.changed().await.unwrap();
        assert_eq!(rx.borrow().notify.max_per_minute, 1);
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        drop(tx);
        task.await.unwrap();
    }
}
