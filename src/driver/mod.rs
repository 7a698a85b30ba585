//! Drivers: where a session's agent runs and how it is reached. A driver
//! provisions the session's environment, starts programs in it (the agent, with its
//! stdio; a debugging command for `cru session exec`), says which limits are in force,
//! and tears it down. ACP file requests are served by the daemon on the session's files,
//! which every driver here shows the agent at the same path.

pub mod limits;
pub mod path;
pub mod podman;
pub mod sandbox;
pub mod ssh;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::kiln::Kiln;
use crate::protocol::{Confinement, DriverSpec, SshOptions, env};

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

/// The variables a sandboxed program keeps from the daemon's environment.
const KEPT: &[&str] = &["PATH", "TERM", "LANG", "LC_ALL", "TZ"];

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

/// A session's environment, made by its driver. Dropping it releases what it holds on
/// the host (its cgroups); the session's files stay.
pub struct Environment {
    spec: DriverSpec,
    inner: Inner,
    limits: Limits,
    /// See [`Setup::passed`].
    passed: Vec<(String, String)>,
    /// Where programs are looked for (see [`path::search`]).
    search: Option<OsString>,
    /// The agent's `PATH` on this machine (local and sandbox), `cru`'s folder first.
    agent_path: Option<OsString>,
}

enum Inner {
    Local,
    Sandbox(sandbox::Layout, Confinement),
    Ssh(ssh::Remote),
    Podman(podman::Container),
}

impl Environment {
    /// Makes the environment `spec` describes for the session.
    pub async fn provision(
        spec: &DriverSpec,
        mut setup: Setup<'_>,
    ) -> Result<Environment, DriverError> {
        let passed = std::mem::take(&mut setup.passed);
        let search = path::search(setup.path);
        let kiln = setup.kiln;
        let (inner, limits) = Self::make(spec, setup, search.as_deref()).await?;
        let agent_path = match &inner {
            Inner::Local => path::cru_folder(kiln)
                .map(|bin| path::ahead(&bin, search.as_deref()))
                .or_else(|| search.clone()),
            Inner::Sandbox(..) => Some(path::ahead(
                Path::new(sandbox::BIN_INSIDE),
                Some(
                    search
                        .as_deref()
                        .unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin")),
                ),
            )),
            _ => None,
        };
        Ok(Environment {
            spec: spec.clone(),
            inner,
            limits,
            passed,
            search,
            agent_path,
        })
    }

    async fn make(
        spec: &DriverSpec,
        setup: Setup<'_>,
        search: Option<&OsStr>,
    ) -> Result<(Inner, Limits), DriverError> {
        match spec {
            DriverSpec::Local => Ok((Inner::Local, Limits::default())),
            DriverSpec::Sandbox(confinement) => {
                tokio::task::spawn_blocking(sandbox::check)
                    .await
                    .map_err(|e| DriverError::Setup(e.to_string()))??;
                let layout = sandbox_layout(setup, search).await?;
                // Checked now, so a bad mount fails `session new`, not the first start.
                sandbox::arguments(confinement, &layout)?;
                let limits = Limits::apply(confinement, &cgroup_name(&layout.cwd));
                Ok((Inner::Sandbox(layout, confinement.clone()), limits))
            }
            DriverSpec::Ssh(options) => {
                let (host, Some(repo)) = (&options.host, &options.remote_path) else {
                    return Err(needs_host_and_path());
                };
                if host.is_empty() {
                    return Err(needs_host_and_path());
                }
                let remote = ssh::Remote::new(
                    host,
                    repo,
                    setup.session_id,
                    &setup.kiln.state_dir(),
                    &setup.kiln.agent_socket_path(),
                );
                remote.provision(setup.cwd).await?;
                Ok((Inner::Ssh(remote), Limits::default()))
            }
            DriverSpec::Podman(options) => {
                tokio::task::spawn_blocking(podman::check)
                    .await
                    .map_err(|e| DriverError::Setup(e.to_string()))??;
                let cwd = std::fs::canonicalize(setup.cwd).map_err(|e| {
                    DriverError::Setup(format!("cannot use {}: {e}", setup.cwd.display()))
                })?;
                let git_dir = crate::git::common_dir(&cwd)
                    .await
                    .filter(|g| !g.starts_with(&cwd));
                let container = podman::Container {
                    session_id: setup.session_id.to_string(),
                    cwd,
                    git_dir,
                    socket: setup.kiln.agent_socket_path(),
                    cru: std::env::current_exe().ok(),
                    options: options.clone(),
                };
                container.arguments(spec.env())?;
                Ok((Inner::Podman(container), Limits::default()))
            }
        }
    }

