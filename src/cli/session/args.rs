//! `cru session`'s subcommands and their arguments, as clap parses them.

use clap::{Args, Subcommand};

use super::{context, new};
use crate::protocol::RemoveOptions;

#[derive(Debug, Args)]
pub(super) struct RemoveArgs {
    /// Also remove the worktree crucible created for it.
    #[arg(long)]
    worktree: bool,
    /// Also delete its branch (and the worktree).
    #[arg(long)]
    branch: bool,
    /// Drop uncommitted changes and unmerged commits too.
    #[arg(long)]
    force: bool,
    /// Also remove the audit log (prune: also those of sessions deleted earlier).
    #[arg(long)]
    audit: bool,
}

impl RemoveArgs {
    pub(super) fn options(&self) -> RemoveOptions {
        RemoveOptions {
            remove_worktree: self.worktree,
            delete_branch: self.branch,
            force: self.force,
            audit: self.audit,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum SessionAction {
    /// Start an agent in a new session: a new branch and worktree by default.
    New(Box<new::NewArgs>),
    /// List sessions.
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
        /// Every kiln's sessions (`cru kilns`), each named with its kiln.
        #[arg(long)]
        all_kilns: bool,
    },
    /// Show one session in detail.
    Status {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Print the session as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's transcript.
    Logs {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Keep printing as the agent works, until its agent ends (or Ctrl-C).
        #[arg(long, short)]
        follow: bool,
        /// Print entries as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Send a prompt; it waits its turn if one is running.
    Send {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The prompt (its words are joined with spaces).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Ask the agent to stop its current turn.
    Cancel {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
    },
    /// Send the turn that was cut short (by a daemon restart, or its agent's end) again;
    /// an agent that is gone is started again for it.
    Resend {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
    },
    /// End the session's agent; the worktree and transcript stay.
    Stop {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
    },
    /// Delete a session (stopping its agent first).
    Delete {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        #[command(flatten)]
        remove: RemoveArgs,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show or reshape a session's context stack (pop, checkpoint, rollback,
    /// replace-top, reset, summarize).
    Context {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        #[command(subcommand)]
        action: Option<context::ContextAction>,
        /// Print the stack and the change as JSON.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Run a command in the session's environment (its sandbox, mounts and limits),
    /// for debugging: `cru session exec <s> -- ls -la`.
    Exec {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The command and its arguments, after `--`.
        #[arg(required = true, num_args = 1.., last = true)]
        command: Vec<String>,
    },
    /// Show a session's audit log: its start (driver, mounts, network, limits, env
    /// names), prompts, tool calls, permissions, file access, commands and state changes.
    Audit {
        /// A session, or the full id of a deleted one.
        session: String,
        /// Print the log's records as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Refinement: widen the read manifest of a session a context miss
    /// stopped, and start its agent again (at most 10 times per work item).
    Refine {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Also allow reading these files: a glob relative to the worktree (repeat
        /// for several).
        #[arg(long = "allow-read", value_name = "GLOB", required = true)]
        allow_read: Vec<String>,
        /// The restarted agent's first prompt.
        #[arg(long)]
        prompt: Option<String>,
    },
    /// Reset: a new session (fresh agent, empty security state) for the same
    /// worktree, agent and driver; the old one is stopped with reason `reset`, its
    /// transcript and audit log kept.
    Reset {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Keep the rules switched off for the old session switched off.
        #[arg(long)]
        keep_disabled: bool,
        /// Print the new session as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The session's security state: rules its operations activated, rules switched
    /// off for it, operations approved once, credentials approved.
    Security {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Print the security state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start the session's agent again, resuming its own session where the agent can.
    Restart {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
    },
    /// Name the session (lists and the workbench show it; commands accept it).
    Rename {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Its new name.
        name: String,
    },
    /// A new session on a new branch from this session's HEAD, its context stack copied.
    Fork {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The new branch (default: `<branch>-fork`).
        #[arg(long, short)]
        worktree: Option<String>,
        /// A first prompt for the new session.
        #[arg(long)]
        task: Option<String>,
        /// Print the new session as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Team mode: the session goes on on another daemon of the team, with its branch
    /// (uncommitted work committed first), transcript, context and open questions; its
    /// agent here stops once that daemon has it, and a failed move leaves it running here.
    Move {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The daemon that takes it: its instance id (or a prefix), host or kiln folder,
        /// as `cru daemon status` lists them.
        #[arg(long)]
        to: String,
        /// Print what the move did as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The session's task goes on with another agent in the same worktree and branch:
    /// its first prompt is where the work stands (the task, the context summary, open
    /// questions, the diff so far); this session is stopped.
    Handoff {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The agent profile that takes over.
        #[arg(long, short)]
        agent: String,
        /// Print the new session as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The session's changes against the point its branch left its base branch,
    /// committed and uncommitted.
    Diff {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// Files and counts only.
        #[arg(long)]
        stat: bool,
        /// Print the files and their changes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Commit everything in the session's worktree.
    Commit {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The message (default: the session's task).
        #[arg(long, short)]
        message: Option<String>,
    },
    /// Merge the session's branch into its base branch, checked out in the kiln;
    /// refused, naming the files, when it would conflict.
    Merge {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// One commit on the base branch instead of a merge commit.
        #[arg(long, conflicts_with = "rebase")]
        squash: bool,
        /// Rebase the branch onto the base branch, then fast-forward.
        #[arg(long)]
        rebase: bool,
        /// The merge (or squash) commit's message.
        #[arg(long, short)]
        message: Option<String>,
    },
    /// Push the session's branch and open a pull request with gh.
    Pr {
        /// The session: its number in `cru session list`, its name, branch or id.
        session: String,
        /// The pull request's title (default: the first line of the session's task, or
        /// its name).
        #[arg(long)]
        title: Option<String>,
        /// The pull request's description (default: the session's name and id).
        #[arg(long)]
        body: Option<String>,
    },
    /// Sessions whose branches change the same files (and lines): the conflict radar.
    Conflicts {
        /// Print the overlapping sessions and files as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete every complete, cancelled or stopped session.
    Prune {
        #[command(flatten)]
        remove: RemoveArgs,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
}
