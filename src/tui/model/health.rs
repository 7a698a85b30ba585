//! What the workbench knows of its link: whether the daemon is connected and answers,
//! whether it reaches its database, and whether the settings files load. The screen
//! shows a banner while any of it is wrong.

use crate::protocol::{MatrixVerification, StoreHealth, VerificationState};

/// The link to the daemon, as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// Not connected yet: the screen is drawn before the daemon answers.
    Connecting,
    Connected,
    /// The daemon went away; the runtime is reconnecting.
    Lost {
        reason: String,
    },
}

/// What the link's health is told.
#[derive(Debug)]
pub(in crate::tui) enum HealthMsg {
    Connection(Connection),
    /// Whether the daemon reaches its database (team mode: a server).
    Store(StoreHealth),
    /// Why the settings files do not load, or `None` once they do.
    Settings(Option<String>),
    /// Why the daemon does not answer, or `None` once it does.
    Silence(Option<String>),
    /// How the Matrix bot's emoji verification stands.
    Verification(MatrixVerification),
}

/// The link's health.
#[derive(Debug)]
pub struct Health {
    pub(in crate::tui) connection: Connection,
    /// What the daemon's database cannot read back (its first damaged stretch).
    pub(in crate::tui) store_damaged: Option<String>,
    /// What the daemon rebuilt as it started, when its database did not open (the first
    /// line of what it says).
    pub(in crate::tui) store_rebuilt: Option<String>,
    /// Team mode: why the daemon cannot reach its database server, while it cannot.
    pub(in crate::tui) store_down: Option<String>,
    /// Why the settings files do not load (one line), while they do not: the last good
    /// settings stay in use.
    pub(in crate::tui) settings_error: Option<String>,
    /// Why the connected daemon does not answer (stopped by a signal, or silent), while
    /// it does not.
    pub(in crate::tui) daemon_silence: Option<String>,
    /// The Matrix bot's emoji verification while its emoji wait for the person's word.
    pub(in crate::tui) verification: Option<MatrixVerification>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            connection: Connection::Connected,
            store_damaged: None,
            store_rebuilt: None,
            store_down: None,
            settings_error: None,
            daemon_silence: None,
            verification: None,
        }
    }
}

impl Health {
    pub(in crate::tui) fn update(&mut self, msg: HealthMsg) {
        match msg {
            HealthMsg::Connection(connection) => self.connection = connection,
            HealthMsg::Store(health) => {
                self.store_damaged =
                    health
                        .damaged
                        .first()
                        .map(|first| match health.damaged.len() {
                            1 => first.clone(),
                            n => format!("{first} (and {} more)", n - 1),
                        });
                self.store_rebuilt = health.rebuilt.first().cloned();
                self.store_down =
                    (!health.connected).then(|| health.error.unwrap_or_else(|| "no answer".into()));
            }
            HealthMsg::Settings(why) => self.settings_error = why,
            HealthMsg::Silence(why) => self.daemon_silence = why,
            HealthMsg::Verification(v) => {
                self.verification = (v.state == VerificationState::Emoji).then_some(v);
            }
        }
    }

    /// Whether a banner is shown: something is wrong with the link.
    pub fn is_troubled(&self) -> bool {
        self.connection != Connection::Connected
            || self.daemon_silence.is_some()
            || self.store_down.is_some()
            || self.store_damaged.is_some()
            || self.store_rebuilt.is_some()
            || self.settings_error.is_some()
            || self.verification.is_some()
    }
}
