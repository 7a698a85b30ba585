//! What a slash command means once parsed: [`SlashCommand`] and its parts.

use crate::protocol::{ContextCall, DriverOptions, MergeStrategy, RemoveOptions};

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    Sessions,
    Inbox,
    /// 1-based, as shown in the status bar.
    Goto(usize),
    Next,
    Prev,
    New {
        worktree: Option<String>,
        agent: Option<String>,
        task: Option<String>,
        /// `--driver` and its options, as `cru session new` takes them.
        driver: DriverOptions,
        /// `--kiln NAME`: across kilns, the kiln to start it in.
        kiln: Option<String>,
    },
    /// An option number or free text.
    Answer(String),
    Context(ContextCall),
    /// The focused session's audit log.
    Audit,
    /// The rules, and how each stands in the focused session.
    Rules,
    /// Switch a rule off (`/disable`) or on (`/enable`) for the focused session.
    Rule {
        rule: String,
        enabled: bool,
    },
    /// The focused session's security state.
    Session,
    /// The focused session's context summary.
    Memory,
    /// The focused session's agent's own commands.
    Skills,
    Approve,
    Deny,
    /// End the focused session's running turn.
    Cancel,
    /// End the focused session's agent.
    Stop,
    /// The focused session's changes.
    Diff,
    /// The review comments: list, send to the agent, or drop.
    Review(ReviewOp),
    /// Commit the focused session's worktree.
    Commit(Option<String>),
    /// Land the focused session's branch.
    Merge(MergeStrategy),
    /// Open a pull request for the focused session's branch.
    Pr,
    /// The conflict radar.
    Conflicts,
    /// Start the focused session's agent again.
    Restart,
    /// Send the turn that was cut short again.
    Resend,
    /// Delete the focused session.
    Delete(RemoveOptions),
    /// Delete every finished session.
    Prune(RemoveOptions),
    /// Name the focused session.
    Rename(String),
    /// A new session from the focused one's HEAD and context.
    Fork {
        worktree: Option<String>,
        task: Option<String>,
    },
    /// The focused session's task goes on with this agent profile.
    Handoff(String),
    /// Team mode: the focused session goes on on this daemon of the team.
    Move(String),
    /// Find words in every session's transcript, the inbox and sessions' names and tasks.
    Search(String),
    /// A fresh session for the focused one's worktree and agent.
    Reset {
        keep_disabled: bool,
    },
    Help,
    Quit,
}

/// What `/review` does with the focused session's comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewOp {
    List,
    Send,
    Clear,
}