    /// The limits in force, one line each.
    pub fn limits(&self) -> Vec<String> {
        match &self.inner {
            Inner::Podman(container) => container.limits(),
            _ => self.limits.described().to_vec(),
        }
    }

    /// Crucible's variables as a program inside sees them: the kiln's own paths mean
    /// nothing in a sandbox or on another machine, and the agent socket has its place
    /// there.
    pub fn agent_vars(&self, vars: &[(String, String)]) -> Vec<(String, String)> {
        let socket = match &self.inner {
            Inner::Local => return vars.to_vec(),
            Inner::Sandbox(..) => sandbox::SOCKET_INSIDE.to_string(),
            Inner::Ssh(remote) => remote.socket.clone(),
            Inner::Podman(_) => podman::SOCKET_INSIDE.to_string(),
        };
        vars.iter()
            .filter(|(name, _)| name != env::KILN)
            .map(|(name, value)| match name.as_str() {
                env::SOCKET => (name.clone(), socket.clone()),
                _ => (name.clone(), value.clone()),
            })
            .collect()
    }

    /// The variables named in the spec, with the values found for them.
    fn passed(&self) -> Vec<(String, String)> {
        self.passed.clone()
    }

    /// The `cru` program as a program inside reaches it.
    pub fn cru_program(&self) -> Option<PathBuf> {
        match &self.inner {
            Inner::Local => std::env::current_exe().ok(),
            Inner::Sandbox(..) => Some(PathBuf::from(format!("{}/cru", sandbox::BIN_INSIDE))),
            // Installed there like the agent itself.
            Inner::Ssh(_) => Some(PathBuf::from("cru")),
            Inner::Podman(_) => Some(PathBuf::from(podman::CRU_INSIDE)),
        }
    }

    /// The session's folder as the agent sees it.
    pub fn agent_cwd(&self, cwd: &Path) -> PathBuf {
        match &self.inner {
            Inner::Ssh(remote) => PathBuf::from(&remote.worktree),
            Inner::Podman(_) => PathBuf::from(podman::WORKSPACE),
            _ => cwd.to_path_buf(),
        }
    }

    /// The machine the agent's files are on, when it is not this one.
    pub fn remote(&self) -> Option<&ssh::Remote> {
        match &self.inner {
            Inner::Ssh(remote) => Some(remote),
            _ => None,
        }
    }

    /// What a program started by [`Environment::command`] must read on its stdin before
    /// anything else: the variables, where they cannot travel any other way unseen.
    pub fn preamble(&self, vars: &[(String, String)]) -> Option<Vec<u8>> {
        match &self.inner {
            Inner::Ssh(_) => {
                let mut all = self.passed();
                all.extend(self.agent_vars(vars));
                Some(ssh::Remote::preamble(&all))
            }
            _ => None,
        }
    }

    /// What an exit code of the started program means, when the driver knows better
    /// than the code.
    pub fn explain_exit(&self, code: Option<i32>) -> Option<String> {
        self.remote().and_then(|r| r.explain(code))
    }

