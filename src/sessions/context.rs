//! The sessions' side of the context stack: the `context.*` operations (with summaries
//! from the session's model where it has one), the system entry each agent type starts
//! with, the preamble that seeds a fresh ACP session, and the link the internal agent
//! reaches its stack and the inbox through.
//!
//! The bottom (system) entry: an internal agent's is its real system prompt (the
//! profile's `system_prompt`, or the built-in one). ACP and command agents bring their
//! own system prompts, which crucible never sees, so theirs is a description instead:
//! `ACP agent <profile> working in <folder>`.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Result, Sessions};
use crate::agent::{AgentError, SessionLink};
use crate::config::{AgentKind, AgentProfile, Config};
use crate::context::summary::{MODEL_PROMPT, clamp_summary};
use crate::context::{ContextOp, Entry, Message, fallback_summary};
use crate::ledger::{Ledger, LedgerError};
use crate::openai::{ChatMessage, ChatRequest, messages_from_stack};
use crate::protocol::{ContextCall, ContextResult, MsgType, SendParams, Session};

/// How long a model may take to write a summary before the fallback is used.
const SUMMARY_TIMEOUT: Duration = Duration::from_secs(30);

/// The first line of the context sent ahead of the prompt to a fresh ACP session.
pub const PREAMBLE_HEADER: &str = "[crucible] Context kept from earlier in this session \
(it replaces the conversation you may remember; the new prompt follows):";

/// The bottom entry of a session's stack.
pub fn system_entry(session: &Session, profile: Option<&AgentProfile>, cwd: &str) -> String {
    match profile {
        Some(p) if p.kind == AgentKind::Internal => p.system_prompt.clone().unwrap_or_else(|| {
            crate::agent::internal::default_system_prompt(std::path::Path::new(cwd))
        }),
        _ => {
            let kind = match session.agent_type.as_str() {
                "acp" => "ACP agent",
                "command" => "command agent",
                other => other,
            };
            format!(
                "{kind} {} working in {cwd} (its own system prompt is not known to crucible)",
                session.agent_name
            )
        }
    }
}

/// The folder a session works in.
pub fn folder(ledger: &Ledger, session: &Session) -> String {
    session
        .worktree
        .clone()
        .unwrap_or_else(|| ledger.kiln().root().display().to_string())
}

/// The summary of `entries`: the model's when the profile is internal (and its summary
/// succeeds in time), otherwise the deterministic one.
pub async fn summary(profile: Option<&AgentProfile>, entries: &[Entry]) -> String {
    if let Some(p) = profile.filter(|p| p.kind == AgentKind::Internal && p.model_summaries)
        && let Some(text) = model_summary(p, entries).await
    {
        return text;
    }
    fallback_summary(entries)
}

async fn model_summary(profile: &AgentProfile, entries: &[Entry]) -> Option<String> {
    let client = crate::agent::internal::chat_client(profile).ok()?;
    let mut messages = messages_from_stack(entries);
    messages.push(ChatMessage::User {
        content: MODEL_PROMPT.to_string(),
    });
    let request = ChatRequest {
        model: profile.model.clone(),
        messages,
        tools: Vec::new(),
    };
    match tokio::time::timeout(SUMMARY_TIMEOUT, client.complete(&request)).await {
        Ok(Ok(reply)) if !reply.content.trim().is_empty() => Some(clamp_summary(&reply.content)),
        Ok(Ok(_)) => None,
        Ok(Err(e)) => {
            tracing::warn!("the model could not summarise; using the fallback: {e}");
            None
        }
        Err(_) => {
            tracing::warn!("the model took too long to summarise; using the fallback");
            None
        }
    }
}

/// The context a fresh ACP session gets ahead of the prompt: the stack above the system
/// entry, one labelled block per entry. Empty when only the system entry is left.
pub fn preamble(entries: &[Entry]) -> String {
    let kept: Vec<String> = entries
        .iter()
        .skip(1)
        .map(|e| match &e.message {
            Message::System { text } => format!("System: {text}"),
            Message::Human { text } => format!("Human: {text}"),
            Message::Agent { text } => format!("Agent: {text}"),
            Message::ToolCall {
                tool, arguments, ..
            } if arguments.is_empty() => format!("Tool call: {tool}"),
            Message::ToolCall {
                tool, arguments, ..
            } => format!("Tool call: {tool} {arguments}"),
            Message::ToolResult { tool, ok, text, .. } => {
                let outcome = if *ok { "ok" } else { "failed" };
                format!("Tool result ({tool}, {outcome}): {text}")
            }
            Message::Summary { text } => format!("Summary: {text}"),
        })
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    format!("{PREAMBLE_HEADER}\n\n{}", kept.join("\n\n"))
}

