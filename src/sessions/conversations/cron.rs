//! Cron jobs (`[[cron]]`, the cron channel): each run starts a session with the
//! job's instructions, tagged `cron <id>`. A run whose previous one is still working is
//! skipped, and the skip is counted and logged; a previous run that rests is stopped
//! (its worktree and transcript stay), so runs do not pile up agents. The schedule loop
//! follows the jobs the daemon is given (they change with the settings) and sleeps until
//! the next run is due: nothing wakes in between. A job taken out of the settings starts
//! no more runs; a run of it already working finishes.
//!
//! A run that cannot start is counted against its job, which waits longer before the
//! next attempt, and the first of a row is said once ([`failing`]). The count and the
//! last error outlive the daemon ([`kept`]): a restarted one goes on counting the same
//! row and says nothing new.

mod failing;
mod kept;

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};

use super::{ConversationError, Conversations};
use crate::config::CronJob;
use crate::protocol::{ChannelTag, CronJobView, CronRun, DriverOptions, Resolution};
use crate::sessions::*;

/// The channel name cron sessions carry.
pub const CHANNEL: &str = "cron";

/// What the daemon remembers of a job between runs.
#[derive(Debug, Default, Clone)]
struct JobRecord {
    skipped: u64,
    last_skipped_at: Option<String>,
    /// Runs in a row that could not start.
    failures: u64,
    last_error: Option<String>,
    last_failed_at: Option<String>,
}

/// One job the daemon runs, and when it runs next (none: disabled, or never again).
#[derive(Debug, Clone, PartialEq)]
struct Scheduled {
    job: CronJob,
    next: Option<DateTime<Utc>>,
}

/// The jobs the daemon runs, their skips since it started, and their runs in a row that
/// could not start.
#[derive(Debug, Default)]
pub(super) struct CronBook {
    jobs: Vec<Scheduled>,
    records: HashMap<String, JobRecord>,
    /// Whether the kept failures were read in.
    read: bool,
}

impl CronBook {
    /// The jobs it runs that fail, as they are kept.
    fn failing(&self) -> HashMap<String, kept::Failing> {
        self.records
            .iter()
            .filter(|(id, r)| r.failures > 0 && self.jobs.iter().any(|s| &s.job.id == *id))
            .map(|(id, r)| {
                let failing = kept::Failing {
                    failures: r.failures,
                    last_error: r.last_error.clone(),
                    last_failed_at: r.last_failed_at.clone(),
                };
                (id.clone(), failing)
            })
            .collect()
    }

    /// Takes in the failures a previous daemon kept.
    fn read_in(&mut self, kept: HashMap<String, kept::Failing>) {
        self.read = true;
        for (id, failing) in kept {
            let record = self.records.entry(id).or_default();
            record.failures = failing.failures;
            record.last_error = failing.last_error;
            record.last_failed_at = failing.last_failed_at;
        }
    }
}

/// The schedule for `jobs` at `now`: a job whose id, schedule and switch are unchanged
/// keeps the run it was waiting for; any other gets its next run after `now`.
fn plan(old: &[Scheduled], jobs: &[CronJob], now: DateTime<Utc>) -> Vec<Scheduled> {
    jobs.iter()
        .map(|job| {
            let kept = old.iter().find(|s| {
                s.job.id == job.id && s.job.schedule == job.schedule && s.job.enabled == job.enabled
            });
            let next = match kept {
                Some(s) => s.next,
                None if job.enabled => job.next_after(now),
                None => None,
            };
            Scheduled {
                job: job.clone(),
                next,
            }
        })
        .collect()
}

/// The job due first, and when.
fn first_due(jobs: &[Scheduled]) -> Option<(usize, DateTime<Utc>)> {
    jobs.iter()
        .enumerate()
        .filter_map(|(i, s)| s.next.map(|when| (i, when)))
        .min_by_key(|(_, when)| *when)
}

/// How a due job is run: as `cron.run`, through the daemon's door, on the job's behalf
/// (its access, its request span, the job named as the caller).
pub trait CronDoor: Send + Sync {
    fn run(&self, id: String) -> Pin<Box<dyn Future<Output = Result<CronRun>> + Send>>;
}