    /// Releases what the environment holds open (the ssh connection).
    pub async fn close(&self) {
        match &self.inner {
            Inner::Ssh(remote) => remote.close().await,
            Inner::Podman(container) => container.remove().await,
            _ => {}
        }
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
        match &self.inner {
            Inner::Ssh(remote) => {
                let mut command = remote.command(program, args, &remote.worktree, true);
                // Not a secret: how a restarted daemon knows the ssh client its
                // predecessor left.
                command.envs(
                    vars.iter()
                        .filter(|(name, _)| name == env::SESSION)
                        .cloned(),
                );
                Ok(command)
            }
            Inner::Podman(container) => {
                let vars = self.agent_vars(vars);
                let mut names = self.spec.env().to_vec();
                names.extend(vars.iter().map(|(name, _)| name.clone()));
                let mut command = Command::new("podman");
                command
                    .args(container.arguments(&names)?)
                    .arg(program)
                    .args(args)
                    // podman reads the values of `--env NAME` from its own environment.
                    .envs(self.passed())
                    .envs(vars);
                Ok(command)
            }
            Inner::Local => {
                let mut command = Command::new(program);
                command.args(args);
                if let Some(path) = &self.agent_path {
                    command.env("PATH", path);
                }
                command.envs(vars.iter().cloned()).current_dir(cwd);
                Ok(command)
            }
            Inner::Sandbox(layout, confinement) => {
                // Inside, a bare name would be looked up on a PATH of other folders.
                let resolved = match program.to_str() {
                    Some(name) if !name.contains('/') => {
                        path::resolve_in(name, self.search.as_deref())
                    }
                    _ => None,
                };
                let program = resolved.as_deref().unwrap_or(program);
                let mut bwrap_args = sandbox::arguments(confinement, layout)?;
                if cwd != layout.cwd {
                    let at = bwrap_args.len().saturating_sub(1);
                    bwrap_args[at] = cwd.to_string_lossy().into_owned();
                }
                let mut command = Command::new("bwrap");
                command.args(bwrap_args).arg("--").arg(program).args(args);
                command.env_clear();
                for name in KEPT {
                    if let Some(value) = std::env::var_os(name) {
                        command.env(name, value);
                    }
                }
                if let Some(path) = &self.agent_path {
                    command.env("PATH", path);
                }
                command.env("HOME", &layout.home_inside);
                command.envs(self.passed());
                command.envs(self.agent_vars(vars));
                let pre_exec = self.limits.pre_exec();
                // SAFETY: the closure only makes async-signal-safe calls (write,
                // setrlimit, sched_*affinity) on values prepared before the fork.
                unsafe {
                    command.pre_exec(pre_exec);
                }
                Ok(command)
            }
        }
    }
}

fn needs_host_and_path() -> DriverError {
    DriverError::Setup(
        "the ssh driver needs --host USER@HOST and --remote-path (the repository's clone there)"
            .into(),
    )
}

/// One name per environment for its cgroups.
fn cgroup_name(cwd: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in cwd.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("crucible-{}-{hash:016x}", std::process::id())
}

async fn sandbox_layout(
    setup: Setup<'_>,
    search: Option<&OsStr>,
) -> Result<sandbox::Layout, DriverError> {
    let state_dir = setup.kiln.state_dir();
    let home = state_dir
        .join("sandboxes")
        .join(setup.session_id)
        .join("home");
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&home)
            .map_err(|e| DriverError::Setup(format!("cannot make {}: {e}", home.display())))?;
    }
    let home_inside = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .unwrap_or_else(|| PathBuf::from("/home/agent"));
    let cwd = std::fs::canonicalize(setup.cwd)
        .map_err(|e| DriverError::Setup(format!("cannot use {}: {e}", setup.cwd.display())))?;
    let git_dir = crate::git::common_dir(&cwd).await;
    let programs = setup
        .program
        .and_then(|p| path::resolve_in(p, search))
        .map(|p| sandbox::install_folders(&p, search))
        .unwrap_or_default();
    Ok(sandbox::Layout {
        cwd,
        git_dir,
        state_dir: std::fs::canonicalize(&state_dir).unwrap_or(state_dir),
        home,
        home_inside,
        programs,
        cru: std::env::current_exe().ok(),
        socket: setup.kiln.agent_socket_path(),
    })
}
