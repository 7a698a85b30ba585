//! The params and results of what channels call: a message resolved to a session, and
//! the cron jobs and failing webhooks.

use serde::{Deserialize, Serialize};

/// `session.resolve`: a message from a channel (a webhook), resolved to a session by
/// the conversation policy (reset phrase, timeout, closed, drift, continue) and delivered
/// there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResolveParams {
    /// The channel: `webhook`, `matrix`, `cron` (or any name of the caller's).
    pub channel: crate::protocol::ChannelKind,
    /// Which hook or job of it.
    pub source: String,
    /// The conversation within it (e.g. an issue number); `""` for one conversation.
    #[serde(default, rename = "ref")]
    pub reference: String,
    /// The message: the first prompt of a new session, or a follow-up prompt.
    pub text: String,
    /// The sender's own words within `text`, checked against the reset phrases
    /// (default: `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<String>,
    /// The agent profile a new session runs.
    pub agent: String,
    /// Where a new session runs, over the profile's driver.
    #[serde(default)]
    pub driver: Option<crate::protocol::DriverKind>,
    /// One persistent conversation (a direct chat): it does not time out or drift; only
    /// a reset phrase or closing it starts a new session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persistent: bool,
    /// Through the person's hub: the kiln the conversation lives in (by name). A kiln's
    /// daemon refuses a name that is not its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kiln: Option<String>,
}

/// How a message was resolved: to which session, and why. On the wire it also says
/// `decision`, `new` or `continue`, which follows from the reason.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "ResolveWire")]
pub struct ResolveResult {
    pub session_id: String,
    /// Which policy fired.
    pub reason: crate::protocol::Resolution,
    /// The session a new one replaced (closed), if any.
    #[serde(default)]
    pub previous_session_id: Option<String>,
    /// On `continue`: true when a turn was running and the message waits for it.
    #[serde(default)]
    pub queued: bool,
}

impl ResolveResult {
    /// `new` or `continue`, from the reason.
    pub fn decision(&self) -> &'static str {
        self.reason.decision()
    }
}

/// [`ResolveResult`] as it is sent, with its decision.
#[derive(Serialize)]
struct ResolveWire {
    session_id: String,
    decision: &'static str,
    reason: crate::protocol::Resolution,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_session_id: Option<String>,
    queued: bool,
}

impl From<ResolveResult> for ResolveWire {
    fn from(r: ResolveResult) -> Self {
        Self {
            decision: r.decision(),
            session_id: r.session_id,
            reason: r.reason,
            previous_session_id: r.previous_session_id,
            queued: r.queued,
        }
    }
}

/// `cron.run`: run a job the daemon runs now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronRunParams {
    pub id: String,
}

/// One run of a cron job, or why it was skipped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronRun {
    pub job: String,
    /// The run's session; when skipped, the previous run's, still working.
    pub session_id: String,
    pub skipped: bool,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// `cron.list`: the jobs the daemon runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronJobs {
    pub jobs: Vec<CronJobView>,
    /// The webhooks whose deliveries fail in a row, with the last error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<FailingHook>,
    /// Why the settings files cannot be used: the jobs are the last good settings' ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
}

/// A webhook whose deliveries fail in a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingHook {
    pub name: String,
    /// Deliveries in a row that failed (counted across daemon restarts).
    pub failures: u64,
    pub last_error: String,
    /// When the first of them failed (RFC 3339).
    pub since: String,
}

/// A cron job, its next run and its last one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CronJobView {
    pub id: String,
    pub schedule: String,
    pub agent: String,
    pub enabled: bool,
    /// RFC 3339, UTC; none when disabled.
    #[serde(default)]
    pub next_run: Option<String>,
    #[serde(default)]
    pub last_session_id: Option<String>,
    #[serde(default)]
    pub last_run_at: Option<String>,
    #[serde(default)]
    pub last_state: Option<crate::protocol::SessionState>,
    /// Runs skipped since the daemon started because the previous one still worked.
    #[serde(default)]
    pub skipped: u64,
    #[serde(default)]
    pub last_skipped_at: Option<String>,
    /// Runs in a row that could not start (0 once one does), counted across daemon
    /// restarts.
    #[serde(default)]
    pub failures: u64,
    /// Why the last of them could not start; kept until a run starts.
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_failed_at: Option<String>,
}
