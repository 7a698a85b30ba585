//! `cru session`: create agent sessions, watch them, talk to them, and clean them up.
//!
//! A session can be named by its id, a unique start or end of its id, its display name
//! (`feat/auth @ claude`) or its branch.

mod context;

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
    CreateSessionParams, DeleteOutcome, DeleteSessionParams, EntryKind, Event, PromptParams,
    RemoveOptions, Session, SessionIdParams, SessionState, Topic, TranscriptEntry,
    TranscriptParams,
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
}

impl RemoveArgs {
    fn options(&self) -> RemoveOptions {
        RemoveOptions {
            remove_worktree: self.worktree,
            delete_branch: self.branch,
            force: self.force,
        }
    }
}

#[derive(Debug, Subcommand)]
enum SessionAction {
    /// Start an agent in a new session: a new branch and worktree by default.
    New {
        /// The agent profile, `[agents.<name>]` in the settings.
        #[arg(long)]
        agent: String,
        /// A branch (existing, or new from HEAD) or the path of an existing worktree.
        #[arg(long, value_name = "BRANCH|PATH", conflicts_with = "in_place")]
        worktree: Option<String>,
        /// Work in the kiln itself, without a worktree.
        #[arg(long)]
        in_place: bool,
        /// The first prompt.
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        json: bool,
    },
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
    /// Delete every complete or stopped session.
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
        SessionAction::New {
            agent,
            worktree,
            in_place,
            task,
            json,
        } => {
            let worktree = worktree.map(|w| absolute_if_dir(&w));
            let created = client
                .call::<m::SessionCreate>(&CreateSessionParams {
                    agent,
                    worktree,
                    in_place,
                    task,
                })
                .await?;
            let s = created.session;
            if json {
                outln!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                outln!("created {} ({})", s.display_name, s.id);
                outln!(
                    "  worktree: {}",
                    s.worktree.as_deref().unwrap_or("the kiln itself")
                );
                outln!("  follow it: cru session logs -f {}", short_id(&s.id));
            }
        }
        SessionAction::List { json } => {
            let list = list(&client).await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                outln!("no sessions");
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        vec![
                            format!("[{}]", i + 1),
                            s.display_name.clone(),
                            state_of(s),
                            s.agent_name.clone(),
                            output::clip(s.task.as_deref().unwrap_or(""), 40),
                            s.turn_count.to_string(),
                            output::clip(goal_of(s), 40),
                            output::age(&s.started_at),
                            s.id.clone(),
                        ]
                    })
                    .collect();
                output::print_table(
                    &[
                        "#", "SESSION", "STATE", "AGENT", "TASK", "TURNS", "CONTEXT", "AGE", "ID",
                    ],
                    &rows,
                );
            }
        }
        SessionAction::Status { session, json } => {
            let s = match resolve(&client, &session).await {
                Ok(s) => s,
                // A registered session that ended is no longer listed, but its
                // termination record answers to its full id for a while.
                Err(e) => match client
                    .call::<m::SessionGet>(&SessionIdParams {
                        session_id: session.trim().to_string(),
                    })
                    .await
                {
                    Ok(reply) => reply.session,
                    Err(_) => return Err(e),
                },
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print_status(&kiln, &s);
            }
        }
        SessionAction::Logs {
            session,
            follow,
            json,
        } => {
            let s = resolve(&client, &session).await?;
            logs(&client, &s, follow, json).await?;
        }
        SessionAction::Send { session, text } => {
            let s = resolve(&client, &session).await?;
            let sent = client
                .call::<m::SessionPrompt>(&PromptParams {
                    session_id: s.id.clone(),
                    text: text.join(" "),
                })
                .await?;
            if sent.queued {
                outln!(
                    "queued for {}: it runs when the current turn ends",
                    s.display_name
                );
            } else {
                outln!("sent to {}", s.display_name);
            }
        }
        SessionAction::Cancel { session } => {
            let s = resolve(&client, &session).await?;
            client
                .call::<m::SessionCancel>(&SessionIdParams {
                    session_id: s.id.clone(),
                })
                .await?;
            outln!("asked {} to stop its turn", s.display_name);
        }
        SessionAction::Stop { session } => {
            let s = resolve(&client, &session).await?;
            let stopped = client
                .call::<m::SessionStop>(&SessionIdParams {
                    session_id: s.id.clone(),
                })
                .await?;
            outln!(
                "{}: {}",
                stopped.session.display_name,
                state_of(&stopped.session)
            );
        }
        SessionAction::Delete {
            session,
            remove,
            json,
        } => {
            let s = resolve(&client, &session).await?;
            let outcome = client
                .call::<m::SessionDelete>(&DeleteSessionParams {
                    session_id: s.id.clone(),
                    options: remove.options(),
                })
                .await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&outcome)?);
            } else {
                outln!("deleted {}{}", s.display_name, removed(&outcome));
            }
        }
        SessionAction::Context {
            session,
            action,
            json,
        } => {
            let s = resolve(&client, &session).await?;
            context::run(&client, &s, action, json).await?;
        }
        SessionAction::Prune { remove, json } => {
            let result = client.call::<m::SessionPrune>(&remove.options()).await?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                if result.deleted.is_empty() && result.skipped.is_empty() {
                    outln!("nothing to prune");
                }
                for d in &result.deleted {
                    outln!("deleted {}{}", d.session_id, removed(d));
                }
                for s in &result.skipped {
                    outln!("kept {}: {}", s.session_id, s.reason);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A path that exists is sent absolute (the daemon runs elsewhere); anything else is
/// a branch name.
fn absolute_if_dir(spec: &str) -> String {
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

async fn list(client: &Client) -> anyhow::Result<Vec<Session>> {
    Ok(client
        .call::<m::SessionList>(&m::NoParams {})
        .await?
        .sessions)
}

/// Finds the session `name` refers to.
async fn resolve(client: &Client, name: &str) -> anyhow::Result<Session> {
    let sessions = list(client).await?;
    pick(&sessions, name).cloned()
}

fn pick<'a>(sessions: &'a [Session], name: &str) -> anyhow::Result<&'a Session> {
    let name = name.trim();
    let lower = name.to_lowercase();
    if let Some(s) = sessions.iter().find(|s| {
        s.id.eq_ignore_ascii_case(name)
            || s.display_name == name
            || s.branch.as_deref() == Some(name)
    }) {
        return Ok(s);
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

fn print_status(kiln: &Kiln, s: &Session) {
    outln!("{}", s.display_name);
    let mut pairs = vec![("id", s.id.clone()), ("state", state_of(s))];
    if let Some(reason) = &s.state_reason {
        pairs.push(("reason", reason.clone()));
    }
    pairs.push(("agent", format!("{} ({})", s.agent_name, s.agent_type)));
    pairs.push((
        "worktree",
        s.worktree
            .clone()
            .unwrap_or_else(|| "the kiln itself".into()),
    ));
    if let Some(branch) = &s.branch {
        pairs.push(("branch", branch.clone()));
    }
    if let Some(task) = &s.task {
        pairs.push(("task", task.clone()));
    }
    pairs.push((
        "created",
        format!("{} ({} ago)", s.started_at, output::age(&s.started_at)),
    ));
    if let Some(updated) = &s.updated_at {
        pairs.push((
            "updated",
            format!("{updated} ({} ago)", output::age(updated)),
        ));
    }
    if let Some(pid) = s.agent_pid {
        pairs.push(("agent pid", pid.to_string()));
    }
    if let Some(ended) = &s.ended_at {
        let code = s
            .exit_code
            .map_or_else(|| "no exit code".to_string(), |c| format!("exit code {c}"));
        pairs.push(("ended", format!("{ended} ({code})")));
    }
    if s.is_managed() {
        pairs.push(("turns", s.turn_count.to_string()));
        if let Some(summary) = &s.context_summary {
            pairs.push(("context", summary.replace('\n', "\n  ")));
        }
        let log = crate::markdown::MarkdownLog::path_for(&kiln.sessions_dir(), &s.id);
        pairs.push(("log", log.display().to_string()));
    }
    output::print_pairs(&pairs);
}

/// Prints the transcript; with `follow`, keeps printing streamed text and new entries
/// until the agent ends.
async fn logs(client: &Client, session: &Session, follow: bool, json: bool) -> anyhow::Result<()> {
    // Subscribe before reading, so nothing falls between the two.
    let mut notes = if follow {
        Some(
            client
                .subscribe(Some(vec![Topic::Transcript, Topic::Session]))
                .await?,
        )
    } else {
        None
    };
    let mut last = 0;
    loop {
        let page = client
            .call::<m::SessionTranscript>(&TranscriptParams {
                session_id: session.id.clone(),
                after: Some(last),
                limit: Some(1000),
            })
            .await?;
        let Some(end) = page.entries.last().map(|e| e.seq) else {
            break;
        };
        for entry in &page.entries {
            print_entry(entry, json)?;
        }
        last = end;
    }
    let Some(notes) = notes.as_mut() else {
        return Ok(());
    };
    if !session
        .state
        .is_some_and(|s| s.is_busy() || s == SessionState::Complete)
    {
        return Ok(());
    }
    let mut out = std::io::stdout();
    // Text streamed since the last entry; its stored entry is then not printed again.
    let mut streamed = false;
    while let Some(note) = notes.recv().await {
        match Event::from_notification(&note.method, note.params) {
            Some(Event::Output(chunk)) if chunk.session_id == session.id && !json => {
                write!(out, "{}", chunk.text)?;
                out.flush()?;
                streamed = true;
            }
            Some(Event::Transcript(entry)) if entry.session_id == session.id => {
                if entry.seq <= last {
                    continue;
                }
                last = entry.seq;
                let text = matches!(entry.kind, EntryKind::Message | EntryKind::Thought);
                if text && streamed && !json {
                    writeln!(out)?;
                } else {
                    print_entry(&entry, json)?;
                }
                streamed = false;
            }
            Some(Event::SessionUpdated(s))
                if s.id == session.id
                    && matches!(s.state, Some(SessionState::Stopped | SessionState::Error))
                    && s.agent_pid.is_none() =>
            {
                break;
            }
            Some(Event::SessionDeregistered { session_id, .. }) if session_id == session.id => {
                break;
            }
            _ => {}
        }
    }
    Ok(())
}

fn print_entry(entry: &TranscriptEntry, json: bool) -> anyhow::Result<()> {
    if json {
        outln!(
            "{}",
            serde_json::to_string(entry).context("cannot print an entry")?
        );
    } else {
        out!("{}", render(entry));
    }
    Ok(())
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
    }
}
