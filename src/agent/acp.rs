//! The ACP side of an agent process: the connection crucible holds as the agent's client
//! (initialize, open or load the session, prompts and cancels, permission and file
//! requests through the firewall), and how session updates become [`AgentEvent`]s.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, CreateTerminalRequest, EnvVariable,
    FileSystemCapabilities, Implementation, InitializeRequest, KillTerminalRequest,
    LoadSessionRequest, McpServer, McpServerStdio, NewSessionRequest, PromptRequest,
    ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionRequest, SessionNotification,
    SessionUpdate, TerminalOutputRequest, TextContent, WaitForTerminalExitRequest,
    WriteTextFileRequest,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use super::*;

mod handlers;

use handlers::FileAccess;

/// The name a schema enum has on the wire (`end_turn`, `in_progress`, …).
pub(super) fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "unknown".into(),
    }
}

pub(super) fn text_of(content: &ContentBlock) -> Option<String> {
    match content {
        ContentBlock::Text(t) => Some(t.text.clone()),
        ContentBlock::ResourceLink(link) => Some(format!("[{}]({})", link.name, link.uri)),
        _ => None,
    }
}

/// Turns a session update into events; updates crucible has no use for are dropped.
pub(super) fn translate(update: SessionUpdate) -> Option<AgentEvent> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(chunk) => AgentEvent::Chunk {
            kind: EntryKind::Message,
            text: text_of(&chunk.content)?,
            message_id: chunk.message_id.map(|id| id.0.to_string()),
        },
        SessionUpdate::AgentThoughtChunk(chunk) => AgentEvent::Chunk {
            kind: EntryKind::Thought,
            text: text_of(&chunk.content)?,
            message_id: chunk.message_id.map(|id| id.0.to_string()),
        },
        SessionUpdate::ToolCall(call) => AgentEvent::ToolCall {
            operation: operation(
                Some(&call.kind),
                &call.title,
                &call.locations,
                call.raw_input.as_ref(),
            ),
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            status: wire_name(&call.status),
        },
        SessionUpdate::ToolCallUpdate(update) => AgentEvent::ToolUpdate {
            id: update.tool_call_id.0.to_string(),
            title: update.fields.title,
            status: update.fields.status.as_ref().map(wire_name),
        },
        SessionUpdate::AvailableCommandsUpdate(update) => AgentEvent::Skills(
            update
                .available_commands
                .iter()
                .map(|c| format!("/{} — {}", c.name, c.description))
                .collect(),
        ),
        SessionUpdate::UsageUpdate(usage) => AgentEvent::Usage(crate::protocol::Usage {
            used: usage.used,
            size: usage.size,
            cost: usage.cost.as_ref().map(|c| c.amount),
            currency: usage.cost.map(|c| c.currency),
        }),
        SessionUpdate::Plan(plan) => AgentEvent::Plan(
            plan.entries
                .iter()
                .map(|e| format!("[{}] {}", wire_name(&e.status), e.content))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => return None,
    })
}

/// What an ACP tool call does, for the rules: its kind, its command (from `raw_input`'s
/// `command`, as agents' shell tools give it), the paths it names, and its title.
pub(super) fn operation(
    kind: Option<&agent_client_protocol::v1::schema::ToolKind>,
    title: &str,
    locations: &[agent_client_protocol::v1::schema::ToolCallLocation],
    raw_input: Option<&serde_json::Value>,
) -> Operation {
    let command = raw_input
        .and_then(|v| v.get("command"))
        .and_then(|c| match c {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        });
    Operation {
        // ACP's kinds have the rules' names.
        kind: kind
            .and_then(|k| serde_json::to_value(k).ok())
            .and_then(|k| serde_json::from_value(k).ok())
            .unwrap_or_default(),
        command,
        paths: locations
            .iter()
            .map(|l| l.path.display().to_string())
            .collect(),
        tool: Some(title.to_string()),
    }
}

/// An ACP error on one line: its message, and its data compactly when there is some.
pub(super) fn describe(e: &agent_client_protocol::Error) -> String {
    match &e.data {
        None | Some(serde_json::Value::Null) => e.message.clone(),
        Some(serde_json::Value::String(data)) => format!("{}: {data}", e.message),
        Some(data) => format!("{}: {data}", e.message),
    }
}

/// A refused or failed file or terminal request, as the ACP error the agent gets.
pub(super) fn fs_error(message: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(
        agent_client_protocol::ErrorCode::INVALID_PARAMS,
        message.to_string(),
    )
}

