//! What the actor watches beside the machine: the memory its agent uses while a turn runs
//! (near the session's cap, the inbox is told), and, on a usage limit, the hand-off to
//! the profile's fallback.

use super::*;

/// A session with a memory cap is looked at every [`MEMORY_EVERY`] while a turn runs
/// (never at rest): its agent's process tree near the cap is reported in the inbox
/// before the kernel ends it, once until it falls back below.
pub(crate) struct MemoryWatch {
    pub cap: u64,
    pub next: Option<tokio::time::Instant>,
    pub warned: bool,
    /// Where the agent runs: a container's processes are read from its first one.
    pub environment: Arc<crate::driver::Environment>,
}

pub(super) const MEMORY_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Percent of the cap reported.
pub(super) const MEMORY_WARN_PERCENT: u64 = 80;

/// A profile's `fallback`: the profile a session is handed off to on a usage limit, and
/// the manager that hands it off.
pub(crate) struct Fallback {
    pub agent: String,
    pub sessions: std::sync::Weak<crate::sessions::Sessions>,
}

impl Actor {
    /// When the memory watch looks next: while a turn runs, every [`MEMORY_EVERY`].
    pub(super) fn memory_due(&mut self) -> Option<tokio::time::Instant> {
        let working = matches!(
            self.session.state,
            Some(SessionState::Working | SessionState::Waiting)
        );
        let watch = self.memory.as_mut()?;
        if !working {
            watch.next = None;
            return None;
        }
        Some(
            *watch
                .next
                .get_or_insert_with(|| tokio::time::Instant::now() + MEMORY_EVERY),
        )
    }

    /// Reads the agent's process tree; near the cap, says so in the inbox.
    pub(super) async fn check_memory(&mut self) {
        let Some(environment) = self.memory.as_ref().map(|w| Arc::clone(&w.environment)) else {
            return;
        };
        let pid = match environment.process_root().await {
            Some(root) => Some(root),
            None => crate::proc_tree::agent_process(self.session.agent_pid),
        };
        let Some(watch) = self.memory.as_mut() else {
            return;
        };
        watch.next = Some(tokio::time::Instant::now() + MEMORY_EVERY);
        let Some(used) = pid.and_then(crate::proc_tree::walk) else {
            return;
        };
        let near =
            used.rss_bytes.saturating_mul(100) >= watch.cap.saturating_mul(MEMORY_WARN_PERCENT);
        if !near {
            watch.warned = false;
            return;
        }
        if watch.warned {
            return;
        }
        watch.warned = true;
        let notice = wording::memory_near_cap(used.rss_bytes, watch.cap, used.processes);
        tracing::warn!(
            rss = used.rss_bytes,
            cap = watch.cap,
            "agent near its memory cap"
        );
        if let Err(e) = self.ledger.send(notice.into_params(&self.session.id)).await {
            tracing::warn!("cannot report the memory near its cap: {e}");
        }
    }

    /// On a usage limit, with a `fallback` on the profile: the task goes on with that
    /// profile through a hand-off (which stops this session, parked meanwhile, in turn).
    /// Once: the session is stopped by it, or, if it fails, waits for the reset.
    pub(super) fn fall_back(&mut self) {
        let Some(fallback) = self.fallback.take() else {
            return;
        };
        let Some(sessions) = fallback.sessions.upgrade() else {
            return;
        };
        let ledger = Arc::clone(&self.ledger);
        let session_id = self.session.id.clone();
        tokio::spawn(
            async move {
                let params = crate::protocol::HandoffParams {
                    session_id: session_id.clone(),
                    agent: fallback.agent.clone(),
                };
                let notice = match sessions.handoff(params).await {
                    Ok(to) => wording::fell_back(&to.display_name, &to.id, &fallback.agent),
                    Err(e) => {
                        tracing::warn!("the usage-limit fallback failed: {e}");
                        wording::fallback_failed(&fallback.agent, &e.to_string())
                    }
                };
                if let Err(e) = ledger.send(notice.into_params(&session_id)).await {
                    tracing::warn!("cannot report the usage-limit fallback: {e}");
                }
            }
            .in_current_span(),
        );
    }
}
