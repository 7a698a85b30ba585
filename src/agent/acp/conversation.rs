//! The main task of a connected ACP conversation: `initialize`, opening (or reloading)
//! the session within the startup time, then prompts and cancels until the orders stop;
//! a prompt with a reshaped context opens a fresh session first.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_client_protocol::Agent;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, EnvVariable, FileSystemCapabilities,
    Implementation, InitializeRequest, LoadSessionRequest, McpServer, McpServerStdio,
    NewSessionRequest, PromptRequest, TextContent,
};
use tokio::sync::mpsc;

use super::wire::wire_name;
use crate::agent::error::{AgentError, describe};
use crate::agent::events::{AgentEvent, TurnFailure, TurnTokens};
use crate::agent::handle::{Launch, Order};

/// How the agent's sessions are opened: where it works, the session to resume (and
/// whether a fresh one may stand in when that fails), the MCP servers it is offered, and
/// how long it has to open the first.
pub(super) struct Opening {
    cwd: PathBuf,
    resume: Option<String>,
    fresh_if_unresumable: bool,
    mcp_servers: Vec<McpServer>,
    startup: Duration,
}

impl Opening {
    pub(super) fn of(launch: &Launch) -> Opening {
        Opening {
            cwd: launch.environment.agent_cwd(&launch.cwd),
            resume: launch.resume.clone(),
            fresh_if_unresumable: launch.fresh_if_unresumable,
            mcp_servers: inbox_server(launch).into_iter().collect(),
            startup: Duration::from_secs(launch.profile.startup_timeout_secs),
        }
    }
}

/// The main task of a connected conversation: the connection, how sessions are opened,
/// and where events go.
pub(super) struct Conversation<'a> {
    pub(super) cx: &'a ConnectionTo<Agent>,
    pub(super) opening: &'a Opening,
    pub(super) events: &'a mpsc::UnboundedSender<AgentEvent>,
}

impl Conversation<'_> {
    /// Opens the session within the startup time and reports the outcome: ready, or why
    /// not (through `explain`). `reported` is set either way. The session id if it opened.
    pub(super) async fn start(
        &self,
        reported: &AtomicBool,
        explain: impl Fn(String) -> String,
    ) -> Option<String> {
        let Opening {
            cwd,
            resume,
            fresh_if_unresumable,
            mcp_servers,
            startup,
        } = self.opening;
        let opened = tokio::time::timeout(
            *startup,
            open_session(
                self.cx,
                cwd.clone(),
                resume.clone(),
                *fresh_if_unresumable,
                mcp_servers.clone(),
            ),
        )
        .await;
        let why = match opened {
            Ok(Ok((session_id, resumed, agent_name))) => {
                reported.store(true, Ordering::Relaxed);
                let _ = self.events.send(AgentEvent::Ready {
                    acp_session_id: session_id.clone(),
                    resumed,
                    agent_name,
                });
                return Some(session_id);
            }
            Ok(Err(why)) => why.to_string(),
            Err(_) => format!(
                "the agent did not start its session within {}s",
                startup.as_secs()
            ),
        };
        reported.store(true, Ordering::Relaxed);
        let _ = self.events.send(AgentEvent::StartFailed(explain(why)));
        None
    }

    /// Forwards prompts and cancels to the session until the orders stop or the agent
    /// closes the connection.
    pub(super) async fn run(
        &self,
        mut session_id: String,
        commands: &mut mpsc::UnboundedReceiver<Order>,
    ) -> Result<(), agent_client_protocol::Error> {
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Order::Prompt { text, fresh }) => {
                        self.prompt(&mut session_id, text, fresh).await?;
                    }
                    Some(Order::Cancel) => {
                        self.cx
                            .send_notification(CancelNotification::new(session_id.clone()))?;
                    }
                    None => return Ok(()),
                },
                _ = self.cx.incoming_closed() => return Ok(()),
            }
        }
    }

    /// Sends a prompt in its own task, which reports the turn's end. With `fresh` (the
    /// reshaped context), a new session is opened first and given the context ahead of
    /// the text; if the agent cannot open one, the turn ends failed.
    async fn prompt(
        &self,
        session_id: &mut String,
        text: String,
        fresh: Option<String>,
    ) -> Result<(), agent_client_protocol::Error> {
        let mut blocks = Vec::new();
        if let Some(context) = fresh {
            let Some(renewed) = self.renew().await else {
                return Ok(());
            };
            *session_id = renewed;
            if !context.is_empty() {
                blocks.push(ContentBlock::Text(TextContent::new(context)));
            }
        }
        blocks.push(ContentBlock::Text(TextContent::new(text)));
        let cx = self.cx.clone();
        let events = self.events.clone();
        let request = PromptRequest::new(session_id.clone(), blocks);
        self.cx.spawn(async move {
            let outcome = cx.send_request(request).block_task().await;
            let ended = match outcome {
                Ok(response) => {
                    if let Some(usage) = &response.usage {
                        let tokens = TurnTokens {
                            input: usage.input_tokens,
                            output: usage.output_tokens,
                            cached: usage
                                .cached_read_tokens
                                .unwrap_or(0)
                                .saturating_add(usage.cached_write_tokens.unwrap_or(0)),
                        };
                        let _ = events.send(AgentEvent::TurnTokens(tokens));
                    }
                    Ok(wire_name(&response.stop_reason))
                }
                Err(_) if cx.is_incoming_closed() => Err(TurnFailure::Lost),
                Err(e) => Err(TurnFailure::Failed(describe(&e))),
            };
            let _ = events.send(AgentEvent::TurnEnded(ended));
            Ok(())
        })
    }

    /// Opens a fresh session for a reshaped context and reports it; if the agent cannot,
    /// the turn is reported ended with why, and `None` returned.
    async fn renew(&self) -> Option<String> {
        let opened = self
            .cx
            .send_request(
                NewSessionRequest::new(self.opening.cwd.clone())
                    .mcp_servers(self.opening.mcp_servers.clone()),
            )
            .block_task()
            .await;
        match opened {
            Ok(created) => {
                let session_id = created.session_id.0.to_string();
                let _ = self.events.send(AgentEvent::SessionRenewed {
                    acp_session_id: session_id.clone(),
                });
                Some(session_id)
            }
            Err(e) => {
                let why = format!(
                    "the agent could not open a fresh session for the reshaped context: {}",
                    describe(&e)
                );
                let _ = self
                    .events
                    .send(AgentEvent::TurnEnded(Err(TurnFailure::Failed(why))));
                None
            }
        }
    }
}

