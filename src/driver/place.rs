//! What a driver is given and what it makes: the session's [`Setup`], the [`Place`] a
//! driver's `provision` returns (how programs start there and how the session looks from
//! inside), the [`Start`] of one program, and the folder helpers every `provision` uses.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use tokio::process::Command;

use super::error::DriverError;
use super::ssh::remote::Remote;
use crate::kiln::Kiln;

/// What the driver needs to know of the session.
pub struct Setup<'a> {
    pub kiln: &'a Kiln,
    pub session_id: &'a str,
    /// The session's folder (its worktree, or the kiln for an in-place session).
    pub cwd: &'a Path,
    /// The agent's program, as configured (found on `PATH` unless a path).
    pub program: Option<&'a str>,
    /// The values of the spec's `env` names that were found (the asking process's,
    /// else the daemon's). Never written anywhere.
    pub passed: Vec<(String, String)>,
    /// The `PATH` of the process that asked for the session, if it said: where programs
    /// are looked for, and the agent's `PATH` (else the daemon's).
    pub path: Option<&'a str>,
}

/// A session's environment as one driver made it: how programs start there and how the
/// session looks from inside. Each driver implements it in its own file, with the
/// `provision` that makes it.
pub(super) trait Place: Send + Sync {
    /// `start.program` there, with `start.vars` on top of what the driver passes
    /// through; stdio is the caller's to set.
    fn command(&self, start: Start<'_>) -> Result<Command, DriverError>;

    /// The `cru` program as a program inside reaches it.
    fn cru_program(&self) -> Option<PathBuf>;

    /// The limits in force, one line each.
    fn limits(&self) -> Vec<String> {
        Vec::new()
    }

    /// Where the agent socket is inside; `None` where crucible's variables mean there
    /// what they mean here.
    fn socket_inside(&self) -> Option<String> {
        None
    }

    /// The session's folder as the agent sees it.
    fn agent_cwd(&self, cwd: &Path) -> PathBuf {
        cwd.to_path_buf()
    }

    /// The machine the agent's files are on, when it is not this one.
    fn remote(&self) -> Option<&Remote> {
        None
    }

    /// What a started program must read on its stdin before anything else, given every
    /// variable it gets: where they cannot travel any other way unseen.
    fn preamble(&self, _all: &[(String, String)]) -> Option<Vec<u8>> {
        None
    }

    /// The process whose tree is the agent's on this machine, when that is not the
    /// tree of the program crucible started (a container's processes are children of
    /// podman's monitor, not of `podman run`); `None`: the started program's.
    fn process_root(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(async { None })
    }

    /// The agent's figures read where it runs, where this machine's process table does
    /// not show them (a remote machine, a guest); `None` to read that table.
    fn measure(&self) -> Option<BoxFuture<'_, Option<crate::protocol::Resources>>> {
        None
    }

    /// How many processes the kernel's OOM killer has ended under the environment's
    /// memory limit (`None`: no memory cgroup to read).
    fn oom_kills(&self) -> Option<u64> {
        None
    }

    /// Looks again for what [`Place::oom_kills`] reads: a container is found once (its
    /// memory cgroup is its first process's); a guest is asked.
    fn look_for_oom(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            let _ = self.process_root().await;
        })
    }

    /// How the started program ended, when the driver knows better than its status
    /// (an ssh client's 255 is a lost connection; a QEMU's code carries its guest's).
    fn exit(&self, _status: std::process::ExitStatus) -> Option<super::Exit> {
        None
    }

    /// Releases what the environment holds open (a connection, a container).
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// What a driver is asked to start, as [`Environment::command`](super::Environment::command) prepared it.
pub(super) struct Start<'a> {
    pub(super) program: &'a Path,
    pub(super) args: &'a [String],
    /// Crucible's and the profile's variables, as a program inside sees them (see
    /// [`Environment::agent_vars`](super::Environment::agent_vars)).
    pub(super) vars: Vec<(String, String)>,
    /// The folder to start in, as this machine names it.
    pub(super) cwd: &'a Path,
    /// The values found for the spec's `env` names (see [`Setup::passed`]).
    pub(super) passed: &'a [(String, String)],
    /// Where programs are looked for (see [`super::path::search`]).
    pub(super) search: Option<&'a OsStr>,
}

/// Makes `folder` and its parents, owner-only.
/// Of the variables a started program gets, the one a carrier (an ssh client, a QEMU)
/// keeps in its own environment: not a secret, it is how a restarted daemon knows the
/// carrier its predecessor left. The rest travel inside (see [`Place::preamble`]).
pub(super) fn session_marker(
    vars: Vec<(String, String)>,
) -> impl Iterator<Item = (String, String)> {
    vars.into_iter()
        .filter(|(name, _)| name == crate::protocol::env::SESSION)
}

pub(super) fn private_folder(folder: &Path) -> Result<(), DriverError> {
    crate::sys::private_dir(folder)
        .map_err(|e| DriverError::file("cannot make ", folder.display(), e))
}

/// The session's folder, with links resolved.
pub(super) fn real_cwd(cwd: &Path) -> Result<PathBuf, DriverError> {
    std::fs::canonicalize(cwd).map_err(|e| DriverError::file("cannot use ", cwd.display(), e))
}

/// Runs a blocking check of whether the driver can run here.
pub(super) async fn checked(check: fn() -> Result<(), DriverError>) -> Result<(), DriverError> {
    tokio::task::spawn_blocking(check)
        .await
        .map_err(|e| DriverError::Check(std::sync::Arc::new(e)))?
}
