//! Cron jobs (`[[cron]]`, the cron channel): each run starts a session with the
//! job's instructions, tagged `cron <id>`. A run whose previous one is still working is
//! skipped, and the skip is counted and logged; a previous run that rests is stopped
//! (its worktree and transcript stay), so runs do not pile up agents. The schedule loop
//! follows the jobs the daemon is given (they change with the settings) and sleeps until
//! the next run is due: nothing wakes in between. A job taken out of the settings starts
//! no more runs; a run of it already working finishes.
//!
//! A run that cannot start (its branch is checked out elsewhere, its agent is gone) is
//! counted with its error, and its job waits longer before the next attempt, doubling up
//! to [`RETRY_LONGEST_SECS`], still at its scheduled times. The first failure of a row is
//! said once: a session record in state `error` stands for the run that could not start
//! and carries one inbox `error`; the log says each new error once. The run that starts
//! again posts an `info` saying so. The count and the last error outlive the daemon
//! ([`kept`]): a restarted one goes on counting the same row and says nothing new.

mod kept;

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};

use super::*;
use crate::config::CronJob;
use crate::protocol::{
    ChannelTag, CronJobView, CronRun, DriverOptions, MsgType, Resolution, SendParams,
};

/// The channel name cron sessions carry.
pub const CHANNEL: &str = "cron";

/// The shortest wait before a job whose run could not start is tried again; it doubles
/// with each failure in a row.
const RETRY_FIRST_SECS: i64 = 1;
/// The longest such wait.
const RETRY_LONGEST_SECS: i64 = 30 * 60;

/// How the state reason of a record of a run that could not start begins.
const NOT_STARTED: &str = "the cron run could not start: ";

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

/// What a run that could not start changes in what is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failing {
    /// The first of a row: said in the inbox and the log.
    Began,
    /// Another error than the last one: logged.
    Changed,
    /// The same error again: said nowhere again.
    Again,
}

impl JobRecord {
    /// Counts a run that could not start at `at`.
    fn failed(&mut self, error: &str, at: &str) -> Failing {
        self.failures += 1;
        self.last_failed_at = Some(at.to_string());
        let before = self.last_error.replace(error.to_string());
        match before {
            _ if self.failures == 1 => Failing::Began,
            Some(before) if before == error => Failing::Again,
            _ => Failing::Changed,
        }
    }

    /// A run started: how many could not before it, and the last one's error, if any.
    fn started(&mut self) -> Option<(u64, String)> {
        let failures = std::mem::take(&mut self.failures);
        self.last_failed_at = None;
        let error = self.last_error.take()?;
        (failures > 0).then_some((failures, error))
    }
}