impl Conversations {
    /// Runs the jobs `jobs` holds on their schedules, following it as it changes, until
    /// its sender is dropped.
    pub async fn run_cron(
        self: Arc<Self>,
        mut jobs: watch::Receiver<Vec<CronJob>>,
        door: Arc<dyn CronDoor>,
    ) {
        let given = jobs.borrow_and_update().clone();
        self.reschedule(&given).await;
        loop {
            let due = first_due(&self.cron_book().jobs);
            let wait = async {
                match due {
                    Some((_, when)) => {
                        if let Ok(wait) = (when - Utc::now()).to_std() {
                            tokio::time::sleep(wait).await;
                        }
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = jobs.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let given = jobs.borrow_and_update().clone();
                    self.reschedule(&given).await;
                }
                () = wait => {
                    let id = {
                        let mut book = self.cron_book();
                        let now = Utc::now();
                        // Read again: a run that could not start may have put it later.
                        let Some((i, when)) = first_due(&book.jobs) else { continue };
                        if when > now {
                            continue;
                        }
                        let Some(s) = book.jobs.get_mut(i) else { continue };
                        s.next = s.job.next_after(now);
                        s.job.id.clone()
                    };
                    let door = Arc::clone(&door);
                    tokio::spawn(async move {
                        match door.run(id.clone()).await {
                            Ok(run) if run.skipped => {
                                tracing::info!(job = %id, "cron run skipped: {}", run.note)
                            }
                            Ok(run) => tracing::info!(job = %id, session = %run.session_id, "cron run"),
                            Err(LedgerError::NotFound(_)) => tracing::info!(
                                job = %id,
                                "cron run not started: the job was taken out of the settings"
                            ),
                            // Counted and logged once per change by `cron_failed`.
                            Err(_) => {}
                        }
                    });
                }
            }
        }
    }

    /// Makes `jobs` the ones the daemon runs. Waits for a run being started to have
    /// started, so that once a job is gone from [`Sessions::cron_jobs`] it starts none.
    async fn reschedule(&self, jobs: &[CronJob]) {
        let _one_at_a_time = self.resolving.lock().await;
        let mut book = self.cron_book();
        book.jobs = plan(&book.jobs, jobs, Utc::now());
    }

    /// Runs the job `id` of the ones the daemon runs now, unless its previous run is
    /// still working. A run that cannot start is counted against its job.
    pub async fn run_cron_now(
        self: &Arc<Self>,
        id: &str,
    ) -> std::result::Result<CronRun, ConversationError> {
        let _one_at_a_time = self.resolving.lock().await;
        let job = self
            .cron_book()
            .jobs
            .iter()
            .find(|s| s.job.id == id)
            .map(|s| s.job.clone())
            .ok_or_else(|| ConversationError::NoCronJob { id: id.into() })?;
        let run = self.run_cron_job(&job).await;
        match &run {
            Ok(run) if !run.skipped => self.cron_started(&job, &run.session_id).await,
            Ok(_) => {}
            Err(e) => self.cron_failed(&job, &e.to_string()).await,
        }
        run
    }

    /// Runs `job` now, unless its previous run is still working. The caller holds
    /// `resolving`.
    async fn run_cron_job(
        self: &Arc<Self>,
        job: &CronJob,
    ) -> std::result::Result<CronRun, ConversationError> {
        let previous = self.newest_of(CHANNEL, &job.id, "");
        if let Some(prev) = &previous
            && self.sessions.runner().actor(&prev.id).is_some()
            && matches!(
                prev.state,
                Some(
                    SessionState::Creating
                        | SessionState::Starting
                        | SessionState::Working
                        | SessionState::Waiting
                )
            )
        {
            let at = now_rfc3339();
            {
                let mut book = self.cron_book();
                let record = book.records.entry(job.id.clone()).or_default();
                record.skipped += 1;
                record.last_skipped_at = Some(at.clone());
            }
            return Ok(CronRun {
                job: job.id.clone(),
                session_id: prev.id.clone(),
                skipped: true,
                note: format!(
                    "the run of {} is still {}; skipped at {at}",
                    prev.id,
                    prev.state.map_or("running", SessionState::as_str)
                ),
            });
        }
        // A fixed branch is worked on in the previous run's worktree.
        let worktree = match (&job.branch, &previous) {
            (Some(_), Some(prev)) if prev.branch == job.branch && prev.worktree.is_some() => {
                prev.worktree.clone()
            }
            (branch, _) => branch.clone(),
        };
        if let Some(prev) = &previous
            && self.sessions.runner().actor(&prev.id).is_some()
        {
            self.sessions.runner().stop(&prev.id).await?;
        }
        let session = self
            .sessions
            .lifecycle()
            .create(CreateSessionParams {
                kiln: None,
                agent: job.agent.clone(),
                worktree,
                in_place: false,
                task: Some(job.instructions.clone()),
                driver: DriverOptions {
                    driver: job.driver,
                    ..Default::default()
                },
                allow_read: Vec::new(),
                channel: Some(ChannelTag {
                    kind: CHANNEL.into(),
                    source: job.id.clone(),
                    reference: String::new(),
                    reason: Resolution::Scheduled,
                    last_message_at: now_rfc3339(),
                    closed: false,
                    approval_target: job.approval_target.clone(),
                    own_bot: self
                        .sessions
                        .settings()
                        .is_ok_and(|c| c.channels.matrix.is_some()),
                }),
            })
            .await?;
        Ok(CronRun {
            job: job.id.clone(),
            session_id: session.id,
            skipped: false,
            note: String::new(),
        })
    }

    /// The jobs the daemon runs, with their next runs, last sessions and skips.
    pub fn cron_jobs(&self) -> Vec<CronJobView> {
        let book = self.cron_book();
        book.jobs
            .iter()
            .map(|Scheduled { job, next }| {
                let record = book.records.get(&job.id).cloned().unwrap_or_default();
                let last = self.newest_of(CHANNEL, &job.id, "");
                CronJobView {
                    id: job.id.clone(),
                    schedule: job.schedule.clone(),
                    agent: job.agent.clone(),
                    enabled: job.enabled,
                    next_run: next.map(|t| t.to_rfc3339()),
                    last_session_id: last.as_ref().map(|s| s.id.clone()),
                    last_run_at: last.as_ref().map(|s| s.started_at.clone()),
                    last_state: last.and_then(|s| s.state),
                    skipped: record.skipped,
                    last_skipped_at: record.last_skipped_at,
                    failures: record.failures,
                    last_error: record.last_error,
                    last_failed_at: record.last_failed_at,
                }
            })
            .collect()
    }

    fn cron_book(&self) -> std::sync::MutexGuard<'_, CronBook> {
        let mut book = self.cron.lock().unwrap_or_else(|e| e.into_inner());
        if !book.read {
            book.read_in(kept::load(&self.cron_failures_path()));
        }
        book
    }

    /// Keeps the book's failures for the next daemon (under the book's lock, so that
    /// writes follow the changes in order).
    fn keep_failures(&self, book: &CronBook) {
        kept::save(&self.cron_failures_path(), &book.failing());
    }

    fn cron_failures_path(&self) -> std::path::PathBuf {
        self.ledger.kiln().state_dir().join(kept::FILE)
    }
}

#[cfg(test)]
mod tests;
