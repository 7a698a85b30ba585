//! Outbound notification (`[notify]`): for every message that needs a human (a question
//! or an approval, from any session and any channel), the user's command runs with the
//! kiln's name and folder and the message's session, channel, type, title and id in its
//! environment and nothing else of the daemon's (which may hold secrets). Runs are
//! rate-limited; a failing or hung command is logged (and killed after its timeout) and
//! never holds up a session. The `[notify]` settings in use are the daemon's live ones
//! ([`Notifier::reconfigure`]).

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, watch};

use super::caller::Caller;
use super::components::Component;
use super::door::{Door, Starts};
use super::error::DaemonError;
use crate::config::{Config, NotifyConfig};
use crate::kiln::Kiln;
use crate::protocol::methods as m;
use crate::protocol::{
    ChannelKind, ComponentState, ComponentStatus, Event, InboxMessage, SessionIdParams,
};

const WINDOW: Duration = Duration::from_secs(60);

/// The notify command as a component of the daemon.
pub(super) struct Notifier {
    config: watch::Sender<NotifyConfig>,
    task: tokio::task::JoinHandle<()>,
}

impl Starts for Notifier {
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError> {
        // Named as the person's registry of kilns names it (recorded as the daemon
        // started).
        let kiln_name = crate::kilns::name_of(door.kiln(), config.kiln.name.as_deref());
        let (config, settings) = watch::channel(config.notify.clone());
        Ok(Self {
            config,
            task: tokio::spawn(run(door.clone(), kiln_name, settings)),
        })
    }
}

impl Component for Notifier {
    fn name(&self) -> &'static str {
        "notify"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        self.config.send_if_modified(|now| {
            let differs = *now != config.notify;
            if differs {
                tracing::info!("notify: the settings changed");
                *now = config.notify.clone();
            }
            differs
        });
        None
    }

    fn status(&self) -> Option<ComponentStatus> {
        let config = self.config.borrow();
        let command = config.command.as_deref().filter(|c| !c.trim().is_empty());
        Some(ComponentStatus {
            name: self.name().into(),
            state: match command {
                Some(_) => ComponentState::On,
                None => ComponentState::Off,
            },
            detail: match command {
                Some(_) => "runs the [notify] command for each message that needs a human".into(),
                None => "no [notify] command in the settings".into(),
            },
            error: None,
        })
    }

    fn stop(&mut self) {
        self.task.abort();
    }
}

/// Follows the inbox until the daemon ends; wakes only when a message arrives.
async fn run(door: Door, kiln_name: String, settings: watch::Receiver<NotifyConfig>) {
    let mut events = door.events();
    let mut recent: VecDeque<Instant> = VecDeque::new();
    let mut missed = 0u64;
    loop {
        let message = match events.recv().await.as_deref() {
            Ok(Event::InboxCreated(m)) if m.msg_type.blocks() => m.clone(),
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!("notify: {n} events missed while busy");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let config = settings.borrow().clone();
        let Some(command) = config.command.filter(|c| !c.trim().is_empty()) else {
            continue;
        };
        let now = Instant::now();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) > WINDOW)
        {
            recent.pop_front();
        }
        if recent.len() >= config.max_per_minute as usize {
            missed += 1;
            tracing::info!(
                message = %message.id,
                "notify: over {} a minute, not run for this message",
                config.max_per_minute
            );
            continue;
        }
        recent.push_back(now);
        let asked = SessionIdParams {
            session_id: message.session_id.clone(),
        };
        let notifier = Caller::channel(ChannelKind::Other("notify".into()), "the notify command");
        let channel = door
            .call::<m::SessionGet>(notifier, &asked)
            .await
            .ok()
            .and_then(|reply| reply.session.channel)
            .map(|t| t.label())
            .unwrap_or_default();
        let timeout = Duration::from_secs(config.timeout_secs);
        tokio::spawn(notify(
            Told {
                kiln: door.kiln().clone(),
                kiln_name: kiln_name.clone(),
                message,
                channel,
                missed: std::mem::take(&mut missed),
            },
            command,
            timeout,
        ));
    }
}

/// What one run of the command is told.
struct Told {
    kiln: Kiln,
    kiln_name: String,
    message: InboxMessage,
    channel: String,
    /// Messages not told since the last run, over `max_per_minute`.
    missed: u64,
}

async fn notify(told: Told, command: String, timeout: Duration) {
    let Told {
        kiln,
        kiln_name,
        message,
        channel,
        missed,
    } = told;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(&command)
        .current_dir(kiln.root())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in ["PATH", "HOME", "LANG"] {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("CRUCIBLE_KILN", &kiln_name)
        .env("CRUCIBLE_KILN_PATH", kiln.root())
        .env("CRUCIBLE_SESSION_ID", &message.session_id)
        .env("CRUCIBLE_SESSION_NAME", &message.session_name)
        .env("CRUCIBLE_CHANNEL", &channel)
        .env("CRUCIBLE_MESSAGE_ID", &message.id)
        .env("CRUCIBLE_MESSAGE_TYPE", message.msg_type.as_str())
        .env("CRUCIBLE_MESSAGE_TITLE", &message.title)
        .env("CRUCIBLE_NOTIFY_MISSED", missed.to_string());
    crate::sys::user_umask(&mut cmd);
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::warn!(message = %message.id, "notify: cannot run the command: {e}");
            return;
        }
    };
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) if out.status.success() => {
            tracing::info!(message = %message.id, "notify: told");
        }
        Ok(Ok(out)) => tracing::warn!(
            message = %message.id,
            "notify: the command failed ({}): {}",
            out.status,
            crate::text::cap(String::from_utf8_lossy(&out.stderr).trim().to_string(), 1024)
        ),
        Ok(Err(e)) => tracing::warn!(message = %message.id, "notify: {e}"),
        Err(_) => tracing::warn!(
            message = %message.id,
            "notify: the command ran over {}s and was killed",
            timeout.as_secs()
        ),
    }
}
