//! The slash commands: one static table ([`COMMANDS`]) drives parsing, `/help` and Tab
//! completion, so the three never disagree.

mod new;

use crate::context::ContextOp;
use crate::protocol::ContextCall;
use crate::protocol::{DriverOptions, MergeStrategy, RemoveOptions};

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

/// Why a line is not a valid slash command; `Display` is the message the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("unknown command /{name}{}", suggestion_text(.suggestion))]
    Unknown {
        name: String,
        suggestion: Option<&'static str>,
    },
    #[error("/{command}{}: {problem}", usage_text(.synopsis))]
    BadArgs {
        command: &'static str,
        synopsis: &'static str,
        problem: String,
    },
}

fn usage_text(synopsis: &str) -> String {
    if synopsis.is_empty() {
        String::new()
    } else {
        format!(" {synopsis}")
    }
}

fn suggestion_text(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(
        || " — /help lists the commands".to_string(),
        |s| format!(" — did you mean /{s}?"),
    )
}

/// Finds a command by name or alias.
pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// Parses a line that starts with `/`.
pub fn parse(line: &str) -> Result<SlashCommand, CommandError> {
    let body = line.trim().trim_start_matches('/');
    let (name, rest) = body
        .split_once(char::is_whitespace)
        .map_or((body, ""), |(n, r)| (n, r.trim()));
    let Some(spec) = lookup(name) else {
        return Err(CommandError::Unknown {
            name: name.to_string(),
            suggestion: suggest(name),
        });
    };
    let bad = |problem: &str| CommandError::BadArgs {
        command: spec.name,
        synopsis: spec.args,
        problem: problem.to_string(),
    };
    let no_args = |command: SlashCommand| {
        if rest.is_empty() {
            Ok(command)
        } else {
            Err(bad("takes no arguments"))
        }
    };
    match spec.name {
        "sessions" => no_args(SlashCommand::Sessions),
        "inbox" => no_args(SlashCommand::Inbox),
        "next" => no_args(SlashCommand::Next),
        "prev" => no_args(SlashCommand::Prev),
        "help" => no_args(SlashCommand::Help),
        "audit" => no_args(SlashCommand::Audit),
        "rules" => no_args(SlashCommand::Rules),
        "session" => no_args(SlashCommand::Session),
        "memory" => no_args(SlashCommand::Memory),
        "skills" => no_args(SlashCommand::Skills),
        "cancel" => no_args(SlashCommand::Cancel),
        "stop" => no_args(SlashCommand::Stop),
        "restart" => no_args(SlashCommand::Restart),
        "diff" => no_args(SlashCommand::Diff),
        "pr" => no_args(SlashCommand::Pr),
        "conflicts" => no_args(SlashCommand::Conflicts),
        "review" => match rest {
            "" => Ok(SlashCommand::Review(ReviewOp::List)),
            "send" => Ok(SlashCommand::Review(ReviewOp::Send)),
            "clear" => Ok(SlashCommand::Review(ReviewOp::Clear)),
            _ => Err(bad("takes send or clear")),
        },
        "commit" => Ok(SlashCommand::Commit(
            (!rest.is_empty()).then(|| rest.to_string()),
        )),
        "merge" => match rest {
            "" => Ok(SlashCommand::Merge(MergeStrategy::Merge)),
            "--squash" => Ok(SlashCommand::Merge(MergeStrategy::Squash)),
            "--rebase" => Ok(SlashCommand::Merge(MergeStrategy::Rebase)),
            _ => Err(bad("takes --squash or --rebase")),
        },
        "delete" => parse_remove(rest)
            .map(SlashCommand::Delete)
            .map_err(|p| bad(&p)),
        "prune" => parse_remove(rest)
            .map(SlashCommand::Prune)
            .map_err(|p| bad(&p)),
        "rename" if rest.is_empty() => Err(bad("needs a name")),
        "rename" => Ok(SlashCommand::Rename(rest.to_string())),
        "fork" => parse_fork(rest).map_err(|p| bad(&p)),
        "approve" => no_args(SlashCommand::Approve),
        "reset" => match rest {
            "" => Ok(SlashCommand::Reset {
                keep_disabled: false,
            }),
            "--keep-disabled" => Ok(SlashCommand::Reset {
                keep_disabled: true,
            }),
            _ => Err(bad("takes only --keep-disabled")),
        },
        "deny" => no_args(SlashCommand::Deny),
        "disable" | "enable" if rest.split_whitespace().count() == 1 => Ok(SlashCommand::Rule {
            rule: rest.to_string(),
            enabled: spec.name == "enable",
        }),
        "disable" | "enable" => Err(bad("needs one rule id (see /rules)")),
        "quit" => no_args(SlashCommand::Quit),
        "goto" => match rest.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(SlashCommand::Goto(n)),
            _ => Err(bad("needs a session number (1, 2, …)")),
        },
        "answer" if rest.is_empty() => Err(bad("needs an option number or text")),
        "answer" => Ok(SlashCommand::Answer(rest.to_string())),
        "new" => new::parse_new(rest).map_err(|p| bad(&p)),
        "context" => parse_context(rest)
            .map(SlashCommand::Context)
            .map_err(|p| bad(&p)),
        _ => Err(bad("is in the table but has no parser")),
    }
}

