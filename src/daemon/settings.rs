//! The daemon's settings, followed live. One watcher notices edits of the settings files
//! (the kiln's and the user's), waits for a quiet pause (editors write in steps), reads
//! them again and publishes the result on a `watch` channel the daemon's components
//! follow. A request does not wait for the watcher: before it is answered,
//! [`LiveSettings::fresh`] compares the files with what was last read (a stat each) and
//! reads them at once when they changed, so a command run right after a save sees it.
//! Settings that fail to load leave the last good ones in use, and say why: in the log,
//! and to `cron.list` and `daemon.status`. Nothing wakes while no file changes (inotify,
//! through `notify`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::config::{Config, ConfigError, FileStamp};
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
    /// Where the settings are read from; `None` for settings given whole (tests).
    source: Option<Source>,
}

/// The settings files, and how they stood when last read.
struct Source {
    /// The kiln's settings file (the loader layers the user's under it); none for the
    /// person's hub, which reads the person's settings alone.
    kiln_settings: Option<PathBuf>,
    files: Vec<PathBuf>,
    /// `None` until the files are first read here: the settings given at start were read
    /// before, at a moment not known.
    read: Mutex<Option<Vec<FileStamp>>>,
}

impl LiveSettings {
    /// Settings given whole, never read again.
    #[cfg(test)]
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(Self::with_source(config, None))
    }

    /// The kiln's settings, as loaded at start (`config`), read again from its files
    /// whenever they change.
    pub fn of_kiln(kiln: &Kiln, config: Config) -> Arc<Self> {
        let kiln_settings = kiln.settings_path();
        let source = Source {
            files: crate::config::settings_files(&kiln_settings),
            kiln_settings: Some(kiln_settings),
            read: Mutex::new(None),
        };
        Arc::new(Self::with_source(config, Some(source)))
    }

    /// The person's own settings, as loaded at start (`config`), read again whenever
    /// the file changes: what their hub serves.
    pub fn of_person(config: Config) -> Arc<Self> {
        let source = Source {
            files: crate::config::user_settings_path().into_iter().collect(),
            kiln_settings: None,
            read: Mutex::new(None),
        };
        Arc::new(Self::with_source(config, Some(source)))
    }

    fn with_source(config: Config, source: Option<Source>) -> Self {
        Self {
            config: watch::channel(Arc::new(config)).0,
            error: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
            source,
        }
    }

    /// Makes the settings in use those of the files as they are now: when a file changed
    /// since the last read (its size, times or inode, or whether it exists), reads them
    /// again before returning, publishing the result as the watcher does. Files that do
    /// not load leave the last good settings in use and say why; they are read again only
    /// once they change. Costs a stat of each file when nothing changed.
    pub fn fresh(&self) {
        self.read_files(false);
    }

    /// Reads the files again whether or not they seem to have changed (the watcher's
    /// read: two saves within one tick of the file system's clock look the same).
    fn read_again(&self) {
        self.read_files(true);
    }

    fn read_files(&self, always: bool) {
        let Some(source) = &self.source else {
            return;
        };
        // Held while reading: a request that comes meanwhile waits for this read rather
        // than answer from the settings before it.
        let mut read = lock(&source.read);
        let now = FileStamp::all(&source.files);
        if !always && read.as_ref() == Some(&now) {
            return;
        }
        self.reload(match &source.kiln_settings {
            Some(kiln_settings) => Config::load(kiln_settings),
            None => Config::load_person(),
        });
        *read = Some(now);
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
    fn reload(&self, read: Result<Config, ConfigError>) {
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
                let why = e.summary();
                let mut error = lock(&self.error);
                if error.as_deref() != Some(why.as_str()) {
                    tracing::warn!("settings: {why}; the last good settings stay in use");
                }
                *error = Some(why);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The watcher of the settings files; dropping it stops following them.
pub(crate) struct SettingsWatch {
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
        let task = tokio::spawn(follow(changes, move || live.read_again()));
        Self {
            _watcher: watcher,
            task,
        }
    }
}

/// Reads the settings again (`read`) after each burst of changes, until the watcher is
/// dropped.
async fn follow(mut changes: mpsc::UnboundedReceiver<()>, read: impl Fn()) {
    while changes.recv().await.is_some() {
        while let Ok(Some(())) = tokio::time::timeout(QUIET, changes.recv()).await {}
        read();
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
    fn a_request_sees_the_file_saved_just_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        let live = LiveSettings::of_kiln(&kiln, Config::default());
        let mut rx = live.subscribe();
        let mut text = String::new();
        for n in 0..5 {
            // Saved in place, right before the request: no watcher has run.
            text.push_str(&format!("[agents.fresh{n}]\ncommand = \"sh\"\n"));
            std::fs::write(kiln.settings_path(), &text).unwrap();
            live.fresh();
            assert!(live.current().agents.contains_key(&format!("fresh{n}")));
            assert!(rx.has_changed().unwrap(), "published to the components");
            rx.borrow_and_update();
        }

        // Half written: the last good settings stay, the error says where.
        std::fs::write(kiln.settings_path(), format!("{text}comand = \"sh\"\n")).unwrap();
        live.fresh();
        assert!(live.current().agents.contains_key("fresh4"));
        assert!(!rx.has_changed().unwrap());
        let why = live.error().unwrap();
        assert!(why.contains("comand") && why.contains("line 11"), "{why}");

        // Taken away: the defaults, and no error.
        std::fs::remove_file(kiln.settings_path()).unwrap();
        live.fresh();
        assert_eq!(live.error(), None);
        assert!(live.current().agents.is_empty());
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
        let followed = Arc::clone(&live);
        let task = tokio::spawn(follow(changes, move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut c = Config::default();
            c.notify.max_per_minute = 1;
            followed.reload(Ok(c));
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
