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

mod acp;
pub mod command;
mod error;
mod fs;
pub mod internal;
pub mod start_failure;
mod terminal;
pub mod usage_limit;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};

use crate::config::{AgentKind, AgentProfile};
use crate::context::{Entry, Message};
use crate::driver::Environment;
use crate::protocol::{EntryKind, MsgType};
use crate::rules::Operation;

pub use error::AgentError;
pub use fs::Firewall;

/// How long a stopped agent gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Puts an operation to the approval gate and waits for its word: `Ok` to go ahead, or
/// why not (also when the session ends before it answers).
pub(crate) async fn ask_gate(
    events: &mpsc::UnboundedSender<AgentEvent>,
    operation: Operation,
) -> Result<(), AgentError> {
    let (reply, answer) = oneshot::channel();
    let _ = events.send(AgentEvent::Gate { operation, reply });
    answer
        .await
        .unwrap_or_else(|_| Err(AgentError::Refused("the session is ending".into())))
}

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
        /// What the tool does, for the rules (the agent runs it itself).
        operation: Operation,
    },
    ToolUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
    },
    /// The whole plan, one `[status] step` per line.
    Plan(String),
    /// The agent's own commands, `name — description` each.
    Skills(Vec<String>),
    /// Context use and cost (ACP `usage_update`).
    Usage(crate::protocol::Usage),
    /// The agent waits for permission; answer with an option id, or `None` to cancel.
    Permission {
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        /// What the agent asks to do, for the rules.
        operation: Operation,
        reply: oneshot::Sender<Option<String>>,
    },
    /// An operation crucible runs or serves for the agent (a file request, a terminal
    /// command) waits for the rules: `Ok` to go ahead, or why not.
    Gate {
        operation: Operation,
        reply: oneshot::Sender<Result<(), AgentError>>,
    },
    /// A file request the firewall let through (`refused` empty) or stopped.
    File {
        op: &'static str,
        path: String,
        refused: Option<String>,
    },
    /// The tokens the turn that is ending used, as the agent reported them with its
    /// end (before [`AgentEvent::TurnEnded`]).
    TurnTokens(TurnTokens),
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

/// The tokens one turn used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnTokens {
    pub input: u64,
    pub output: u64,
    /// Read from (or written to) the model's prompt cache.
    pub cached: u64,
}

impl TurnTokens {
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cached)
    }
}

/// What a driver hosted inside the daemon (the internal agent) reaches of its session:
/// the context stack, which is its conversation, and the inbox. Implemented by the
/// session; boxed futures keep it usable as a trait object.
pub trait SessionLink: Send + Sync {
    /// The stack's entries, bottom to top.
    fn context(&self) -> futures::future::BoxFuture<'_, Result<Vec<Entry>, AgentError>>;
    /// Pushes one message, stored before this returns.
    fn push(&self, message: Message) -> futures::future::BoxFuture<'_, Result<(), AgentError>>;
    /// The tool-error policy: the failed tool result on top replaced by `error`.
    fn recover_tool_error(
        &self,
        error: String,
    ) -> futures::future::BoxFuture<'_, Result<(), AgentError>>;
    /// Posts an inbox message; for a blocking type waits for the human's answer.
    fn ask(
        &self,
        msg_type: MsgType,
        title: String,
        body: Option<String>,
        options: Option<Vec<String>>,
    ) -> futures::future::BoxFuture<'_, Result<Option<String>, AgentError>>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionChoice {
    pub id: String,
    pub name: String,
    pub kind: OptionKind,
}

/// What choosing a permission option means, as ACP names it (`allow_once`,
/// `allow_always`, `reject_once`, `reject_always`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// A kind this crucible does not know: neither allows nor rejects.
    #[serde(other)]
    Unknown,
}

impl OptionKind {
    /// The kind from its wire name; a name not known is [`OptionKind::Unknown`].
    pub fn from_wire(name: &str) -> Self {
        serde_json::from_value(serde_json::Value::String(name.into())).unwrap_or(Self::Unknown)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowAlways => "allow_always",
            Self::RejectOnce => "reject_once",
            Self::RejectAlways => "reject_always",
            Self::Unknown => "unknown",
        }
    }

    /// Choosing it lets the operation run (once or always).
    pub fn allows(self) -> bool {
        matches!(self, Self::AllowOnce | Self::AllowAlways)
    }

    /// Choosing it refuses the operation (once or always).
    pub fn rejects(self) -> bool {
        matches!(self, Self::RejectOnce | Self::RejectAlways)
    }
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
    /// When the agent cannot reload it, open a new one instead of failing.
    pub fresh_if_unresumable: bool,
    /// The session's context and inbox, for the internal agent.
    pub link: Option<std::sync::Arc<dyn SessionLink>>,
    /// Where the agent's processes run (its driver's environment).
    pub environment: std::sync::Arc<Environment>,
    /// The internal agent's API key for `api_key_env`, when the process that asked for
    /// the session gave it (else the daemon's variable is read). Given to no process.
    pub api_key: Option<String>,
}

