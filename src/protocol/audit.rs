//! The audit log's records (every agent action, logged for review), as
//! `session.audit` returns them and `<kiln>/.crucible/audit/<session>.jsonl` keeps them.
//! Environment variables appear by name only.

use serde::{Deserialize, Serialize};

/// One action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AuditEvent {
    /// The agent's environment was made and the agent started.
    Start {
        driver: String,
        #[serde(default)]
        mounts: Vec<String>,
        network: String,
        #[serde(default)]
        limits: Vec<String>,
        /// Names of the variables passed in; never their values.
        #[serde(default)]
        env: Vec<String>,
    },
    Prompt {
        text: String,
    },
    ToolCall {
        tool: String,
        #[serde(default)]
        status: Option<String>,
    },
    PermissionAsked {
        title: String,
        #[serde(default)]
        message_id: Option<String>,
    },
    PermissionAnswered {
        answer: String,
        /// Who answered: `human`, or why nobody did (`withdrawn`, `cancelled`).
        by: String,
    },
    /// A person raised a budget the session had reached.
    BudgetRaised {
        /// Which budget, and how far it was spent.
        budget: String,
        /// The answer: by how much.
        by: String,
    },
    FileRead {
        path: String,
        allowed: bool,
        #[serde(default)]
        reason: Option<String>,
    },
    FileWrite {
        path: String,
        allowed: bool,
        #[serde(default)]
        reason: Option<String>,
    },
    /// A command run in the session's environment through crucible.
    Command {
        command: Vec<String>,
        #[serde(default)]
        exit_code: Option<i32>,
    },
    State {
        state: String,
        #[serde(default)]
        reason: Option<String>,
    },
    /// The environment was torn down (the session may start it again).
    End {
        reason: String,
    },
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// RFC 3339.
    pub at: String,
    pub session_id: String,
    #[serde(flatten)]
    pub event: AuditEvent,
}

impl AuditRecord {
    /// One line for people: `12:03:04 file_write src/main.rs (refused: outside)`.
    pub fn line(&self) -> String {
        let time = self.at.get(11..19).unwrap_or(&self.at);
        let what = match &self.event {
            AuditEvent::Start {
                driver,
                mounts,
                network,
                limits,
                env,
            } => {
                let mut parts = vec![format!("driver {driver}"), format!("network {network}")];
                parts.extend(mounts.iter().map(|m| format!("mount {m}")));
                parts.extend(limits.iter().cloned());
                if !env.is_empty() {
                    parts.push(format!("env {}", env.join(",")));
                }
                format!("start: {}", parts.join("; "))
            }
            AuditEvent::Prompt { text } => {
                format!(
                    "prompt: {}",
                    crate::text::cap(text.lines().next().unwrap_or("").to_string(), 100)
                )
            }
            AuditEvent::ToolCall { tool, status } => match status {
                Some(status) => format!("tool call: {tool} ({status})"),
                None => format!("tool call: {tool}"),
            },
            AuditEvent::PermissionAsked { title, .. } => format!("permission asked: {title}"),
            AuditEvent::PermissionAnswered { answer, by } => {
                format!("permission answered: {answer} (by {by})")
            }
            AuditEvent::BudgetRaised { budget, by } => format!("budget raised: {budget} ({by})"),
            AuditEvent::FileRead {
                path,
                allowed,
                reason,
            } => file_line("file read", path, *allowed, reason.as_deref()),
            AuditEvent::FileWrite {
                path,
                allowed,
                reason,
            } => file_line("file write", path, *allowed, reason.as_deref()),
            AuditEvent::Command { command, exit_code } => match exit_code {
                Some(code) => format!("command: {} (exit {code})", command.join(" ")),
                None => format!("command: {} (no exit code)", command.join(" ")),
            },
            AuditEvent::State { state, reason } => match reason {
                Some(reason) => format!("state: {state} ({reason})"),
                None => format!("state: {state}"),
            },
            AuditEvent::End { reason } => format!("end: {reason}"),
        };
        format!("{time} {what}")
    }
}

fn file_line(what: &str, path: &str, allowed: bool, reason: Option<&str>) -> String {
    match (allowed, reason) {
        (true, _) => format!("{what}: {path}"),
        (false, Some(reason)) => format!("{what}: {path} (refused: {reason})"),
        (false, None) => format!("{what}: {path} (refused)"),
    }
}
