//! Why a session cannot be made, restarted, renamed, forked, handed off, refined, moved
//! or deleted: each refusal by what it is, each with its own JSON-RPC code.

use std::path::PathBuf;

use crate::config::ProfileError;
use crate::git::GitError;
use crate::ledger::LedgerError;
use crate::protocol::{DriverKind, SpecError, code};
use crate::sessions::RunError;
use crate::sessions::guard::GuardError;

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The agent profile asked for cannot be used (unknown, or its program missing).
    #[error("{source} (settings: {})", settings.display())]
    Profile {
        #[source]
        source: ProfileError,
        settings: PathBuf,
    },
    #[error("choose either a worktree or in_place, not both")]
    WorktreeAndInPlace,
    /// The driver options asked for cannot be used.
    #[error(transparent)]
    DriverOptions(#[from] SpecError),
    #[error(
        "crucible's own agent runs in the daemon: use the local or sandbox driver, not {driver}"
    )]
    InternalApart { driver: DriverKind },
    #[error("the {driver} driver works in a worktree of its own, not in place")]
    InPlaceApart { driver: DriverKind },
    #[error(
        "the task is {kib} KiB, over the {most_kib} KiB a task may hold: put the rest in a file in the worktree and name it in the task"
    )]
    TaskTooLong { kib: usize, most_kib: usize },
    #[error("session {id} is still being created")]
    StillCreating { id: String },
    /// `state`: what the session is, in words.
    #[error("session {id} has no turn that was cut short (it is {state})")]
    NothingToResend { id: String, state: &'static str },
    #[error("give the session a name")]
    NoName,
    #[error("a session name is one line of at most {most} characters")]
    BadName { most: usize },
    #[error(
        "session {id} works in place, not on a branch of its own; there is nothing to fork from"
    )]
    NothingToFork { id: String },
    #[error("branch {name} already exists; a fork makes a new one")]
    BranchExists { name: String },
    #[error(
        "session {id} works in place, not in a worktree of its own; there is nothing to hand off"
    )]
    NothingToHandOff { id: String },
    #[error("session {id} was handed off already, to {to}")]
    HandedOffAlready { id: String, to: String },
    /// The profile a hand-off names cannot be used.
    #[error("cannot hand off: {0}")]
    HandOffProfile(#[source] ProfileError),
    #[error("give the globs to allow")]
    NoGlobs,
    #[error("session {id} is running; a refinement restarts a session a context miss stopped")]
    RefineRunning { id: String },
    #[error(
        "session {id} was refined {most} times, the most for one work item (MAX_REFINEMENT_ATTEMPTS); start a new session with the manifest it needs"
    )]
    RefinedEnough { id: String, most: u32 },
    /// `root`: the kiln's folder.
    #[error(
        "{} is not a git repository, so sessions cannot have worktrees; run in place instead",
        root.display()
    )]
    NoRepository { root: PathBuf },
    #[error("{} is not a worktree of {}", path.display(), repo.display())]
    NotAWorktree { path: PathBuf, repo: PathBuf },
    #[error(
        "{} already exists; pass it as the worktree to reuse it, or choose another branch",
        path.display()
    )]
    WorktreeExists { path: PathBuf },
    /// Another session works in the worktree a deletion would remove (after a reset).
    #[error(
        "{} is also the worktree of session {sessions} (after a reset, say); delete that one first or keep the worktree",
        path.display()
    )]
    WorktreeShared { path: PathBuf, sessions: String },
    #[error("crucible did not create {}; remove it with git if you mean to", path.display())]
    NotOurWorktree { path: PathBuf },
    /// The worktree a deletion would remove has changes; `named`: the first three.
    #[error(
        "{} has {count} uncommitted change(s) ({named}); commit them, or force to drop them",
        path.display()
    )]
    Uncommitted {
        path: PathBuf,
        count: usize,
        named: String,
    },
    #[error("branch {branch} has commits not merged into HEAD; merge them, or force to drop them")]
    Unmerged { branch: String },
    /// The session's records are gone, but git could not remove `what` (its worktree or
    /// its branch).
    #[error("{}", partly_deleted(id, what, source))]
    PartlyDeleted {
        id: String,
        what: String,
        #[source]
        source: GitError,
    },
    #[error("moving a session needs team mode: daemons sharing one database ([store] url)")]
    NoTeam,
    #[error(
        "session {id} works in place, not in a worktree of its own; there is no branch to move"
    )]
    NothingToMove { id: String },
    /// `state`: what the session is doing, in words.
    #[error("session {id} is {state}: move it once its turn has ended (or cancel the turn)")]
    MoveBusy { id: String, state: &'static str },
    /// `kiln`: "the kiln" here, "this kiln" on the daemon taking a session.
    #[error("{kiln} is not a git repository")]
    NotARepository { kiln: &'static str },
    #[error("the daemon on {host} ({kiln}) has not renewed its lease: it cannot take a session")]
    DaemonNotLive { host: String, kiln: String },
    #[error("{to} is this daemon, which runs the session already")]
    MoveHere { to: String },
    #[error("no daemon of the team is {to:?} (`cru daemon status` lists them)")]
    NoSuchDaemon { to: String },
    /// `ids`: their instance ids.
    #[error("{to:?} names {count} daemons ({ids}); give its instance id")]
    ManyDaemons {
        to: String,
        count: usize,
        ids: String,
    },
    /// The daemon asked to take a session over refused: its code and words.
    #[error("{message}")]
    RefusedThere { code: i64, message: String },
    #[error("cannot write the request to the daemon taking the session: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the daemon that took the session answered in a way this one cannot read: {0}")]
    UnreadableAnswer(#[source] serde_json::Error),
    #[error("session {id} is not run by the daemon {from} that asks to move it")]
    NotTheOwner { id: String, from: String },
    #[error("the branch's bundle is not base64: {0}")]
    BadBundle(#[source] base64::DecodeError),
    #[error("{} exists here already; the session cannot take it", path.display())]
    TakenHere { path: PathBuf },
    /// The agent of a session taken over would not start on this daemon.
    #[error("the agent would not start here: {0}")]
    NotStartedHere(#[source] Box<crate::sessions::SpawnError>),
    /// A file could not be read or written: what was being done, and the io error.
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
    /// Starting or telling the session's agent failed (boxed: a spawn error is large).
    #[error(transparent)]
    Run(Box<RunError>),
    #[error(transparent)]
    Guard(#[from] GuardError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// What a deletion that removed the session but not all of its git says: a failed git
/// command first, in git's words; otherwise what was kept first.
fn partly_deleted(id: &str, what: &str, source: &GitError) -> String {
    match source {
        GitError::Failed { .. } => {
            format!("{source} (session {id} was deleted, but {what} could not be removed)")
        }
        _ => format!("session {id} was deleted, but {what} could not be removed: {source}"),
    }
}

impl LifecycleError {
    /// The JSON-RPC code of this refusal.
    pub fn code(&self) -> i64 {
        use LifecycleError as E;
        match self {
            E::Profile { .. }
            | E::WorktreeAndInPlace
            | E::DriverOptions(_)
            | E::InternalApart { .. }
            | E::InPlaceApart { .. }
            | E::TaskTooLong { .. }
            | E::NoName
            | E::BadName { .. }
            | E::NothingToFork { .. }
            | E::NothingToHandOff { .. }
            | E::HandOffProfile(_)
            | E::NoGlobs
            | E::RefinedEnough { .. }
            | E::NoRepository { .. }
            | E::NotAWorktree { .. }
            | E::NotOurWorktree { .. }
            | E::NoTeam
            | E::NothingToMove { .. }
            | E::NotARepository { .. }
            | E::DaemonNotLive { .. }
            | E::MoveHere { .. }
            | E::NoSuchDaemon { .. }
            | E::ManyDaemons { .. }
            | E::BadBundle(_) => code::INVALID_PARAMS,
            E::StillCreating { .. }
            | E::NothingToResend { .. }
            | E::BranchExists { .. }
            | E::HandedOffAlready { .. }
            | E::RefineRunning { .. }
            | E::WorktreeExists { .. }
            | E::WorktreeShared { .. }
            | E::Uncommitted { .. }
            | E::Unmerged { .. }
            | E::MoveBusy { .. }
            | E::NotTheOwner { .. }
            | E::TakenHere { .. }
            | E::Git(GitError::Refused(_)) => code::CONFLICT,
            E::PartlyDeleted {
                source: GitError::Failed { .. },
                ..
            }
            | E::Git(GitError::Failed { .. }) => code::GIT_FAILED,
            E::PartlyDeleted { .. } | E::Git(GitError::Spawn(_)) => code::TOOL_FAILED,
            E::RefusedThere { code, .. } => *code,
            E::UnreadableAnswer(_) => code::STORE_ERROR,
            E::NotStartedHere(_) | E::Encode(_) => code::INTERNAL_ERROR,
            E::Io { .. } => code::IO_ERROR,
            E::Run(e) => e.code(),
            E::Ledger(e) => e.code(),
            E::Guard(e) => e.code(),
        }
    }
}

impl From<RunError> for LifecycleError {
    fn from(e: RunError) -> Self {
        LifecycleError::Run(Box::new(e))
    }
}

crate::ledger::coded_error!(LifecycleError);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorObject;

    #[test]
    fn each_refusal_keeps_the_code_and_words_it_had() {
        let cases = [
            (
                LifecycleError::StillCreating { id: "s1".into() },
                code::CONFLICT,
                "session s1 is still being created",
            ),
            (
                LifecycleError::TaskTooLong {
                    kib: 70,
                    most_kib: 64,
                },
                code::INVALID_PARAMS,
                "the task is 70 KiB, over the 64 KiB a task may hold: put the rest in a file in the worktree and name it in the task",
            ),
            (
                LifecycleError::Uncommitted {
                    path: "/w/a".into(),
                    count: 2,
                    named: "M a.rs, ?? b.rs".into(),
                },
                code::CONFLICT,
                "/w/a has 2 uncommitted change(s) (M a.rs, ?? b.rs); commit them, or force to drop them",
            ),
            (
                LifecycleError::PartlyDeleted {
                    id: "s1".into(),
                    what: "its branch cru/x".into(),
                    source: GitError::Failed {
                        args: "branch -d cru/x".into(),
                        message: "not merged".into(),
                    },
                },
                code::GIT_FAILED,
                "git branch -d cru/x: not merged (session s1 was deleted, but its branch cru/x could not be removed)",
            ),
            (
                LifecycleError::PartlyDeleted {
                    id: "s1".into(),
                    what: "its worktree /w/a".into(),
                    source: GitError::Refused("it is locked".into()),
                },
                code::TOOL_FAILED,
                "session s1 was deleted, but its worktree /w/a could not be removed: it is locked",
            ),
            (
                LifecycleError::RefusedThere {
                    code: code::NOT_FOUND,
                    message: "no session s1".into(),
                },
                code::NOT_FOUND,
                "no session s1",
            ),
        ];
        for (error, code, words) in cases {
            let object = ErrorObject::from(error);
            assert_eq!((object.code, object.message.as_str()), (code, words));
        }
    }

    #[test]
    fn a_ledger_error_passes_through_as_it_was() {
        let missing = LedgerError::from(LifecycleError::Ledger(LedgerError::NotFound(
            "no session s9".into(),
        )));
        assert!(matches!(&missing, LedgerError::NotFound(m) if m == "no session s9"));
        let refused = LedgerError::from(LifecycleError::NoGlobs);
        assert_eq!(
            (refused.code(), refused.to_string().as_str()),
            (code::INVALID_PARAMS, "give the globs to allow")
        );
    }
}
