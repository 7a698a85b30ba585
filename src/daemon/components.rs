//! The daemon's background parts as components: each is started with the settings the
//! daemon starts with, is given every new version of them, says whether it keeps a
//! daemon with no client up, and is stopped in one place. Cron jobs, the notify command,
//! the webhook listener, the approval timeout and team forwarding are components; adding
//! a part is one type implementing [`Component`] and one line in `daemon::run`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::caller::Caller;
use super::door::Door;
use crate::config::{Config, CronJob};
use crate::ledger::LedgerError;
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, CronRun, CronRunParams};
use crate::sessions::{CronDoor, Sessions};

/// A background part of the daemon.
pub(super) trait Component: Send {
    /// What the log calls it.
    fn name(&self) -> &'static str;

    /// Applies a new version of the settings. Returns what it could not apply, saying
    /// what to do about it.
    fn reconfigure(&mut self, config: &Config) -> Option<String>;

    /// Whether a daemon with no client connected stays up for it.
    fn keeps_daemon_up(&self) -> bool {
        false
    }

    /// Stops it: the daemon is shutting down.
    fn stop(&mut self);
}

/// The components a daemon runs, in the order they started.
#[derive(Default)]
pub(super) struct Components(Vec<Box<dyn Component>>);

impl Components {
    pub fn add(&mut self, component: impl Component + 'static) {
        self.0.push(Box::new(component));
    }

    /// Gives every component the new settings; returns what they could not apply.
    pub fn reconfigure(&mut self, config: &Config) -> Vec<String> {
        self.0
            .iter_mut()
            .filter_map(|c| c.reconfigure(config))
            .collect()
    }

    /// Whether any component keeps a daemon with no client up.
    pub fn keep_daemon_up(&self) -> bool {
        self.0.iter().any(|c| c.keeps_daemon_up())
    }

    /// Stops them, the last started first.
    pub fn stop(&mut self) {
        for component in self.0.iter_mut().rev() {
            tracing::debug!(component = component.name(), "stopping");
            component.stop();
        }
    }
}

/// A task with no settings of its own, aborted when the daemon stops.
pub(super) struct Task {
    name: &'static str,
    task: JoinHandle<()>,
}

impl Task {
    pub fn spawn(name: &'static str, work: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            name,
            task: tokio::spawn(work),
        }
    }
}

impl Component for Task {
    fn name(&self) -> &'static str {
        self.name
    }

    fn reconfigure(&mut self, _: &Config) -> Option<String> {
        None
    }

    fn stop(&mut self) {
        self.task.abort();
    }
}

/// The `[[cron]]` jobs: the schedule loop ([`Sessions::run_cron`]) follows the jobs
/// given here. A daemon with an enabled job stays up.
pub(super) struct Cron {
    jobs: watch::Sender<Vec<CronJob>>,
    task: JoinHandle<()>,
}

impl Cron {
    pub fn start(sessions: Arc<Sessions>, door: Door, config: &Config) -> Self {
        let (jobs, given) = watch::channel(config.cron.clone());
        let enabled = enabled_ids(&config.cron);
        if !enabled.is_empty() {
            tracing::info!(jobs = %enabled.join(", "), "cron jobs scheduled");
        }
        Self {
            jobs,
            task: tokio::spawn(sessions.run_cron(given, Arc::new(JobCaller(door)))),
        }
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

    fn stop(&mut self) {
        self.task.abort();
    }
}
