//! Reading a typed line into a [`SlashCommand`]: the command by name or alias, then its
//! arguments by the command's own parser.

use super::command::{ReviewOp, SlashCommand};
use super::complete::suggest;
use super::error::{ArgsError, CommandError};
use super::new;
use super::table::lookup;
use crate::context::ContextOp;
use crate::protocol::{ContextCall, MergeStrategy, RemoveOptions};

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
    let bad = |problem: ArgsError| CommandError::BadArgs {
        command: spec.name,
        synopsis: spec.args,
        problem,
    };
    let usage = |complaint: &'static str| bad(ArgsError::Usage(complaint));
    let no_args = |command: SlashCommand| {
        if rest.is_empty() {
            Ok(command)
        } else {
            Err(usage("takes no arguments"))
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
        "resend" => no_args(SlashCommand::Resend),
        "diff" => no_args(SlashCommand::Diff),
        "pr" => no_args(SlashCommand::Pr),
        "conflicts" => no_args(SlashCommand::Conflicts),
        "review" => match rest {
            "" => Ok(SlashCommand::Review(ReviewOp::List)),
            "send" => Ok(SlashCommand::Review(ReviewOp::Send)),
            "clear" => Ok(SlashCommand::Review(ReviewOp::Clear)),
            _ => Err(usage("takes send or clear")),
        },
        "commit" => Ok(SlashCommand::Commit(
            (!rest.is_empty()).then(|| rest.to_string()),
        )),
        "merge" => match rest {
            "" => Ok(SlashCommand::Merge(MergeStrategy::Merge)),
            "--squash" => Ok(SlashCommand::Merge(MergeStrategy::Squash)),
            "--rebase" => Ok(SlashCommand::Merge(MergeStrategy::Rebase)),
            _ => Err(usage("takes --squash or --rebase")),
        },
        "delete" => parse_remove(rest).map(SlashCommand::Delete).map_err(bad),
        "prune" => parse_remove(rest).map(SlashCommand::Prune).map_err(bad),
        "rename" if rest.is_empty() => Err(usage("needs a name")),
        "rename" => Ok(SlashCommand::Rename(rest.to_string())),
        "fork" => parse_fork(rest).map_err(bad),
        "handoff" if rest.is_empty() || rest.contains(char::is_whitespace) => {
            Err(usage("needs the agent profile that takes over"))
        }
        "handoff" => Ok(SlashCommand::Handoff(rest.to_string())),
        "move" if rest.is_empty() || rest.contains(char::is_whitespace) => Err(usage(
            "needs the daemon that takes it: its host, kiln folder or instance id",
        )),
        "move" => Ok(SlashCommand::Move(rest.to_string())),
        "search" if !rest.chars().any(char::is_alphanumeric) => Err(usage("needs words to find")),
        "search" => Ok(SlashCommand::Search(rest.to_string())),
        "approve" => no_args(SlashCommand::Approve),
        "reset" => match rest {
            "" => Ok(SlashCommand::Reset {
                keep_disabled: false,
            }),
            "--keep-disabled" => Ok(SlashCommand::Reset {
                keep_disabled: true,
            }),
            _ => Err(usage("takes only --keep-disabled")),
        },
        "deny" => no_args(SlashCommand::Deny),
        "disable" | "enable" if rest.split_whitespace().count() == 1 => Ok(SlashCommand::Rule {
            rule: rest.to_string(),
            enabled: spec.name == "enable",
        }),
        "disable" | "enable" => Err(usage("needs one rule id (see /rules)")),
        "quit" => no_args(SlashCommand::Quit),
        "goto" => match rest.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(SlashCommand::Goto(n)),
            _ => Err(usage("needs a session number (1, 2, …)")),
        },
        "answer" if rest.is_empty() => Err(usage("needs an option number or text")),
        "answer" => Ok(SlashCommand::Answer(rest.to_string())),
        "new" => new::parse_new(rest).map_err(bad),
        "context" => parse_context(rest).map(SlashCommand::Context).map_err(bad),
        _ => Err(usage("is in the table but has no parser")),
    }
}

/// `[--worktree] [--branch] [--force]`, as `cru session delete` takes them.
fn parse_remove(rest: &str) -> Result<RemoveOptions, ArgsError> {
    let mut options = RemoveOptions::default();
    for word in rest.split_whitespace() {
        match word {
            "--worktree" | "-w" => options.remove_worktree = true,
            "--branch" | "-b" => options.delete_branch = true,
            "--force" | "-f" => options.force = true,
            other => return Err(ArgsError::UnknownOption(other.to_string())),
        }
    }
    Ok(options)
}

/// `[--worktree <branch>] [task…]`.
fn parse_fork(rest: &str) -> Result<SlashCommand, ArgsError> {
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
                .ok_or(ArgsError::Usage("--worktree needs a branch"))?,
        );
    }
    let task: Vec<&str> = words.collect();
    Ok(SlashCommand::Fork {
        worktree,
        task: (!task.is_empty()).then(|| task.join(" ")),
    })
}

/// `[pop [n] | checkpoint <name> | rollback <name> | replace-top <text> | reset | summarize]`.
fn parse_context(rest: &str) -> Result<ContextCall, ArgsError> {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let name = |op: &'static str| match words.get(1..) {
        Some([name]) => Ok(name.to_string()),
        _ => Err(ArgsError::NeedsCheckpoint(op)),
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
                .ok_or_else(|| ArgsError::BadCount(n.to_string())),
            _ => Err(ArgsError::Usage("pop takes at most one count")),
        },
        Some("checkpoint") => {
            name("checkpoint").map(|n| ContextCall::Apply(ContextOp::Checkpoint(n)))
        }
        Some("rollback") => name("rollback").map(|n| ContextCall::Apply(ContextOp::Rollback(n))),
        Some(op @ ("replace-top" | "replace_top")) => {
            let summary = rest.trim_start()[op.len()..].trim();
            if summary.is_empty() {
                Err(ArgsError::Usage(
                    "usage: /context replace-top <summary text>",
                ))
            } else {
                Ok(ContextCall::Apply(ContextOp::ReplaceTop(
                    summary.to_string(),
                )))
            }
        }
        Some("reset") if words.len() == 1 => Ok(ContextCall::Apply(ContextOp::Reset)),
        Some("summarize") if words.len() == 1 => Ok(ContextCall::Apply(ContextOp::Summarize(None))),
        Some(op @ ("reset" | "summarize")) => Err(ArgsError::NoArguments(op.to_string())),
        Some(other) => Err(ArgsError::UnknownOperation(other.to_string())),
    }
}
