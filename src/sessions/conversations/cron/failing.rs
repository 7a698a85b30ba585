//! A cron run that cannot start (its branch is checked out elsewhere, its agent is gone):
//! counted with its error, and its job waits longer before the next attempt, doubling up
//! to [`RETRY_LONGEST_SECS`], still at its scheduled times. The first failure of a row is
//! said once: a session record in state `error` stands for the run that could not start
//! and carries one inbox `error`; the log says each new error once. The run that starts
//! again posts an `info` saying so.

use super::*;
use crate::protocol::{MsgType, SendParams};

/// The shortest wait before a job whose run could not start is tried again; it doubles
/// with each failure in a row.
const RETRY_FIRST_SECS: i64 = 1;
/// The longest such wait.
pub(super) const RETRY_LONGEST_SECS: i64 = 30 * 60;

/// How the state reason of a record of a run that could not start begins.
const NOT_STARTED: &str = "the cron run could not start: ";

/// What a run that could not start changes in what is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failing {
    /// The first of a row: said in the inbox and the log.
    Began,
    /// Another error than the last one: logged.
    Changed,
    /// The same error again: said nowhere again.
    Again,
}

impl JobRecord {
    /// Counts a run that could not start at `at`.
    pub(super) fn failed(&mut self, error: &str, at: &str) -> Failing {
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
    pub(super) fn started(&mut self) -> Option<(u64, String)> {
        let failures = std::mem::take(&mut self.failures);
        self.last_failed_at = None;
        let error = self.last_error.take()?;
        (failures > 0).then_some((failures, error))
    }
}

/// The least a job waits after its `failures`-th run in a row that could not start.
pub(super) fn retry_wait(failures: u64) -> chrono::TimeDelta {
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
pub(super) fn after_failure(
    s: &Scheduled,
    at: DateTime<Utc>,
    failures: u64,
) -> Option<DateTime<Utc>> {
    let not_before = at + retry_wait(failures);
    match s.next {
        Some(next) if next < not_before => s.job.next_after(not_before),
        other => other,
    }
}

impl Conversations {
    /// A run of `job` could not start: counted, the job waits longer before its next
    /// one, and the first of a row is said in the inbox. The log says each new error once.
    pub(super) async fn cron_failed(&self, job: &CronJob, error: &str) {
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
            .sessions
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
                own_bot: self
                    .sessions
                    .settings()
                    .is_ok_and(|c| c.channels.matrix.is_some()),
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
    pub(super) async fn cron_started(&self, job: &CronJob, session: &str) {
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
}
