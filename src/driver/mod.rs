//! Drivers: where a session's agent runs and how it is reached. A driver
//! provisions the session's environment, starts programs in it (the agent, with its
//! stdio; a debugging command for `cru session exec`), says which limits are in force,
//! and tears it down. ACP file requests are served by the daemon on the session's files,
//! which every driver here shows the agent at the same path.

pub mod limits;
mod local;
pub mod path;
pub mod podman;
pub mod sandbox;
pub mod ssh;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use tokio::process::Command;

use crate::kiln::Kiln;
use crate::protocol::{DriverSpec, SshOptions, env};

pub use limits::Limits;

#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverError {
    /// The driver cannot run on this machine (a missing tool, a refusing kernel).
    #[error("{0}")]
    Unavailable(String),
    /// This session's environment could not be made.
    #[error("{0}")]
    Setup(String),
}

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

/// The remote place of an ssh session, from its recorded spec; no connection is made
/// until it is used. `None` for every other driver.
pub fn remote_of(spec: &DriverSpec, kiln: &Kiln, session_id: &str) -> Option<ssh::Remote> {
    match spec {
        DriverSpec::Ssh(SshOptions {
            host,
            remote_path: Some(repo),
            ..
        }) => Some(ssh::Remote::new(
            host,
            repo,
            session_id,
            &kiln.state_dir(),
            &kiln.agent_socket_path(),
        )),
        _ => None,
    }
}

/// A session's environment as one driver made it: how programs start there and how the
/// session looks from inside. Each driver implements it in its own file, with the
/// `provision` that makes it.
trait Place: Send + Sync {
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
    fn remote(&self) -> Option<&ssh::Remote> {
        None
    }

    /// What a started program must read on its stdin before anything else, given every
    /// variable it gets: where they cannot travel any other way unseen.
    fn preamble(&self, _all: &[(String, String)]) -> Option<Vec<u8>> {
        None
    }

    /// Releases what the environment holds open (a connection, a container).
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// What a driver is asked to start, as [`Environment::command`] prepared it.
struct Start<'a> {
    program: &'a Path,
    args: &'a [String],
    /// Crucible's and the profile's variables, as a program inside sees them (see
    /// [`Environment::agent_vars`]).
    vars: Vec<(String, String)>,
    /// The folder to start in, as this machine names it.
    cwd: &'a Path,
    /// The values found for the spec's `env` names (see [`Setup::passed`]).
    passed: &'a [(String, String)],
    /// Where programs are looked for (see [`path::search`]).
    search: Option<&'a OsStr>,
}

/// A session's environment, made by its driver. Dropping it releases what it holds on
/// the host (its cgroups); the session's files stay.
pub struct Environment {
    place: Box<dyn Place>,
    /// See [`Setup::passed`].
    passed: Vec<(String, String)>,
    /// Where programs are looked for (see [`path::search`]).
    search: Option<OsString>,
    /// Set once the environment is released: a second release waits for the first.
    closed: tokio::sync::OnceCell<()>,
}

impl Environment {
    /// Makes the environment `spec` describes for the session.
    pub async fn provision(
        spec: &DriverSpec,
        mut setup: Setup<'_>,
    ) -> Result<Environment, DriverError> {
        let passed = std::mem::take(&mut setup.passed);
        let search = path::search(setup.path);
        let at = search.as_deref();
        let place = match spec {
            DriverSpec::Local(_) => local::provision(setup, at),
            DriverSpec::Sandbox(confinement) => sandbox::provision(confinement, setup, at).await?,
            DriverSpec::Ssh(options) => ssh::provision(options, setup).await?,
            DriverSpec::Podman(options) => podman::provision(options, setup).await?,
        };
        Ok(Environment {
            place,
            passed,
            search,
            closed: tokio::sync::OnceCell::new(),
        })
    }

    /// The limits in force, one line each.
    pub fn limits(&self) -> Vec<String> {
        self.place.limits()
    }

    /// Crucible's variables as a program inside sees them: the kiln's own paths mean
    /// nothing in a sandbox or on another machine, and the agent socket has its place
    /// there.
    pub fn agent_vars(&self, vars: &[(String, String)]) -> Vec<(String, String)> {
        let Some(socket) = self.place.socket_inside() else {
            return vars.to_vec();
        };
        vars.iter()
            .filter(|(name, _)| name != env::KILN)
            .map(|(name, value)| match name.as_str() {
                env::SOCKET => (name.clone(), socket.clone()),
                _ => (name.clone(), value.clone()),
            })
            .collect()
    }

    /// The `cru` program as a program inside reaches it.
    pub fn cru_program(&self) -> Option<PathBuf> {
        self.place.cru_program()
    }

    /// The session's folder as the agent sees it.
    pub fn agent_cwd(&self, cwd: &Path) -> PathBuf {
        self.place.agent_cwd(cwd)
    }

    /// The machine the agent's files are on, when it is not this one.
    pub fn remote(&self) -> Option<&ssh::Remote> {
        self.place.remote()
    }

    /// What a program started by [`Environment::command`] must read on its stdin before
    /// anything else: the variables, where they cannot travel any other way unseen.
    pub fn preamble(&self, vars: &[(String, String)]) -> Option<Vec<u8>> {
        let mut all = self.passed.clone();
        all.extend(self.agent_vars(vars));
        self.place.preamble(&all)
    }

    /// What an exit code of the started program means, when the driver knows better
    /// than the code.
    pub fn explain_exit(&self, code: Option<i32>) -> Option<String> {
        self.remote().and_then(|r| r.explain(code))
    }

    /// Releases what the environment holds open (the ssh connection, the container),
    /// once: whoever asks while it is being released returns when it is.
    pub async fn close(&self) {
        self.closed.get_or_init(|| self.place.close()).await;
    }

    /// `program args` in the environment, in `cwd`, with `vars` (crucible's and the
    /// profile's) on top of what the driver passes through; stdio is the caller's to set.
    pub fn command(
        &self,
        program: &Path,
        args: &[String],
        vars: &[(String, String)],
        cwd: &Path,
    ) -> Result<Command, DriverError> {
        self.place.command(Start {
            program,
            args,
            vars: self.agent_vars(vars),
            cwd,
            passed: &self.passed,
            search: self.search.as_deref(),
        })
    }
}

/// Makes `folder` and its parents, owner-only.
fn private_folder(folder: &Path) -> Result<(), DriverError> {
    crate::sys::private_dir(folder)
        .map_err(|e| DriverError::Setup(format!("cannot make {}: {e}", folder.display())))
}

/// The session's folder, with links resolved.
fn real_cwd(cwd: &Path) -> Result<PathBuf, DriverError> {
    std::fs::canonicalize(cwd)
        .map_err(|e| DriverError::Setup(format!("cannot use {}: {e}", cwd.display())))
}

/// Runs a blocking check of whether the driver can run here.
async fn checked(check: fn() -> Result<(), DriverError>) -> Result<(), DriverError> {
    tokio::task::spawn_blocking(check)
        .await
        .map_err(|e| DriverError::Setup(e.to_string()))?
}
