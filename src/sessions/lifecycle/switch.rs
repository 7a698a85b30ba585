//! The switches themselves: at a usage limit, the next profile of the chain takes the
//! task over; at the first profile's reset, the task comes back to it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tracing::Instrument;

use super::{Lifecycle, Switching};
use crate::ledger::now_rfc3339;
use crate::protocol::{Event, HandoffParams, ProfileSwitch, Session, SessionState, SwitchReason};
use crate::sessions::fallback::{Chain, wording};
use crate::sessions::given;
use crate::sessions::wording::Notice;

impl Lifecycle {
    /// The agent of session `id` reported a usage limit that resets at `resets_at` (the
    /// session is parked for it): its profile is limited until then, and the task goes on
    /// along the fallback chain, if there is one and a profile of it is left.
    pub(in crate::sessions) async fn usage_limited(
        self: &Arc<Self>,
        id: &str,
        resets_at: DateTime<Utc>,
    ) {
        let seen = std::time::Instant::now();
        let Ok(session) = self.ledger.get_session(id) else {
            return;
        };
        let now = Utc::now();
        self.fallbacks.mark_limited(&session.agent_name, resets_at);
        self.fallbacks.prune(now);
        let Some(mut chain) = self
            .fallbacks
            .take(&session)
            .or_else(|| self.begin(&session, resets_at))
        else {
            return;
        };
        let to = match self.fallbacks.next(&chain, now) {
            Ok(to) => to,
            Err(passed) => {
                tracing::info!(agent = %session.agent_name, "usage limit: no profile of the fallback chain is left");
                self.tell(
                    id,
                    wording::chain_spent(&session.agent_name, resets_at, &passed),
                )
                .await;
                // Still the chain's, for the task's return at the first profile's reset.
                if chain.first_session != session.id {
                    chain.holder = session.id.clone();
                    self.fallbacks.put(chain);
                }
                return;
            }
        };
        chain.tried.push(to.clone());
        chain.holder = session.id.clone();
        self.fallbacks.put(chain.clone());
        let earlier = self.sessions_of(
            std::iter::once(&chain.first_session)
                .chain(&chain.taken)
                .filter(|s| **s != session.id),
        );
        let switching = Switching {
            switch: ProfileSwitch {
                to_agent: to.clone(),
                why: SwitchReason::UsageLimit,
                at: now_rfc3339(),
                resets_at: Some(resets_at.to_rfc3339()),
            },
            task: chain.task.clone(),
            earlier,
        };
        let params = HandoffParams {
            session_id: session.id.clone(),
            agent: to.clone(),
        };
        match self.hand_over(params, Some(switching)).await {
            Ok(new) => {
                tracing::info!(
                    from = %session.agent_name,
                    to = %to,
                    session = %new.id,
                    switch_ms = seen.elapsed().as_millis() as u64,
                    "usage limit: the task goes on along the fallback chain"
                );
                let back = chain.back_at.map(|at| (chain.first_agent.as_str(), at));
                if let Some(mut kept) = self.fallbacks.remove(&chain.first_session) {
                    kept.taken.push(new.id.clone());
                    kept.holder = new.id.clone();
                    self.fallbacks.put(kept);
                }
                let notice = wording::fell_back(
                    &session.agent_name,
                    &to,
                    &new.display_name,
                    &new.id,
                    resets_at,
                    back,
                );
                self.tell(id, notice).await;
                if let (Some(at), true) = (chain.back_at, chain.taken.is_empty()) {
                    self.bring_back_at(chain.first_session.clone(), at);
                }
            }
            Err(e) => {
                tracing::warn!("the fallback hand-off failed: {e}");
                self.tell(
                    id,
                    wording::switch_failed(&session.agent_name, &to, &e.to_string()),
                )
                .await;
            }
        }
    }

    /// The chain a limit on `session` begins, when its profile has a `fallback`.
    fn begin(&self, session: &Session, resets_at: DateTime<Utc>) -> Option<Chain> {
        let config = self.settings().ok()?;
        let given = self.runner.given(&session.id);
        let profile = given::profile(&config, &session.agent_name, given.as_deref()).ok()?;
        Chain::begin(session, &profile, resets_at)
    }

