//! `[[webhooks]]`: a hook's settings, which deliveries it takes, and the prompt and
//! conversation a delivery's payload gives.

use serde::{Deserialize, Serialize};

use super::channels::ChannelError;
use super::validate::is_name;
use crate::protocol::DriverKind;

/// `[[webhooks]]`: `POST /hooks/<name>` starts or continues a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
        if !is_name(name) {
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
