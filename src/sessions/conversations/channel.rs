//! Messages from channels (webhooks): each inbound message is resolved to a session by
//! its conversation, keyed by (channel, source, reference): a reset phrase
//! starts afresh, a first message or a closed conversation starts a session, a
//! conversation quiet past the timeout starts a new one carrying the previous context
//! summary, and anything else continues the same session as a follow-up prompt. The
//! decision is kept on the session ([`ChannelTag`]) and returned.

use std::future::Future;
use std::pin::Pin;

use super::{ConversationError, Conversations};
use crate::protocol::{
    ChannelKind, ChannelTag, DriverOptions, Resolution, ResolveParams, ResolveResult,
};
use crate::sessions::*;
use tracing::Instrument;

/// Gives a conversation's follow-up message to its session, as `session.prompt` does: in
/// team mode that reaches the daemon running the session, wherever it is. Answers
/// whether the prompt had to queue.
pub trait Deliver: Sync {
    fn prompt<'a>(
        &'a self,
        session_id: &'a str,
        text: String,
    ) -> Pin<Box<dyn Future<Output = Result<bool>> + Send + 'a>>;
}

impl Conversations {
    /// Resolves `inbound` to its conversation's session and delivers its text there
    /// (a follow-up through `deliver`).
    pub async fn resolve(
        self: &Arc<Self>,
        inbound: ResolveParams,
        deliver: &dyn Deliver,
    ) -> std::result::Result<ResolveResult, ConversationError> {
        if inbound.text.trim().is_empty() {
            return Err(ConversationError::EmptyMessage);
        }
        // One message at a time: two messages of one conversation must not both find
        // "no session" and make two.
        let _one_at_a_time = self.resolving.lock().await;
        let config = self.sessions.settings()?;
        let channels = &config.channels;
        let now = chrono::Utc::now();
        let current = self.conversation(&inbound);
        let reason = match &current {
            _ if channels.is_reset(inbound.words.as_deref().unwrap_or(&inbound.text)) => {
                Resolution::ExplicitReset
            }
            None => Resolution::NoSession,
            Some(s) if self.is_closed(s) => Resolution::Closed,
            Some(s) if !inbound.persistent && quiet_since(s, now) > channels.session_timeout() => {
                Resolution::Timeout
            }
            Some(s) if !inbound.persistent && self.drifts(&config, s, &inbound.text).await => {
                Resolution::Drift
            }
            Some(_) => Resolution::Continue,
        };
        let tag = ChannelTag {
            kind: inbound.channel.clone(),
            source: inbound.source.clone(),
            reference: inbound.reference.clone(),
            reason,
            last_message_at: now_rfc3339(),
            closed: false,
            approval_target: (inbound.channel == ChannelKind::Webhook)
                .then(|| config.webhook(&inbound.source)?.approval_target.clone())
                .flatten(),
            own_bot: config.channels.matrix.is_some(),
        };
        if let (Resolution::Continue, Some(session)) = (reason, &current) {
            // The session as it is now, not as it was read above: its actor may have
            // saved it since (a new state, its agent's session), and only the channel's
            // record is this one's to change.
            // A session another daemon runs is that daemon's to write (team mode).
            let mut continued = self.ledger.get_session(&session.id)?;
            if !self.ledger.is_foreign(&continued) {
                continued.channel = Some(tag);
                self.ledger.save_managed(&continued).await?;
            }
            let queued = deliver.prompt(&session.id, inbound.text.clone()).await?;
            return Ok(ResolveResult {
                session_id: session.id.clone(),
                reason,
                previous_session_id: None,
                queued,
            });
        }
        // A new session. The one it replaces is closed first, so the conversation has
        // one live session at a time.
        let previous = current.filter(|s| !self.is_closed(s));
        if let Some(old) = &previous {
            self.close_session(old).await?;
        }
        let task = match (reason, &previous) {
            (Resolution::ExplicitReset, _) => None,
            (Resolution::Timeout | Resolution::Drift, Some(old)) => {
                Some(carry_summary(old, &inbound.text))
            }
            _ => Some(inbound.text.clone()),
        };
        let session = self
            .sessions
            .lifecycle()
            .create(CreateSessionParams {
                kiln: None,
                agent: inbound.agent.clone(),
                worktree: None,
                in_place: false,
                task,
                driver: DriverOptions {
                    driver: inbound.driver,
                    ..Default::default()
                },
                allow_read: Vec::new(),
                channel: Some(tag),
            })
            .await?;
        Ok(ResolveResult {
            session_id: session.id,
            reason,
            previous_session_id: previous.map(|s| s.id),
            queued: false,
        })
    }

