//! `cru session restart`, `rename` and `fork`.

use crate::cli::output::outln;
use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{
    ForkParams, HandoffParams, MoveParams, RenameParams, Resumed, Session, SessionIdParams,
};

pub(super) async fn restart(client: &Client, session: &Session) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionRestart>(&SessionIdParams {
            session_id: session.id.clone(),
        })
        .await?;
    outln!(
        "{}: {}",
        reply.session.display_name,
        super::state_of(&reply.session)
    );
    Ok(())
}

pub(super) async fn rename(client: &Client, session: &Session, name: String) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionRename>(&RenameParams {
            session_id: session.id.clone(),
            name,
        })
        .await?;
    outln!("{} is now {}", reply.session.id, reply.session.display_name);
    Ok(())
}

pub(super) async fn move_to(
    client: &Client,
    session: &Session,
    to: String,
    json: bool,
) -> anyhow::Result<()> {
    let moved = client
        .call::<m::SessionMove>(&MoveParams {
            session_id: session.id.clone(),
            to,
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&moved)?);
        return Ok(());
    }
    let resumed = match moved.resumed {
        Resumed::Load => "its agent reloaded its own session",
        Resumed::Fresh => "its agent started afresh, seeded with the context stack",
        Resumed::Starting => "its agent is still starting",
        Resumed::NotRunning => "its agent was not running, and is not started",
    };
    outln!(
        "moved {} from {} to {} in {:.1} s; {resumed}; {} open question(s) carried, {} approval(s) withdrawn (the agent asks again)",
        session.display_name,
        moved.from_host,
        moved.to_host,
        moved.millis as f64 / 1000.0,
        moved.carried,
        moved.withdrawn,
    );
    Ok(())
}

pub(super) async fn handoff(
    client: &Client,
    session: &Session,
    agent: String,
    json: bool,
) -> anyhow::Result<()> {
    let created = client
        .call::<m::SessionHandoff>(&HandoffParams {
            session_id: session.id.clone(),
            agent,
        })
        .await?;
    let s = created.session;
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        outln!(
            "handed {} off to {} ({}) on branch {}; {} is stopped",
            session.display_name,
            s.display_name,
            s.id,
            s.branch.as_deref().unwrap_or("?"),
            session.display_name,
        );
    }
    Ok(())
}

pub(super) async fn fork(
    client: &Client,
    session: &Session,
    worktree: Option<String>,
    task: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let created = client
        .call::<m::SessionFork>(&ForkParams {
            session_id: session.id.clone(),
            worktree,
            task,
        })
        .await?;
    let s = created.session;
    if json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        outln!(
            "forked {} into {} ({}) on branch {}",
            session.display_name,
            s.display_name,
            s.id,
            s.branch.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}
