//! `[channels]` and `[[webhooks]]`: sessions started and continued from outside the
//! workbench: how each channel is set up, and how its messages are resolved to the
//! conversation (the session) they continue.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::protocol::DriverKind;

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// A setting of a channel (the listen address, a hook, a cron job) is wrong.
    #[error("{0}")]
    Invalid(String),
    /// A delivery the hook does not take (its event or action); said to the sender.
    #[error("{0}")]
    NotTaken(String),
    /// A delivery whose payload lacks what the hook needs.
    #[error("{0}")]
    Payload(String),
}

/// The settings' own checks still speak in words (`Config::validate`): a channel's
/// fault joins them as its message.
impl From<ChannelError> for String {
    fn from(e: ChannelError) -> Self {
        e.to_string()
    }
}

impl HttpConfig {
    /// The address to listen on, if the listener is on.
    pub fn address(&self) -> Result<Option<SocketAddr>, ChannelError> {
        self.listen
            .as_deref()
            .map(|a| {
                a.parse().map_err(|_| {
                    ChannelError::Invalid(format!(
                        "channels.http.listen {a:?} is not HOST:PORT (e.g. \"127.0.0.1:8421\")"
                    ))
                })
            })
            .transpose()
    }
}

/// `[[webhooks]]`: `POST /hooks/<name>` starts or continues a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// The path segment: letters, digits, `-` and `_`.
    pub name: String,
    /// The daemon's environment variable holding the shared secret (GitHub's
    /// `X-Hub-Signature-256` HMAC). The value is never written anywhere.
    pub secret_env: String,
    /// The agent profile its sessions run.
    pub agent: String,
    /// The prompt: each `{{/json/pointer}}` is that value of the payload (RFC 6901).
    pub prompt: String,
    /// A JSON pointer naming the conversation (e.g. `/issue/number`): messages with the
    /// same value continue one session. Absent: every message is its own conversation
    /// key `""`, so all of them share one.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// A JSON pointer to the sender's own words (e.g. `/comment/body`), checked against
    /// the reset phrases; absent: the whole prompt is.
    #[serde(default)]
    pub message: Option<String>,
    /// Where its sessions run, over the profile's driver.
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// The events it takes, matched against `X-GitHub-Event` (e.g. `issue_comment`).
    /// Empty: any event, and requests without the header.
    #[serde(default)]
    pub events: Vec<String>,
    /// The payload `action`s it takes (e.g. `created`). Empty: any, except that a
    /// comment event ([`COMMENT_EVENTS`]) is taken only when `created`, so an edited or
    /// deleted comment does not prompt again.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Where its sessions' approvals and questions are posted and answered: a Matrix room
    /// (`!id`, `#alias`) or user (`@name:server`); absent: `[channels.matrix]`'s.
    #[serde(default)]
    pub approval_target: Option<String>,
}

/// GitHub's comment events: without an `actions` filter, only their `created` prompts.
pub const COMMENT_EVENTS: [&str; 4] = [
    "issue_comment",
    "pull_request_review_comment",
    "commit_comment",
    "discussion_comment",
];

impl WebhookConfig {
    /// Whether a delivery of `event` (its `X-GitHub-Event`) whose payload says `action`
    /// is for this hook; if not, why not (said to the sender with a 202).
    pub fn admits(&self, event: Option<&str>, action: Option<&str>) -> Result<(), ChannelError> {
        let list = |names: &[String]| names.join(", ");
        if !self.events.is_empty() {
            match event {
                None => {
                    return Err(ChannelError::NotTaken(format!(
                        "no X-GitHub-Event header; this hook takes {}",
                        list(&self.events)
                    )));
                }
                Some(event) if !self.events.iter().any(|e| e == event) => {
                    return Err(ChannelError::NotTaken(format!(
                        "the event {event:?} is not one this hook takes ({})",
                        list(&self.events)
                    )));
                }
                Some(_) => {}
            }
        }
        if !self.actions.is_empty() {
            return match action {
                Some(action) if self.actions.iter().any(|a| a == action) => Ok(()),
                Some(action) => Err(ChannelError::NotTaken(format!(
                    "the action {action:?} is not one this hook takes ({})",
                    list(&self.actions)
                ))),
                None => Err(ChannelError::NotTaken(format!(
                    "the payload has no action; this hook takes {}",
                    list(&self.actions)
                ))),
            };
        }
        match (event, action) {
            (Some(event), Some(action))
                if COMMENT_EVENTS.contains(&event) && action != "created" =>
            {
                Err(ChannelError::NotTaken(format!(
                    "{event} {action:?} does not prompt: unless the hook's actions say \
                     otherwise, only a created comment does"
                )))
            }
            _ => Ok(()),
        }
    }

