//! `[channels]` and `[[webhooks]]`: sessions started and continued from outside the
//! workbench: how each channel is set up, and how its messages are resolved to the
//! conversation (the session) they continue.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The reset phrases: a message that is one of these (any case) starts the
/// conversation afresh.
pub const RESET_PHRASES: [&str; 8] = [
    "new task",
    "start over",
    "reset",
    "forget that",
    "new project",
    "clear history",
    "start fresh",
    "new conversation",
];

/// `[channels]`: how inbound messages of non-interactive channels find their session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelsConfig {
    /// A conversation quiet this long starts a new session at its next message, carrying
    /// the previous one's context summary.
    pub session_timeout_minutes: f64,
    /// The same in seconds, over the minutes when set.
    pub session_timeout_secs: Option<u64>,
    /// Messages that start the conversation afresh (an explicit reset); matched
    /// whole, in any case, ignoring surrounding spaces and a final `.` or `!`.
    pub reset_phrases: Vec<String>,
    /// A question or approval of a cron or webhook session unanswered this long cancels
    /// the session's turn, with an `error` message saying so. None: it waits.
    pub approval_timeout_secs: Option<u64>,
    /// The optional topic-drift check: an `internal` agent profile whose model
    /// judges whether a message leaves its conversation's topic. None: off.
    pub drift_agent: Option<String>,
    /// The model's confidence at which a drift starts a new session.
    pub drift_threshold: f64,
    pub http: HttpConfig,
    /// `[channels.matrix]`: off when absent.
    pub matrix: Option<super::matrix::MatrixConfig>,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            session_timeout_minutes: 30.0,
            session_timeout_secs: None,
            reset_phrases: RESET_PHRASES.iter().map(|p| p.to_string()).collect(),
            approval_timeout_secs: None,
            drift_agent: None,
            drift_threshold: 0.8,
            http: HttpConfig::default(),
            matrix: None,
        }
    }
}

impl ChannelsConfig {
    pub fn session_timeout(&self) -> Duration {
        match self.session_timeout_secs {
            Some(secs) => Duration::from_secs(secs),
            None => Duration::from_secs_f64(self.session_timeout_minutes.max(0.0) * 60.0),
        }
    }

    /// Whether `text` is one of the reset phrases.
    pub fn is_reset(&self, text: &str) -> bool {
        let said = text
            .trim()
            .trim_end_matches(['.', '!'])
            .trim()
            .to_lowercase();
        self.reset_phrases
            .iter()
            .any(|p| p.trim().to_lowercase() == said)
    }
}

/// `[channels.http]`: the daemon's HTTP listener for webhooks. Off unless `listen` is
/// set; loopback is the expected address (put a reverse proxy in front for the world).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// `HOST:PORT`, e.g. `127.0.0.1:8421`.
    pub listen: Option<String>,
    /// The largest body accepted; larger is 413.
    pub max_body_kb: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: None,
            max_body_kb: 1024,
        }
    }
}

/// What is wrong with a channel's settings, or with a delivery a webhook gets.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ChannelError {
    /// A setting of a channel (the listen address, a hook, a cron job) is wrong.
    #[error("{0}")]
    Invalid(String),
    /// `channels.http.listen` is not an address.
    #[error("channels.http.listen {listen:?} is not HOST:PORT (e.g. \"127.0.0.1:8421\")")]
    Listen {
        listen: String,
        #[source]
        source: std::net::AddrParseError,
    },
    /// A cron job's schedule is not cron syntax.
    #[error("cron.{id}: schedule {schedule:?}: {source}")]
    Schedule {
        id: String,
        schedule: String,
        #[source]
        source: std::sync::Arc<croner::errors::CronError>,
    },
    /// A delivery the hook does not take (its event or action); said to the sender.
    #[error("{0}")]
    NotTaken(String),
    /// A delivery whose payload lacks what the hook needs.
    #[error("{0}")]
    Payload(String),
}

/// Two faults are the same when they are of one kind and say the same: the parse errors
/// they keep have no equality of their own.
impl PartialEq for ChannelError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for ChannelError {}

impl HttpConfig {
    /// The address to listen on, if the listener is on.
    pub fn address(&self) -> Result<Option<SocketAddr>, ChannelError> {
        self.listen
            .as_deref()
            .map(|a| {
                a.parse().map_err(|source| ChannelError::Listen {
                    listen: a.to_string(),
                    source,
                })
            })
            .transpose()
    }
}

/// `[notify]`: a command run for every message that needs a human (a question or an
/// approval), so it reaches them where they are (ntfy, Slack, mail, `notify-send`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// Run with `sh -c`, its environment only `PATH`, `HOME`, `LANG` and
    /// `CRUCIBLE_SESSION_ID`, `CRUCIBLE_SESSION_NAME`, `CRUCIBLE_CHANNEL`,
    /// `CRUCIBLE_MESSAGE_ID`, `CRUCIBLE_MESSAGE_TYPE`, `CRUCIBLE_MESSAGE_TITLE`.
    pub command: Option<String>,
    /// At most this many runs a minute; messages over it are counted, logged and told
    /// to the next run (`CRUCIBLE_NOTIFY_MISSED`).
    pub max_per_minute: u32,
    /// A run still going after this long is killed.
    pub timeout_secs: u64,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            command: None,
            max_per_minute: 6,
            timeout_secs: 30,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_phrases_match_whole_messages_in_any_case() {
        let c = ChannelsConfig::default();
        assert!(c.is_reset("Start over!"));
        assert!(c.is_reset("  RESET. "));
        assert!(!c.is_reset("please reset the cache"));
        assert!(!c.is_reset("fix the reset button"));
    }
}