/// `[--worktree] [--branch] [--force]`, as `cru session delete` takes them.
fn parse_remove(rest: &str) -> Result<RemoveOptions, String> {
    let mut options = RemoveOptions::default();
    for word in rest.split_whitespace() {
        match word {
            "--worktree" | "-w" => options.remove_worktree = true,
            "--branch" | "-b" => options.delete_branch = true,
            "--force" | "-f" => options.force = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// `[--worktree <branch>] [task…]`.
fn parse_fork(rest: &str) -> Result<SlashCommand, String> {
    let mut words = rest.split_whitespace().peekable();
    let mut worktree = None;
    if let Some(&flag) = words.peek()
        && (flag == "--worktree" || flag == "-w" || flag.starts_with("--worktree="))
    {
        words.next();
        let value = match flag.split_once('=') {
            Some((_, v)) => Some(v.to_string()),
            None => words.next().map(String::from),
        };
        worktree = Some(
            value
                .filter(|v| !v.is_empty())
                .ok_or("--worktree needs a branch")?,
        );
    }
    let task: Vec<&str> = words.collect();
    Ok(SlashCommand::Fork {
        worktree,
        task: (!task.is_empty()).then(|| task.join(" ")),
    })
}

fn parse_context(rest: &str) -> Result<ContextCall, String> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let name = |op: &str| match words.get(1..) {
        Some([name]) => Ok(name.to_string()),
        _ => Err(format!("{op} needs one checkpoint name")),
    };
    match words.first().copied() {
        None => Ok(ContextCall::Get),
        Some("pop") => match words.get(1..) {
            Some([]) => Ok(ContextCall::Apply(ContextOp::Pop(1))),
            Some([n]) => n
                .parse()
                .ok()
                .filter(|n| *n >= 1)
                .map(|n| ContextCall::Apply(ContextOp::Pop(n)))
                .ok_or_else(|| format!("pop takes a count ≥ 1, not {n}")),
            _ => Err("pop takes at most one count".into()),
        },
        Some("checkpoint") => {
            name("checkpoint").map(|n| ContextCall::Apply(ContextOp::Checkpoint(n)))
        }
        Some("rollback") => name("rollback").map(|n| ContextCall::Apply(ContextOp::Rollback(n))),
        Some(op @ ("replace-top" | "replace_top")) => {
            let summary = rest.trim_start()[op.len()..].trim();
            if summary.is_empty() {
                Err("usage: /context replace-top <summary text>".to_string())
            } else {
                Ok(ContextCall::Apply(ContextOp::ReplaceTop(
                    summary.to_string(),
                )))
            }
        }
        Some("reset") if words.len() == 1 => Ok(ContextCall::Apply(ContextOp::Reset)),
        Some("summarize") if words.len() == 1 => Ok(ContextCall::Apply(ContextOp::Summarize(None))),
        Some(op @ ("reset" | "summarize")) => Err(format!("{op} takes no arguments")),
        Some(other) => Err(format!("unknown operation {other}")),
    }
}

/// The closest command name or alias to a mistyped one, if any is close enough.
pub fn suggest(name: &str) -> Option<&'static str> {
    let limit = if name.chars().count() <= 3 { 1 } else { 2 };
    COMMANDS
        .iter()
        .flat_map(|c| {
            std::iter::once(c.name)
                .chain(c.aliases.iter().copied())
                .map(move |w| (w, c.name))
        })
        .filter(|(word, _)| word.len() > 1)
        .map(|(word, command)| (edit_distance(name, word), command))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, command)| command)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// What Tab does to the input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The new input line, when completion could extend it.
    pub line: Option<String>,
    /// Every candidate, when more than one fits.
    pub candidates: Vec<String>,
}

