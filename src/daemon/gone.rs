//! Noticing that the kiln went away: a daemon whose socket was removed or replaced, or
//! whose state directory was deleted, can never be reached again, so it shuts down and
//! stops its agents instead of running on for nobody.
//!
//! The state directory is watched with inotify (through `notify`): nothing wakes while
//! nothing changes there.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

pub(super) struct KilnWatch {
    _watcher: Option<notify::RecommendedWatcher>,
    changes: mpsc::UnboundedReceiver<()>,
    sockets: Vec<(PathBuf, (u64, u64))>,
}

impl KilnWatch {
    /// Watches `state_dir` for the disappearance of `sockets` (which must exist now).
    pub fn start(state_dir: &Path, sockets: &[PathBuf]) -> Self {
        let (tx, changes) = mpsc::unbounded_channel();
        let sockets = sockets
            .iter()
            .filter_map(|path| identity(path).map(|id| (path.clone(), id)))
            .collect();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                let _ = tx.send(());
            }
        })
        .and_then(|mut watcher| {
            watcher.watch(state_dir, RecursiveMode::NonRecursive)?;
            Ok(watcher)
        });
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!(
                    "cannot watch {}: {e}; the daemon will not notice if its kiln is deleted",
                    state_dir.display()
                );
                None
            }
        };
        Self {
            _watcher: watcher,
            changes,
            sockets,
        }
    }

    /// Resolves, with the reason, once a socket is gone or is no longer ours.
    pub async fn gone(&mut self) -> String {
        loop {
            if let Some(why) = self.check() {
                return why;
            }
            if self.changes.recv().await.is_none() {
                return std::future::pending().await;
            }
        }
    }

    fn check(&self) -> Option<String> {
        self.sockets
            .iter()
            .find_map(|(path, id)| match identity(path) {
                None => Some(format!("{} was removed", path.display())),
                Some(now) if now != *id => Some(format!("{} was replaced", path.display())),
                Some(_) => None,
            })
    }
}

/// Device and inode: what makes a socket file this daemon's own.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}
