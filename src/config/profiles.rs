//! `[agents.<name>]`: how crucible starts one kind of agent (the built-in profiles are in
//! `builtin`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::DriverKind;

/// How crucible starts one kind of agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// How crucible talks to the agent.
    #[serde(rename = "type", default)]
    pub kind: AgentKind,
    /// The program, found on `PATH` unless it is a path (`acp` and `command` only).
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the environment the agent inherits from the daemon.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// How long the agent may take to answer `initialize` and open its session.
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_secs: u64,
    /// `internal` only: the API root of an OpenAI-compatible chat-completions endpoint,
    /// e.g. `http://localhost:11434/v1` (Ollama).
    #[serde(default)]
    pub base_url: String,
    /// `internal` only: the model to ask.
    #[serde(default)]
    pub model: String,
    /// `internal` only: the environment variable holding the API key, sent as a bearer
    /// token; none is sent when unset.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `internal` only: the system prompt (the bottom of the context stack); a built-in
    /// one describing the tools and the worktree when unset.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// `internal` only: write files without asking (otherwise every write is an
    /// `approval_required` message).
    #[serde(default)]
    pub allow_writes: bool,
    /// `internal` only: run commands without asking.
    #[serde(default)]
    pub allow_commands: bool,
    /// `internal` only: the tool-error policy: a failed tool result is popped and
    /// replaced by the error message alone (`pop(1)` + inject the error).
    #[serde(default)]
    pub recover_tool_errors: bool,
    /// Where this profile's sessions run unless a session asks otherwise (`local`).
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// `internal` only: the model writes the session's context summary after every turn
    /// (and for `summarize`); `false` uses the deterministic summary and saves a request.
    #[serde(default = "default_true")]
    pub model_summaries: bool,
    /// Stop (park) an agent of this profile that had no turn for this many minutes, on
    /// any driver; the next prompt starts it again, resuming its session where the agent
    /// can. Unset: `[drivers] idle_timeout_minutes` for the drivers that make an
    /// environment, never for `local`.
    #[serde(default)]
    pub idle_stop_minutes: Option<f64>,
    /// The fallback chain: when an agent of this profile reports a usage or rate limit,
    /// its task goes on with the first of these profiles (other accounts or agents) that
    /// is not at a limit itself, through a hand-off, instead of waiting for the reset; at
    /// a limit there, with the next, and so on. A profile already tried since the first
    /// limit is skipped, so a chain never loops; when none is left the session is
    /// parked until its reset. One name (`fallback = "codex"`) is a chain of one. Unset:
    /// the session is parked until the reset.
    #[serde(default, deserialize_with = "one_or_many")]
    #[schemars(with = "OneOrMany")]
    pub fallback: Vec<String>,
    /// With a `fallback` chain: when this profile's usage limit resets, the task comes
    /// back to it from whichever profile of the chain has it then (once that one's turn
    /// has ended), with a brief of what was done meanwhile.
    #[serde(default)]
    pub fallback_return: bool,
    /// Review the agent's plan before it acts on it: when the agent sends its plan (ACP
    /// `plan` updates, as codex-acp and claude-agent-acp send them), what it asks for
    /// waits while the plan is asked in the inbox as numbered steps. Approved, the
    /// commands and files its steps name run without a question for the rest of that
    /// turn, and anything else is asked with the plan's current step shown; rejected,
    /// the turn ends; comments on steps (`2: use the view`) go back to the agent as one
    /// prompt.
    #[serde(default)]
    pub plan_review: bool,
}

/// A profile name, or a list of them.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged, expecting = "a profile name or a list of profile names")]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// `fallback`: one name or a list of names, always a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(name) => vec![name],
        OneOrMany::Many(names) => names,
    })
}

fn default_true() -> bool {
    true
}

pub(super) fn default_startup_timeout() -> u64 {
    60
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// The Agent Client Protocol over the agent's stdin and stdout.
    #[default]
    Acp,
    /// A plain program run once per prompt: the prompt on its stdin, its stdout the
    /// reply, its exit the end of the turn.
    Command,
    /// Crucible's own agent loop over an OpenAI-compatible chat endpoint.
    Internal,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Acp => "acp",
            AgentKind::Command => "command",
            AgentKind::Internal => "internal",
        }
    }
}

#[cfg(test)]
#[path = "profiles_tests.rs"]
mod tests;
