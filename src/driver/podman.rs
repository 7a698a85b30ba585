//! The `podman` driver: the agent runs in a container (`podman run -i`) of the image
//! named, with the session's worktree at `/workspace` and the repository's git folder at
//! its own path (hooks and config read-only), the user's mounts, no network unless
//! asked, the limits, and the agent socket and `cru` so the agent can reach its inbox.
//! Variables are passed by name (`-e NAME`): podman takes the value from its own
//! environment, so no value is on its command line. Containers carry the label
//! `crucible.session=<id>`; stop and delete remove them.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::Command;

use futures::future::BoxFuture;

use super::error::DriverError;
use super::place::{Place, Setup, Start};
use crate::protocol::{Network, PodmanOptions};

pub const WORKSPACE: &str = "/workspace";
pub const SOCKET_INSIDE: &str = "/run/crucible/agent.sock";
pub const BIN_INSIDE: &str = "/run/crucible/bin";
pub const CRU_INSIDE: &str = "/run/crucible/bin/cru";
const LABEL: &str = "crucible.session";
/// What podman's monitor (conmon) writes where it runs when the OOM killer strikes.
const OOM_FILE: &str = "oom";

#[derive(Debug, Clone)]
pub struct Container {
    pub session_id: String,
    /// The session's folder on the host, `/workspace` inside.
    pub cwd: PathBuf,
    pub git_dir: Option<PathBuf>,
    pub socket: PathBuf,
    pub cru: Option<PathBuf>,
    /// The image and what confines the container.
    pub options: PodmanOptions,
    /// The running container's first process, once found ([`Container::first_pid`]).
    pub first: std::sync::Arc<std::sync::Mutex<Option<u32>>>,
    /// The folder `podman run` starts in, the session's own: podman's monitor leaves an
    /// `oom` file where it runs when the kernel's OOM killer ends a process of the
    /// container, and that must not land in the person's repository.
    pub workdir: PathBuf,
}

