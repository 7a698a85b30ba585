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
    sockets: Vec<Bound>,
}

/// A socket file as the daemon bound it: its path and, when it could be read just after
/// binding, its device and inode. One that could not be read was gone at once.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl Bound {
    /// The socket file at `path`, read now (just after it was bound).
    pub fn of(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            identity: identity(path),
        }
    }
}

impl KilnWatch {
    /// Watches `state_dir` for the disappearance of the `sockets` as they were bound; one
    /// already gone is noticed at the first look.
    pub fn start(state_dir: &Path, sockets: &[Bound]) -> Self {
        let (tx, changes) = mpsc::unbounded_channel();
        let sockets = sockets.to_vec();
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
        self.sockets.iter().find_map(|bound| {
            let path = bound.path.display();
            match (identity(&bound.path), bound.identity) {
                (None, _) => Some(format!("{path} was removed")),
                (Some(_), None) => Some(format!("{path} was replaced as it was bound")),
                (Some(now), Some(id)) if now != id => Some(format!("{path} was replaced")),
                (Some(_), Some(_)) => None,
            }
        })
    }
}

/// Device and inode: what makes a socket file this daemon's own.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_removed_before_the_watch_started_is_gone_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let bound = Bound::of(&path);
        std::fs::remove_file(&path).unwrap();
        let mut watch = KilnWatch::start(dir.path(), &[bound]);
        let why = tokio::time::timeout(std::time::Duration::from_secs(5), watch.gone())
            .await
            .expect("a removed socket is noticed without waiting for a change");
        assert!(why.ends_with("was removed"), "{why}");
    }

    #[tokio::test]
    async fn a_whole_state_folder_deleted_before_the_watch_started_is_gone_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let path = state.join("daemon.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let bound = Bound::of(&path);
        std::fs::remove_dir_all(&state).unwrap();
        let mut watch = KilnWatch::start(&state, &[bound]);
        let why = tokio::time::timeout(std::time::Duration::from_secs(5), watch.gone())
            .await
            .expect("a deleted state folder is noticed although it cannot be watched");
        assert!(why.contains("daemon.sock"), "{why}");
    }

    #[tokio::test]
    async fn a_socket_still_there_is_not_gone_until_it_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut watch = KilnWatch::start(dir.path(), &[Bound::of(&path)]);
        let early = tokio::time::timeout(std::time::Duration::from_millis(300), watch.gone()).await;
        assert!(
            early.is_err(),
            "a socket still there is not gone: {early:?}"
        );
        std::fs::remove_file(&path).unwrap();
        let why = tokio::time::timeout(std::time::Duration::from_secs(5), watch.gone())
            .await
            .expect("the removal is noticed");
        assert!(why.ends_with("was removed"), "{why}");
    }
}