/// The ACP conversation: handlers for what the agent asks, and the main task that opens
/// the session and forwards prompts and cancels. `reported` is set once the start's
/// outcome (ready, or why not) has been sent.
pub(super) async fn converse(
    (stdin, stdout): (tokio::process::ChildStdin, tokio::process::ChildStdout),
    launch: &Launch,
    stderr_mark: u64,
    firewall: Firewall,
    events: mpsc::UnboundedSender<AgentEvent>,
    mut commands: mpsc::UnboundedReceiver<Order>,
    reported: &AtomicBool,
) -> Result<(), agent_client_protocol::Error> {
    let explain = start_failure(launch, stderr_mark);
    let mut stdin = stdin;
    pass_variables(&mut stdin, launch).await?;
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let updates = events.clone();
    let permissions = events.clone();
    let terminals = terminal::Terminals::new(launch, events.clone());
    let remote = launch.environment.remote().cloned();
    let reads = FileAccess {
        events: events.clone(),
        firewall: firewall.clone(),
        remote: remote.clone(),
    };
    let writes = FileAccess {
        events: events.clone(),
        firewall,
        remote,
    };
    let opening = Opening::of(launch);

    Client
        .v1()
        .name("crucible")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let Some(event) = translate(notification.update) {
                    let _ = updates.send(event);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                handlers::ask_permission(&permissions, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                handlers::read_text_file(&reads, request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                handlers::write_text_file(&writes, request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: CreateTerminalRequest, responder, _cx| {
                    handlers::create_terminal(&terminals, request, responder).await
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: TerminalOutputRequest, responder, _cx| {
                    handlers::terminal_output(&terminals, request, responder)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: WaitForTerminalExitRequest, responder, cx| {
                    handlers::wait_for_terminal_exit(&terminals, request, responder, &cx)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: KillTerminalRequest, responder, _cx| {
                    handlers::kill_terminal(&terminals, request, responder)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: ReleaseTerminalRequest, responder, _cx| {
                    handlers::release_terminal(&terminals, request, responder)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Agent>| {
            let conversation = Conversation {
                cx: &cx,
                opening: &opening,
                events: &events,
            };
            match conversation.start(reported, explain).await {
                Some(session_id) => conversation.run(session_id, &mut commands).await,
                None => Ok(()),
            }
        })
        .await
}

/// Why a start failed, with what the agent said on stderr since it was started (from
/// `stderr_mark` on).
fn start_failure(launch: &Launch, stderr_mark: u64) -> impl Fn(String) -> String + use<> {
    let log = launch.stderr_log.clone();
    let program = launch.profile.command.clone();
    move |why: String| {
        let stderr = super::start_failure::stderr_since(&log, stderr_mark);
        super::start_failure::explain(&why, &program, &stderr)
    }
}

/// Writes the environment's preamble (the agent's variables) to the agent's stdin, when
/// the environment has one, before the conversation starts.
async fn pass_variables(
    stdin: &mut tokio::process::ChildStdin,
    launch: &Launch,
) -> Result<(), agent_client_protocol::Error> {
    if let Some(preamble) = launch.environment.preamble(&launch.vars(&[])) {
        use tokio::io::AsyncWriteExt;
        stdin
            .write_all(&preamble)
            .await
            .map_err(|e| fs_error(format!("cannot pass the agent its variables: {e}")))?;
    }
    Ok(())
}

/// How the agent's sessions are opened: where it works, the session to resume (and
/// whether a fresh one may stand in when that fails), the MCP servers it is offered, and
/// how long it has to open the first.
struct Opening {
    cwd: PathBuf,
    resume: Option<String>,
    fresh_if_unresumable: bool,
    mcp_servers: Vec<McpServer>,
    startup: Duration,
}

impl Opening {
    fn of(launch: &Launch) -> Opening {
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
struct Conversation<'a> {
    cx: &'a ConnectionTo<Agent>,
    opening: &'a Opening,
    events: &'a mpsc::UnboundedSender<AgentEvent>,
}

impl Conversation<'_> {
    /// Opens the session within the startup time and reports the outcome: ready, or why
    /// not (through `explain`). `reported` is set either way. The session id if it opened.
    async fn start(
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
    async fn run(
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
pub(super) async fn open_session(
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
        .map_err(|e| {
            AgentError::Protocol(format!("the agent failed to initialize: {}", describe(&e)))
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
            .map_err(|e| {
                AgentError::Protocol(format!(
                    "the agent could not resume session {id}: {}",
                    describe(&e)
                ))
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
        .map_err(|e| {
            let mut why = format!("the agent could not open a session: {}", describe(&e));
            // ACP's "authentication required": name the ways the agent offers.
            if e.code == agent_client_protocol::ErrorCode::AUTH_REQUIRED
                && !init.auth_methods.is_empty()
            {
                let ways: Vec<&str> = init.auth_methods.iter().map(|m| m.name()).collect();
                why.push_str(&format!(" (it signs in by: {})", ways.join("; ")));
            }
            AgentError::Protocol(why)
        })?;
    Ok((created.session_id.0.to_string(), false, agent_name))
}

/// `cru mcp`, offered to every ACP agent as an MCP server named `crucible`, so an agent
/// that speaks MCP gets the inbox tools (notify, ask, approve) for its own session with
/// no setup. It carries the session's handle and socket from `env`. `None` if this
/// program's own path is unknown.
pub(super) fn inbox_server(launch: &Launch) -> Option<McpServer> {
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