/// `initialize`, then a new session or the reloaded one. Returns the ACP session id,
/// whether it was resumed, and the agent's name.
async fn open_session(
    cx: &ConnectionTo<Agent>,
    cwd: PathBuf,
    resume: Option<String>,
    fresh_if_unresumable: bool,
    mcp_servers: Vec<McpServer>,
) -> Result<(String, bool, Option<String>), AgentError> {
    let init = cx
        .send_request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(
                    ClientCapabilities::new()
                        .fs(FileSystemCapabilities::new()
                            .read_text_file(true)
                            .write_text_file(true))
                        .terminal(true),
                )
                .client_info(Implementation::new("crucible", env!("CARGO_PKG_VERSION"))),
        )
        .block_task()
        .await
        .map_err(|source| AgentError::Acp {
            doing: "the agent failed to initialize".into(),
            source: Box::new(source),
            note: String::new(),
        })?;
    let agent_name = init.agent_info.as_ref().map(|i| i.name.clone());
    if let Some(id) = resume {
        let loaded = if !init.agent_capabilities.load_session {
            Err(AgentError::Protocol(
                "the agent cannot resume sessions (no loadSession support)".to_string(),
            ))
        } else {
            cx.send_request(
                LoadSessionRequest::new(id.clone(), cwd.clone()).mcp_servers(mcp_servers.clone()),
            )
            .block_task()
            .await
            .map(|_| ())
            .map_err(|source| AgentError::Acp {
                doing: format!("the agent could not resume session {id}"),
                source: Box::new(source),
                note: String::new(),
            })
        };
        match loaded {
            Ok(()) => return Ok((id, true, agent_name)),
            Err(why) if fresh_if_unresumable => {
                tracing::info!("opening a fresh agent session: {why}");
            }
            Err(why) => return Err(why),
        }
    }
    let created = cx
        .send_request(NewSessionRequest::new(cwd).mcp_servers(mcp_servers))
        .block_task()
        .await
        .map_err(|source| {
            let mut note = String::new();
            // ACP's "authentication required": name the ways the agent offers.
            if source.code == agent_client_protocol::ErrorCode::AUTH_REQUIRED
                && !init.auth_methods.is_empty()
            {
                let ways: Vec<&str> = init.auth_methods.iter().map(|m| m.name()).collect();
                note = format!(" (it signs in by: {})", ways.join("; "));
            }
            AgentError::Acp {
                doing: "the agent could not open a session".into(),
                source: Box::new(source),
                note,
            }
        })?;
    Ok((created.session_id.0.to_string(), false, agent_name))
}

/// `cru mcp`, offered to every ACP agent as an MCP server named `crucible`, so an agent
/// that speaks MCP gets the inbox tools (notify, ask, approve) for its own session with
/// no setup. It carries the session's handle and socket from `env`. `None` if this
/// program's own path is unknown.
fn inbox_server(launch: &Launch) -> Option<McpServer> {
    let program = launch.environment.cru_program()?;
    let env = launch
        .environment
        .agent_vars(&launch.env)
        .into_iter()
        .map(|(name, value)| EnvVariable::new(name, value))
        .collect();
    Some(McpServer::Stdio(
        McpServerStdio::new("crucible", program)
            .args(vec!["mcp".to_string()])
            .env(env),
    ))
}
