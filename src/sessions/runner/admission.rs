//! Admission by memory: an agent starts (a new session, an unpark, a cron run, a resume
//! after a restart) only while the host has the memory `[fleet]` asks to keep available.
//! Below it the session is `queued`, saying how much there was and what is kept, with the
//! prompt it will start with kept in its `queued` prompts; the queue is looked at once a
//! second while it holds anything (and not at all while it is empty), and its sessions
//! start in order, each once the memory is there again, or at once when the bar is
//! lowered or taken away in the settings.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::spawn::{Resume, SpawnError};
use super::{Runner, locked};
use crate::config::AgentProfile;
use crate::ledger::now_rfc3339;
use crate::protocol::{Session, SessionState};

/// How often a non-empty queue looks at the host's memory.
const LOOK_EVERY: Duration = Duration::from_secs(1);

const MIB: u64 = 1024 * 1024;

/// A session whose agent waits for memory, with what its start needs.
pub(super) struct Waiting {
    session_id: String,
    profile_name: String,
    profile: AgentProfile,
    resume: Option<Resume>,
}

/// The sessions waiting for memory, oldest first.
#[derive(Default)]
pub(super) struct Queue {
    waiting: std::sync::Mutex<VecDeque<Waiting>>,
    /// Whether a task looks at the memory for the queue now.
    looking: AtomicBool,
}

/// The host's memory, from `/proc/meminfo`: (available, total) in bytes.
fn host_memory() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
    };
    Some((field("MemAvailable:")?, field("MemTotal:")?))
}

impl Runner {
    /// Whether a session waits for memory.
    pub fn has_queued(&self) -> bool {
        !locked(&self.admission.waiting).is_empty()
    }

    /// Why an agent must wait to start now, if it must: the host's available memory is
    /// below what `[fleet]` keeps free.
    fn short_of_memory(&self) -> Option<String> {
        let config = self.settings.get().ok()?;
        let (available, total) = host_memory()?;
        let bar = config.fleet.min_free_bytes(total)?;
        (available < bar).then(|| {
            format!(
                "queued for memory: {} MiB was available, and [fleet] keeps {} MiB free; it \
                 starts once there is more, or the bar is lowered",
                available / MIB,
                bar / MIB
            )
        })
    }

    /// Starts the session's agent ([`Runner::spawn`]) now, or queues it while the host is
    /// short of memory: then the session is `queued`, `first_prompt` goes first in its
    /// kept prompts, and the agent starts once the memory is there.
    pub(in crate::sessions) async fn admit(
        self: &Arc<Self>,
        session: Session,
        profile_name: &str,
        profile: AgentProfile,
        resume: Option<Resume>,
        first_prompt: Option<String>,
    ) -> std::result::Result<(), SpawnError> {
        let Some(why) = self.short_of_memory() else {
            return self
                .spawn(session, profile_name, profile, resume, first_prompt)
                .await;
        };
        let mut queued = session;
        queued.state = Some(SessionState::Queued);
        queued.state_reason = Some(why);
        queued.updated_at = Some(now_rfc3339());
        if let Some(prompt) = first_prompt {
            queued.queued.insert(0, prompt);
        }
        let queued = self
            .ledger
            .save_managed(&queued)
            .await
            .map_err(SpawnError::Record)?;
        tracing::info!(session = %queued.id, "queued for memory");
        locked(&self.admission.waiting).push_back(Waiting {
            session_id: queued.id,
            profile_name: profile_name.into(),
            profile,
            resume,
        });
        self.look_for_memory();
        Ok(())
    }

    /// Looks at the memory once a second while sessions wait, starting them in order as
    /// it allows; the task ends when the queue is empty.
    fn look_for_memory(self: &Arc<Self>) {
        if self.admission.looking.swap(true, Ordering::AcqRel) {
            return;
        }
        let runner = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(LOOK_EVERY).await;
                let Some(runner) = runner.upgrade() else {
                    return;
                };
                if !runner.start_waiting().await {
                    runner.admission.looking.store(false, Ordering::Release);
                    // A session queued between the last look and now starts a new task.
                    if locked(&runner.admission.waiting).is_empty() {
                        return;
                    }
                    if runner.admission.looking.swap(true, Ordering::AcqRel) {
                        return;
                    }
                }
            }
        });
    }

    /// Starts the waiting sessions the memory allows, oldest first; whether any still
    /// waits.
    async fn start_waiting(self: &Arc<Self>) -> bool {
        loop {
            if locked(&self.admission.waiting).is_empty() {
                return false;
            }
            if self.short_of_memory().is_some() {
                self.make_room();
                return true;
            }
            let Some(next) = locked(&self.admission.waiting).pop_front() else {
                return false;
            };
            self.start_admitted(next).await;
        }
    }

    /// With `[fleet] park_idle`: asks every contained session that runs an agent and
    /// rests to park (its actor parks only when idle with nothing open); parked, its
    /// environment is gone and the next prompt brings it back.
    fn make_room(&self) {
        if !self.settings.get().is_ok_and(|c| c.fleet.park_idle) {
            return;
        }
        let actors: Vec<(String, tokio::sync::mpsc::UnboundedSender<super::Command>)> =
            locked(&self.actors)
                .iter()
                .map(|(id, tx)| (id.clone(), tx.clone()))
                .collect();
        for (id, actor) in actors {
            let Ok(session) = self.ledger.get_session(&id) else {
                continue;
            };
            let contained = session
                .driver
                .as_ref()
                .is_some_and(|d| d.kind() != crate::protocol::DriverKind::Local);
            if contained && session.state.is_some_and(SessionState::is_resting) {
                tracing::info!(session = %id, "parking an idle session to make room in memory");
                let _ = actor.send(super::Command::Park);
            }
        }
    }

    /// Starts one session the memory now allows: from its record as it is now (it may
    /// have been stopped or deleted meanwhile, then nothing starts).
    async fn start_admitted(self: &Arc<Self>, waiting: Waiting) {
        let Ok(session) = self.ledger.get_session(&waiting.session_id) else {
            return;
        };
        if session.state != Some(SessionState::Queued) {
            return;
        }
        let mut starting = session.clone();
        starting.state = Some(SessionState::Starting);
        starting.state_reason = None;
        let id = session.id.clone();
        let started = self
            .spawn(
                starting,
                &waiting.profile_name,
                waiting.profile,
                waiting.resume,
                None,
            )
            .await;
        if let Err(why) = started {
            self.queued_start_failed(&id, &why).await;
        }
    }

    /// Records that a session queued for memory could not start its agent: `error`, and
    /// why.
    pub(super) async fn queued_start_failed(&self, id: &str, why: &SpawnError) {
        tracing::warn!(session = %id, "a queued session's agent did not start: {why}");
        let Ok(mut failed) = self.ledger.get_session(id) else {
            return;
        };
        failed.state = Some(SessionState::Error);
        failed.state_reason = Some(format!(
            "its agent did not start after waiting for memory: {why}"
        ));
        failed.updated_at = Some(now_rfc3339());
        if let Err(e) = self.ledger.save_managed(&failed).await {
            tracing::error!(session = %id, "cannot record the failed start: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_memory_is_read() {
        let (available, total) = host_memory().expect("/proc/meminfo");
        assert!(
            available > 0 && available <= total,
            "{available} of {total}"
        );
    }
}
