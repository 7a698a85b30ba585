//! The slash-command table: every command's name, aliases, argument synopsis, help line
//! and the words Tab completes after it, in `/help` order.

use super::new;

/// One slash command as the table describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandSpec {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// The argument synopsis shown by `/help`.
    pub args: &'static str,
    pub help: &'static str,
    /// Words Tab completes as the first argument.
    pub subcommands: &'static [&'static str],
}

/// Every slash command, in `/help` order.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "sessions",
        &[],
        "",
        "list every session with its state and inbox",
        &[],
    ),
    spec("inbox", &[], "", "show the inbox pane and move to it", &[]),
    spec("goto", &["g"], "<n>", "focus session n", &[]),
    spec(
        "search",
        &["find"],
        "<words…>",
        "find words in every transcript, the inbox and sessions' names and tasks; Enter jumps to one",
        &[],
    ),
    spec("next", &["n"], "", "focus the next session", &[]),
    spec("prev", &["p"], "", "focus the previous session", &[]),
    spec(
        "new",
        &[],
        new::SYNOPSIS,
        "create a session and focus it",
        new::COMPLETED_FLAGS,
    ),
    spec(
        "answer",
        &["a"],
        "<option n | text>",
        "answer the open decision or approval",
        &[],
    ),
    spec(
        "context",
        &[],
        "[pop [n] | checkpoint <name> | rollback <name> | replace-top <text> | reset | summarize]",
        "show or reshape the focused session's context",
        &[
            "pop",
            "checkpoint",
            "rollback",
            "replace-top",
            "reset",
            "summarize",
        ],
    ),
    spec(
        "audit",
        &[],
        "",
        "show the focused session's audit log (driver, prompts, tools, files, commands)",
        &[],
    ),
    spec(
        "rules",
        &[],
        "",
        "the rules that judge what agents do, and how each stands in this session",
        &[],
    ),
    spec(
        "disable",
        &[],
        "<rule>",
        "switch a rule off for the focused session (it no longer asks or refuses there)",
        &[],
    ),
    spec(
        "enable",
        &[],
        "<rule>",
        "switch a rule on again for the focused session",
        &[],
    ),
    spec(
        "session",
        &[],
        "",
        "the focused session's security state (activated rules, approvals, credentials)",
        &[],
    ),
    spec(
        "memory",
        &[],
        "",
        "the focused session's context summary",
        &[],
    ),
    spec(
        "skills",
        &[],
        "",
        "the focused agent's own commands (ACP)",
        &[],
    ),
    spec(
        "cancel",
        &[],
        "",
        "end the focused session's running turn",
        &[],
    ),
    spec(
        "resend",
        &[],
        "",
        "send the focused session's turn that was cut short again (alt-r)",
        &[],
    ),
    spec(
        "stop",
        &[],
        "",
        "end the focused session's agent (worktree and transcript stay)",
        &[],
    ),
    spec(
        "restart",
        &[],
        "",
        "start the focused session's agent again (its own session resumed where it can)",
        &[],
    ),
    spec(
        "delete",
        &[],
        "[--worktree] [--branch] [--force]",
        "delete the focused session (and its worktree, branch); uncommitted work is kept unless forced",
        &["--worktree", "--branch", "--force"],
    ),
    spec(
        "prune",
        &[],
        "[--worktree] [--branch] [--force]",
        "delete every session that is done, cancelled or stopped",
        &["--worktree", "--branch", "--force"],
    ),
    spec("rename", &[], "<name>", "name the focused session", &[]),
    spec(
        "fork",
        &[],
        "[--worktree <branch>] [task…]",
        "a new session on a new branch from the focused session's HEAD, its context copied",
        &["--worktree"],
    ),
    spec(
        "move",
        &[],
        "<daemon>",
        "team mode: the focused session goes on on another daemon (host, kiln folder or id)",
        &[],
    ),
    spec(
        "handoff",
        &[],
        "<agent>",
        "the focused session's task goes on with another agent in the same worktree; this one stops",
        &[],
    ),
    spec(
        "diff",
        &[],
        "",
        "the focused session's changes against its base branch; c comments on a line",
        &[],
    ),
    spec(
        "review",
        &[],
        "[send | clear]",
        "list the review comments written in /diff, send them to the agent as one prompt, or drop them",
        &["send", "clear"],
    ),
    spec(
        "commit",
        &[],
        "[message…]",
        "commit everything in the focused session's worktree (message: its task)",
        &[],
    ),
    spec(
        "merge",
        &[],
        "[--squash | --rebase]",
        "land the focused session's branch on its base branch in the kiln (refused, naming the files, if it would conflict)",
        &["--squash", "--rebase"],
    ),
    spec(
        "pr",
        &[],
        "",
        "push the focused session's branch and open a pull request with gh",
        &[],
    ),
    spec(
        "conflicts",
        &[],
        "",
        "sessions whose branches change the same files or lines",
        &[],
    ),
    spec(
        "reset",
        &[],
        "[--keep-disabled]",
        "a fresh session (new agent, empty security state) for the focused session's worktree; the old one ends as reset",
        &["--keep-disabled"],
    ),
    spec("approve", &[], "", "approve the open approval here", &[]),
    spec("deny", &[], "", "deny the open approval here", &[]),
    spec("help", &["h"], "", "show key bindings and commands", &[]),
    spec(
        "quit",
        &["q"],
        "",
        "leave the workbench (agents keep working)",
        &[],
    ),
];

const fn spec(
    name: &'static str,
    aliases: &'static [&'static str],
    args: &'static str,
    help: &'static str,
    subcommands: &'static [&'static str],
) -> CommandSpec {
    CommandSpec {
        name,
        aliases,
        args,
        help,
        subcommands,
    }
}

/// Finds a command by name or alias.
pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}
