//! Drivers (local, sandbox, ssh, podman, qemu): where a session's agent runs and how it is reached. A driver
//! provisions the session's environment, starts programs in it (the agent, with its
//! stdio; a debugging command for `cru session exec`), says which limits are in force,
//! and tears it down. ACP file requests are served by the daemon on the session's files,
//! which every driver here shows the agent at the same path.

mod error;
mod exit;
pub mod limits;
mod local;
pub mod path;
mod place;
pub mod podman;
pub mod qemu;
pub mod sandbox;
pub mod ssh;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::kiln::Kiln;
use crate::protocol::{DriverSpec, SshOptions, env};
use place::{Place, Start};

pub use error::DriverError;
pub use exit::Exit;
pub use place::Setup;

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
            DriverSpec::Qemu(options) => qemu::provision(options, setup, at).await?,
        };
        Ok(Environment {
            place,
            passed,
            search,
            closed: tokio::sync::OnceCell::new(),
        })
    }

    /// How many processes the kernel's OOM killer has ended under the environment's
    /// memory limit, where that can be read.
    pub fn oom_kills(&self) -> Option<u64> {
        self.place.oom_kills()
    }

    /// Looks again for what [`Environment::oom_kills`] reads (a container, a guest).
    pub async fn look_for_oom(&self) {
        self.place.look_for_oom().await
    }

    /// The agent's figures read where it runs (over an ssh connection, from a guest),
    /// or `None` where this machine's process table shows them.
    pub async fn measured(&self) -> Option<Option<crate::protocol::Resources>> {
        match self.place.measure() {
            Some(measure) => Some(measure.await),
            None => None,
        }
    }

    /// The process whose tree is the agent's on this machine: a container's first
    /// process, or (`None`) the program crucible started.
    pub async fn process_root(&self) -> Option<u32> {
        self.place.process_root().await
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

    /// How the started program ended: the driver's account where the program crucible
    /// waited for carries the agent (an ssh client, a QEMU), else its own status.
    pub fn exit(&self, status: std::process::ExitStatus) -> Exit {
        self.place.exit(status).unwrap_or_else(|| Exit::of(status))
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
