//! What the actor watches beside the machine: the memory its agent uses while a turn runs
//! (near the session's cap, the inbox is told), and, on a usage limit, the hand-off to
//! the profile's fallback chain.

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
    /// The kernel's OOM kills under the session's memory limit, as last looked at.
    pub oom_seen: u64,
    /// When the last of them was first seen.
    pub oom_at: Option<tokio::time::Instant>,
}

/// An agent that ends by a signal this soon after an OOM kill was seen was that kill (the
/// turn it was in may have been told first).
const OOM_EXIT_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) const MEMORY_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Percent of the cap reported.
pub(super) const MEMORY_WARN_PERCENT: u64 = 80;

/// Where a usage limit is reported: the manager, which keeps each profile's limits and
/// moves the task along the profile's `fallback` chain.
pub(crate) struct Fallback {
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
        let used = match environment.measured().await {
            Some(measured) => measured,
            None => match environment.process_root().await {
                Some(root) => crate::proc_tree::walk(root),
                None => crate::proc_tree::agent_process(self.session.agent_pid)
                    .and_then(crate::proc_tree::walk),
            },
        };
        let Some(watch) = self.memory.as_mut() else {
            return;
        };
        watch.next = Some(tokio::time::Instant::now() + MEMORY_EVERY);
        self.report_oom().await;
        let (Some(used), Some(watch)) = (used, self.memory.as_mut()) else {
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

    /// Whether the kernel's OOM killer ended a process under the session's memory
    /// limit since the last look.
    fn new_oom_kill(&mut self) -> bool {
        let Some(watch) = self.memory.as_mut() else {
            return false;
        };
        match watch.environment.oom_kills() {
            Some(kills) if kills > watch.oom_seen => {
                watch.oom_seen = kills;
                watch.oom_at = Some(tokio::time::Instant::now());
                true
            }
            _ => false,
        }
    }

    /// Says in the inbox when the kernel's OOM killer ended a process of the agent's
    /// (the agent goes on: it was a command it ran) since the last look.
    pub(super) async fn check_oom(&mut self) {
        if let Some(environment) = self.memory.as_ref().map(|w| Arc::clone(&w.environment)) {
            environment.look_for_oom().await;
        }
        self.report_oom().await;
    }

    /// [`Actor::check_oom`] once the agent's processes were looked for.
    async fn report_oom(&mut self) {
        if !self.new_oom_kill() {
            return;
        }
        let Some(cap) = self.memory.as_ref().map(|w| w.cap) else {
            return;
        };
        tracing::warn!(
            cap,
            "the kernel ended a process of the agent's: out of memory"
        );
        let notice = wording::out_of_memory(cap);
        if let Err(e) = self.ledger.send(notice.into_params(&self.session.id)).await {
            tracing::warn!("cannot report the process ended for memory: {e}");
        }
    }

    /// How an agent that ended by a signal ended: `killed: out of memory (cap N MiB)`
    /// when the kernel's OOM killer ended it, else `status` as it is. Behind bubblewrap
    /// or podman the agent's SIGKILL reaches crucible as the wrapper's exit code 137.
    pub(super) fn exit_status(&mut self, status: String, code: Option<i32>) -> String {
        if code.is_some_and(|c| c != 128 + libc::SIGKILL) {
            return status;
        }
        let _ = self.new_oom_kill();
        let Some(watch) = self.memory.as_ref() else {
            return status;
        };
        if watch.oom_at.is_none_or(|at| at.elapsed() > OOM_EXIT_WITHIN) {
            return status;
        }
        let cap = watch.cap;
        format!(
            "was killed: out of memory (cap {} MiB)",
            cap / (1024 * 1024)
        )
    }

    /// On a usage limit that resets at `resets_at`: the manager hears of it (the
    /// profile is limited until then) and moves the task along the profile's fallback
    /// chain when it has one (which stops this session, parked meanwhile, in turn).
    pub(super) fn fall_back(&mut self, resets_at: chrono::DateTime<chrono::Utc>) {
        let Some(sessions) = self.fallback.as_ref().and_then(|f| f.sessions.upgrade()) else {
            return;
        };
        let session_id = self.session.id.clone();
        tokio::spawn(
            async move { sessions.usage_limited(&session_id, resets_at).await }.in_current_span(),
        );
    }
}
