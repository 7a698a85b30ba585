//! What starting an agent takes ([`Launch`]) and what it gives ([`AgentHandle`]): the
//! handle sends the running agent its prompts, cancels and stop as [`Order`]s.

use std::path::PathBuf;

use tokio::sync::{mpsc, oneshot};

use super::link::SessionLink;
use crate::config::AgentProfile;
use crate::driver::Environment;

#[derive(Debug)]
pub(crate) enum Order {
    Prompt {
        text: String,
        /// Open a fresh session first, and send this context ahead of the prompt (when
        /// it is not empty).
        fresh: Option<String>,
    },
    Cancel,
}

/// What is needed to start one agent.
pub struct Launch {
    pub profile_name: String,
    pub profile: AgentProfile,
    /// The session's folder: the agent's working directory and the firewall's root.
    pub cwd: PathBuf,
    /// Folders under `cwd` the agent may not touch (see [`Firewall::new`]).
    pub denied: Vec<PathBuf>,
    /// Added to the profile's environment.
    pub env: Vec<(String, String)>,
    /// Where the agent's stderr goes.
    pub stderr_log: PathBuf,
    /// Reload this ACP session instead of opening a new one.
    pub resume: Option<String>,
    /// When the agent cannot reload it, open a new one instead of failing.
    pub fresh_if_unresumable: bool,
    /// The session's context and inbox, for the internal agent.
    pub link: Option<std::sync::Arc<dyn SessionLink>>,
    /// Where the agent's processes run (its driver's environment).
    pub environment: std::sync::Arc<Environment>,
    /// The internal agent's API key for `api_key_env`, when the process that asked for
    /// the session gave it (else the daemon's variable is read). Given to no process.
    pub api_key: Option<String>,
}

impl Launch {
    /// The session's variables over the profile's, plus `extra`.
    pub(crate) fn vars(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = self
            .profile
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        vars.extend(self.env.iter().cloned());
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars
    }
}

/// A running agent. Dropping it stops the agent.
pub struct AgentHandle {
    pub pid: u32,
    pub(crate) commands: mpsc::UnboundedSender<Order>,
    pub(crate) stop: Option<oneshot::Sender<()>>,
}

impl AgentHandle {
    pub fn prompt(&self, text: String) {
        let _ = self.commands.send(Order::Prompt { text, fresh: None });
    }

    /// Sends the prompt in a fresh agent session, `context` (if not empty) ahead of it.
    /// Only ACP agents keep sessions; the others take the prompt as it is.
    pub fn prompt_fresh(&self, text: String, context: String) {
        let _ = self.commands.send(Order::Prompt {
            text,
            fresh: Some(context),
        });
    }

    pub fn cancel(&self) {
        let _ = self.commands.send(Order::Cancel);
    }

    /// Ends the agent: its connection closes, then SIGTERM, then SIGKILL after a grace.
    /// [`AgentEvent::Exited`] reports when it is gone.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
