//! The kiln: the directory crucible works in, and where its state lives.

use std::path::{Path, PathBuf};

/// The longest socket path a Unix socket address can hold on Linux, less the terminator.
const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kiln {
    root: PathBuf,
}

impl Kiln {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Finds the kiln for `start`: the nearest ancestor that already has crucible state or
    /// settings (`.crucible/` or `.crucible.toml`), else the nearest git repository root,
    /// else `start` itself. The first rule keeps an agent working in a worktree under
    /// `<kiln>/.crucible/worktrees/` attached to the kiln that made it.
    pub fn discover(start: &Path) -> Self {
        let start = start.canonicalize().unwrap_or_else(|_| start.to_path_buf());
        let has = |dir: &Path, name: &str| dir.join(name).exists();
        if let Some(dir) = start
            .ancestors()
            .find(|d| has(d, ".crucible.toml") || d.join(".crucible").is_dir())
        {
            return Self::new(dir);
        }
        if let Some(dir) = start.ancestors().find(|d| has(d, ".git")) {
            return Self::new(dir);
        }
        Self::new(start)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<kiln>/.crucible`
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(".crucible")
    }

    pub fn socket_path(&self) -> PathBuf {
        self.state_dir().join("daemon.sock")
    }

    pub fn pid_path(&self) -> PathBuf {
        self.state_dir().join("daemon.pid")
    }

    /// The pid written in the pid file, if any (whether that daemon still runs is for
    /// its lock to say).
    pub fn read_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.pid_path())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Held while a client decides whether to start a daemon.
    pub fn start_lock_path(&self) -> PathBuf {
        self.state_dir().join("daemon.start.lock")
    }

    pub fn db_path(&self) -> PathBuf {
        self.state_dir().join("db")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.state_dir().join("logs")
    }

    /// Where the worktrees crucible creates live.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state_dir().join("worktrees")
    }

    /// Where readable session logs (markdown) and agents' stderr go.
    pub fn sessions_dir(&self) -> PathBuf {
        self.state_dir().join("sessions")
    }

    pub fn settings_path(&self) -> PathBuf {
        self.root.join(".crucible.toml")
    }

    /// Where agents reach the daemon: every connection here must present a session
    /// handle. A sandbox sees this socket and nothing else of the state directory.
    pub fn agent_socket_path(&self) -> PathBuf {
        self.state_dir().join("agent.sock")
    }

    /// Creates the state directory if needed and makes it owner-only whoever created it,
    /// then checks the socket path fits. The directory ignores itself in git, so sockets,
    /// the database and logs never show up as untracked files of the project.
    pub fn ensure_state_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let dir = self.state_dir();
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
        }
        if std::fs::metadata(&dir)?.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "# crucible's state: not part of the project\n*\n")?;
        }
        let socket = self.socket_path();
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the kiln path is too long for a Unix socket ({} > {MAX_SOCKET_PATH} bytes): {}",
                    socket.as_os_str().len(),
                    socket.display()
                ),
            ));
        }
        Ok(())
    }

    /// Makes everything crucible keeps in the state directory owner-only (directories
    /// 0700, files 0600), whatever made it: the database, logs and session logs. The
    /// worktrees folder itself is closed, but the projects' files in it keep their modes.
    pub fn secure_state_dir(&self) -> std::io::Result<()> {
        self.ensure_state_dir()?;
        let worktrees = self.worktrees_dir();
        for entry in std::fs::read_dir(self.state_dir())? {
            let path = entry?.path();
            if path == worktrees {
                restrict(&path, 0o700)?;
            } else {
                restrict_tree(&path)?;
            }
        }
        Ok(())
    }
}

/// Clears the group and other bits of `path` (sockets and links are left alone).
fn restrict(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    let kind = meta.file_type();
    if !(kind.is_dir() || kind.is_file()) {
        return Ok(());
    }
    if meta.permissions().mode() & 0o077 != 0 {
        let keep = meta.permissions().mode() & 0o700;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(keep | mode))?;
    }
    Ok(())
}

fn restrict_tree(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        restrict(path, 0o700)?;
        for entry in std::fs::read_dir(path)? {
            restrict_tree(&entry?.path())?;
        }
        Ok(())
    } else {
        restrict(path, 0o600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_prefers_crucible_state_over_a_nested_git_worktree() {
        let tmp = tempfile::tempdir().unwrap();
        let kiln = tmp.path().join("repo");
        let worktree = kiln.join(".crucible/worktrees/feat-auth");
        std::fs::create_dir_all(kiln.join(".git")).unwrap();
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join(".git"), "gitdir: ..").unwrap();
        let found = Kiln::discover(&worktree);
        assert_eq!(found.root(), kiln.canonicalize().unwrap());
    }

    #[test]
    fn state_dir_is_private_and_ignored_by_git() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(tmp.path());
        kiln.ensure_state_dir().unwrap();
        let mode = std::fs::metadata(kiln.state_dir())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
        let ignore = std::fs::read_to_string(kiln.state_dir().join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
    }

    #[test]
    fn a_state_dir_made_by_hand_becomes_owner_only_with_everything_in_it() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let tmp = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(tmp.path());
        let state = kiln.state_dir();
        for dir in ["db", "logs", "sessions", "worktrees/feat/src"] {
            std::fs::create_dir_all(state.join(dir)).unwrap();
        }
        let files = ["db/000001.wal", "logs/daemon.log", "sessions/S1.md"];
        for file in files {
            std::fs::write(state.join(file), "x").unwrap();
        }
        std::fs::write(state.join("worktrees/feat/src/lib.rs"), "x").unwrap();
        let all = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
        for p in ["", "db", "logs", "sessions", "worktrees"] {
            all(&state.join(p)).unwrap();
        }
        for p in files.iter().chain(["worktrees/feat/src/lib.rs"].iter()) {
            std::fs::set_permissions(state.join(p), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        kiln.secure_state_dir().unwrap();
        assert_eq!(mode(&state), 0o700);
        for dir in ["db", "logs", "sessions", "worktrees"] {
            assert_eq!(mode(&state.join(dir)), 0o700, "{dir}");
        }
        for file in files {
            assert_eq!(mode(&state.join(file)), 0o600, "{file}");
        }
        // The project's own files in a worktree keep their modes.
        assert_eq!(mode(&state.join("worktrees/feat/src/lib.rs")), 0o644);
    }

    #[test]
    fn discovery_falls_back_to_git_root_then_start() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        assert_eq!(
            Kiln::discover(&repo.join("src/deep")).root(),
            repo.canonicalize().unwrap()
        );
        let plain = tmp.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(Kiln::discover(&plain).root(), plain.canonicalize().unwrap());
    }
}