    /// Closes a channel session: the conversation's next message starts a new one. Its
    /// agent is stopped; the worktree and transcript stay.
    pub async fn close(
        self: &Arc<Self>,
        id: &str,
    ) -> std::result::Result<Session, ConversationError> {
        let session = self.sessions.managed(id)?;
        if session.channel.is_none() {
            return Err(ConversationError::NotFromAChannel { id: id.into() });
        }
        self.close_session(&session).await?;
        Ok(self.ledger.get_session(id)?)
    }

    async fn close_session(self: &Arc<Self>, session: &Session) -> Result<()> {
        let mut closed = session.clone();
        if let Some(tag) = closed.channel.as_mut() {
            tag.closed = true;
        }
        self.ledger.save_managed(&closed).await?;
        if self.sessions.runner().actor(&session.id).is_some() {
            // Stopping waits for the agent to go; the message need not.
            let me = Arc::clone(self);
            let id = session.id.clone();
            let span = crate::logging::session_span(&id);
            tokio::spawn(
                async move {
                    if let Err(e) = me.sessions.runner().stop(&id).await {
                        tracing::warn!("cannot stop a closed channel session: {e}");
                    }
                }
                .instrument(span),
            );
        }
        Ok(())
    }

    /// Follows the inbox until the daemon ends: a question or approval of a channel
    /// session left unanswered for `channels.approval_timeout_secs` cancels its turn,
    /// with an `error` message saying so, so a background session never hangs unseen.
    pub async fn watch_approvals(self: Arc<Self>) {
        let mut events = self.ledger.subscribe();
        loop {
            let message = match events.recv().await.as_deref() {
                Ok(Event::InboxCreated(m)) if m.msg_type.blocks() => m.clone(),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            // Team mode: another daemon's sessions are timed by that daemon.
            let background = self
                .ledger
                .get_session(&message.session_id)
                .is_ok_and(|s| s.channel.is_some() && !self.ledger.is_foreign(&s));
            let timeout = self
                .sessions
                .settings()
                .ok()
                .and_then(|c| c.channels.approval_timeout_secs);
            let (true, Some(secs)) = (background, timeout) else {
                continue;
            };
            let me = Arc::clone(&self);
            let span = crate::logging::session_span(&message.session_id);
            tokio::spawn(
                async move {
                    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
                    let Ok(now) = me.ledger.get_message(&message.id).await else {
                        return;
                    };
                    if now.responded || now.withdrawn {
                        return;
                    }
                    let notice = wording::unanswered(&now.title, secs);
                    if let Err(e) = me
                        .ledger
                        .send(notice.into_params(&message.session_id))
                        .await
                    {
                        tracing::warn!("cannot post: {e}");
                    }
                    if let Err(e) = me.sessions.runner().cancel(&message.session_id).await {
                        tracing::warn!("cannot cancel: {e}");
                    }
                    // Whoever asked (the agent itself, through `cru ask`) no longer waits.
                    if let Err(e) = me
                        .ledger
                        .withdraw_open(&message.session_id, "nobody answered in time")
                        .await
                    {
                        tracing::warn!("cannot withdraw: {e}");
                    }
                }
                .instrument(span),
            );
        }
    }

    /// The newest session of the message's conversation.
    fn conversation(&self, inbound: &ResolveParams) -> Option<Session> {
        self.newest_of(
            inbound.channel.as_str(),
            &inbound.source,
            &inbound.reference,
        )
    }

    /// The newest session of a channel's conversation (a cron job's runs are one, `""`).
    pub(super) fn newest_of(&self, kind: &str, source: &str, reference: &str) -> Option<Session> {
        self.ledger
            .list_sessions()
            .into_iter()
            .filter(|s| {
                s.channel.as_ref().is_some_and(|t| {
                    t.kind == kind && t.source == source && t.reference == reference
                })
            })
            .max_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)))
    }

    /// Whether the drift check (when configured) judges `text` off `s`'s topic. A check
    /// that cannot be made is logged and counts as no drift.
    #[tracing::instrument(name = "session", skip_all, fields(session = %s.id))]
    async fn drifts(&self, config: &Config, s: &Session, text: &str) -> bool {
        let Some(name) = config.channels.drift_agent.as_deref() else {
            return false;
        };
        let summary = s
            .context_summary
            .as_deref()
            .or(s.task.as_deref())
            .unwrap_or("(nothing yet)");
        let verdict = match config.profile(name) {
            Ok(profile) => super::drift::classify(name, &profile, summary, text).await,
            Err(why) => Err(super::drift::DriftError::Profile(why)),
        };
        match verdict {
            Ok(v) => {
                tracing::info!(drift = v.drift, confidence = v.confidence, "drift check");
                v.drift && v.confidence >= config.channels.drift_threshold
            }
            Err(why) => {
                tracing::warn!("the drift check could not be made: {why}");
                false
            }
        }
    }

    /// Closed by hand or by a newer session, or its agent is gone for good. A session
    /// another daemon runs (team mode) is that daemon's: open unless it stopped.
    fn is_closed(&self, s: &Session) -> bool {
        if self.ledger.is_foreign(s) {
            return s.channel.as_ref().is_some_and(|t| t.closed)
                || matches!(s.state, Some(SessionState::Stopped | SessionState::Error));
        }
        s.channel.as_ref().is_some_and(|t| t.closed)
            || (self.sessions.runner().actor(&s.id).is_none()
                && !matches!(
                    s.state,
                    Some(SessionState::Parked | SessionState::Creating | SessionState::Starting)
                ))
    }
}

