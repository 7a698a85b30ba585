//! The daemon's background parts as components: each is started from the daemon's door
//! and the settings the daemon starts with ([`Starts`](super::door::Starts)), is given
//! every new version of them, says whether it keeps a daemon with no client up, reports
//! its state for `daemon.status`, and is stopped in one place. The Matrix channel, the
//! web view, the webhook listener, cron jobs, the notify command, the approval timeout
//! and team forwarding are components; adding a part is one type implementing
//! [`Component`] and one line in `daemon::run`.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::config::Config;
use crate::protocol::ComponentStatus;

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

    /// What `daemon.status` shows of it; `None` for a part with nothing to say.
    fn status(&self) -> Option<ComponentStatus> {
        None
    }

    /// What it shares with the daemon's methods (the web view's paired browsers), found
    /// by its type ([`Components::part`]).
    fn shares(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        None
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

    /// What the components report, in the order they started.
    pub fn statuses(&self) -> Vec<ComponentStatus> {
        self.0.iter().filter_map(|c| c.status()).collect()
    }

    /// What a component shares of type `T`.
    pub fn part<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.iter().find_map(|c| c.shares()?.downcast::<T>().ok())
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
