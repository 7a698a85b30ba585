//! `cru mcp`: the inbox as tools for agents that speak MCP.
//!
//! An agent that crucible runs in a session finds `CRUCIBLE_HANDLE` and `CRUCIBLE_SOCKET`
//! in its environment. Registered as an MCP server in that agent, `cru mcp` serves three
//! tools over stdio that reach the session's inbox through an [`AgentLink`]:
//!
//! - `notify`: a non-blocking `info` message;
//! - `ask`: a `decision_needed` message, answered when the human decides;
//! - `approve`: an `approval_required` message, answered "approved" or "denied".
//!
//! The link is made on the first tool call, not at start: a server started outside a
//! session (or while the daemon is away) still answers the MCP handshake and lists its
//! tools, and each call reports why crucible cannot be reached, which the agent's MCP
//! client shows instead of a dead server. After an error the link is dropped, so the next
//! call connects afresh.
//!
//! Stdout carries MCP frames only; logs (`tracing`) go wherever the caller sent them,
//! never to stdout.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ContentBlock, Implementation, IntoContents, ServerCapabilities, ServerConfig};
use rmcp::service::QuitReason;
use rmcp::transport::stdio;
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::client::agent::{AgentError, AgentLink, Answer};

/// Serves the inbox tools over stdio until the MCP client closes the connection.
pub async fn run() -> anyhow::Result<ExitCode> {
    let service = InboxTools::new()
        .serve(stdio())
        .await
        .context("the MCP client did not complete the handshake")?;
    match service.waiting().await {
        Ok(QuitReason::JoinError(e)) | Err(e) => {
            Err(e).context("the MCP server stopped unexpectedly")
        }
        Ok(_) => Ok(ExitCode::SUCCESS),
    }
}

const INSTRUCTIONS: &str = "\
You are running in a crucible session; crucible keeps an inbox that the human watches. \
Use `notify` to tell the human something without waiting (progress, a finding, a finished \
step). Use `ask` when you need the human to decide something, and `approve` before an \
action that needs the human's permission. `ask` and `approve` block until the human \
answers in crucible's inbox.";

const NOTIFY_DESCRIPTION: &str = "\
Send a message to the human's crucible inbox without waiting for an answer: progress, a \
finding, a finished step, something worth a look. Returns at once with \"sent <message id>\".";

const ASK_DESCRIPTION: &str = "\
Ask the human a question in crucible's inbox and wait for the answer. This call BLOCKS \
until the human answers in crucible's inbox (or until `timeout_secs` passes, if given). \
With `options`, the human picks one and the result is that option, spelled as you gave \
it; without `options`, the result is the human's free-text answer. Use it for decisions \
you should not make alone. If no answer comes in time, or the question is withdrawn \
(for example because the session was stopped), the call fails with a message saying so.";

const APPROVE_DESCRIPTION: &str = "\
Ask the human's permission before an action (a destructive command, a push, a deploy, \
spending money) and wait for the verdict. This call BLOCKS until the human approves or \
denies in crucible's inbox (or until `timeout_secs` passes, if given). The result is the \
text \"approved\" or \"denied\". A denial is an ordinary answer, not an error: when the \
result is \"denied\", do not perform the action. If no answer comes in time, or the \
request is withdrawn, the call fails; treat that as not approved.";