    /// At `at`, the task of the chain begun by `first` comes back to that session's
    /// profile.
    fn bring_back_at(self: &Arc<Self>, first: String, at: DateTime<Utc>) {
        let me = Arc::downgrade(self);
        tokio::spawn(
            async move {
                let mut at = at;
                loop {
                    let wait = (at - Utc::now()).to_std().unwrap_or_default();
                    tokio::time::sleep(wait).await;
                    let Some(me) = me.upgrade() else {
                        return;
                    };
                    let Some(chain) = me.fallbacks.get(&first) else {
                        return;
                    };
                    // Limited again meanwhile (another session of it): until that resets.
                    match me.fallbacks.limited_until(&chain.first_agent, Utc::now()) {
                        Some(later) => at = later,
                        None => return me.bring_back(&first).await,
                    }
                }
            }
            .in_current_span(),
        );
    }

    /// The task of the chain begun by `first` comes back to its first profile, from the
    /// session that has it, once that session's turn has ended.
    async fn bring_back(self: &Arc<Self>, first: &str) {
        let mut events = self.ledger.subscribe();
        let holder = loop {
            let Some(chain) = self.fallbacks.get(first) else {
                return;
            };
            let Some(holder) = self.live_end(&chain.holder) else {
                self.fallbacks.remove(first);
                return;
            };
            if !busy(&holder) {
                break holder;
            }
            // Every change of a session wakes this; it looks again.
            loop {
                match events.recv().await {
                    Ok(event) if matches!(&*event, Event::SessionUpdated(s) if s.id == holder.id) =>
                    {
                        break;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        let Some(chain) = self.fallbacks.remove(first) else {
            return;
        };
        let switching = Switching {
            switch: ProfileSwitch {
                to_agent: chain.first_agent.clone(),
                why: SwitchReason::LimitReset,
                at: now_rfc3339(),
                resets_at: None,
            },
            task: chain.task.clone(),
            earlier: self.sessions_of(chain.taken.iter()),
        };
        let params = HandoffParams {
            session_id: holder.id.clone(),
            agent: chain.first_agent.clone(),
        };
        let notice = match self.hand_over(params, Some(switching)).await {
            Ok(new) => {
                tracing::info!(from = %holder.agent_name, to = %chain.first_agent, session = %new.id, "usage limit reset: the task comes back");
                wording::came_back(
                    &holder.agent_name,
                    &chain.first_agent,
                    &new.display_name,
                    &new.id,
                )
            }
            Err(e) => {
                tracing::warn!("the task could not come back: {e}");
                wording::switch_failed(&holder.agent_name, &chain.first_agent, &e.to_string())
            }
        };
        self.tell(&holder.id, notice).await;
    }

    /// The session that has the task `id` had: `id`, or where hand-offs took it since;
    /// `None` when that one has ended or is gone.
    fn live_end(&self, id: &str) -> Option<Session> {
        let mut session = self.ledger.get_session(id).ok()?;
        while let Some(to) = session.handed_to.clone() {
            session = self.ledger.get_session(&to).ok()?;
        }
        (!matches!(
            session.state,
            Some(SessionState::Stopped | SessionState::Error) | None
        ))
        .then_some(session)
    }

    /// The sessions `ids` that are still in the ledger.
    fn sessions_of<'a>(&self, ids: impl Iterator<Item = &'a String>) -> Vec<Session> {
        ids.filter_map(|id| self.ledger.get_session(id).ok())
            .collect()
    }

    async fn tell(&self, id: &str, notice: Notice) {
        if let Err(e) = self.ledger.send(notice.into_params(id)).await {
            tracing::warn!("cannot report the fallback chain's switch: {e}");
        }
    }
}

/// Whether a session is in a turn, or getting ready for one: the task comes back after.
fn busy(session: &Session) -> bool {
    matches!(
        session.state,
        Some(
            SessionState::Creating
                | SessionState::Queued
                | SessionState::Starting
                | SessionState::Working
                | SessionState::Waiting
        )
    )
}