/// The least a job waits after its `failures`-th run in a row that could not start.
fn retry_wait(failures: u64) -> chrono::TimeDelta {
    let doublings = u32::try_from(failures.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(30);
    let secs = RETRY_FIRST_SECS
        .saturating_mul(1_i64 << doublings)
        .min(RETRY_LONGEST_SECS);
    chrono::TimeDelta::seconds(secs)
}

/// When a job runs next after its `failures`-th run in a row could not start at `at`:
/// its scheduled run, unless that comes before the wait is over; then the first
/// scheduled after it.
fn after_failure(s: &Scheduled, at: DateTime<Utc>, failures: u64) -> Option<DateTime<Utc>> {
    let not_before = at + retry_wait(failures);
    match s.next {
        Some(next) if next < not_before => s.job.next_after(not_before),
        other => other,
    }
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

impl Sessions {
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
    pub async fn run_cron_now(self: &Arc<Self>, id: &str) -> Result<CronRun> {
        let _one_at_a_time = self.resolving.lock().await;
        let job = self
            .cron_book()
            .jobs
            .iter()
            .find(|s| s.job.id == id)
            .map(|s| s.job.clone())
            .ok_or_else(|| {
                LedgerError::NotFound(format!("no cron job {id:?} in the daemon's settings"))
            })?;
        let run = self.run_cron_job(&job).await;
        match &run {
            Ok(run) if !run.skipped => self.cron_started(&job, &run.session_id).await,
            Ok(_) => {}
            Err(e) => self.cron_failed(&job, &e.to_string()).await,
        }
        run
    }

    /// A run of `job` could not start: counted, the job waits longer before its next
    /// one, and the first of a row is said in the inbox. The log says each new error once.
    async fn cron_failed(&self, job: &CronJob, error: &str) {
        let now = Utc::now();
        let (failing, failures) = {
            let mut book = self.cron_book();
            let record = book.records.entry(job.id.clone()).or_default();
            let failing = record.failed(error, &now.to_rfc3339());
            let failures = record.failures;
            if let Some(s) = book.jobs.iter_mut().find(|s| s.job.id == job.id) {
                s.next = after_failure(s, now, failures);
            }
            self.keep_failures(&book);
            (failing, failures)
        };
        match failing {
            Failing::Began => {
                tracing::warn!(
                    job = %job.id,
                    "cron run could not start: {error} (tried again at its scheduled times, waiting longer after each failure; said again only when the error changes)"
                );
                self.say_cron_fails(job, error).await;
            }
            Failing::Changed => {
                tracing::warn!(job = %job.id, failures, "cron run could not start, now: {error}");
                if let Some(mut record) = self.not_started_record(job) {
                    record.state_reason = Some(format!("{NOT_STARTED}{error}"));
                    record.updated_at = Some(now_rfc3339());
                    if let Err(e) = self.ledger.save_managed(&record).await {
                        tracing::warn!(job = %job.id, "cannot record the cron job's new error: {e}");
                    }
                }
            }
            Failing::Again => {
                tracing::debug!(job = %job.id, failures, "cron run could not start: {error}");
            }
        }
    }

    /// The job's newest run, when it is the record of a run that could not start.
    fn not_started_record(&self, job: &CronJob) -> Option<Session> {
        self.newest_of(CHANNEL, &job.id, "").filter(|s| {
            s.state == Some(SessionState::Error)
                && s.worktree.is_none()
                && s.state_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with(NOT_STARTED))
        })
    }

    /// Says in the inbox that `job` cannot start its runs, under a session record of the
    /// run that could not (an inbox message belongs to a session). A record a previous
    /// daemon made for the same row of failures is used again, and says nothing new.
    async fn say_cron_fails(&self, job: &CronJob, error: &str) {
        let reason = format!("{NOT_STARTED}{error}");
        let now = now_rfc3339();
        if let Some(mut record) = self.not_started_record(job) {
            record.state_reason = Some(reason);
            record.updated_at = Some(now);
            if let Err(e) = self.ledger.save_managed(&record).await {
                tracing::warn!(job = %job.id, "cannot record the cron job's error: {e}");
            }
            return;
        }
        let kind = self
            .settings()
            .ok()
            .and_then(|config| config.profile(&job.agent).ok())
            .map_or(AgentKind::Acp, |profile| profile.kind);
        let record = Session {
            state: Some(SessionState::Error),
            state_reason: Some(reason),
            task: Some(job.instructions.clone()),
            updated_at: Some(now.clone()),
            channel: Some(ChannelTag {
                kind: CHANNEL.into(),
                source: job.id.clone(),
                reference: String::new(),
                reason: Resolution::Scheduled,
                last_message_at: now.clone(),
                closed: false,
                approval_target: job.approval_target.clone(),
                own_bot: self.settings().is_ok_and(|c| c.channels.matrix.is_some()),
            }),
            ..Session::started(
                self.ledger.next_id(),
                None,
                kind.as_str().into(),
                job.agent.clone(),
                format!("cron {} @ {}", job.id, job.agent),
                now,
            )
        };
        let record = match self.ledger.add_managed(record).await {
            Ok(record) => record,
            Err(e) => {
                tracing::error!(job = %job.id, "cannot record the cron run that could not start: {e}");
                return;
            }
        };
        let body = format!(
            "{error}\n\nIt is tried again at its scheduled times, waiting longer after each \
             failure (up to {} minutes between attempts); this is not said again while it \
             keeps failing. `cru cron list` shows the count and the last error; `cru cron run \
             {}` tries at once.",
            RETRY_LONGEST_SECS / 60,
            job.id
        );
        let message = SendParams {
            session_id: record.id,
            msg_type: MsgType::Error,
            title: format!("Cron job {} cannot start its runs", job.id),
            body: Some(body),
            options: None,
            option_kinds: None,
            flagged: None,
        };
        if let Err(e) = self.ledger.send(message).await {
            tracing::error!(job = %job.id, "cannot say that the cron job fails: {e}");
        }
    }

    /// A run of `job` started as `session`: after runs that could not, its schedule is
    /// its own again, and the run says in the inbox that the job works again.
    async fn cron_started(&self, job: &CronJob, session: &str) {
        let recovered = {
            let mut book = self.cron_book();
            let recovered = book.records.get_mut(&job.id).and_then(JobRecord::started);
            if recovered.is_some()
                && let Some(s) = book.jobs.iter_mut().find(|s| s.job.id == job.id)
                && s.next.is_some()
            {
                s.next = s.job.next_after(Utc::now());
            }
            if recovered.is_some() {
                self.keep_failures(&book);
            }
            recovered
        };
        let Some((failures, error)) = recovered else {
            return;
        };
        tracing::info!(job = %job.id, failures, "cron run started again");
        let message = SendParams {
            session_id: session.to_string(),
            msg_type: MsgType::Info,
            title: format!("Cron job {} runs again", job.id),
            body: Some(format!(
                "This run started after {failures} that could not; the last said: {error}"
            )),
            options: None,
            option_kinds: None,
            flagged: None,
        };
        if let Err(e) = self.ledger.send(message).await {
            tracing::warn!(job = %job.id, "cannot say that the cron job runs again: {e}");
        }
    }

    /// Runs `job` now, unless its previous run is still working. The caller holds
    /// `resolving`.
    async fn run_cron_job(self: &Arc<Self>, job: &CronJob) -> Result<CronRun> {
        let previous = self.newest_of(CHANNEL, &job.id, "");
        if let Some(prev) = &previous
            && self.runner.actor(&prev.id).is_some()
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
            && self.runner.actor(&prev.id).is_some()
        {
            self.runner.stop(&prev.id).await?;
        }
        let session = self
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
                    own_bot: self.settings().is_ok_and(|c| c.channels.matrix.is_some()),
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
