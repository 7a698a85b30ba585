//! The ACP side of an agent process: the connection crucible holds as the agent's client
//! (initialize, open or load the session, prompts and cancels, permission and file
//! requests through the firewall), and how session updates become [`AgentEvent`]s.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, CreateTerminalRequest,
    CreateTerminalResponse, EnvVariable, FileSystemCapabilities, Implementation, InitializeRequest,
    KillTerminalRequest, KillTerminalResponse, LoadSessionRequest, McpServer, McpServerStdio,
    NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, TerminalOutputRequest, TerminalOutputResponse, TextContent,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use super::*;

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
        kind: kind.map_or_else(|| "other".to_string(), wire_name),
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

/// Passes a file request through the firewall, recording it either way.
pub(super) fn gate(
    events: &mpsc::UnboundedSender<AgentEvent>,
    firewall: &Firewall,
    op: &'static str,
    path: &std::path::Path,
) -> Result<PathBuf, agent_client_protocol::Error> {
    let checked = firewall.check(path);
    let _ = events.send(AgentEvent::File {
        op,
        path: path.display().to_string(),
        refused: checked.as_ref().err().map(ToString::to_string),
    });
    checked.map_err(fs_error)
}

/// The rules' word on a file request the firewall let through.
async fn ask_rules(
    events: &mpsc::UnboundedSender<AgentEvent>,
    kind: &str,
    path: &std::path::Path,
) -> Result<(), AgentError> {
    let (reply, answer) = oneshot::channel();
    let operation = Operation {
        kind: kind.into(),
        paths: vec![path.display().to_string()],
        tool: Some(format!("fs/{kind}")),
        ..Default::default()
    };
    let _ = events.send(AgentEvent::Gate { operation, reply });
    answer
        .await
        .unwrap_or_else(|_| Err(AgentError::Refused("the session is ending".into())))
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
    // Why a start failed, with what the agent said on stderr since it was started.
    let explain = {
        let log = launch.stderr_log.clone();
        let program = launch.profile.command.clone();
        move |why: String| {
            let stderr = super::start_failure::stderr_since(&log, stderr_mark);
            super::start_failure::explain(&why, &program, &stderr)
        }
    };
    let mut stdin = stdin;
    if let Some(preamble) = launch.environment.preamble(&launch.vars(&[])) {
        use tokio::io::AsyncWriteExt;
        stdin
            .write_all(&preamble)
            .await
            .map_err(|e| fs_error(format!("cannot pass the agent its variables: {e}")))?;
    }
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let updates = events.clone();
    let permissions = events.clone();
    let terminals = terminal::Terminals::new(launch, events.clone());
    let remote = launch.environment.remote().cloned();
    let reads = (events.clone(), firewall.clone(), remote.clone());
    let writes = (events.clone(), firewall, remote);
    let cwd = launch.environment.agent_cwd(&launch.cwd);
    let resume = launch.resume.clone();
    let fresh_if_unresumable = launch.fresh_if_unresumable;
    let mcp_servers = inbox_server(launch).into_iter().collect::<Vec<_>>();
    let startup = Duration::from_secs(launch.profile.startup_timeout_secs);

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
                let (reply, answer) = oneshot::channel();
                let options = request
                    .options
                    .iter()
                    .map(|o| PermissionChoice {
                        id: o.option_id.0.to_string(),
                        name: o.name.clone(),
                        kind: OptionKind::from_wire(&wire_name(&o.kind)),
                    })
                    .collect();
                let title = request
                    .tool_call
                    .fields
                    .title
                    .clone()
                    .unwrap_or_else(|| "The agent asks for permission".into());
                let fields = &request.tool_call.fields;
                let operation = operation(
                    fields.kind.as_ref(),
                    fields.title.as_deref().unwrap_or(&title),
                    fields.locations.as_deref().unwrap_or(&[]),
                    fields.raw_input.as_ref(),
                );
                let _ = permissions.send(AgentEvent::Permission {
                    operation,
                    title,
                    tool_call_id: request.tool_call.tool_call_id.0.to_string(),
                    options,
                    reply,
                });
                // The human may take hours: wait off the dispatch loop.
                tokio::spawn(async move {
                    let outcome = match answer.await {
                        Ok(Some(id)) => {
                            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
                        }
                        _ => RequestPermissionOutcome::Cancelled,
                    };
                    let _ = responder.respond(RequestPermissionResponse::new(outcome));
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                let (events, firewall, remote) = &reads;
                let path = request.path.display().to_string();
                let real = match gate(events, firewall, "read", &request.path) {
                    Ok(real) => real,
                    Err(refusal) => return responder.respond_with_error(refusal),
                };
                if let Err(why) = ask_rules(events, "read", &real).await {
                    return responder.respond_with_error(fs_error(why));
                }
                let read = match remote {
                    Some(remote) => remote.read(&real.to_string_lossy()).await.map_err(|e| e.to_string()),
                    None => tokio::fs::read_to_string(&real).await.map_err(|e| e.to_string()),
                };
                match read {
                    Ok(text) => responder.respond(ReadTextFileResponse::new(fs::slice_lines(
                        &text,
                        request.line,
                        request.limit,
                    ))),
                    Err(e) => responder.respond_with_error(fs_error(format!("{path}: {e}"))),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                let (events, firewall, remote) = &writes;
                let path = request.path.display().to_string();
                let real = match gate(events, firewall, "write", &request.path) {
                    Ok(real) => real,
                    Err(refusal) => return responder.respond_with_error(refusal),
                };
                if let Err(why) = ask_rules(events, "edit", &real).await {
                    return responder.respond_with_error(fs_error(why));
                }
                let written = match remote {
                    Some(remote) => remote.write(&real.to_string_lossy(), &request.content).await.map_err(|e| e.to_string()),
                    None => {
                        let local = async {
                            if let Some(parent) = real.parent() {
                                tokio::fs::create_dir_all(parent).await?;
                            }
                            tokio::fs::write(&real, request.content.as_bytes()).await
                        };
                        local.await.map_err(|e| e.to_string())
                    }
                };
                match written {
                    Ok(()) => responder.respond(WriteTextFileResponse::new()),
                    Err(e) => responder.respond_with_error(fs_error(format!("{path}: {e}"))),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: CreateTerminalRequest, responder, _cx| {
                    match terminals.create(request).await {
                        Ok(id) => responder.respond(CreateTerminalResponse::new(id)),
                        Err(why) => responder.respond_with_error(fs_error(why)),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: TerminalOutputRequest, responder, _cx| {
                    match terminals.output(&request.terminal_id.0) {
                        Ok((output, truncated, exit)) => {
                            let mut response = TerminalOutputResponse::new(output, truncated);
                            if let Some(exit) = exit {
                                response = response.exit_status(exit.status());
                            }
                            responder.respond(response)
                        }
                        Err(why) => responder.respond_with_error(fs_error(why)),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: WaitForTerminalExitRequest, responder, cx| {
                    // The command may run for long: wait off the dispatch loop.
                    let terminals = terminals.clone();
                    cx.spawn(async move {
                        match terminals.wait(&request.terminal_id.0).await {
                            Ok(exit) => responder
                                .respond(WaitForTerminalExitResponse::new(exit.status())),
                            Err(why) => responder.respond_with_error(fs_error(why)),
                        }
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: KillTerminalRequest, responder, _cx| {
                    match terminals.kill(&request.terminal_id.0) {
                        Ok(()) => responder.respond(KillTerminalResponse::new()),
                        Err(why) => responder.respond_with_error(fs_error(why)),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let terminals = terminals.clone();
                async move |request: ReleaseTerminalRequest, responder, _cx| {
                    match terminals.release(&request.terminal_id.0) {
                        Ok(()) => responder.respond(ReleaseTerminalResponse::new()),
                        Err(why) => responder.respond_with_error(fs_error(why)),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Agent>| {
            let opened = tokio::time::timeout(
                startup,
                open_session(&cx, cwd.clone(), resume, fresh_if_unresumable, mcp_servers.clone()),
            )
            .await;
            let (session_id, resumed, agent_name) = match opened {
                Ok(Ok(opened)) => opened,
                Ok(Err(why)) => {
                    reported.store(true, Ordering::Relaxed);
                    let _ = events.send(AgentEvent::StartFailed(explain(why.to_string())));
                    return Ok(());
                }
                Err(_) => {
                    reported.store(true, Ordering::Relaxed);
                    let _ = events.send(AgentEvent::StartFailed(explain(format!(
                        "the agent did not start its session within {}s",
                        startup.as_secs()
                    ))));
                    return Ok(());
                }
            };
            reported.store(true, Ordering::Relaxed);
            let _ = events.send(AgentEvent::Ready {
                acp_session_id: session_id.clone(),
                resumed,
                agent_name,
            });
            let mut session_id = session_id;
            loop {
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(Order::Prompt { text, fresh }) => {
                            let mut blocks = Vec::new();
                            if let Some(context) = fresh {
                                let opened = cx
                                    .send_request(
                                        NewSessionRequest::new(cwd.clone())
                                            .mcp_servers(mcp_servers.clone()),
                                    )
                                    .block_task()
                                    .await;
                                match opened {
                                    Ok(created) => {
                                        session_id = created.session_id.0.to_string();
                                        let _ = events.send(AgentEvent::SessionRenewed {
                                            acp_session_id: session_id.clone(),
                                        });
                                    }
                                    Err(e) => {
                                        let why = format!(
                                            "the agent could not open a fresh session for the reshaped context: {}",
                                            describe(&e)
                                        );
                                        let _ = events.send(AgentEvent::TurnEnded(Err(
                                            TurnFailure::Failed(why),
                                        )));
                                        continue;
                                    }
                                }
                                if !context.is_empty() {
                                    blocks.push(ContentBlock::Text(TextContent::new(context)));
                                }
                            }
                            blocks.push(ContentBlock::Text(TextContent::new(text)));
                            let cx2 = cx.clone();
                            let events = events.clone();
                            let request = PromptRequest::new(session_id.clone(), blocks);
                            cx.spawn(async move {
                                let outcome = cx2.send_request(request).block_task().await;
                                let ended = match outcome {
                                    Ok(response) => Ok(wire_name(&response.stop_reason)),
                                    Err(_) if cx2.is_incoming_closed() => Err(TurnFailure::Lost),
                                    Err(e) => Err(TurnFailure::Failed(describe(&e))),
                                };
                                let _ = events.send(AgentEvent::TurnEnded(ended));
                                Ok(())
                            })?;
                        }
                        Some(Order::Cancel) => {
                            cx.send_notification(CancelNotification::new(session_id.clone()))?;
                        }
                        None => return Ok(()),
                    },
                    _ = cx.incoming_closed() => return Ok(()),
                }
            }
        })
        .await
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
