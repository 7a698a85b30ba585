//! `cru session send`, `cancel`, `stop`, `delete`, `refine`, `reset` and `prune`: what
//! is asked of a session (or of all the finished ones), and the answer in words or JSON.

use super::{removed, state_of};
use crate::cli::output::outln;
use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{DeleteSessionParams, PromptParams, RemoveOptions, Session, SessionIdParams};

/// Sends a prompt; said when it waits for the current turn.
pub(super) async fn send(client: &Client, s: &Session, text: String) -> anyhow::Result<()> {
    let sent = client
        .call::<m::SessionPrompt>(&PromptParams {
            session_id: s.id.clone(),
            text,
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
    Ok(())
}

/// Sends the session's turn that was cut short again.
pub(super) async fn resend(client: &Client, s: &Session) -> anyhow::Result<()> {
    let sent = client
        .call::<m::SessionResend>(&SessionIdParams {
            session_id: s.id.clone(),
        })
        .await?;
    if sent.queued {
        outln!(
            "the cut-short turn is queued for {}: it runs when the agent is ready",
            s.display_name
        );
    } else {
        outln!("the cut-short turn is sent again to {}", s.display_name);
    }
    Ok(())
}

/// Asks the session to stop its turn.
pub(super) async fn cancel(client: &Client, s: &Session) -> anyhow::Result<()> {
    client
        .call::<m::SessionCancel>(&SessionIdParams {
            session_id: s.id.clone(),
        })
        .await?;
    outln!("asked {} to stop its turn", s.display_name);
    Ok(())
}

/// Stops the session's agent.
pub(super) async fn stop(client: &Client, s: &Session) -> anyhow::Result<()> {
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
    Ok(())
}

/// Deletes the session (and what `options` says of its worktree, branch and audit log).
pub(super) async fn delete(
    client: &Client,
    s: &Session,
    options: RemoveOptions,
    json: bool,
) -> anyhow::Result<()> {
    let outcome = client
        .call::<m::SessionDelete>(&DeleteSessionParams {
            session_id: s.id.clone(),
            options,
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        outln!("deleted {}{}", s.display_name, removed(&outcome));
    }
    Ok(())
}

/// Widens the read manifest and starts the agent again.
pub(super) async fn refine(
    client: &Client,
    s: &Session,
    allow_read: Vec<String>,
    prompt: Option<String>,
) -> anyhow::Result<()> {
    let reply = client
        .call::<m::SessionRefine>(&crate::protocol::RefineParams {
            session_id: s.id.clone(),
            allow_read,
            prompt,
        })
        .await?;
    outln!(
        "{}: {}",
        reply.session.display_name,
        reply.session.state_reason.as_deref().unwrap_or("restarted")
    );
    Ok(())
}

/// A new session in the old one's place, the old one stopped.
pub(super) async fn reset(
    client: &Client,
    s: &Session,
    keep_disabled: bool,
    json: bool,
) -> anyhow::Result<()> {
    let created = client
        .call::<m::SessionReset>(&crate::protocol::ResetParams {
            session_id: s.id.clone(),
            keep_disabled,
        })
        .await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&created.session)?);
    } else {
        outln!(
            "reset {}: the new session is {} ({}); the old one is stopped (reset)",
            s.display_name,
            created.session.display_name,
            created.session_id
        );
    }
    Ok(())
}

/// Deletes every complete, cancelled or stopped session; the ones kept say why.
pub(super) async fn prune(
    client: &Client,
    options: RemoveOptions,
    json: bool,
) -> anyhow::Result<()> {
    let result =
        crate::cli::progress::waiting("pruning sessions", client.call::<m::SessionPrune>(&options))
            .await?;
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
        for id in &result.audit_removed {
            outln!("removed the audit log of {id}");
        }
    }
    Ok(())
}
