//! Which worktrees changed since the radar last read them. Each worktree the radar has
//! read is watched (inotify, through `notify`): the worktree itself and its git folder
//! (its `HEAD`, index and reflog move with every commit, checkout or reset). A worktree
//! nothing happened in since its last read is *clean*, and a turn that ends there needs
//! no git at all. A change in a resting session's worktree (a person editing it, a
//! commit made by hand) is read once things have been quiet there for [`QUIET`].
//!
//! Where a worktree cannot be watched (the system's limit on watches is reached, or its
//! git folder is not where a linked worktree keeps it), it is never clean: it is read
//! whenever its session comes to rest, as without a watcher.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::time::Instant;

/// How long a resting worktree must be left alone after a change before it is read: an
/// editor's save, or a build, comes as a burst of events.
pub(super) const QUIET: Duration = Duration::from_secs(1);

/// The file names under a git folder that the daemon's own reads write (the temporary
/// index a diff is staged into, and its lock): not changes.
const OWN_FILES: &str = "crucible-diff-";

/// What the watcher's thread has seen, shared with the radar's task.
#[derive(Debug, Default)]
struct Seen {
    /// Watched folders (each worktree and its git folder), to the session they belong to.
    roots: BTreeMap<PathBuf, String>,
    /// Sessions something happened to since the radar last looked, with when it last did.
    touched: HashMap<String, Instant>,
    /// Sessions a folder of which could not be watched (the system's limit on watches was
    /// reached as it appeared): what happens there may go unseen.
    unreliable: HashSet<String>,
    /// Events were lost (the kernel's queue overflowed): any worktree may have changed.
    overflowed: bool,
}

impl Seen {
    /// Takes in what the watcher reports; true if the radar should look.
    fn note(&mut self, event: notify::Result<notify::Event>, now: Instant) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                let owners: Vec<String> = e
                    .paths
                    .iter()
                    .filter_map(|p| self.owner(p).cloned())
                    .collect();
                if owners.is_empty() {
                    self.overflowed = true;
                }
                for id in owners {
                    self.touched.insert(id.clone(), now);
                    self.unreliable.insert(id);
                }
                return true;
            }
        };
        if event.need_rescan() {
            self.overflowed = true;
            return true;
        }
        // Reads (the daemon's own among them) are not changes.
        if event.kind.is_access() {
            return false;
        }
        let mut any = false;
        for path in event.paths.iter().filter(|p| !own(p)) {
            if let Some(id) = self.owner(path).cloned() {
                self.touched.insert(id, now);
                any = true;
            }
        }
        any
    }

    /// The session whose watched folder holds `path`.
    fn owner(&self, path: &Path) -> Option<&String> {
        let (root, id) = self
            .roots
            .range::<Path, _>((Bound::Unbounded, Bound::Included(path)))
            .next_back()?;
        path.starts_with(root).then_some(id)
    }
}

pub(super) struct Freshness {
    seen: Arc<Mutex<Seen>>,
    wake: Arc<tokio::sync::Notify>,
    /// `None` when no watcher could be made: nothing is ever clean.
    watcher: Option<Arc<Mutex<notify::RecommendedWatcher>>>,
    /// Sessions whose worktrees are watched, with the folders their watch covers.
    watched: HashMap<String, Vec<PathBuf>>,
    /// Sessions that could not be watched, or not wholly: never clean, not tried again.
    unwatchable: HashSet<String>,
    /// Watched sessions with nothing seen since their last read began.
    clean: HashSet<String>,
    /// Sessions with a change not yet read, and when the last change came.
    pending: HashMap<String, Instant>,
}

