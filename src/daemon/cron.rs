//! The `[[cron]]` jobs as a component: the schedule loop ([`Conversations::run_cron`]) follows
//! the jobs given here, and a due job runs as `cron.run` through the door. A daemon with
//! an enabled job stays up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::caller::Caller;
use super::components::Component;
use super::door::{Door, Starts};
use super::error::DaemonError;
use crate::config::{Config, CronJob};
use crate::ledger::LedgerError;
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, ComponentState, ComponentStatus, CronRun, CronRunParams};
use crate::sessions::{Conversations, CronDoor};

/// The `[[cron]]` jobs.
pub(super) struct Cron {
    jobs: watch::Sender<Vec<CronJob>>,
    task: JoinHandle<()>,
}

impl Starts for Cron {
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError> {
        let (jobs, given) = watch::channel(config.cron.clone());
        let enabled = enabled_ids(&config.cron);
        if !enabled.is_empty() {
            tracing::info!(jobs = %enabled.join(", "), "cron jobs scheduled");
        }
        let caller = Arc::new(JobCaller(door.clone()));
        let task = match door.conversations() {
            Some(conversations) => {
                tokio::spawn(Conversations::run_cron(conversations, given, caller))
            }
            None => tokio::spawn(async {}),
        };
        Ok(Self { jobs, task })
    }
}

/// A due job runs as `cron.run` through the door, the job named as its caller.
struct JobCaller(Door);

impl CronDoor for JobCaller {
    fn run(
        &self,
        id: String,
    ) -> Pin<Box<dyn Future<Output = Result<CronRun, LedgerError>> + Send>> {
        let door = self.0.clone();
        Box::pin(async move {
            let caller = Caller::channel(ChannelKind::Cron, format!("job {id}"));
            door.call::<m::CronRunNow>(caller, &CronRunParams { id })
                .await
                .map_err(LedgerError::from_refusal)
        })
    }
}

fn enabled_ids(jobs: &[CronJob]) -> Vec<&str> {
    jobs.iter()
        .filter(|j| j.enabled)
        .map(|j| j.id.as_str())
        .collect()
}

impl Component for Cron {
    fn name(&self) -> &'static str {
        "cron"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        self.jobs.send_if_modified(|jobs| {
            if *jobs == config.cron {
                return false;
            }
            let enabled = enabled_ids(&config.cron);
            let gone: Vec<&str> = enabled_ids(jobs)
                .into_iter()
                .filter(|id| !enabled.contains(id))
                .collect();
            tracing::info!(
                jobs = %enabled.join(", "),
                stopped = %gone.join(", "),
                "cron jobs changed"
            );
            *jobs = config.cron.clone();
            true
        });
        None
    }

    fn keeps_daemon_up(&self) -> bool {
        self.jobs.borrow().iter().any(|j| j.enabled)
    }

    fn status(&self) -> Option<ComponentStatus> {
        let jobs = self.jobs.borrow();
        let enabled = enabled_ids(&jobs);
        Some(ComponentStatus {
            name: self.name().into(),
            state: if enabled.is_empty() {
                ComponentState::Off
            } else {
                ComponentState::On
            },
            detail: match (enabled.len(), jobs.len()) {
                (0, 0) => "no jobs".into(),
                (on, all) if on == all => format!("{on} jobs: {}", enabled.join(", ")),
                (on, all) => format!("{on} of {all} jobs enabled: {}", enabled.join(", ")),
            },
            error: None,
        })
    }

    fn stop(&mut self) {
        self.task.abort();
    }
}
