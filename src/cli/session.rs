//! `cru session`: create agent sessions, watch them, talk to them, and clean them up.
//!
//! A session can be named by its id, a unique start or end of its id, its display name
//! (`feat/auth @ claude`) or its branch.

mod audit;
mod context;
mod control;
mod land;
mod manage;
mod new;
mod show;

use super::output::{out, outln};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::output;
use crate::client::Client;
use crate::kiln::Kiln;
use crate::markdown::render;
use crate::protocol::methods as m;
use crate::protocol::{
    DeleteOutcome, DeleteSessionParams, EntryKind, Event, PromptParams, RemoveOptions, Session,
    SessionIdParams, SessionState, Topic, TranscriptEntry, TranscriptParams,
};

#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    action: SessionAction,
}

#[derive(Debug, Args)]
struct RemoveArgs {
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
    fn options(&self) -> RemoveOptions {
        RemoveOptions {
            remove_worktree: self.worktree,
            delete_branch: self.branch,
            force: self.force,
            audit: self.audit,
        }
    }
}

#[derive(Debug, Subcommand)]
enum SessionAction {
    /// Start an agent in a new session: a new branch and worktree by default.
    New(Box<new::NewArgs>),
    /// List sessions.
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Show one session in detail.
    Status {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Print a session's transcript.
    Logs {
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
        session: String,
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// Ask the agent to stop its current turn.
    Cancel { session: String },
    /// Send the turn that was cut short (by a daemon restart, or its agent's end) again;
    /// an agent that is gone is started again for it.
    Resend { session: String },
    /// End the session's agent; the worktree and transcript stay.
    Stop { session: String },
    /// Delete a session (stopping its agent first).
    Delete {
        session: String,
        #[command(flatten)]
        remove: RemoveArgs,
        #[arg(long)]
        json: bool,
    },
    /// Show or reshape a session's context stack (pop, checkpoint, rollback,
    /// replace-top, reset, summarize).
    Context {
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
        session: String,
        #[arg(required = true, num_args = 1.., last = true)]
        command: Vec<String>,
    },
    /// Show a session's audit log: its start (driver, mounts, network, limits, env
    /// names), prompts, tool calls, permissions, file access, commands and state changes.
    Audit {
        /// A session, or the full id of a deleted one.
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Refinement: widen the read manifest of a session a context miss
    /// stopped, and start its agent again (at most 10 times per work item).
    Refine {
        session: String,
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
        session: String,
        /// Keep the rules switched off for the old session switched off.
        #[arg(long)]
        keep_disabled: bool,
        #[arg(long)]
        json: bool,
    },
    /// The session's security state: rules its operations activated, rules switched
    /// off for it, operations approved once, credentials approved.
    Security {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Start the session's agent again, resuming its own session where the agent can.
    Restart { session: String },
    /// Name the session (lists and the workbench show it; commands accept it).
    Rename { session: String, name: String },
    /// A new session on a new branch from this session's HEAD, its context stack copied.
    Fork {
        session: String,
        /// The new branch (default: `<branch>-fork`).
        #[arg(long, short)]
        worktree: Option<String>,
        /// A first prompt for the new session.
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The session's task goes on with another agent in the same worktree and branch:
    /// its first prompt is where the work stands (the task, the context summary, open
    /// questions, the diff so far); this session is stopped.
    Handoff {
        session: String,
        /// The agent profile that takes over.
        #[arg(long, short)]
        agent: String,
        #[arg(long)]
        json: bool,
    },
    /// The session's changes against the point its branch left its base branch,
    /// committed and uncommitted.
    Diff {
        session: String,
        /// Files and counts only.
        #[arg(long)]
        stat: bool,
        #[arg(long)]
        json: bool,
    },
    /// Commit everything in the session's worktree.
    Commit {
        session: String,
        /// The message (default: the session's task).
        #[arg(long, short)]
        message: Option<String>,
    },
    /// Merge the session's branch into its base branch, checked out in the kiln;
    /// refused, naming the files, when it would conflict.
    Merge {
        session: String,
        /// One commit on the base branch instead of a merge commit.
        #[arg(long, conflicts_with = "rebase")]
        squash: bool,
        /// Rebase the branch onto the base branch, then fast-forward.
        #[arg(long)]
        rebase: bool,
        #[arg(long, short)]
        message: Option<String>,
    },
    /// Push the session's branch and open a pull request with gh.
    Pr {
        session: String,
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        body: Option<String>,
    },
    /// Sessions whose branches change the same files (and lines): the conflict radar.
    Conflicts {
        #[arg(long)]
        json: bool,
    },
    /// Delete every complete, cancelled or stopped session.
    Prune {
        #[command(flatten)]
        remove: RemoveArgs,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(kiln: Kiln, args: SessionArgs) -> anyhow::Result<ExitCode> {
    let client = super::connect(&kiln).await?;
    match args.action {
        SessionAction::New(args) => {
            let json = args.json;
            let created = client.call::<m::SessionCreate>(&args.params()?).await?;
            show::created(&created.session, json)?;
        }
        SessionAction::List { json } => show::list(&client, json).await?,
        SessionAction::Status { session, json } => {
            show::status(&kiln, &client, &session, json).await?;
        }
        SessionAction::Logs {
            session,
            follow,
            json,
        } => {
            show::logs(&client, &resolve(&client, &session).await?, follow, json).await?;
        }
        SessionAction::Send { session, text } => {
            manage::send(&client, &resolve(&client, &session).await?, text.join(" ")).await?;
        }
        SessionAction::Cancel { session } => {
            manage::cancel(&client, &resolve(&client, &session).await?).await?;
        }
        SessionAction::Resend { session } => {
            manage::resend(&client, &resolve(&client, &session).await?).await?;
        }
        SessionAction::Stop { session } => {
            manage::stop(&client, &resolve(&client, &session).await?).await?;
        }
        SessionAction::Delete {
            session,
            remove,
            json,
        } => {
            manage::delete(
                &client,
                &resolve(&client, &session).await?,
                remove.options(),
                json,
            )
            .await?;
        }
        SessionAction::Context {
            session,
            action,
            json,
        } => {
            context::run(&client, &resolve(&client, &session).await?, action, json).await?;
        }
        SessionAction::Exec { session, command } => {
            let s = resolve(&client, &session).await?;
            return audit::exec(&client, &s, command).await;
        }
        SessionAction::Audit { session, json } => {
            let id = match resolve(&client, &session).await {
                Ok(s) => s.id,
                Err(_) => session.trim().to_string(),
            };
            audit::show(&client, &id, json).await?;
        }
        SessionAction::Refine {
            session,
            allow_read,
            prompt,
        } => {
            manage::refine(
                &client,
                &resolve(&client, &session).await?,
                allow_read,
                prompt,
            )
            .await?;
        }
        SessionAction::Reset {
            session,
            keep_disabled,
            json,
        } => {
            manage::reset(
                &client,
                &resolve(&client, &session).await?,
                keep_disabled,
                json,
            )
            .await?;
        }
        SessionAction::Security { session, json } => {
            audit::security(&client, &resolve(&client, &session).await?, json).await?;
        }
        SessionAction::Prune { remove, json } => {
            manage::prune(&client, remove.options(), json).await?
        }
        landing => land_or_control(&client, landing).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Reviewing, landing, restarting, renaming, forking and handing off a session.
async fn land_or_control(client: &Client, action: SessionAction) -> anyhow::Result<()> {
    match action {
        SessionAction::Diff {
            session,
            stat,
            json,
        } => {
            land::diff(client, &resolve(client, &session).await?, stat, json).await?;
        }
        SessionAction::Commit { session, message } => {
            land::commit(client, &resolve(client, &session).await?, message).await?;
        }
        SessionAction::Merge {
            session,
            squash,
            rebase,
            message,
        } => {
            land::merge(
                client,
                &resolve(client, &session).await?,
                land::strategy(squash, rebase),
                message,
            )
            .await?;
        }
        SessionAction::Pr {
            session,
            title,
            body,
        } => {
            land::pr(client, &resolve(client, &session).await?, title, body).await?;
        }
        SessionAction::Conflicts { json } => land::conflicts(client, json).await?,
        SessionAction::Restart { session } => {
            control::restart(client, &resolve(client, &session).await?).await?;
        }
        SessionAction::Rename { session, name } => {
            control::rename(client, &resolve(client, &session).await?, name).await?;
        }
        SessionAction::Handoff {
            session,
            agent,
            json,
        } => {
            control::handoff(client, &resolve(client, &session).await?, agent, json).await?;
        }
        SessionAction::Fork {
            session,
            worktree,
            task,
            json,
        } => {
            control::fork(
                client,
                &resolve(client, &session).await?,
                worktree,
                task,
                json,
            )
            .await?;
        }
        other => bail!("cru session: {other:?} is not a landing or control action"),
    }
    Ok(())
}

/// A path that exists is sent absolute (the daemon runs elsewhere); anything else is
/// a branch name.
pub(super) fn absolute_if_dir(spec: &str) -> String {
    let path = Path::new(spec);
    if path.is_dir()
        && let Ok(real) = path.canonicalize()
    {
        return real.display().to_string();
    }
    spec.to_string()
}

/// The `GOAL:` of a session's context summary, for one table cell.
fn goal_of(s: &Session) -> &str {
    s.context_summary
        .as_deref()
        .and_then(|t| t.lines().next())
        .map_or("", |l| l.strip_prefix("GOAL: ").unwrap_or(l))
}

fn short_id(id: &str) -> &str {
    &id[id.len().saturating_sub(8)..]
}

fn state_of(s: &Session) -> String {
    s.state
        .map_or_else(|| s.status.clone(), |st| st.to_string())
}

fn removed(d: &DeleteOutcome) -> &'static str {
    match (d.worktree_removed, d.branch_deleted) {
        (true, true) => " with its worktree and branch",
        (true, false) => " with its worktree",
        _ => "",
    }
}

pub(super) async fn list(client: &Client) -> anyhow::Result<Vec<Session>> {
    listed(client, false).await
}

/// The sessions, with what each agent costs the machine when `resources` (the daemon
/// reads every process's figures for it).
pub(super) async fn listed(client: &Client, resources: bool) -> anyhow::Result<Vec<Session>> {
    Ok(client
        .call::<m::SessionList>(&crate::protocol::SessionListParams {
            channel: None,
            resources,
        })
        .await?
        .sessions)
}

/// Finds the session `name` refers to.
pub(super) async fn resolve(client: &Client, name: &str) -> anyhow::Result<Session> {
    let sessions = list(client).await?;
    pick(&sessions, name).cloned()
}

pub(super) fn pick<'a>(sessions: &'a [Session], name: &str) -> anyhow::Result<&'a Session> {
    let name = name.trim();
    let lower = name.to_lowercase();
    if let Some(s) = sessions.iter().find(|s| {
        s.id.eq_ignore_ascii_case(name)
            || s.display_name == name
            || s.branch.as_deref() == Some(name)
    }) {
        return Ok(s);
    }
    // `[n]` or `n`, as `cru session list` numbers them (a longer run of digits may
    // still be the start of an id).
    let bracketed = name.starts_with('[') && name.ends_with(']');
    if let Ok(n) = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<usize>()
    {
        if let Some(s) = n.checked_sub(1).and_then(|i| sessions.get(i)) {
            return Ok(s);
        }
        if bracketed || name.len() < 4 {
            bail!(
                "no session [{n}]: `cru session list` numbers {} session(s)",
                sessions.len()
            );
        }
    }
    if name.len() < 4 {
        bail!("no session {name:?} (give at least 4 characters of its id)");
    }
    let matches: Vec<&Session> = sessions
        .iter()
        .filter(|s| {
            let id = s.id.to_lowercase();
            id.starts_with(&lower) || id.ends_with(&lower)
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => bail!("no session {name:?}; `cru session list` shows them"),
        many => bail!(
            "{name:?} matches {} sessions ({}); give more of the id",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn session(id: &str, name: &str, branch: Option<&str>) -> Session {
        serde_json::from_value(json!({
            "id": id, "agent_type": "acp", "agent_name": "a", "status": "active",
            "started_at": "2026-01-01T00:00:00Z", "last_heartbeat": "2026-01-01T00:00:00Z",
            "display_name": name, "branch": branch,
        }))
        .unwrap()
    }

    #[test]
    fn sessions_are_found_by_id_part_name_or_branch() {
        let list = vec![
            session(
                "01KAAAAAAAAAAAAAAAAAAAAAA1",
                "cru/aaaaa1 @ a",
                Some("cru/aaaaa1"),
            ),
            session("01KAAAAAAAAAAAAAAAAAAAAAB2", "feat @ a", Some("feat")),
        ];
        assert_eq!(pick(&list, "feat").unwrap().id, list[1].id);
        assert_eq!(pick(&list, "cru/aaaaa1 @ a").unwrap().id, list[0].id);
        assert_eq!(pick(&list, "aab2").unwrap().id, list[1].id);
        assert_eq!(
            pick(&list, "01kaaaaaaaaaaaaaaaaaaaaaa1").unwrap().id,
            list[0].id
        );
        let ambiguous = pick(&list, "01KAAAA").unwrap_err().to_string();
        assert!(ambiguous.contains("matches 2"), "{ambiguous}");
        assert!(pick(&list, "zzzz").is_err());
        assert!(pick(&list, "a1").is_err());
        // The numbers `cru session list` prints.
        assert_eq!(pick(&list, "1").unwrap().id, list[0].id);
        assert_eq!(pick(&list, "[2]").unwrap().id, list[1].id);
        let beyond = pick(&list, "3").unwrap_err().to_string();
        assert!(beyond.contains("numbers 2 session"), "{beyond}");
        assert!(pick(&list, "0").is_err());
    }
}
