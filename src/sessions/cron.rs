//! Cron jobs (`[[cron]]`, seed 000's cron channel): each run starts a session with the
//! job's instructions, tagged `cron <id>`. A run whose previous one is still working is
//! skipped, and the skip is counted and logged; a previous run that rests is stopped
//! (its worktree and transcript stay), so runs do not pile up agents. The schedule loop
//! sleeps until the next run is due: nothing wakes in between.

use chrono::{DateTime, Utc};

use super::*;
use crate::config::CronJob;
use crate::protocol::{ChannelTag, CronJobView, CronRun, DriverOptions, Resolution};

/// The channel name cron sessions carry.
pub const CHANNEL: &str = "cron";

/// What the daemon remembers of a job between runs.
#[derive(Debug, Default, Clone)]
pub(super) struct JobRecord {
    skipped: u64,
    last_skipped_at: Option<String>,
}

impl Sessions {
    /// Runs the enabled jobs on their schedules until the daemon ends.
    pub async fn run_cron(self: Arc<Self>, jobs: Vec<CronJob>) {
        let mut due: Vec<(Option<DateTime<Utc>>, CronJob)> = jobs
            .into_iter()
            .filter(|j| j.enabled)
            .map(|j| (j.next_after(Utc::now()), j))
            .collect();
        loop {
            let Some((i, when)) = due
                .iter()
                .enumerate()
                .filter_map(|(i, (when, _))| when.map(|w| (i, w)))
                .min_by_key(|(_, when)| *when)
            else {
                return;
            };
            if let Ok(wait) = (when - Utc::now()).to_std() {
                tokio::time::sleep(wait).await;
            }
            let job = due[i].1.clone();
            due[i].0 = job.next_after(Utc::now().max(when));
            let me = Arc::clone(&self);
            tokio::spawn(async move {
                match me.run_cron_job(&job).await {
                    Ok(run) if run.skipped => {
                        tracing::info!(job = %job.id, "cron run skipped: {}", run.note)
                    }
                    Ok(run) => tracing::info!(job = %job.id, session = %run.session_id, "cron run"),
                    Err(e) => tracing::warn!(job = %job.id, "cron run failed: {e}"),
                }
            });
        }
    }

    /// Runs `job` now, unless its previous run is still working.
    pub async fn run_cron_job(self: &Arc<Self>, job: &CronJob) -> Result<CronRun> {
        let _one_at_a_time = self.resolving.lock().await;
        let previous = self.newest_of(CHANNEL, &job.id, "");
        if let Some(prev) = &previous
            && self.actor(&prev.id).is_some()
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
                let mut records = self.cron_records();
                let record = records.entry(job.id.clone()).or_default();
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
            && self.actor(&prev.id).is_some()
        {
            self.stop(&prev.id).await?;
        }
        let session = self
            .create(CreateSessionParams {
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

    /// Runs the job of the settings named `id` now (see [`Sessions::run_cron_job`]).
    pub async fn run_cron_now(self: &Arc<Self>, id: &str) -> Result<CronRun> {
        let config = self.settings()?;
        let job = config.cron.iter().find(|j| j.id == id).ok_or_else(|| {
            WorkbenchError::NotFound(format!("no cron job {id:?} in the settings"))
        })?;
        self.run_cron_job(job).await
    }

    /// The jobs of the settings, with their next runs, last sessions and skips.
    pub fn cron_jobs(&self) -> Result<Vec<CronJobView>> {
        let jobs = self.settings()?.cron;
        let records = self.cron_records();
        Ok(jobs
            .iter()
            .map(|job| {
                let record = records.get(&job.id).cloned().unwrap_or_default();
                let last = self.newest_of(CHANNEL, &job.id, "");
                CronJobView {
                    id: job.id.clone(),
                    schedule: job.schedule.clone(),
                    agent: job.agent.clone(),
                    enabled: job.enabled,
                    next_run: job
                        .enabled
                        .then(|| job.next_after(Utc::now()))
                        .flatten()
                        .map(|t| t.to_rfc3339()),
                    last_session_id: last.as_ref().map(|s| s.id.clone()),
                    last_run_at: last.as_ref().map(|s| s.started_at.clone()),
                    last_state: last.and_then(|s| s.state),
                    skipped: record.skipped,
                    last_skipped_at: record.last_skipped_at,
                }
            })
            .collect())
    }

    fn cron_records(&self) -> std::sync::MutexGuard<'_, HashMap<String, JobRecord>> {
        self.cron.lock().unwrap_or_else(|e| e.into_inner())
    }
}
