//! `cru session`: create agent sessions, watch them, talk to them, and clean them up.
//!
//! A session can be named by its id, a unique start or end of its id, its display name
//! (`feat/auth @ claude`) or its branch.

mod args;
mod audit;
mod context;
mod control;
mod everywhere;
mod find;
mod land;
mod manage;
mod new;
mod show;

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use crate::client::Client;
use crate::kiln::Kiln;
use crate::protocol::{DeleteOutcome, Session};
use args::SessionAction;
pub(super) use find::{list, listed, pick, resolve};

#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    action: SessionAction,
}

pub async fn run(kiln: Kiln, args: SessionArgs) -> anyhow::Result<ExitCode> {
    if let SessionAction::List {
        json,
        all_kilns: true,
    } = args.action
    {
        everywhere::list(json).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = super::connect(&kiln).await?;
    act(&kiln, &client, args.action).await
}

/// Does `action` in the kiln `client` is connected to.
async fn act(kiln: &Kiln, client: &Client, action: SessionAction) -> anyhow::Result<ExitCode> {
    match action {
        SessionAction::New(args) => new::make(kiln, client, args).await?,
        SessionAction::List { json, .. } => show::list(client, json).await?,
        SessionAction::Status { session, json } => {
            show::status(kiln, client, &session, json).await?;
        }
        SessionAction::Logs {
            session,
            follow,
            json,
        } => {
            show::logs(client, &resolve(client, &session).await?, follow, json).await?;
        }
        SessionAction::Send { session, text } => {
            manage::send(client, &resolve(client, &session).await?, text.join(" ")).await?;
        }
        SessionAction::Cancel { session } => {
            manage::cancel(client, &resolve(client, &session).await?).await?;
        }
        SessionAction::Resend { session } => {
            manage::resend(client, &resolve(client, &session).await?).await?;
        }
        SessionAction::Stop { session } => {
            manage::stop(client, &resolve(client, &session).await?).await?;
        }
        SessionAction::Delete {
            session,
            remove,
            json,
        } => {
            manage::delete(
                client,
                &resolve(client, &session).await?,
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
            context::run(client, &resolve(client, &session).await?, action, json).await?;
        }
        SessionAction::Exec { session, command } => {
            let s = resolve(client, &session).await?;
            return audit::exec(client, &s, command).await;
        }
        SessionAction::Audit { session, json } => {
            let id = match resolve(client, &session).await {
                Ok(s) => s.id,
                Err(_) => session.trim().to_string(),
            };
            audit::show(client, &id, json).await?;
        }
        SessionAction::Refine {
            session,
            allow_read,
            prompt,
        } => {
            manage::refine(
                client,
                &resolve(client, &session).await?,
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
                client,
                &resolve(client, &session).await?,
                keep_disabled,
                json,
            )
            .await?;
        }
        SessionAction::Security { session, json } => {
            audit::security(client, &resolve(client, &session).await?, json).await?;
        }
        SessionAction::Prune { remove, json } => {
            manage::prune(client, remove.options(), json).await?
        }
        landing => land_or_control(client, landing).await?,
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
        SessionAction::Move { session, to, json } => {
            control::move_to(client, &resolve(client, &session).await?, to, json).await?;
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