impl Freshness {
    pub fn start() -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let wake = Arc::new(tokio::sync::Notify::new());
        let watcher = {
            let seen = Arc::clone(&seen);
            let wake = Arc::clone(&wake);
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if lock(&seen).note(event, Instant::now()) {
                    wake.notify_one();
                }
            })
        };
        let watcher = match watcher {
            Ok(watcher) => Some(Arc::new(Mutex::new(watcher))),
            Err(e) => {
                tracing::warn!(
                    "radar: cannot watch worktrees ({e}); each is read whenever its session comes to rest"
                );
                None
            }
        };
        Self {
            seen,
            wake,
            watcher,
            watched: HashMap::new(),
            unwatchable: HashSet::new(),
            clean: HashSet::new(),
            pending: HashMap::new(),
        }
    }

    /// Resolves when something happened in a watched worktree.
    pub async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Takes what the watcher saw: those sessions are no longer clean, and each is
    /// pending from its last change.
    ///
    /// A session a folder of which could not be watched is never clean again (it is read
    /// at every rest); when events were lost, every watched session is pending.
    pub fn collect(&mut self) {
        let (touched, unreliable, overflowed) = {
            let mut seen = lock(&self.seen);
            (
                std::mem::take(&mut seen.touched),
                std::mem::take(&mut seen.unreliable),
                std::mem::take(&mut seen.overflowed),
            )
        };
        for id in unreliable {
            tracing::info!(
                session = %id,
                "radar: a folder of its worktree cannot be watched (the system's limit on watches); it is read whenever its session comes to rest"
            );
            self.unwatchable.insert(id);
        }
        if overflowed {
            tracing::info!("radar: changes were missed; every watched worktree is read again");
            let now = Instant::now();
            for id in self.watched.keys() {
                self.pending.insert(id.clone(), now);
            }
            self.clean.clear();
        }
        for (id, at) in touched {
            self.clean.remove(&id);
            self.pending.insert(id, at);
        }
    }

    /// When the next pending session will have been quiet for [`QUIET`].
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().map(|at| *at + QUIET)
    }

    /// The pending sessions quiet for [`QUIET`] by `now`, no longer pending.
    pub fn take_due(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at + QUIET <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            self.pending.remove(id);
        }
        due
    }

    /// The sessions whose worktrees were tried (watched or not).
    pub fn known(&self) -> impl Iterator<Item = &String> {
        self.watched.keys().chain(&self.unwatchable)
    }

    /// Whether nothing happened in `id`'s worktree since its last read.
    pub fn is_clean(&self, id: &str) -> bool {
        self.clean.contains(id)
    }

    /// `id`'s worktree at `worktree` is about to be read: it is watched from now on (if it
    /// can be), and clean until something happens in it.
    pub async fn reading(&mut self, id: &str, worktree: &Path) {
        if !self.watched.contains_key(id) && !self.unwatchable.contains(id) {
            match self.watch(id, worktree).await {
                Ok(watched) => {
                    self.watched.insert(id.to_string(), watched);
                }
                Err(e) => {
                    tracing::info!(
                        session = %id,
                        "radar: cannot watch {} ({e}); it is read whenever its session comes to rest",
                        worktree.display()
                    );
                    self.unwatchable.insert(id.to_string());
                }
            }
        }
        // What the watcher saw before now is covered by this read.
        lock(&self.seen).touched.remove(id);
        self.pending.remove(id);
        if self.watched.contains_key(id) && !self.unwatchable.contains(id) {
            self.clean.insert(id.to_string());
        }
    }

    /// `id` is gone: its worktree is no longer watched.
    pub async fn forget(&mut self, id: &str) {
        self.clean.remove(id);
        self.pending.remove(id);
        self.unwatchable.remove(id);
        let Some(folders) = self.watched.remove(id) else {
            return;
        };
        {
            let mut seen = lock(&self.seen);
            for folder in &folders {
                seen.roots.remove(folder);
            }
            seen.touched.remove(id);
        }
        if let Some(watcher) = &self.watcher {
            let watcher = Arc::clone(watcher);
            let _ = tokio::task::spawn_blocking(move || {
                let mut watcher = lock(&watcher);
                for folder in &folders {
                    // A folder already removed with its worktree is unwatched already.
                    let _ = watcher.unwatch(folder);
                }
            })
            .await;
        }
    }

    /// Watches `worktree` and its git folder, both whole (new folders are watched as
    /// they appear).
    async fn watch(&self, id: &str, worktree: &Path) -> Result<Vec<PathBuf>, Unwatchable> {
        let watcher = self.watcher.as_ref().ok_or(Unwatchable::NoWatcher)?;
        let git_dir = linked_git_dir(worktree)?;
        let folders = vec![worktree.to_path_buf(), git_dir];
        {
            let mut seen = lock(&self.seen);
            for folder in &folders {
                seen.roots.insert(folder.clone(), id.to_string());
            }
        }
        let watcher = Arc::clone(watcher);
        let to_watch = folders.clone();
        let watched = tokio::task::spawn_blocking(move || {
            let mut watcher = lock(&watcher);
            for (i, folder) in to_watch.iter().enumerate() {
                if let Err(e) = watcher.watch(folder, RecursiveMode::Recursive) {
                    for done in &to_watch[..=i] {
                        let _ = watcher.unwatch(done);
                    }
                    return Err(Unwatchable::Watch(e));
                }
            }
            Ok(())
        })
        .await
        .map_err(Unwatchable::Gone)
        .and_then(|r| r);
        if let Err(e) = watched {
            let mut seen = lock(&self.seen);
            for folder in &folders {
                seen.roots.remove(folder);
            }
            return Err(e);
        }
        Ok(folders)
    }
}

/// Why a worktree is not watched.
#[derive(Debug, thiserror::Error)]
enum Unwatchable {
    /// The system gave the radar no watcher at all.
    #[error("no watcher")]
    NoWatcher,
    /// The worktree's `.git` is not a file that can be read.
    #[error("{}: {source} (not a linked worktree)", .dot_git.display())]
    NotLinked {
        dot_git: PathBuf,
        source: std::io::Error,
    },
    /// The worktree's `.git` file names no git folder.
    #[error("{} names no git folder", .0.display())]
    NoGitFolder(PathBuf),
    /// The git folder `.git` names is not a folder.
    #[error("{} is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// The watcher refused a folder (the system's limit on watches, say).
    #[error("{0}")]
    Watch(#[source] notify::Error),
    /// The task that set up the watches did not finish.
    #[error("{0}")]
    Gone(#[source] tokio::task::JoinError),
}

/// The git folder of the linked worktree at `worktree`: its `.git` is a file naming it.
fn linked_git_dir(worktree: &Path) -> Result<PathBuf, Unwatchable> {
    let dot_git = worktree.join(".git");
    let text = match std::fs::read_to_string(&dot_git) {
        Ok(text) => text,
        Err(source) => return Err(Unwatchable::NotLinked { dot_git, source }),
    };
    let Some(named) = text
        .strip_prefix("gitdir:")
        .map(str::trim)
        .filter(|p| !p.is_empty())
    else {
        return Err(Unwatchable::NoGitFolder(dot_git));
    };
    let dir = worktree.join(named);
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(Unwatchable::NotAFolder(dir))
    }
}

/// Whether `path` is a file the daemon's own reads write.
fn own(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(OWN_FILES))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[path = "freshness_tests.rs"]
mod tests;