/// Completes a command name, or the first argument of a command with subcommands.
pub fn complete(line: &str) -> Completion {
    let body = line.trim_start_matches('/');
    match body.split_once(' ') {
        None => {
            let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            extend("/", body, &names, " ")
        }
        Some((name, arg)) if !arg.contains(' ') => match lookup(name) {
            Some(spec) if !spec.subcommands.is_empty() => {
                extend(&format!("/{name} "), arg, spec.subcommands, " ")
            }
            _ => Completion {
                line: None,
                candidates: Vec::new(),
            },
        },
        Some(_) => Completion {
            line: None,
            candidates: Vec::new(),
        },
    }
}

fn extend(head: &str, typed: &str, words: &[&str], tail: &str) -> Completion {
    let fits: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| w.starts_with(typed))
        .collect();
    match fits.as_slice() {
        [] => Completion {
            line: None,
            candidates: Vec::new(),
        },
        [only] => Completion {
            line: Some(format!("{head}{only}{tail}")),
            candidates: Vec::new(),
        },
        many => {
            let common = common_prefix(many);
            Completion {
                line: (common.len() > typed.len()).then(|| format!("{head}{common}")),
                candidates: many
                    .iter()
                    .map(|w| format!("{head}{w}").trim().to_string())
                    .collect(),
            }
        }
    }
}