    pub fn validate(&self) -> Result<(), ChannelError> {
        let name = &self.name;
        if !super::is_name(name) {
            return Err(ChannelError::Invalid(format!(
                "webhooks: the name {name:?} may use only letters, digits, '-' and '_'"
            )));
        }
        if self.secret_env.trim().is_empty() {
            return Err(ChannelError::Invalid(format!(
                "webhooks.{name}.secret_env must name an environment variable"
            )));
        }
        if let Some(pointer) = &self.reference
            && !pointer.is_empty()
            && !pointer.starts_with('/')
        {
            return Err(ChannelError::Invalid(format!(
                "webhooks.{name}.ref {pointer:?} is not a JSON pointer (it starts with '/')"
            )));
        }
        if let Some(pointer) = &self.message
            && !pointer.starts_with('/')
        {
            return Err(ChannelError::Invalid(format!(
                "webhooks.{name}.message {pointer:?} is not a JSON pointer (it starts with '/')"
            )));
        }
        if self.prompt.trim().is_empty() {
            return Err(ChannelError::Invalid(format!(
                "webhooks.{name}.prompt must not be empty"
            )));
        }
        if let Some(blank) = self
            .events
            .iter()
            .chain(&self.actions)
            .find(|n| n.trim().is_empty())
        {
            return Err(ChannelError::Invalid(format!(
                "webhooks.{name}: events and actions are names, not {blank:?}"
            )));
        }
        Ok(())
    }

    /// The prompt with each `{{/pointer}}` replaced by that value of `payload`: a string
    /// as it is, anything else as JSON, a missing value as nothing.
    pub fn render(&self, payload: &serde_json::Value) -> String {
        render(&self.prompt, payload)
    }

    /// The sender's own words in `payload`, when the hook names where they are.
    pub fn words_of(&self, payload: &serde_json::Value) -> Option<String> {
        let pointer = self.message.as_deref()?;
        payload.pointer(pointer).filter(|v| !v.is_null()).map(plain)
    }

    /// The conversation this payload belongs to, or why it has none.
    pub fn reference_of(&self, payload: &serde_json::Value) -> Result<String, ChannelError> {
        match self.reference.as_deref() {
            None | Some("") => Ok(String::new()),
            Some(pointer) => payload
                .pointer(pointer)
                .filter(|v| !v.is_null())
                .map(plain)
                .ok_or_else(|| {
                    ChannelError::Payload(format!(
                        "the payload has no value at {pointer} (the hook's ref)"
                    ))
                }),
        }
    }
}

fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn render(template: &str, payload: &serde_json::Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) if after[..end].trim().starts_with('/') || after[..end].trim().is_empty() => {
                let pointer = after[..end].trim();
                if let Some(value) = payload.pointer(pointer).filter(|v| !v.is_null()) {
                    out.push_str(&plain(value));
                }
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `[notify]`: a command run for every message that needs a human (a question or an
/// approval), so it reaches them where they are (ntfy, Slack, mail, `notify-send`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// `[[cron]]`: a job that starts a session on a schedule (the cron channel).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronJob {
    /// Letters, digits, `-` and `_`.
    pub id: String,
    /// Cron syntax, five fields or six with seconds first (`*/10 * * * * *`), in UTC.
    pub schedule: String,
    /// The agent profile its sessions run.
    pub agent: String,
    /// The first prompt of each run.
    pub instructions: String,
    /// Where its sessions run, over the profile's driver.
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// Run on this branch (made from HEAD the first time) instead of a new worktree and
    /// branch per run.
    #[serde(default)]
    pub branch: Option<String>,
    /// `false` keeps the job in the settings without running it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Where its sessions' approvals and questions are posted and answered: a Matrix room
    /// (`!id`, `#alias`) or user (`@name:server`); absent: `[channels.matrix]`'s.
    #[serde(default)]
    pub approval_target: Option<String>,
}

fn yes() -> bool {
    true
}

impl CronJob {
    /// The parsed schedule, or why it is not one.
    pub fn parsed(&self) -> Result<croner::Cron, ChannelError> {
        croner::Cron::new(&self.schedule)
            .with_seconds_optional()
            .parse()
            .map_err(|e| {
                ChannelError::Invalid(format!(
                    "cron.{}: schedule {:?}: {e}",
                    self.id, self.schedule
                ))
            })
    }

    /// When it runs next after `after`.
    pub fn next_after(
        &self,
        after: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.parsed().ok()?.find_next_occurrence(&after, false).ok()
    }

    pub fn validate(&self) -> Result<(), ChannelError> {
        let id = &self.id;
        if !super::is_name(id) {
            return Err(ChannelError::Invalid(format!(
                "cron: the id {id:?} may use only letters, digits, '-' and '_'"
            )));
        }
        if self.instructions.trim().is_empty() {
            return Err(ChannelError::Invalid(format!(
                "cron.{id}.instructions must not be empty"
            )));
        }
        self.parsed().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(prompt: &str, reference: Option<&str>) -> WebhookConfig {
        WebhookConfig {
            name: "issues".into(),
            secret_env: "HOOK_SECRET".into(),
            agent: "a".into(),
            prompt: prompt.into(),
            reference: reference.map(str::to_string),
            message: None,
            driver: None,
            events: Vec::new(),
            actions: Vec::new(),
            approval_target: None,
        }
    }

    #[test]
    fn events_and_actions_filter_deliveries_and_comments_prompt_only_when_created() {
        let mut h = hook("x", None);
        // No filter: anything, but a comment only when created.
        assert_eq!(h.admits(None, None), Ok(()));
        assert_eq!(h.admits(Some("push"), None), Ok(()));
        assert_eq!(h.admits(Some("issues"), Some("deleted")), Ok(()));
        assert_eq!(h.admits(Some("issue_comment"), Some("created")), Ok(()));
        for action in ["edited", "deleted"] {
            let why = h
                .admits(Some("issue_comment"), Some(action))
                .unwrap_err()
                .to_string();
            assert!(why.contains(action) && why.contains("created"), "{why}");
        }
        // An events filter: the header must name one of them.
        h.events = vec!["issue_comment".into(), "issues".into()];
        assert_eq!(h.admits(Some("issues"), Some("opened")), Ok(()));
        let why = h.admits(Some("push"), None).unwrap_err().to_string();
        assert!(
            why.contains("\"push\"") && why.contains("issue_comment, issues"),
            "{why}"
        );
        assert!(
            h.admits(None, Some("created"))
                .unwrap_err()
                .to_string()
                .contains("X-GitHub-Event")
        );
        // An actions filter replaces the comment default.
        h.actions = vec!["created".into(), "edited".into()];
        assert_eq!(h.admits(Some("issue_comment"), Some("edited")), Ok(()));
        let why = h
            .admits(Some("issue_comment"), Some("deleted"))
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("\"deleted\"") && why.contains("created, edited"),
            "{why}"
        );
        assert!(
            h.admits(Some("issues"), None)
                .unwrap_err()
                .to_string()
                .contains("no action")
        );
    }

    #[test]
    fn the_prompt_is_filled_from_json_pointers() {
        let payload = json!({"issue": {"number": 42, "title": "Crash on start", "labels": ["bug"]},
                             "a/b": "slash", "none": null});
        let h = hook(
            "#{{/issue/number}}: {{ /issue/title }} {{/issue/labels}} {{/a~1b}} [{{/missing}}][{{/none}}] {{not a pointer}}",
            None,
        );
        assert_eq!(
            h.render(&payload),
            "#42: Crash on start [\"bug\"] slash [][] {{not a pointer}}"
        );
    }

    #[test]
    fn the_reference_is_the_pointed_value_or_a_clear_refusal() {
        let payload = json!({"issue": {"number": 42}, "repo": "acme"});
        assert_eq!(
            hook("x", Some("/issue/number")).reference_of(&payload),
            Ok("42".into())
        );
        assert_eq!(
            hook("x", Some("/repo")).reference_of(&payload),
            Ok("acme".into())
        );
        assert_eq!(hook("x", None).reference_of(&payload), Ok(String::new()));
        let missing = hook("x", Some("/pull/number")).reference_of(&payload);
        assert!(missing.unwrap_err().to_string().contains("/pull/number"));
    }

    #[test]
    fn reset_phrases_match_whole_messages_in_any_case() {
        let c = ChannelsConfig::default();
        assert!(c.is_reset("Start over!"));
        assert!(c.is_reset("  RESET. "));
        assert!(!c.is_reset("please reset the cache"));
        assert!(!c.is_reset("fix the reset button"));
    }

    #[test]
    fn schedules_take_an_optional_seconds_field_and_bad_ones_are_named() {
        let mut job = CronJob {
            id: "nightly".into(),
            schedule: "*/10 * * * * *".into(),
            agent: "a".into(),
            instructions: "check".into(),
            driver: None,
            branch: None,
            enabled: true,
            approval_target: None,
        };
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:03Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            job.next_after(t).unwrap().to_rfc3339(),
            "2026-01-01T00:00:10+00:00"
        );
        job.schedule = "0 9 * * *".into();
        assert_eq!(
            job.next_after(t).unwrap().to_rfc3339(),
            "2026-01-01T09:00:00+00:00"
        );
        job.schedule = "61 * * * *".into();
        let why = job.validate().unwrap_err().to_string();
        assert!(
            why.contains("cron.nightly") && why.contains("61 * * * *"),
            "{why}"
        );
    }

    #[test]
    fn bad_hooks_are_named() {
        let mut h = hook("x", Some("issue/number"));
        assert!(
            h.validate()
                .unwrap_err()
                .to_string()
                .contains("JSON pointer")
        );
        h.reference = None;
        h.name = "a b".into();
        assert!(h.validate().unwrap_err().to_string().contains("\"a b\""));
    }
}