/// How long the conversation has been quiet: since its last message, or since the
/// session last changed (a turn ending), whichever is later.
fn quiet_since(s: &Session, now: chrono::DateTime<chrono::Utc>) -> std::time::Duration {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    let last = [
        s.channel.as_ref().map(|t| t.last_message_at.as_str()),
        s.updated_at.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(parse)
    .max();
    last.and_then(|t| (now - t.with_timezone(&chrono::Utc)).to_std().ok())
        .unwrap_or_default()
}

/// The first prompt of a session that follows one timed out: the previous session's
/// context summary ahead of the message.
fn carry_summary(old: &Session, text: &str) -> String {
    match old
        .context_summary
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        Some(summary) => format!(
            "Summary of the previous conversation (session {}):\n{summary}\n\n{text}",
            old.id
        ),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(summary: Option<&str>, updated: &str, last: &str) -> Session {
        let mut s: Session = serde_json::from_value(serde_json::json!({
            "id": "01OLD", "agent_type": "command", "agent_name": "a", "status": "active",
            "started_at": updated, "last_heartbeat": updated, "display_name": "x",
            "updated_at": updated,
        }))
        .unwrap();
        s.context_summary = summary.map(str::to_string);
        s.channel = Some(ChannelTag {
            kind: "webhook".into(),
            source: "issues".into(),
            reference: "42".into(),
            reason: Resolution::NoSession,
            last_message_at: last.into(),
            closed: false,
            approval_target: None,
            own_bot: false,
        });
        s
    }

    #[test]
    fn quiet_counts_from_the_later_of_the_last_message_and_the_last_change() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:10:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let s = session(None, "2026-01-01T00:05:00Z", "2026-01-01T00:02:00Z");
        assert_eq!(quiet_since(&s, now).as_secs(), 300);
        let s = session(None, "2026-01-01T00:01:00Z", "2026-01-01T00:09:00Z");
        assert_eq!(quiet_since(&s, now).as_secs(), 60);
    }

    #[test]
    fn a_timed_out_conversation_carries_its_summary_ahead_of_the_message() {
        let s = session(
            Some("GOAL: fix 42"),
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        );
        let first = carry_summary(&s, "and now?");
        assert!(
            first
                .starts_with("Summary of the previous conversation (session 01OLD):\nGOAL: fix 42")
        );
        assert!(first.ends_with("\n\nand now?"));
        let s = session(None, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z");
        assert_eq!(carry_summary(&s, "and now?"), "and now?");
    }
}
