//! Agent processes and the Agent Client Protocol (ACP).
//!
//! [`launch`] starts an agent's process in its session's folder and drives it as an ACP
//! client: `initialize`, then `session/new` (or `session/load` to resume), then prompts
//! and cancels on command. What the agent does comes back as [`AgentEvent`]s on one
//! channel, in the order it happened; the last one is always [`AgentEvent::Exited`].
//! Profiles of `type = "command"` run a plain program per prompt instead (see
//! [`command`]), and `type = "internal"` profiles run crucible's own agent loop (see
//! [`internal`]); they report through the same events.
//! This module knows nothing of the store or the inbox: the session that owns the
//! agent turns events into state, transcript and messages.

pub mod command;
mod fs;
pub mod internal;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, EnvVariable, FileSystemCapabilities,
    Implementation, InitializeRequest, LoadSessionRequest, McpServer, McpServerStdio,
    NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, TextContent,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::config::{AgentKind, AgentProfile};
use crate::context::{Entry, Message};
use crate::protocol::{EntryKind, MsgType};

pub use fs::Firewall;

/// How long a stopped agent gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// What an agent did, in order.
#[derive(Debug)]
pub enum AgentEvent {
    /// The agent answered `initialize` and opened (or reloaded) its session.
    Ready {
        acp_session_id: String,
        resumed: bool,
        agent_name: Option<String>,
    },
    /// Streamed text: `Message` or `Thought`. Chunks with different message ids belong
    /// to different messages.
    Chunk {
        kind: EntryKind,
        text: String,
        message_id: Option<String>,
    },
    ToolCall {
        id: String,
        title: String,
        status: String,
    },
    ToolUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
    },
    /// The whole plan, one `[status] step` per line.
    Plan(String),
    /// The agent waits for permission; answer with an option id, or `None` to cancel.
    Permission {
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        reply: oneshot::Sender<Option<String>>,
    },
    /// A file request the firewall let through (`refused` empty) or stopped.
    File {
        op: &'static str,
        path: String,
        refused: Option<String>,
    },
    /// A prompt's turn ended: the stop reason, or why it failed.
    TurnEnded(Result<String, TurnFailure>),
    /// The agent could not be started or resumed.
    StartFailed(String),
    /// The process doing the agent's work now, for agents that run one per prompt
    /// (`None`: the run ended).
    Process(Option<u32>),
    /// The process is gone: how it ended, and its exit code if it had one.
    Exited { status: String, code: Option<i32> },
    /// The agent opened a fresh session for a prompt (after the context shrank); the
    /// old one is no longer used.
    SessionRenewed { acp_session_id: String },
}

/// What a driver hosted inside the daemon (the internal agent) reaches of its session:
/// the context stack, which is its conversation, and the inbox. Implemented by the
/// session; boxed futures keep it usable as a trait object.
pub trait SessionLink: Send + Sync {
    /// The stack's entries, bottom to top.
    fn context(&self) -> futures::future::BoxFuture<'_, Result<Vec<Entry>, String>>;
    /// Pushes one message, stored before this returns.
    fn push(&self, message: Message) -> futures::future::BoxFuture<'_, Result<(), String>>;
    /// The tool-error policy: the failed tool result on top replaced by `error`.
    fn recover_tool_error(
        &self,
        error: String,
    ) -> futures::future::BoxFuture<'_, Result<(), String>>;
    /// Posts an inbox message; for a blocking type waits for the human's answer.
    fn ask(
        &self,
        msg_type: MsgType,
        title: String,
        body: Option<String>,
        options: Option<Vec<String>>,
    ) -> futures::future::BoxFuture<'_, Result<Option<String>, String>>;
}

