//! What making or using a session's environment can fail with: a driver that cannot run
//! on this machine, a program it needs that cannot run, a file or folder it cannot make
//! or use, git or ssh refusing, and the words of a setup that cannot be meant. Errors of
//! the system keep their source.

use std::sync::Arc;

/// Why a driver could not make or use a session's environment.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DriverError {
    /// The driver cannot run on this machine (a missing tool, a refusing kernel).
    #[error("{0}")]
    Unavailable(String),
    /// This session's environment could not be made, and why in words.
    #[error("{0}")]
    Setup(String),
    /// A program the driver runs (ssh, git, bwrap) could not be started.
    #[error("cannot run {program}: {source}")]
    Program {
        program: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A file or folder of the environment could not be made or used; `doing` leads
    /// the message (`cannot make `, `cannot mount `).
    #[error("{doing}{path}: {source}")]
    File {
        doing: &'static str,
        path: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A git command ran and failed: its arguments and what it said.
    #[error("git {command}: {stderr}")]
    Git { command: String, stderr: String },
    /// The ssh connection to `host` failed while in use.
    #[error("ssh {host}: {source}")]
    Ssh {
        host: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A command run on `host` failed: how it ended, and what it said.
    #[error("on {host} ({ended}): {stderr}")]
    Remote {
        host: String,
        ended: String,
        stderr: String,
    },
    /// `remote_path` on `host` is not a repository clone there.
    #[error("no git repository at {repo} on {host}: {source}")]
    NoRepository {
        repo: String,
        host: String,
        #[source]
        source: Box<DriverError>,
    },
    /// The check of whether the driver can run here did not finish.
    #[error("{0}")]
    Check(#[source] Arc<tokio::task::JoinError>),
}

impl DriverError {
    /// A file or folder at `path` that could not be made or used.
    pub(crate) fn file(doing: &'static str, path: impl ToString, source: std::io::Error) -> Self {
        Self::File {
            doing,
            path: path.to_string(),
            source: Arc::new(source),
        }
    }

    /// A program that could not be started.
    pub(crate) fn program(program: impl ToString, source: std::io::Error) -> Self {
        Self::Program {
            program: program.to_string(),
            source: Arc::new(source),
        }
    }
}
