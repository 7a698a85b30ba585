//! Inbox news for the running sessions: each actor is told when a blocking message of
//! its session opens or closes, and told to read what is open again when news was
//! missed.

use tokio::sync::broadcast;
use tracing::Instrument;

use super::command::Command;
use super::{Sessions, wording};
use crate::protocol::{Event, InboxMessage, Purpose};

/// Tells each actor when a blocking message of its session opens or closes, which is
/// what moves it between working and waiting, and answers its permission requests.
pub(super) async fn route_inbox_events(
    sessions: std::sync::Weak<Sessions>,
    mut events: broadcast::Receiver<std::sync::Arc<Event>>,
) {
    loop {
        let event = events.recv().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        match event.as_deref() {
            // A context miss answered "widen": its path is added and the agent restarted.
            Ok(Event::InboxUpdated(InboxMessage {
                purpose: Some(Purpose::ContextMiss { path }),
                response: Some(answer),
                session_id,
                ..
            })) if answer == wording::WIDEN => {
                let sessions = std::sync::Arc::clone(&sessions);
                let (session_id, path) = (session_id.clone(), path.clone());
                let span = crate::logging::session_span(&session_id);
                tokio::spawn(
                    async move {
                        if let Err(e) = sessions
                            .lifecycle
                            .refine(&session_id, vec![path], None)
                            .await
                        {
                            tracing::warn!("cannot refine: {e}");
                        }
                    }
                    .instrument(span),
                );
            }
            Ok(Event::InboxCreated(m)) | Ok(Event::InboxUpdated(m)) => {
                if m.msg_type.blocks()
                    && let Some(actor) = sessions.runner.actor(&m.session_id)
                {
                    let _ = actor.send(Command::Inbox(Box::new(m.clone())));
                }
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => {
                sessions.runner.tell_all(|| Command::Resync);
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

impl Sessions {
    /// Why an answer to `message` would reach no one, if it would not: its session is
    /// gone, or crucible runs its agent and that agent is not running (a crash, a stop, a
    /// daemon restart that could not resume it). A session another daemon runs (team
    /// mode) is that daemon's to tell, and a session that registered itself hears its
    /// answers through `inbox.wait` as long as it has not ended. A context miss's
    /// question is heard by the daemon itself, its session stopped. A running agent's
    /// session is asked to settle first: one resumed after a restart withdraws the
    /// questions its earlier agent asked before it answers.
    pub async fn unheard(&self, message: &InboxMessage) -> Option<String> {
        let Ok(session) = self.ledger.get_session(&message.session_id) else {
            return Some(format!("its session {} is gone", message.session_id));
        };
        if self.ledger.is_foreign(&session) {
            return None;
        }
        if matches!(message.purpose, Some(Purpose::ContextMiss { .. })) {
            return None;
        }
        if !session.is_managed() {
            return session
                .ended_at
                .is_some()
                .then(|| format!("its agent ended (session {} deregistered)", session.id));
        }
        if let Some(actor) = self.runner.actor(&session.id) {
            let (ack, settled) = tokio::sync::oneshot::channel();
            if actor.send(Command::Settled { ack }).is_ok() && settled.await.is_ok() {
                return None;
            }
        }
        let state = session.state.map_or("stopped", |s| s.as_str());
        Some(format!(
            "its agent is not running (session {} is {state})",
            session.id
        ))
    }
}
