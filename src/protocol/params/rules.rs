//! The params and results of the rules and secrets methods, and the audit log.

use serde::{Deserialize, Serialize};

/// `session.security` and `session.rule`: a session's security state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecurityReply {
    pub session_id: String,
    pub security: crate::protocol::types::SecurityState,
}

/// `session.rule`: switch a rule off (`enabled: false`) or on again for one session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRuleParams {
    pub session_id: String,
    pub rule: String,
    pub enabled: bool,
}

/// `rules.list`: the rules in force, and for a session how each stands in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RulesParams {
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RuleInfo {
    pub id: String,
    pub description: String,
    /// `allow`, `ask` or `deny`.
    pub action: String,
    pub builtin: bool,
    /// It applies only after an operation matched its `activated_by`.
    pub needs_activation: bool,
    /// Switched off in the settings.
    pub off: bool,
    /// Switched off for the session asked about.
    #[serde(default)]
    pub disabled: bool,
    /// What activated it in that session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activated: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RulesReply {
    /// The rules in force: the last good set when the files are bad; none when no good
    /// set was read since the daemon started.
    pub rules: Vec<RuleInfo>,
    /// [`RulesReply::error`] in one sentence, with what applies instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Why the rule files are not in force, if they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RulesFileError>,
}

/// A rule file that cannot be read or parsed, or holds a bad rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesFileError {
    /// The file at fault: `<kiln>/.crucible/rules.toml` or a settings file.
    pub file: String,
    /// Why (cannot read it, not UTF-8, a TOML error with its line, a bad rule).
    pub reason: String,
    /// True: the last good set applies to every session, new ones too. False: no good
    /// set was read since the daemon started, so every gated operation is refused.
    pub last_good: bool,
}

/// `secret.get`: an agent asks for a credential by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretParams {
    pub session_id: String,
    pub name: String,
}

/// The value; it is never stored or logged by crucible.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecretReply {
    pub name: String,
    pub value: String,
}

/// `session.audit`: the session's audit log, oldest first (also after it was deleted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditLog {
    pub session_id: String,
    pub records: Vec<crate::protocol::audit::AuditRecord>,
}