#[derive(Debug, Deserialize, JsonSchema)]
struct NotifyRequest {
    /// One line: what the human should know.
    title: String,
    /// Optional details (plain text or Markdown).
    #[serde(default)]
    body: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AskRequest {
    /// The question, in one line.
    question: String,
    /// The choices to offer. The human picks one; omit for a free-text answer.
    #[serde(default)]
    options: Option<Vec<String>>,
    /// Optional context the human needs to decide (plain text or Markdown).
    #[serde(default)]
    body: Option<String>,
    /// Give up after this many seconds without an answer. Omit to wait until answered.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ApproveRequest {
    /// The action that needs permission, in one line (e.g. "git push --force origin main").
    action: String,
    /// Optional details: why, and what it will change (plain text or Markdown).
    #[serde(default)]
    body: Option<String>,
    /// Give up after this many seconds without an answer. Omit to wait until answered.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SecretRequest {
    /// The credential's name, e.g. "GITHUB_TOKEN".
    name: String,
}

const SECRET_DESCRIPTION: &str = "\
Get a credential (an API token, a password) by name. The first time in a session the human \
approves it; the value is returned and crucible never stores or logs it. Do not print it.";

/// What a tool returns: the text for the agent, or (as `isError: true`) why it failed.
type ToolResult = Result<String, ToolFailure>;

/// Why a tool call failed; the agent is told in words (as `isError: true`).
#[derive(Debug, thiserror::Error)]
enum ToolFailure {
    /// Crucible's daemon cannot be reached, or failed the request.
    #[error("{0}")]
    Crucible(String),
    /// The call itself is wrong (a zero timeout).
    #[error("{0}")]
    Request(String),
    /// The human gave no answer the tool can pass on: cancelled, timed out, withdrawn,
    /// or outside the choices.
    #[error("{0}")]
    Unanswered(String),
}

impl IntoContents for ToolFailure {
    fn into_contents(self) -> Vec<ContentBlock> {
        self.to_string().into_contents()
    }
}

/// The MCP server: four tools over one lazily made [`AgentLink`].
struct InboxTools {
    /// The link once made; `None` before the first call and after an error.
    link: Mutex<Option<Arc<AgentLink>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl InboxTools {
    fn new() -> Self {
        InboxTools {
            link: Mutex::new(None),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = NOTIFY_DESCRIPTION)]
    async fn notify(&self, Parameters(request): Parameters<NotifyRequest>) -> ToolResult {
        let link = self.link().await?;
        let sent = link.notify(&request.title, request.body.as_deref()).await;
        let id = self.checked(&link, sent).await.map_err(|e| {
            ToolFailure::Crucible(format!("crucible could not deliver the message: {e}"))
        })?;
        Ok(format!("sent {id}"))
    }

    #[tool(description = ASK_DESCRIPTION)]
    async fn ask(
        &self,
        cancelled: CancellationToken,
        Parameters(request): Parameters<AskRequest>,
    ) -> ToolResult {
        let timeout = parse_timeout(request.timeout_secs)?;
        let link = self.link().await?;
        let options = request.options.unwrap_or_default();
        let answer = tokio::select! {
            answer = link.ask(&request.question, &options, request.body.as_deref(), timeout) => answer,
            () = cancelled.cancelled() => return Err(ToolFailure::Unanswered("cancelled before the human answered".into())),
        };
        let answer = self
            .checked(&link, answer)
            .await
            .map_err(|e| ToolFailure::Crucible(format!("crucible could not ask the human: {e}")))?;
        match answer {
            Answer::Chosen(choice) => Ok(choice),
            Answer::TimedOut => Err(ToolFailure::Unanswered(no_answer(timeout))),
            Answer::Withdrawn(note) => Err(ToolFailure::Unanswered(format!(
                "the question was withdrawn: {note}"
            ))),
        }
    }

    #[tool(description = SECRET_DESCRIPTION)]
    async fn secret(
        &self,
        cancelled: CancellationToken,
        Parameters(request): Parameters<SecretRequest>,
    ) -> ToolResult {
        let link = self.link().await?;
        let value = tokio::select! {
            value = link.secret(&request.name) => value,
            () = cancelled.cancelled() => return Err(ToolFailure::Unanswered("cancelled before the human answered".into())),
        };
        self.checked(&link, value)
            .await
            .map_err(|e| ToolFailure::Crucible(format!("no credential {}: {e}", request.name)))
    }

    #[tool(description = APPROVE_DESCRIPTION)]
    async fn approve(
        &self,
        cancelled: CancellationToken,
        Parameters(request): Parameters<ApproveRequest>,
    ) -> ToolResult {
        const NOT_APPROVED: &str = "the action is not approved";
        let timeout = parse_timeout(request.timeout_secs)?;
        let link = self.link().await?;
        let answer = tokio::select! {
            answer = link.approve(&request.action, request.body.as_deref(), timeout) => answer,
            () = cancelled.cancelled() => {
                return Err(ToolFailure::Unanswered(format!(
                    "cancelled before the human answered; {NOT_APPROVED}"
                )));
            }
        };
        let answer = self.checked(&link, answer).await.map_err(|e| {
            ToolFailure::Crucible(format!("crucible could not ask for approval: {e}"))
        })?;
        match answer {
            // A denial is an answer like any other, not a failure of the tool.
            Answer::Chosen(verdict) if verdict.eq_ignore_ascii_case("approve") => {
                Ok("approved".into())
            }
            Answer::Chosen(verdict) if verdict.eq_ignore_ascii_case("deny") => Ok("denied".into()),
            Answer::Chosen(other) => Err(ToolFailure::Unanswered(format!(
                "crucible answered {other:?}, neither approve nor deny; {NOT_APPROVED}"
            ))),
            Answer::TimedOut => Err(ToolFailure::Unanswered(format!(
                "{}; {NOT_APPROVED}",
                no_answer(timeout)
            ))),
            Answer::Withdrawn(note) => Err(ToolFailure::Unanswered(format!(
                "the approval request was withdrawn ({note}); {NOT_APPROVED}"
            ))),
        }
    }
}

impl InboxTools {
    /// The link to the session's inbox, made on first use; the error says why crucible
    /// cannot be reached.
    async fn link(&self) -> Result<Arc<AgentLink>, ToolFailure> {
        let mut slot = self.link.lock().await;
        if let Some(link) = slot.as_ref() {
            return Ok(Arc::clone(link));
        }
        let link = AgentLink::from_env()
            .await
            .map(Arc::new)
            .map_err(|e| ToolFailure::Crucible(format!("cannot reach crucible: {e}")))?;
        tracing::debug!(
            session = link.session_id(),
            "connected to the crucible daemon"
        );
        *slot = Some(Arc::clone(&link));
        Ok(link)
    }

    /// Passes `result` through; after an error, drops `link` (unless another call already
    /// replaced it) so that the next call connects afresh.
    async fn checked<T>(
        &self,
        link: &Arc<AgentLink>,
        result: Result<T, AgentError>,
    ) -> Result<T, AgentError> {
        if result.is_err() {
            let mut slot = self.link.lock().await;
            if slot
                .as_ref()
                .is_some_and(|current| Arc::ptr_eq(current, link))
            {
                *slot = None;
            }
        }
        result
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for InboxTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("crucible", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// `timeout_secs` as a duration; zero is refused (omit the field to wait until answered).
fn parse_timeout(secs: Option<u64>) -> Result<Option<Duration>, ToolFailure> {
    match secs {
        Some(0) => Err(ToolFailure::Request(
            "timeout_secs must be at least 1; omit it to wait until the human answers".into(),
        )),
        secs => Ok(secs.map(Duration::from_secs)),
    }
}

fn no_answer(timeout: Option<Duration>) -> String {
    match timeout {
        Some(timeout) => format!("no answer within {} s", timeout.as_secs()),
        None => "no answer came in time".to_string(),
    }
}