fn common_prefix<'a>(words: &[&'a str]) -> &'a str {
    let first = words[0];
    let len = words[1..].iter().fold(first.len(), |len, w| {
        first[..len]
            .char_indices()
            .zip(w.chars())
            .find(|((_, a), b)| a != b)
            .map_or(len.min(w.len()), |((i, _), _)| i)
    });
    &first[..len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{DriverKind, Network};

    #[test]
    fn names_and_aliases_parse() {
        assert_eq!(parse("/next"), Ok(SlashCommand::Next));
        assert_eq!(parse("/n"), Ok(SlashCommand::Next));
        assert_eq!(parse("/p"), Ok(SlashCommand::Prev));
        assert_eq!(parse("  /goto 3 "), Ok(SlashCommand::Goto(3)));
        assert_eq!(parse("/sessions"), Ok(SlashCommand::Sessions));
        assert_eq!(parse("/answer 2"), Ok(SlashCommand::Answer("2".into())));
    }

    #[test]
    fn goto_needs_a_positive_number() {
        for bad in ["/goto", "/goto x", "/goto 0", "/goto -1"] {
            let err = parse(bad).unwrap_err();
            assert!(err.to_string().contains("session number"), "{bad}: {err}");
        }
    }

    #[test]
    fn commands_without_arguments_refuse_them() {
        assert_eq!(
            parse("/next 2").unwrap_err().to_string(),
            "/next: takes no arguments"
        );
    }

    #[test]
    fn new_takes_flags_in_any_order_and_a_task() {
        assert_eq!(
            parse("/new --agent codex --worktree fix/flaky make the test pass"),
            Ok(SlashCommand::New {
                worktree: Some("fix/flaky".into()),
                agent: Some("codex".into()),
                task: Some("make the test pass".into()),
                driver: DriverOptions::default(),
            })
        );
        assert_eq!(
            parse("/new --worktree=feat/auth"),
            Ok(SlashCommand::New {
                worktree: Some("feat/auth".into()),
                agent: None,
                task: None,
                driver: DriverOptions::default(),
            })
        );
        // After the task begins, dashes are part of it.
        assert_eq!(
            parse("/new fix --verbose flag"),
            Ok(SlashCommand::New {
                worktree: None,
                agent: None,
                task: Some("fix --verbose flag".into()),
                driver: DriverOptions::default(),
            })
        );
    }

    #[test]
    fn new_takes_the_driver_options_of_cru_session_new() {
        let Ok(SlashCommand::New { driver, task, .. }) = parse(
            "/new --driver sandbox --network host --env API_KEY --env=OTHER --memory 512 \
             --mount /data:ro --pids 64 fix it",
        ) else {
            panic!("not parsed");
        };
        assert_eq!(task.as_deref(), Some("fix it"));
        let spec = driver.resolve().unwrap();
        assert_eq!(spec.kind, DriverKind::Sandbox);
        assert_eq!(spec.network, Network::Host);
        assert_eq!(spec.env, ["API_KEY", "OTHER"]);
        assert_eq!((spec.memory, spec.pids), (Some(512), Some(64)));
        assert!(spec.mounts[0].read_only);
        assert!(
            parse("/new --driver vm")
                .unwrap_err()
                .to_string()
                .contains("unknown driver")
        );
        assert!(
            parse("/new --memory lots")
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
    }

    #[test]
    fn new_rejects_a_flag_without_value_or_an_unknown_flag() {
        assert!(
            parse("/new --agent")
                .unwrap_err()
                .to_string()
                .contains("--agent needs a value")
        );
        assert!(
            parse("/new --model x")
                .unwrap_err()
                .to_string()
                .contains("unknown option --model")
        );
    }

    #[test]
    fn context_operations_parse() {
        let ctx = |s| {
            parse(s).map(|c| match c {
                SlashCommand::Context(op) => op,
                other => panic!("{other:?}"),
            })
        };
        assert_eq!(ctx("/context"), Ok(ContextCall::Get));
        assert_eq!(
            ctx("/context pop"),
            Ok(ContextCall::Apply(ContextOp::Pop(1)))
        );
        assert_eq!(
            ctx("/context pop 3"),
            Ok(ContextCall::Apply(ContextOp::Pop(3)))
        );
        assert_eq!(
            ctx("/context rollback before-refactor"),
            Ok(ContextCall::Apply(ContextOp::Rollback(
                "before-refactor".into()
            )))
        );
        assert_eq!(
            ctx("/context reset"),
            Ok(ContextCall::Apply(ContextOp::Reset))
        );
        assert_eq!(
            ctx("/context replace-top  the tests pass now"),
            Ok(ContextCall::Apply(ContextOp::ReplaceTop(
                "the tests pass now".into()
            )))
        );
        assert!(parse("/context replace-top").is_err());
        assert!(parse("/context pop 0").is_err());
        assert!(parse("/context checkpoint").is_err());
        assert!(
            parse("/context explode")
                .unwrap_err()
                .to_string()
                .contains("unknown operation explode")
        );
    }

    #[test]
    fn a_typo_gets_a_suggestion() {
        assert_eq!(
            parse("/nxt").unwrap_err().to_string(),
            "unknown command /nxt — did you mean /next?"
        );
        assert_eq!(suggest("sesions"), Some("sessions"));
        assert_eq!(suggest("hepl"), Some("help"));
        assert_eq!(
            parse("/frobnicate").unwrap_err().to_string(),
            "unknown command /frobnicate — /help lists the commands"
        );
    }

    #[test]
    fn tab_completes_a_unique_prefix_and_lists_ambiguous_ones() {
        assert_eq!(complete("/inb").line.as_deref(), Some("/inbox "));
        // `/session` (seed 000) and `/sessions`: the common prefix, then both.
        let both = complete("/ses");
        assert_eq!(both.line.as_deref(), Some("/session"));
        assert_eq!(both.candidates, vec!["/sessions", "/session"]);
        let ambiguous = complete("/n");
        assert_eq!(ambiguous.line.as_deref(), Some("/ne"));
        assert_eq!(ambiguous.candidates, vec!["/next", "/new"]);
        let stuck = complete("/ne");
        assert_eq!(stuck.line, None);
        assert_eq!(stuck.candidates, vec!["/next", "/new"]);
        assert_eq!(complete("/nex").line.as_deref(), Some("/next "));
        assert_eq!(
            complete("/context ro").line.as_deref(),
            Some("/context rollback ")
        );
        assert_eq!(complete("/zzz").line, None);
    }

    #[test]
    fn common_prefix_extends_ambiguous_completion() {
        assert_eq!(complete("/context ").line, None);
        assert_eq!(complete("/context ").candidates.len(), 6);
        assert_eq!(
            extend("/", "c", &["checkpoint", "check"], " ")
                .line
                .as_deref(),
            Some("/check")
        );
    }

    #[test]
    fn every_table_entry_parses() {
        for spec in COMMANDS {
            let line = match spec.name {
                "goto" => "/goto 1".to_string(),
                "answer" => "/answer yes".to_string(),
                "disable" | "enable" => format!("/{} ask-before-push", spec.name),
                "rename" => "/rename the auth work".to_string(),
                name => format!("/{name}"),
            };
            assert!(parse(&line).is_ok(), "{line}");
        }
    }
}