#[derive(Debug, Clone)]
pub struct PermissionChoice {
    pub id: String,
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`.
    pub kind: String,
}

#[derive(Debug)]
pub enum TurnFailure {
    /// The connection closed; [`AgentEvent::Exited`] follows with the reason.
    Lost,
    /// The agent answered the prompt with an error.
    Failed(String),
}

#[derive(Debug)]
pub(crate) enum Order {
    Prompt {
        text: String,
        /// Open a fresh session first, and send this context ahead of the prompt (when
        /// it is not empty).
        fresh: Option<String>,
    },
    Cancel,
}

/// What is needed to start one agent.
pub struct Launch {
    pub profile_name: String,
    pub profile: AgentProfile,
    /// The session's folder: the agent's working directory and the firewall's root.
    pub cwd: PathBuf,
    /// Folders under `cwd` the agent may not touch (see [`Firewall::new`]).
    pub denied: Vec<PathBuf>,
    /// Added to the profile's environment.
    pub env: Vec<(String, String)>,
    /// Where the agent's stderr goes.
    pub stderr_log: PathBuf,
    /// Reload this ACP session instead of opening a new one.
    pub resume: Option<String>,
    /// The session's context and inbox, for the internal agent.
    pub link: Option<std::sync::Arc<dyn SessionLink>>,
}

/// A running agent. Dropping it stops the agent.
pub struct AgentHandle {
    pub pid: u32,
    pub(crate) commands: mpsc::UnboundedSender<Order>,
    pub(crate) stop: Option<oneshot::Sender<()>>,
}

impl AgentHandle {
    pub fn prompt(&self, text: String) {
        let _ = self.commands.send(Order::Prompt { text, fresh: None });
    }

    /// Sends the prompt in a fresh agent session, `context` (if not empty) ahead of it.
    /// Only ACP agents keep sessions; the others take the prompt as it is.
    pub fn prompt_fresh(&self, text: String, context: String) {
        let _ = self.commands.send(Order::Prompt {
            text,
            fresh: Some(context),
        });
    }

    pub fn cancel(&self) {
        let _ = self.commands.send(Order::Cancel);
    }

    /// Ends the agent: its connection closes, then SIGTERM, then SIGKILL after a grace.
    /// [`AgentEvent::Exited`] reports when it is gone.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts the agent and its supervisor. Fails only if the process cannot be spawned;
/// everything later arrives as events.
pub fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, String> {
    match launch.profile.kind {
        AgentKind::Command => return command::launch(launch, events),
        AgentKind::Internal => return internal::launch(launch, events),
        AgentKind::Acp => {}
    }
    let firewall = Firewall::new(&launch.cwd, &launch.denied)
        .map_err(|e| format!("cannot use {}: {e}", launch.cwd.display()))?;
    let mut child = spawn(&launch, Path::new(&launch.profile.command), &[])?;
    let pid = child.id().unwrap_or(0);
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel();
    tokio::spawn(supervise(
        child_io(&mut child),
        child,
        launch,
        firewall,
        events,
        command_rx,
        stop_rx,
    ));
    Ok(AgentHandle {
        pid,
        commands,
        stop: Some(stop),
    })
}

/// Starts the profile's program in the session's folder and its own process group, with
/// the session's environment (plus `extra`), stdin and stdout piped, and stderr appended
/// to the session's stderr log.
fn spawn(launch: &Launch, program: &Path, extra: &[(&str, &str)]) -> Result<Child, String> {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.stderr_log)
        .map_err(|e| format!("cannot open {}: {e}", launch.stderr_log.display()))?;
    crate::sys::user_umask(&mut Command::new(program))
        .args(&launch.profile.args)
        .envs(&launch.profile.env)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .envs(extra.iter().copied())
        .current_dir(&launch.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start agent {:?} ({}): {e}",
                launch.profile_name, launch.profile.command
            )
        })
}

type ChildIo = Option<(tokio::process::ChildStdin, tokio::process::ChildStdout)>;

fn child_io(child: &mut Child) -> ChildIo {
    Some((child.stdin.take()?, child.stdout.take()?))
}

/// Runs the connection until it ends or a stop is asked for, makes sure the process is
/// gone, then reports how it ended.
async fn supervise(
    io: ChildIo,
    mut child: Child,
    launch: Launch,
    firewall: Firewall,
    events: mpsc::UnboundedSender<AgentEvent>,
    commands: mpsc::UnboundedReceiver<Order>,
    stop: oneshot::Receiver<()>,
) {
    let pid = child.id();
    let exited_early = match io {
        None => {
            let _ = events.send(AgentEvent::StartFailed(
                "the agent has no stdio pipes".into(),
            ));
            false
        }
        Some((stdin, stdout)) => {
            let connection = converse(stdin, stdout, &launch, firewall, events.clone(), commands);
            tokio::select! {
                outcome = connection => {
                    if let Err(e) = outcome {
                        tracing::info!(agent = %launch.profile_name, "agent connection ended: {e}");
                    }
                    false
                }
                _ = stop => false,
                _ = child.wait() => true,
            }
        }
    };
    if !exited_early {
        end_process(&mut child, pid).await;
    }
    let (status, code) = match child.wait().await {
        Ok(status) => (describe_exit(status), status.code()),
        Err(e) => (format!("could not be waited for: {e}"), None),
    };
    let _ = events.send(AgentEvent::Exited { status, code });
}

/// SIGTERM to the agent's process group, then SIGKILL if it lingers.
async fn end_process(child: &mut Child, pid: Option<u32>) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Some(pid) = pid {
        crate::sys::signal_group(pid, libc::SIGTERM);
    }
    if tokio::time::timeout(STOP_GRACE, child.wait())
        .await
        .is_err()
    {
        if let Some(pid) = pid {
            crate::sys::signal_group(pid, libc::SIGKILL);
        }
        let _ = child.kill().await;
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => "exited normally".into(),
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended ({status})"),
    }
}

/// The name a schema enum has on the wire (`end_turn`, `in_progress`, …).
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "unknown".into(),
    }
}

fn text_of(content: &ContentBlock) -> Option<String> {
    match content {
        ContentBlock::Text(t) => Some(t.text.clone()),
        ContentBlock::ResourceLink(link) => Some(format!("[{}]({})", link.name, link.uri)),
        _ => None,
    }
}

/// Turns a session update into events; updates crucible has no use for are dropped.
fn translate(update: SessionUpdate) -> Option<AgentEvent> {
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
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            status: wire_name(&call.status),
        },
        SessionUpdate::ToolCallUpdate(update) => AgentEvent::ToolUpdate {
            id: update.tool_call_id.0.to_string(),
            title: update.fields.title,
            status: update.fields.status.as_ref().map(wire_name),
        },
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

/// An ACP error on one line: its message, and its data compactly when there is some.
fn describe(e: &agent_client_protocol::Error) -> String {
    match &e.data {
        None | Some(serde_json::Value::Null) => e.message.clone(),
        Some(serde_json::Value::String(data)) => format!("{}: {data}", e.message),
        Some(data) => format!("{}: {data}", e.message),
    }
}

/// Passes a file request through the firewall, recording it either way.
fn gate(
    events: &mpsc::UnboundedSender<AgentEvent>,
    firewall: &Firewall,
    op: &'static str,
    path: &std::path::Path,
) -> Result<PathBuf, agent_client_protocol::Error> {
    let checked = firewall.check(path);
    let _ = events.send(AgentEvent::File {
        op,
        path: path.display().to_string(),
        refused: checked.as_ref().err().cloned(),
    });
    checked.map_err(fs_error)
}

fn fs_error(message: String) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(agent_client_protocol::ErrorCode::INVALID_PARAMS, message)
}

/// The ACP conversation: handlers for what the agent asks, and the main task that opens
/// the session and forwards prompts and cancels.
async fn converse(
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    launch: &Launch,
    firewall: Firewall,
    events: mpsc::UnboundedSender<AgentEvent>,
    mut commands: mpsc::UnboundedReceiver<Order>,
) -> Result<(), agent_client_protocol::Error> {
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let updates = events.clone();
    let permissions = events.clone();
    let reads = (events.clone(), firewall.clone());
    let writes = (events.clone(), firewall);
    let cwd = launch.cwd.clone();
    let resume = launch.resume.clone();
    let mcp_servers = inbox_server(&launch.env).into_iter().collect::<Vec<_>>();
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
                        kind: wire_name(&o.kind),
                    })
                    .collect();
                let title = request
                    .tool_call
                    .fields
                    .title
                    .clone()
                    .unwrap_or_else(|| "The agent asks for permission".into());
                let _ = permissions.send(AgentEvent::Permission {
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
                let (events, firewall) = &reads;
                let path = request.path.display().to_string();
                let real = match gate(events, firewall, "read", &request.path) {
                    Ok(real) => real,
                    Err(refusal) => return responder.respond_with_error(refusal),
                };
                match tokio::fs::read_to_string(&real).await {
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
                let (events, firewall) = &writes;
                let path = request.path.display().to_string();
                let real = match gate(events, firewall, "write", &request.path) {
                    Ok(real) => real,
                    Err(refusal) => return responder.respond_with_error(refusal),
                };
                let written = async {
                    if let Some(parent) = real.parent() {
                        tokio::fs::create_dir_all(parent).await?;
                    }
                    tokio::fs::write(&real, request.content.as_bytes()).await
                };
                match written.await {
                    Ok(()) => responder.respond(WriteTextFileResponse::new()),
                    Err(e) => responder.respond_with_error(fs_error(format!("{path}: {e}"))),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Agent>| {
            let opened = tokio::time::timeout(
                startup,
                open_session(&cx, cwd.clone(), resume, mcp_servers.clone()),
            )
            .await;
            let (session_id, resumed, agent_name) = match opened {
                Ok(Ok(opened)) => opened,
                Ok(Err(why)) => {
                    let _ = events.send(AgentEvent::StartFailed(why));
                    return Ok(());
                }
                Err(_) => {
                    let _ = events.send(AgentEvent::StartFailed(format!(
                        "the agent did not start its session within {}s",
                        startup.as_secs()
                    )));
                    return Ok(());
                }
            };
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
async fn open_session(
    cx: &ConnectionTo<Agent>,
    cwd: PathBuf,
    resume: Option<String>,
    mcp_servers: Vec<McpServer>,
) -> Result<(String, bool, Option<String>), String> {
    let init = cx
        .send_request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(
                    ClientCapabilities::new().fs(FileSystemCapabilities::new()
                        .read_text_file(true)
                        .write_text_file(true)),
                )
                .client_info(Implementation::new("crucible", env!("CARGO_PKG_VERSION"))),
        )
        .block_task()
        .await
        .map_err(|e| format!("the agent failed to initialize: {}", describe(&e)))?;
    let agent_name = init.agent_info.as_ref().map(|i| i.name.clone());
    match resume {
        Some(id) => {
            if !init.agent_capabilities.load_session {
                return Err("the agent cannot resume sessions (no loadSession support)".into());
            }
            cx.send_request(LoadSessionRequest::new(id.clone(), cwd).mcp_servers(mcp_servers))
                .block_task()
                .await
                .map_err(|e| {
                    format!("the agent could not resume session {id}: {}", describe(&e))
                })?;
            Ok((id, true, agent_name))
        }
        None => {
            let created = cx
                .send_request(NewSessionRequest::new(cwd).mcp_servers(mcp_servers))
                .block_task()
                .await
                .map_err(|e| format!("the agent could not open a session: {}", describe(&e)))?;
            Ok((created.session_id.0.to_string(), false, agent_name))
        }
    }
}

/// `cru mcp`, offered to every ACP agent as an MCP server named `crucible`, so an agent
/// that speaks MCP gets the inbox tools (notify, ask, approve) for its own session with
/// no setup. It carries the session's handle and socket from `env`. `None` if this
/// program's own path is unknown.
fn inbox_server(env: &[(String, String)]) -> Option<McpServer> {
    let program = std::env::current_exe().ok()?;
    let env = env
        .iter()
        .map(|(name, value)| EnvVariable::new(name.clone(), value.clone()))
        .collect();
    Some(McpServer::Stdio(
        McpServerStdio::new("crucible", program)
            .args(vec!["mcp".to_string()])
            .env(env),
    ))
}
