//! `cru session new`: what the session is (agent, worktree, task) and where its agent
//! runs (`--driver` and its options), from flags or a session file (`-c FILE`, TOML with
//! the same names), flags winning.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use crate::protocol::driver::MountText;
use crate::protocol::{CreateSessionParams, DriverKind, DriverOptions, Mount, Network};

#[derive(Debug, Args)]
pub(super) struct NewArgs {
    /// The agent profile, `[agents.<name>]` in the settings.
    #[arg(long)]
    agent: Option<String>,
    /// A branch (existing, or new from HEAD) or the path of an existing worktree.
    #[arg(long, value_name = "BRANCH|PATH", conflicts_with = "in_place")]
    worktree: Option<String>,
    /// Work in the kiln itself, without a worktree.
    #[arg(long)]
    in_place: bool,
    /// The first prompt.
    #[arg(long)]
    task: Option<String>,
    /// Where the agent runs: local (as you, the default), sandbox (bubblewrap, default
    /// deny), ssh or podman.
    #[arg(long, value_parser = DriverKind::parse)]
    driver: Option<DriverKind>,
    /// A host path to show inside, read-write unless `:ro` (repeatable).
    #[arg(long = "mount", value_name = "SRC[:DST][:ro]", value_parser = Mount::parse)]
    mounts: Vec<Mount>,
    /// none (the default for sandbox and podman) or host.
    #[arg(long, value_parser = Network::parse)]
    network: Option<Network>,
    /// Pass this variable to the agent (by name; repeatable): its value from this shell,
    /// else from the daemon's environment; never written anywhere.
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// Memory limit in MiB.
    #[arg(long, value_name = "MB")]
    memory: Option<u64>,
    /// CPU limit, whole CPUs.
    #[arg(long, value_name = "N")]
    cpus: Option<u32>,
    /// Process limit.
    #[arg(long, value_name = "N")]
    pids: Option<u64>,
    /// podman: the image.
    #[arg(long)]
    image: Option<String>,
    /// ssh: USER@HOST (your ssh config and agent are used).
    #[arg(long, value_name = "USER@HOST")]
    host: Option<String>,
    /// ssh: the repository's clone on the host.
    #[arg(long, value_name = "PATH")]
    remote_path: Option<String>,
    /// Seed 002's read manifest: reads outside these globs (relative to the worktree)
    /// end the session with CONTEXT_MISS (repeatable).
    #[arg(long = "allow-read", value_name = "GLOB")]
    allow_read: Vec<String>,
    /// Read the session from a TOML file: agent, task, worktree, in_place, driver and
    /// the driver options above (mounts as a list of "SRC[:DST][:ro]").
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    file: Option<PathBuf>,
    #[arg(long)]
    pub(super) json: bool,
}

/// A session file (`-c FILE`): the start of session templates.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SessionFile {
    agent: Option<String>,
    task: Option<String>,
    worktree: Option<String>,
    in_place: bool,
    allow_read: Vec<String>,
    driver: Option<DriverKind>,
    mounts: Vec<MountText>,
    network: Option<Network>,
    env: Vec<String>,
    memory: Option<u64>,
    cpus: Option<u32>,
    pids: Option<u64>,
    image: Option<String>,
    host: Option<String>,
    remote_path: Option<String>,
}

impl SessionFile {
    fn driver(&self) -> DriverOptions {
        DriverOptions {
            driver: self.driver,
            mounts: self.mounts.clone(),
            network: self.network,
            env: self.env.clone(),
            memory: self.memory,
            cpus: self.cpus,
            pids: self.pids,
            image: self.image.clone(),
            host: self.host.clone(),
            remote_path: self.remote_path.clone(),
        }
    }
}

impl NewArgs {
    /// The request, from the session file (if any) under the flags.
    pub(super) fn params(self: Box<Self>) -> anyhow::Result<CreateSessionParams> {
        let file = match &self.file {
            Some(path) => read_file(path)?,
            None => SessionFile::default(),
        };
        let flags = DriverOptions {
            driver: self.driver,
            mounts: self.mounts.into_iter().map(MountText).collect(),
            network: self.network,
            env: self.env,
            memory: self.memory,
            cpus: self.cpus,
            pids: self.pids,
            image: self.image,
            host: self.host,
            remote_path: self.remote_path,
        };
        let mut driver = flags.over(&file.driver());
        // Host paths are sent absolute: the daemon runs elsewhere.
        for mount in &mut driver.mounts {
            mount.0.source = absolute(&mount.0.source);
        }
        let agent = self.agent.or(file.agent).context(
            "which agent? give --agent NAME (a profile in the settings) or `agent` in the session file",
        )?;
        Ok(CreateSessionParams {
            agent,
            worktree: self
                .worktree
                .or(file.worktree)
                .map(|w| super::absolute_if_dir(&w)),
            in_place: self.in_place || file.in_place,
            task: self.task.or(file.task),
            driver,
            allow_read: if self.allow_read.is_empty() {
                file.allow_read
            } else {
                self.allow_read
            },
            channel: None,
        })
    }
}

fn read_file(path: &Path) -> anyhow::Result<SessionFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the session file {}", path.display()))?;
    toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("invalid session file {}: {e}", path.display()))
}

fn absolute(path: &str) -> String {
    match std::fs::canonicalize(path) {
        Ok(real) => real.display().to_string(),
        Err(_) => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        new: NewArgs,
    }

    #[test]
    fn flags_win_over_the_session_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(
            &file,
            "agent = \"claude\"\ntask = \"fix it\"\ndriver = \"sandbox\"\nmemory = 512\nenv = [\"A\"]\nmounts = [\"/tmp:/data:ro\"]\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from([
            "x",
            "-c",
            file.to_str().unwrap(),
            "--memory",
            "128",
            "--env",
            "B",
            "--network",
            "host",
        ])
        .unwrap();
        let params = Box::new(cli.new).params().unwrap();
        assert_eq!(params.agent, "claude");
        assert_eq!(params.task.as_deref(), Some("fix it"));
        let spec = params.driver.resolve().unwrap();
        assert_eq!(spec.kind, DriverKind::Sandbox);
        assert_eq!(spec.memory, Some(128));
        assert_eq!(spec.env, ["A", "B"]);
        assert_eq!(spec.network, Network::Host);
        assert_eq!(spec.mounts[0].inside(), "/data");
        assert!(spec.mounts[0].read_only);
    }

    #[test]
    fn a_bad_session_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(&file, "agent = \"a\"\nmemroy = 5\n").unwrap();
        let cli = Cli::try_parse_from(["x", "-c", file.to_str().unwrap()]).unwrap();
        let err = Box::new(cli.new).params().unwrap_err().to_string();
        assert!(err.contains("memroy"), "{err}");
        assert!(Cli::try_parse_from(["x", "--agent", "a", "--driver", "vm"]).is_err());
        assert!(Cli::try_parse_from(["x", "--agent", "a", "--mount", "/a:rel"]).is_err());
    }
}
