//! The inbox: messages sessions send the human (group-committed), their answers, reads,
//! waits and clearing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use super::Ledger;
use super::error::{LedgerError, Result};
use crate::config::MAX_LIST_LIMIT;
use crate::protocol::{Event, InboxMessage, ListParams, Purpose, SendParams, limits};
use crate::store::{Store, StoreError};
use crate::text::now_rfc3339;

/// The most inbox sends committed in one transaction, and the most bytes of them.
pub(super) const MAX_SEND_BATCH: usize = 1024;
const MAX_SEND_BATCH_BYTES: usize = 2 * 1024 * 1024;

pub(super) type SendJob = (
    InboxMessage,
    oneshot::Sender<std::result::Result<(), StoreError>>,
);

impl Ledger {
    /// Stores a message durably, then announces it.
    pub async fn send(&self, params: SendParams) -> Result<InboxMessage> {
        self.post(params, None).await
    }

    /// [`send`](Self::send) for a question crucible asks itself, with what it is for.
    pub async fn send_for(&self, params: SendParams, purpose: Purpose) -> Result<InboxMessage> {
        self.post(params, Some(purpose)).await
    }

    async fn post(&self, params: SendParams, purpose: Option<Purpose>) -> Result<InboxMessage> {
        let session = self.get_session(&params.session_id)?;
        if params.title.trim().is_empty() {
            return Err(LedgerError::Invalid("title must not be empty".into()));
        }
        if let Some(options) = &params.options {
            if !params.msg_type.blocks() {
                return Err(LedgerError::Invalid(format!(
                    "options are only for decision_needed and approval_required, not {}",
                    params.msg_type
                )));
            }
            if options.iter().any(|o| o.trim().is_empty()) {
                return Err(LedgerError::Invalid(
                    "options must not be empty strings".into(),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = options.iter().find(|o| !seen.insert(o.to_lowercase())) {
                return Err(LedgerError::Invalid(format!(
                    "option {dup:?} is given twice"
                )));
            }
        }
        let message = InboxMessage {
            kiln: None,
            digest: None,
            id: self.next_id(),
            session_id: session.id,
            session_name: session.display_name,
            timestamp: now_rfc3339(),
            msg_type: params.msg_type,
            title: crate::text::cap(params.title, limits::TITLE_BYTES),
            body: params.body.map(|b| crate::text::cap(b, limits::BODY_BYTES)),
            option_kinds: params
                .option_kinds
                .filter(|k| Some(k.len()) == params.options.as_ref().map(Vec::len)),
            options: params.options.filter(|o| !o.is_empty()),
            rule: params.flagged.as_ref().map(|f| f.rule.clone()),
            operation: params.flagged.map(|f| f.operation),
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
            answered_by: None,
            purpose,
        };
        let message = InboxMessage {
            digest: Some(message.asked()),
            ..message
        };
        let (ack, done) = oneshot::channel();
        self.sends
            .send((message.clone(), ack))
            .await
            .map_err(|_| StoreError::WriterStopped("inbox"))?;
        match done.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(StoreError::WriterStopped("inbox").into()),
        }
        self.publish(Event::InboxCreated(message.clone()));
        Ok(message)
    }

    pub async fn list_messages(&self, params: &ListParams) -> Result<Vec<InboxMessage>> {
        let limit = params.limit.unwrap_or(self.config.inbox.default_limit);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(LedgerError::Invalid(format!(
                "limit must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        Ok(self
            .store
            .inbox()
            .list(params.unread_only, params.session_id.as_deref(), limit)
            .await?)
    }

    pub async fn get_message(&self, id: &str) -> Result<InboxMessage> {
        self.store
            .inbox()
            .get(id)
            .await?
            .ok_or_else(|| no_message(id))
    }

    /// Returns how many messages changed from unread to read.
    pub async fn mark_read(&self, ids: &[String]) -> Result<usize> {
        let changed = self.store.inbox().mark_read(ids).await?;
        let count = changed.len();
        for message in changed {
            self.publish(Event::InboxUpdated(message));
        }
        Ok(count)
    }

    /// Records the human's answer to a decision or approval and wakes its waiters.
    pub async fn respond(&self, id: &str, response: &str, by: &str) -> Result<InboxMessage> {
        let message = self.get_message(id).await?;
        let Some(accepted) = message.accepted_answers() else {
            return Err(LedgerError::Invalid(format!(
                "message {id} is {} and takes no answer",
                message.msg_type
            )));
        };
        if message.responded {
            return Err(already_answered(&message));
        }
        let response = if accepted.is_empty() {
            if response.trim().is_empty() {
                return Err(LedgerError::Invalid("the answer must not be empty".into()));
            }
            response.to_string()
        } else {
            message.answer_for(response).ok_or_else(|| {
                let comments = match message.purpose {
                    Some(Purpose::PlanReview { steps }) => format!(
                        ", or comments on the plan's steps 1–{steps}, such as \"2: use the view\""
                    ),
                    _ => String::new(),
                };
                LedgerError::Invalid(format!(
                    "{response:?} is not one of the choices: {}{comments}",
                    accepted.join(", ")
                ))
            })?
        };
        match self
            .store
            .inbox()
            .respond(id, &response, false, Some(by))
            .await?
        {
            Some(updated) => {
                self.publish(Event::InboxUpdated(updated.clone()));
                Ok(updated)
            }
            // Someone else answered between our read and our write.
            None => Err(already_answered(&self.get_message(id).await?)),
        }
    }

    /// Waits until message `id` has an answer and returns it.
    pub async fn wait_for_answer(
        &self,
        id: &str,
        timeout: Option<Duration>,
    ) -> Result<InboxMessage> {
        // Subscribe before looking, so an answer between the two is not missed.
        let mut events = self.subscribe();
        let message = self.get_message(id).await?;
        if message.accepted_answers().is_none() {
            return Err(LedgerError::Invalid(format!(
                "message {id} is {} and takes no answer",
                message.msg_type
            )));
        }
        if message.responded {
            return Ok(message);
        }
        let wait = async {
            loop {
                match events.recv().await.as_deref() {
                    Ok(Event::InboxUpdated(m)) if m.id == id && m.responded => {
                        return Ok(m.clone());
                    }
                    Ok(Event::InboxDeleted { ids }) if ids.iter().any(|x| x == id) => {
                        return Err(no_message(id));
                    }
                    Ok(Event::Resync { .. }) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        let m = self.get_message(id).await?;
                        if m.responded {
                            return Ok(m);
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(LedgerError::Conflict("the daemon is shutting down".into()));
                    }
                }
            }
        };
        match timeout {
            None => wait.await,
            Some(limit) => tokio::time::timeout(limit, wait).await.unwrap_or_else(|_| {
                Err(LedgerError::TimedOut(format!(
                    "no answer to {id} within {}s",
                    limit.as_secs()
                )))
            }),
        }
    }

    /// Deletes read messages that need nothing more; returns their ids.
    pub async fn clear(&self) -> Result<Vec<String>> {
        let ids = self.store.inbox().clear_read().await?;
        if !ids.is_empty() {
            self.publish(Event::InboxDeleted { ids: ids.clone() });
        }
        Ok(ids)
    }

    pub async fn unread_count(&self) -> Result<u64> {
        Ok(self.store.inbox().count_unread().await?)
    }

    /// The decisions and approvals of a session still waiting for an answer.
    pub async fn open_blocking(&self, session_id: &str) -> Result<Vec<String>> {
        Ok(self.store.inbox().open_blocking(session_id).await?)
    }

    /// Closes a question nobody needs answered any more (its turn was cancelled, or its
    /// agent is gone), so it no longer waits in the inbox. `note` is stored as the answer.
    pub async fn withdraw(&self, id: &str, note: &str) -> Result<()> {
        if let Some(updated) = self.store.inbox().respond(id, note, true, None).await? {
            self.publish(Event::InboxUpdated(updated));
        }
        Ok(())
    }

    /// Withdraws every open decision and approval of a session.
    pub async fn withdraw_open(&self, session_id: &str, note: &str) -> Result<()> {
        for id in self.open_blocking(session_id).await? {
            self.withdraw(&id, note).await?;
        }
        Ok(())
    }
}

pub fn no_message(id: &str) -> LedgerError {
    LedgerError::NotFound(format!("no inbox message {id}"))
}

pub(super) fn already_answered(message: &InboxMessage) -> LedgerError {
    let said = message.response.as_deref().unwrap_or("");
    LedgerError::Conflict(match (message.withdrawn, &message.answered_by) {
        (true, _) => format!("message {} was withdrawn: {said}", message.id),
        (false, Some(by)) => format!(
            "message {} was already answered by {by}: {said}",
            message.id
        ),
        (false, None) => format!("message {} was already answered: {said}", message.id),
    })
}

/// Group commit: takes every send waiting in the queue, stores them in one transaction,
/// then answers each caller with the outcome.
pub(super) async fn send_writer(store: Arc<Store>, mut jobs: mpsc::Receiver<SendJob>) {
    let mut batch = Vec::with_capacity(MAX_SEND_BATCH);
    let mut outcomes = Vec::new();
    while jobs.recv_many(&mut batch, MAX_SEND_BATCH).await > 0 {
        // One transaction per group, each small enough for the engine's write buffer.
        let mut rest = &batch[..];
        while !rest.is_empty() {
            let mut bytes = 0;
            let take = rest
                .iter()
                .take_while(|(m, _)| {
                    bytes += m.title.len() + m.body.as_ref().map_or(0, String::len) + 256;
                    bytes <= MAX_SEND_BATCH_BYTES
                })
                .count()
                .max(1);
            let (group, later) = rest.split_at(take);
            rest = later;
            let messages: Vec<InboxMessage> = group.iter().map(|(m, _)| m.clone()).collect();
            let outcome = store.inbox().insert(&messages).await;
            if let Err(e) = &outcome {
                tracing::error!(count = messages.len(), "inbox write failed: {e}");
            }
            outcomes.push((take, outcome));
        }
        let mut acks = batch.drain(..);
        for (count, outcome) in outcomes.drain(..) {
            for (_, ack) in acks.by_ref().take(count) {
                let _ = ack.send(outcome.clone());
            }
        }
    }
}