impl Container {
    /// `podman run`'s arguments up to and including the image; the program follows.
    pub fn arguments(&self, names: &[String]) -> Result<Vec<String>, DriverError> {
        let image = self.options.image.clone();
        if image.is_empty() {
            return Err(DriverError::Setup(
                "the podman driver needs --image IMAGE".into(),
            ));
        }
        let spec = &self.options.confinement;
        let mut a: Vec<String> = ["run", "--rm", "-i", "--init"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.push(format!("--label={LABEL}={}", self.session_id));
        a.push(format!(
            "--network={}",
            if spec.network == Network::Host {
                "host"
            } else {
                "none"
            }
        ));
        a.push(format!("--volume={}:{WORKSPACE}", self.cwd.display()));
        if let Some(git) = &self.git_dir {
            a.push(format!("--volume={0}:{0}", git.display()));
            for part in ["hooks", "config"] {
                let path = git.join(part);
                if path.exists() {
                    a.push(format!("--volume={0}:{0}:ro", path.display()));
                }
            }
        }
        for mount in &spec.mounts {
            let source = std::fs::canonicalize(&mount.source)
                .map_err(|e| DriverError::file("cannot mount ", &mount.source, e))?;
            let target = mount
                .target
                .clone()
                .unwrap_or_else(|| source.display().to_string());
            let ro = if mount.read_only { ":ro" } else { "" };
            a.push(format!("--volume={}:{target}{ro}", source.display()));
        }
        a.push(format!(
            "--volume={}:{SOCKET_INSIDE}",
            self.socket.display()
        ));
        if let Some(cru) = &self.cru {
            a.push(format!("--volume={}:{CRU_INSIDE}:ro", cru.display()));
        }
        a.push(format!("--workdir={WORKSPACE}"));
        // `cru` is on the PATH (not a secret: a value on the command line is fine here).
        a.push(format!(
            "--env=PATH={BIN_INSIDE}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ));
        if let Some(mb) = spec.memory {
            a.push(format!("--memory={mb}m"));
        }
        if let Some(n) = spec.cpus {
            a.push(format!("--cpus={n}"));
        }
        if let Some(n) = spec.pids {
            a.push(format!("--pids-limit={n}"));
        }
        for name in names {
            a.push(format!("--env={name}"));
        }
        if image.starts_with('/') {
            // A folder as the container's root: for machines without a registry.
            a.push("--rootfs".into());
        }
        a.push(image);
        Ok(a)
    }

    /// The limits podman puts in force, as asked.
    pub fn limits(&self) -> Vec<String> {
        let spec = &self.options.confinement;
        let mut out = Vec::new();
        if let Some(mb) = spec.memory {
            out.push(format!("memory {mb} MiB (podman --memory)"));
        }
        if let Some(n) = spec.cpus {
            out.push(format!("cpus {n} (podman --cpus)"));
        }
        if let Some(n) = spec.pids {
            out.push(format!("pids {n} (podman --pids-limit)"));
        }
        out
    }

    /// The host pid of the session's running container's first process (its init),
    /// asked of podman once and kept while that process lives.
    pub async fn first_pid(&self) -> Option<u32> {
        let known = *self.first.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = known
            && std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            return Some(pid);
        }
        let found = self.ask_first_pid().await;
        *self.first.lock().unwrap_or_else(|e| e.into_inner()) = found;
        found
    }

    /// The ids of the session's containers: running ones, or with `all` stopped ones too.
    async fn container_ids(&self, all: bool) -> Vec<String> {
        let listed = Command::new("podman")
            .args(["ps", if all { "-aq" } else { "-q" }, "--filter"])
            .arg(format!("label={LABEL}={}", self.session_id))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .await;
        let Ok(listed) = listed else {
            return Vec::new();
        };
        String::from_utf8_lossy(&listed.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    async fn ask_first_pid(&self) -> Option<u32> {
        let id = self.container_ids(false).await.into_iter().next()?;
        let inspected = Command::new("podman")
            .args(["inspect", "--format", "{{.State.Pid}}", &id])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .await
            .ok()?;
        String::from_utf8_lossy(&inspected.stdout)
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&pid| pid > 0)
    }

    /// Removes every container of the session.
    pub async fn remove(&self) {
        for id in self.container_ids(true).await {
            let _ = Command::new("podman")
                .args(["rm", "-f", "-t", "2", &id])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await;
        }
    }
}

/// Checks that podman runs here, and the container's arguments.
pub(super) async fn provision(
    options: &PodmanOptions,
    setup: Setup<'_>,
) -> Result<Box<dyn Place>, DriverError> {
    super::place::checked(check).await?;
    let cwd = super::place::real_cwd(setup.cwd)?;
    let git_dir = crate::git::common_dir(&cwd)
        .await
        .filter(|g| !g.starts_with(&cwd));
    let workdir = setup.kiln.state_dir().join("podman").join(setup.session_id);
    super::place::private_folder(&workdir)?;
    // What a previous container of the session left.
    let _ = std::fs::remove_file(workdir.join(OOM_FILE));
    let container = Container {
        session_id: setup.session_id.to_string(),
        cwd,
        git_dir,
        socket: setup.kiln.agent_socket_path(),
        cru: std::env::current_exe().ok(),
        options: options.clone(),
        first: Default::default(),
        workdir,
    };
    container.arguments(&options.confinement.env)?;
    Ok(Box::new(container))
}

impl Place for Container {
    fn command(&self, start: Start<'_>) -> Result<Command, DriverError> {
        let mut names = self.options.confinement.env.clone();
        names.extend(start.vars.iter().map(|(name, _)| name.clone()));
        let mut command = Command::new("podman");
        command
            .current_dir(&self.workdir)
            .args(self.arguments(&names)?)
            .arg(start.program)
            .args(start.args)
            // podman reads the values of `--env NAME` from its own environment.
            .envs(start.passed.iter().cloned())
            .envs(start.vars);
        Ok(command)
    }

    fn cru_program(&self) -> Option<PathBuf> {
        Some(PathBuf::from(CRU_INSIDE))
    }

    fn limits(&self) -> Vec<String> {
        Container::limits(self)
    }

    fn socket_inside(&self) -> Option<String> {
        Some(SOCKET_INSIDE.to_string())
    }

    fn agent_cwd(&self, _cwd: &std::path::Path) -> PathBuf {
        PathBuf::from(WORKSPACE)
    }

    fn process_root(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(self.first_pid())
    }

    fn oom_kills(&self) -> Option<u64> {
        let pid = *self.first.lock().unwrap_or_else(|e| e.into_inner());
        let counted = pid
            .and_then(super::limits::memory_cgroup_of)
            .and_then(|dir| super::limits::oom_kills_in(&dir));
        // The monitor's mark outlives the container (an agent ended for memory takes
        // its container with it).
        let marked = self.workdir.join(OOM_FILE).exists().then_some(1);
        counted.max(marked)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.remove())
    }
}

/// Checks that podman is installed; the error names the package.
pub fn check() -> Result<(), DriverError> {
    match std::process::Command::new("podman")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(DriverError::Unavailable(format!(
            "podman --version failed ({s})"
        ))),
        Err(_) => Err(DriverError::Unavailable(
            "the podman driver needs podman, which is not installed: install the `podman` package"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Confinement, Mount};

    #[test]
    fn the_run_line_holds_the_spec_and_no_values() {
        let dir = tempfile::tempdir().unwrap();
        let options = PodmanOptions {
            image: "docker.io/library/node:22".into(),
            confinement: Confinement {
                memory: Some(2048),
                cpus: Some(2),
                pids: Some(256),
                env: vec!["API_KEY".into()],
                mounts: vec![Mount {
                    source: dir.path().display().to_string(),
                    target: Some("/cache".into()),
                    read_only: true,
                }],
                ..Default::default()
            },
        };
        let container = Container {
            session_id: "S1".into(),
            cwd: "/k/.crucible/worktrees/s1".into(),
            git_dir: Some("/k/.git".into()),
            socket: "/k/.crucible/agent.sock".into(),
            cru: Some("/usr/bin/cru".into()),
            options: options.clone(),
            first: Default::default(),
            workdir: "/k/.crucible/state/podman/S1".into(),
        };
        let args = container.arguments(&options.confinement.env).unwrap();
        let has = |s: &str| args.iter().any(|a| a == s);
        assert!(has("--network=none"));
        assert!(has("--volume=/k/.crucible/worktrees/s1:/workspace"));
        assert!(has("--volume=/k/.git:/k/.git"));
        assert!(has("--memory=2048m") && has("--cpus=2") && has("--pids-limit=256"));
        assert!(
            has("--env=API_KEY"),
            "by name: podman reads the value itself"
        );
        assert!(has("--label=crucible.session=S1"));
        assert_eq!(args.last().unwrap(), "docker.io/library/node:22");
        assert!(args.iter().any(|a| a.ends_with(":/cache:ro")));
        assert!(!args.iter().any(|a| a.contains("daemon.sock")));
    }
}
