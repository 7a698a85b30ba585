//! Why a session's work cannot be reviewed, committed, merged, proposed or run in: each
//! refusal by what it is, each with its own JSON-RPC code.

use crate::driver::DriverError;
use crate::git::GitError;
use crate::ledger::LedgerError;
use crate::protocol::{SessionState, code};

#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    /// The session works on the kiln's own checkout: it has no branch of its own.
    #[error("session {id} works in place, on the kiln's own checkout; {doing} with git there")]
    InPlace { id: String, doing: &'static str },
    /// A session made before crucible kept base branches, while the kiln is on none.
    #[error("session {id} has no base branch and the kiln's checkout is not on one")]
    NoBase { id: String },
    /// The session's agent is in a turn: its worktree is changing.
    #[error("session {id} is {state}; wait for its turn to end (or cancel it) before you {doing}")]
    Busy {
        id: String,
        state: SessionState,
        doing: &'static str,
    },
    /// The kiln's checkout is not on the branch the session started from.
    #[error(
        "the kiln has {} checked out, not {base}, the branch session {id} started from; check out {base} to land there",
        checked_out.as_deref().unwrap_or("a detached HEAD")
    )]
    WrongCheckout {
        checked_out: Option<String>,
        base: String,
        id: String,
    },
    /// The session's worktree has changes not yet committed; `named` lists the first.
    #[error(
        "the session's worktree has {count} uncommitted change(s){}; commit them first (/commit)",
        named.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    Uncommitted { count: usize, named: Option<String> },
    #[error(
        "opening a pull request needs the GitHub CLI, gh, on the daemon's PATH (https://cli.github.com); or push the branch and open it yourself"
    )]
    NoGh,
    #[error(
        "the kiln's repository has no remote to open a pull request on; add one with git remote add"
    )]
    NoRemote,
    /// `gh pr create` ran and failed: what it said.
    #[error("gh pr create failed: {said}")]
    GhFailed { said: String },
    /// A program (gh, or the command of `session exec`) could not be started.
    #[error("cannot run {program}: {source}")]
    NotRun {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no command given")]
    NoCommand,
    #[error("no session {id} and no audit log for it")]
    NoAuditLog { id: String },
    #[error("cannot read the audit log: {0}")]
    AuditUnread(#[source] std::io::Error),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl LandingError {
    /// The JSON-RPC code of this refusal.
    pub fn code(&self) -> i64 {
        match self {
            LandingError::InPlace { .. } | LandingError::NoCommand => code::INVALID_PARAMS,
            LandingError::NoBase { .. }
            | LandingError::Busy { .. }
            | LandingError::WrongCheckout { .. }
            | LandingError::Uncommitted { .. }
            | LandingError::NoRemote
            | LandingError::Git(GitError::Refused(_)) => code::CONFLICT,
            LandingError::Git(GitError::Failed { .. }) => code::GIT_FAILED,
            LandingError::NoGh
            | LandingError::GhFailed { .. }
            | LandingError::NotRun { .. }
            | LandingError::Git(GitError::Spawn(_)) => code::TOOL_FAILED,
            LandingError::NoAuditLog { .. } => code::NOT_FOUND,
            LandingError::AuditUnread(_) => code::IO_ERROR,
            LandingError::Driver(_) => code::DRIVER_ERROR,
            LandingError::Ledger(e) => e.code(),
        }
    }
}

crate::ledger::coded_error!(LandingError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorObject;

    #[test]
    fn each_refusal_keeps_the_code_and_words_it_had() {
        let busy = LandingError::Busy {
            id: "s1".into(),
            state: SessionState::Working,
            doing: "merge",
        };
        assert_eq!(busy.code(), code::CONFLICT);
        assert_eq!(
            busy.to_string(),
            "session s1 is working; wait for its turn to end (or cancel it) before you merge"
        );
        let pending = LandingError::Uncommitted {
            count: 2,
            named: Some("M a.rs, ?? b.rs".into()),
        };
        assert_eq!(
            pending.to_string(),
            "the session's worktree has 2 uncommitted change(s) (M a.rs, ?? b.rs); commit them first (/commit)"
        );
        let unnamed = LandingError::Uncommitted {
            count: 1,
            named: None,
        };
        assert_eq!(
            unnamed.to_string(),
            "the session's worktree has 1 uncommitted change(s); commit them first (/commit)"
        );
        let detached = LandingError::WrongCheckout {
            checked_out: None,
            base: "main".into(),
            id: "s1".into(),
        };
        assert!(
            detached
                .to_string()
                .starts_with("the kiln has a detached HEAD checked out")
        );
        let object = ErrorObject::from(LandingError::Git(GitError::Failed {
            args: "merge x".into(),
            message: "boom".into(),
        }));
        assert_eq!(
            (object.code, object.message.as_str()),
            (code::GIT_FAILED, "git merge x: boom")
        );
        let in_place = ErrorObject::from(LandingError::InPlace {
            id: "s1".into(),
            doing: "commit",
        });
        assert_eq!(in_place.code, code::INVALID_PARAMS);
        let missing = ErrorObject::from(LandingError::Ledger(LedgerError::NotFound(
            "no session s9".into(),
        )));
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (code::NOT_FOUND, "no session s9")
        );
    }
}