impl Sessions {
    /// A `context.*` call on a session crucible runs (running or not).
    pub async fn context_call(&self, id: &str, request: ContextCall) -> Result<ContextResult> {
        let session = self.managed(id)?;
        let profile = Config::load(&self.ledger.kiln().settings_path())
            .ok()
            .and_then(|c| c.profile(&session.agent_name).ok());
        let cwd = folder(&self.ledger, &session);
        let system = || system_entry(&session, profile.as_ref(), &cwd);
        let op = match request {
            ContextCall::Get => {
                let state = self.ledger.context(id, system).await?;
                return Ok(ContextResult {
                    session_id: id.to_string(),
                    stack: state.stack,
                    fresh_start: state.fresh_start,
                    change: None,
                    description: None,
                });
            }
            ContextCall::Apply(op) if op.internal() => {
                return Err(LedgerError::Invalid(
                    "that context operation is the session's own".to_string(),
                ));
            }
            ContextCall::Apply(ContextOp::Summarize(None)) => {
                let state = self.ledger.context(id, system).await?;
                // Only the system prompt: the stack refuses, and no model is asked.
                let text = if state.stack.poppable() == 0 {
                    "-".to_string()
                } else {
                    summary(profile.as_ref(), state.stack.entries()).await
                };
                ContextOp::Summarize(Some(text))
            }
            ContextCall::Apply(op) => op,
        };
        let fresh_on_shrink = session.agent_type == AgentKind::Acp.as_str();
        let (state, change) = self
            .ledger
            .apply_context(id, system, op, fresh_on_shrink)
            .await?;
        Ok(ContextResult {
            session_id: id.to_string(),
            stack: state.stack,
            fresh_start: state.fresh_start,
            description: Some(change.to_string()),
            change: Some(change),
        })
    }
}

/// The internal agent's way to its session's stack and inbox.
pub struct AgentLink {
    pub ledger: Arc<Ledger>,
    pub session_id: String,
    pub system: String,
}

/// The session's context stack or inbox failing under the internal agent.
fn link_error(e: LedgerError) -> AgentError {
    AgentError::Session(e.to_string())
}

impl AgentLink {
    async fn apply(&self, op: ContextOp) -> std::result::Result<(), AgentError> {
        let system = self.system.clone();
        self.ledger
            .apply_context(&self.session_id, move || system, op, false)
            .await
            .map(|_| ())
            .map_err(link_error)
    }
}

impl SessionLink for AgentLink {
    fn context(&self) -> BoxFuture<'_, std::result::Result<Vec<Entry>, AgentError>> {
        async move {
            let system = self.system.clone();
            self.ledger
                .context(&self.session_id, move || system)
                .await
                .map(|s| s.stack.entries().to_vec())
                .map_err(link_error)
        }
        .boxed()
    }

    fn push(&self, message: Message) -> BoxFuture<'_, std::result::Result<(), AgentError>> {
        self.apply(ContextOp::Push(message)).boxed()
    }

    fn recover_tool_error(
        &self,
        error: String,
    ) -> BoxFuture<'_, std::result::Result<(), AgentError>> {
        self.apply(ContextOp::ToolError(error)).boxed()
    }

    fn ask(
        &self,
        msg_type: MsgType,
        title: String,
        body: Option<String>,
        options: Option<Vec<String>>,
    ) -> BoxFuture<'_, std::result::Result<Option<String>, AgentError>> {
        async move {
            let message = self
                .ledger
                .send(SendParams {
                    session_id: self.session_id.clone(),
                    msg_type,
                    title,
                    body,
                    options,
                    option_kinds: None,
                    flagged: None,
                })
                .await
                .map_err(link_error)?;
            if !msg_type.blocks() {
                return Ok(None);
            }
            let answered = self
                .ledger
                .wait_for_answer(&message.id, None)
                .await
                .map_err(link_error)?;
            if answered.withdrawn {
                return Err(AgentError::Refused(format!(
                    "the question was withdrawn: {}",
                    answered.response.unwrap_or_default()
                )));
            }
            Ok(answered.response)
        }
        .boxed()
    }
}
