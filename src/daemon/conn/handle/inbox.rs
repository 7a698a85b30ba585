//! The inbox: what sessions send the human, and the human's answers.

use std::time::Duration;

use super::*;

pub(super) async fn send(call: &Call<'_>, p: SendParams) -> Result<Sent, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    let sessions = &call.conn.shared.sessions;
    call.own(&p.session_id)?;
    // An approval an agent asks for itself (`cru approve`) is judged by the
    // rules first: one that allows or denies it answers it at once.
    let ruled = if p.msg_type == MsgType::ApprovalRequired {
        sessions.judge_approval(&p.session_id, &p.title).await
    } else {
        None
    };
    let mut message = ledger.send(p).await.map_err(app_error)?;
    if let Some(allowed) = ruled {
        let answer = if allowed { "approve" } else { "deny" };
        message = ledger
            .respond(&message.id, answer)
            .await
            .map_err(app_error)?;
    }
    Ok(m::Sent {
        id: message.id.clone(),
        message,
    })
}

pub(super) async fn list(call: &Call<'_>, p: ListParams) -> Result<Messages, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    Ok(m::Messages {
        messages: ledger.list_messages(&p).await.map_err(app_error)?,
    })
}

pub(super) async fn get(call: &Call<'_>, p: IdParams) -> Result<MessageReply, ErrorObject> {
    Ok(m::MessageReply {
        message: call.visible(&p.id).await?,
    })
}

pub(super) async fn mark_read(call: &Call<'_>, p: IdsParams) -> Result<Updated, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    Ok(m::Updated {
        updated: ledger.mark_read(&p.ids).await.map_err(app_error)?,
    })
}

pub(super) async fn respond(
    call: &Call<'_>,
    p: RespondParams,
) -> Result<MessageReply, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    Ok(m::MessageReply {
        message: ledger
            .respond(&p.id, &p.response)
            .await
            .map_err(app_error)?,
    })
}

pub(super) async fn wait(call: &Call<'_>, p: WaitParams) -> Result<MessageReply, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    call.visible(&p.id).await?;
    let timeout = p.timeout_secs.map(Duration::from_secs);
    Ok(m::MessageReply {
        message: ledger
            .wait_for_answer(&p.id, timeout)
            .await
            .map_err(app_error)?,
    })
}

pub(super) async fn clear(call: &Call<'_>, _: NoParams) -> Result<Deleted, ErrorObject> {
    let ledger = &call.conn.shared.ledger;
    Ok(m::Deleted {
        deleted: ledger.clear().await.map_err(app_error)?.len(),
    })
}