impl Launch {
    /// The session's variables over the profile's, plus `extra`.
    pub(crate) fn vars(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = self
            .profile
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        vars.extend(self.env.iter().cloned());
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars
    }
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
) -> Result<AgentHandle, AgentError> {
    match launch.profile.kind {
        AgentKind::Command => return command::launch(launch, events),
        AgentKind::Internal => return internal::launch(launch, events),
        AgentKind::Acp => {}
    }
    let firewall = match launch.environment.remote() {
        Some(remote) => Firewall::remote(Path::new(&remote.worktree)),
        None => Firewall::new(&launch.cwd, &launch.denied)
            .map_err(|e| AgentError::Start(format!("cannot use {}: {e}", launch.cwd.display())))?
            .seen_as(&launch.environment.agent_cwd(&launch.cwd)),
    };
    let stderr_mark = start_failure::stderr_mark(&launch.stderr_log);
    let mut child = spawn(&launch, Path::new(&launch.profile.command), &[])?;
    let pid = child.id().unwrap_or(0);
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel();
    tokio::spawn(supervise(
        child_io(&mut child),
        Spawned { child, stderr_mark },
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
fn spawn(launch: &Launch, program: &Path, extra: &[(&str, &str)]) -> Result<Child, AgentError> {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.stderr_log)
        .map_err(|e| {
            AgentError::Start(format!("cannot open {}: {e}", launch.stderr_log.display()))
        })?;
    let mut command = launch
        .environment
        .command(
            program,
            &launch.profile.args,
            &launch.vars(extra),
            &launch.cwd,
        )
        .map_err(|e| {
            AgentError::Start(format!("cannot start agent {:?}: {e}", launch.profile_name))
        })?;
    crate::sys::user_umask(&mut command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            AgentError::Start(format!(
                "cannot start agent {:?} ({}): {e}",
                launch.profile_name, launch.profile.command
            ))
        })
}

/// The agent's process as started, and where its stderr log stood before it started.
struct Spawned {
    child: Child,
    stderr_mark: u64,
}

type ChildIo = Option<(tokio::process::ChildStdin, tokio::process::ChildStdout)>;

fn child_io(child: &mut Child) -> ChildIo {
    Some((child.stdin.take()?, child.stdout.take()?))
}

/// Runs the connection until it ends or a stop is asked for, makes sure the process is
/// gone, then reports how it ended.
async fn supervise(
    io: ChildIo,
    spawned: Spawned,
    launch: Launch,
    firewall: Firewall,
    events: mpsc::UnboundedSender<AgentEvent>,
    commands: mpsc::UnboundedReceiver<Order>,
    stop: oneshot::Receiver<()>,
) {
    let Spawned {
        mut child,
        stderr_mark,
    } = spawned;
    let pid = child.id();
    let reported = AtomicBool::new(false);
    let exited_early = match io {
        None => {
            let _ = events.send(AgentEvent::StartFailed(
                "the agent has no stdio pipes".into(),
            ));
            false
        }
        Some((stdin, stdout)) => {
            let connection = acp::converse(
                (stdin, stdout),
                &launch,
                stderr_mark,
                firewall,
                events.clone(),
                commands,
                &reported,
            );
            tokio::pin!(connection);
            tokio::select! {
                outcome = &mut connection => match outcome {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::info!(agent = %launch.profile_name, "agent connection ended: {e}");
                        if reported.load(Ordering::Relaxed) {
                            false
                        } else if tokio::time::timeout(EXIT_AFTER_CLOSE, child.wait()).await.is_ok() {
                            // The connection broke because the agent ended: its exit says why.
                            true
                        } else {
                            let why = format!("the agent's connection failed: {}", acp::describe(&e));
                            start_failed(&events, &launch, stderr_mark, &why);
                            false
                        }
                    }
                },
                _ = stop => false,
                _ = child.wait() => {
                    // The connection sees the end of the agent's output next: a start
                    // that fails says why (with the agent's stderr) before it exits.
                    let _ = tokio::time::timeout(CONNECTION_DRAIN, &mut connection).await;
                    true
                }
            }
        }
    };
    if !exited_early {
        end_process(&mut child, pid).await;
    }
    let (status, code) = match child.wait().await {
        Ok(status) => (
            launch
                .environment
                .explain_exit(status.code())
                .unwrap_or_else(|| describe_exit(status)),
            status.code(),
        ),
        Err(e) => (format!("could not be waited for: {e}"), None),
    };
    if exited_early && !reported.load(Ordering::Relaxed) {
        // An agent that ended before its start was reported (the connection did not see
        // it in time) fails its start with its own exit and stderr; a session past its
        // start ignores this.
        start_failed(
            &events,
            &launch,
            stderr_mark,
            &format!("the agent {status}"),
        );
    }
    let _ = events.send(AgentEvent::Exited { status, code });
}

/// Reports a failed start: `why`, what the agent wrote to stderr since `stderr_mark`,
/// and how a known agent signs in.
fn start_failed(
    events: &mpsc::UnboundedSender<AgentEvent>,
    launch: &Launch,
    stderr_mark: u64,
    why: &str,
) {
    let stderr = start_failure::stderr_since(&launch.stderr_log, stderr_mark);
    let _ = events.send(AgentEvent::StartFailed(start_failure::explain(
        why,
        &launch.profile.command,
        &stderr,
    )));
}

/// How long an agent whose connection broke during its start may take to exit, so that
/// its exit (not the broken pipe) says why it failed.
const EXIT_AFTER_CLOSE: Duration = Duration::from_secs(1);

/// How long the connection may take to see the end of an agent that exited.
const CONNECTION_DRAIN: Duration = Duration::from_secs(5);

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

/// The name of a signal that ends a process.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => return None,
    })
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => "exited with code 0".into(),
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => match signal_name(signal) {
            Some(name) => format!("was killed by signal {signal} ({name})"),
            None => format!("was killed by signal {signal}"),
        },
        (None, None) => format!("ended ({status})"),
    }
}
