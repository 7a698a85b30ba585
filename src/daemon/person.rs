//! The components the person's hub runs for every kiln at once: the web view and the
//! Matrix bot of the person's own settings (`~/.config/crucible/config.toml`), started
//! from a door into the hub ([`Door::above`]) rather than a kiln's daemon. They are the
//! same components a kiln's daemon runs for its own `[web]` and `[channels.matrix]`;
//! only where their calls go differs.

use std::sync::Arc;

use super::components::Components;
use super::door::{Door, Starts};
#[cfg(feature = "matrix")]
use super::matrix;
use super::matrix_share::MatrixShare;
use super::web::{self, state::WebState};
use crate::config::Config;
use crate::protocol::ComponentStatus;

/// The hub's web view and Matrix bot, and the door they were started from.
pub(crate) struct PersonParts(Components, Door);

impl PersonParts {
    /// Starts the web view and the bot the person's settings `config` ask for; a part
    /// that cannot start is logged and left out.
    pub(crate) fn start(door: &Door, config: &Config) -> Self {
        let mut parts = Components::default();
        match web::Web::start(door, config) {
            Ok(web) => parts.add(web),
            Err(e) => tracing::error!("the person's web view does not start: {e}"),
        }
        #[cfg(feature = "matrix")]
        match matrix::Matrix::start(door, config) {
            Ok(bot) => parts.add(bot),
            Err(e) => tracing::error!("the person's Matrix bot does not start: {e}"),
        }
        Self(parts, door.clone())
    }

    /// The person's settings in use.
    pub(crate) fn settings(&self) -> Arc<Config> {
        self.1.settings()
    }

    /// Applies new settings; what could not be applied.
    pub(crate) fn reconfigure(&mut self, config: &Config) -> Vec<String> {
        self.0.reconfigure(config)
    }

    /// What `hub status` shows of them.
    pub(crate) fn statuses(&self) -> Vec<ComponentStatus> {
        self.0.statuses()
    }

    /// Whether they keep a hub with no client up: an address meant to be reachable at
    /// any time, or a bot.
    pub(crate) fn keep_up(&self) -> bool {
        self.0.keep_daemon_up()
    }

    /// The web view's paired browsers and address, while it runs.
    pub(crate) fn web(&self) -> Option<Arc<WebState>> {
        self.0.part::<WebState>()
    }

    /// The bot's status and the verification waiting for the person's word.
    pub(crate) fn matrix(&self) -> Option<Arc<MatrixShare>> {
        self.0.part::<MatrixShare>()
    }

    pub(crate) fn stop(&mut self) {
        self.0.stop();
    }
}

/// Starts the person's hub when their own settings ask it to serve something (a web view,
/// a bot) and this is the `cru` program: the page and the bot are then there whenever a
/// kiln's daemon is. A hub already running keeps running (the new one sees it and
/// exits); the one started here outlives this daemon.
pub(super) fn wake_the_hub() {
    if !crate::config::person_asks_hub() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    if exe.file_name() != Some(std::ffi::OsStr::new("cru")) {
        return;
    }
    let started = tokio::process::Command::new(&exe)
        .args(["hub", "run"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match started {
        Ok(mut hub) => {
            tracing::info!(
                "started the person's hub: their settings ask it to serve a web view or a bot"
            );
            tokio::spawn(async move {
                let _ = hub.wait().await;
            });
        }
        Err(e) => tracing::warn!("cannot start the person's hub: {e}"),
    }
}
