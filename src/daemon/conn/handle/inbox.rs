//! The inbox: what sessions send the human, and the human's answers.

use std::time::Duration;

use super::*;

impl Answer<m::InboxSend> for Call<'_> {
    async fn answer(&self, p: SendParams) -> Result<Sent, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let guard = &self.conn.services.guard;
        self.own(&p.session_id)?;
        // An approval an agent asks for itself (`cru approve`) is judged by the
        // rules first: one that allows or denies it answers it at once.
        let ruled = if p.msg_type == MsgType::ApprovalRequired {
            guard.judge_approval(&p.session_id, &p.title).await
        } else {
            None
        };
        let mut message = ledger.send(p).await?;
        if let Some(allowed) = ruled {
            let answer = if allowed { "approve" } else { "deny" };
            message = ledger
                .respond(&message.id, answer, "the session's rules")
                .await?;
        }
        Ok(m::Sent {
            id: message.id.clone(),
            message,
        })
    }
}

impl Answer<m::InboxList> for Call<'_> {
    async fn answer(&self, p: ListParams) -> Result<Messages, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        Ok(m::Messages {
            messages: ledger.list_messages(&p).await?,
        })
    }
}

impl Answer<m::InboxGet> for Call<'_> {
    async fn answer(&self, p: IdParams) -> Result<MessageReply, ErrorObject> {
        Ok(m::MessageReply {
            message: self.visible(&p.id).await?,
        })
    }
}

impl Answer<m::InboxMarkRead> for Call<'_> {
    async fn answer(&self, p: IdsParams) -> Result<Updated, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        Ok(m::Updated {
            updated: ledger.mark_read(&p.ids).await?,
        })
    }
}

impl Answer<m::InboxRespond> for Call<'_> {
    async fn answer(&self, p: RespondParams) -> Result<MessageReply, ErrorObject> {
        let (ledger, sessions) = (&self.conn.services.ledger, &self.conn.services.sessions);
        let message = self.visible(&p.id).await?;
        // An answer names the question it answers: one shown another is refused.
        if let (Some(asked), Some(digest)) = (&p.asked, &message.digest)
            && asked != digest
        {
            return Err(ErrorObject::new(
                code::CONFLICT,
                format!(
                    "message {} is not the question that was answered (it asks {:?}); read it again",
                    message.id, message.title
                ),
            )
            .with_data(serde_json::json!({"reason": "not_what_was_asked"})));
        }
        // An answer is acknowledged only when something receives it: a question whose agent
        // is gone is withdrawn, and the one answering is told why.
        if !message.responded
            && let Some(why) = sessions.unheard(&message).await
        {
            ledger.withdraw(&message.id, &why).await?;
            return Err(ErrorObject::new(
                code::CONFLICT,
                format!(
                    "message {} was not answered: {why}; the question is withdrawn",
                    message.id
                ),
            )
            .with_data(serde_json::json!({"reason": "agent_gone"})));
        }
        let by = self.caller.describe();
        Ok(m::MessageReply {
            message: ledger.respond(&p.id, &p.response, &by).await?,
        })
    }
}

impl Answer<m::InboxWait> for Call<'_> {
    async fn answer(&self, p: WaitParams) -> Result<MessageReply, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        self.visible(&p.id).await?;
        let timeout = p.timeout_secs.map(Duration::from_secs);
        Ok(m::MessageReply {
            message: ledger.wait_for_answer(&p.id, timeout).await?,
        })
    }
}

impl Answer<m::InboxClear> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<Deleted, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        Ok(m::Deleted {
            deleted: ledger.clear().await?.len(),
        })
    }
}
