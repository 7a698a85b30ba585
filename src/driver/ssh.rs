//! The `ssh` driver: the agent runs on another machine. Crucible uses
//! the system `ssh` (or the command in `CRU_SSH`, e.g. `ssh -F ~/.ssh/crucible`) with
//! the user's config and agent; no key is ever in crucible's settings. The session's
//! branch is pushed to the repository clone at `remote_path` over the same connection
//! and checked out there in a worktree of its own (`<remote_path>/.crucible/worktrees/
//! <session>`); the agent starts there with its stdio over the ssh channel; the agent
//! socket is forwarded, so `cru ask` works there too. Variables reach the agent on its
//! stdin ahead of the conversation, never on a command line.

mod measure;
pub(super) mod remote;

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use tokio::process::Command;

use super::error::DriverError;
use super::place::{Place, Setup, Start};
use crate::protocol::SshOptions;
pub use remote::Remote;

/// Makes the session's worktree on the host named in `options`.
pub(super) async fn provision(
    options: &SshOptions,
    setup: Setup<'_>,
) -> Result<Box<dyn Place>, DriverError> {
    let (host, Some(repo)) = (&options.host, &options.remote_path) else {
        return Err(needs_host_and_path());
    };
    if host.is_empty() {
        return Err(needs_host_and_path());
    }
    let remote = Remote::new(
        host,
        repo,
        setup.session_id,
        &setup.kiln.state_dir(),
        &setup.kiln.agent_socket_path(),
    );
    remote.provision(setup.cwd).await?;
    Ok(Box::new(remote))
}

fn needs_host_and_path() -> DriverError {
    DriverError::Setup(
        "the ssh driver needs --host USER@HOST and --remote-path (the repository's clone there)"
            .into(),
    )
}

impl Place for Remote {
    fn measure(&self) -> Option<BoxFuture<'_, Option<crate::protocol::Resources>>> {
        Some(Box::pin(self.resources()))
    }

    fn exit(&self, status: std::process::ExitStatus) -> Option<super::Exit> {
        self.explain(status.code())
    }

    fn command(&self, start: Start<'_>) -> Result<Command, DriverError> {
        let mut command = Remote::command(self, start.program, start.args, &self.worktree, true);
        command.envs(super::place::session_marker(start.vars));
        Ok(command)
    }

    fn cru_program(&self) -> Option<PathBuf> {
        // Installed there like the agent itself.
        Some(PathBuf::from("cru"))
    }

    fn socket_inside(&self) -> Option<String> {
        Some(self.socket.clone())
    }

    fn agent_cwd(&self, _cwd: &Path) -> PathBuf {
        PathBuf::from(&self.worktree)
    }

    fn remote(&self) -> Option<&Remote> {
        Some(self)
    }

    fn preamble(&self, all: &[(String, String)]) -> Option<Vec<u8>> {
        Some(Remote::preamble(all))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(Remote::close(self))
    }
}
