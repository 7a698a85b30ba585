//! The `local` driver: the agent runs on the host as the user, unconfined, with the
//! daemon's environment and crucible's variables; `cru` on its `PATH` is the daemon's
//! own (see [`super::path::cru_folder`]).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use tokio::process::Command;

use super::error::DriverError;
use super::path;
use super::place::{Place, Setup, Start};

struct Host {
    /// The agent's `PATH`: `cru`'s folder first.
    agent_path: Option<OsString>,
}

pub(super) fn provision(setup: Setup<'_>, search: Option<&OsStr>) -> Box<dyn Place> {
    Box::new(Host {
        agent_path: path::cru_folder(setup.kiln)
            .map(|bin| path::ahead(&bin, search))
            .or_else(|| search.map(OsStr::to_os_string)),
    })
}

impl Place for Host {
    fn command(&self, start: Start<'_>) -> Result<Command, DriverError> {
        let mut command = Command::new(start.program);
        command.args(start.args);
        if let Some(path) = &self.agent_path {
            command.env("PATH", path);
        }
        command.envs(start.vars).current_dir(start.cwd);
        Ok(command)
    }

    fn cru_program(&self) -> Option<PathBuf> {
        std::env::current_exe().ok()
    }
}
