//! The ACP side of an agent process: the connection crucible holds as the agent's client
//! (initialize, open or load the session, prompts and cancels, permission and file
//! requests through the firewall), and how session updates become [`AgentEvent`]s.

use std::sync::atomic::AtomicBool;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, ReadTextFileRequest, ReleaseTerminalRequest,
    RequestPermissionRequest, SessionNotification, TerminalOutputRequest,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::{self, ConnectionTo};
use agent_client_protocol::{Agent, ByteStreams, Client, HandleDispatchFrom};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use super::events::AgentEvent;
use super::fs::Firewall;
use super::handle::{Launch, Order};
use super::start_failure;
use super::terminal::Terminals;

mod conversation;
mod handlers;
mod wire;

use conversation::{Conversation, Opening};
use handlers::FileAccess;
use wire::{fs_error, translate};

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
    let remote = launch.environment.remote().cloned();
    let files = Files {
        updates: events.clone(),
        permissions: events.clone(),
        reads: FileAccess {
            events: events.clone(),
            firewall: firewall.clone(),
            remote: remote.clone(),
        },
        writes: FileAccess {
            events: events.clone(),
            firewall,
            remote,
        },
    };
    let terminals = Terminals::new(launch, events.clone());
    let opening = Opening::of(launch);
    let client = Client.v1().name("crucible");
    with_terminals(with_files(client, files), &terminals)
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

/// Where the agent's session updates and permission requests are reported, and how its
/// file reads and writes are let through.
struct Files {
    updates: mpsc::UnboundedSender<AgentEvent>,
    permissions: mpsc::UnboundedSender<AgentEvent>,
    reads: FileAccess,
    writes: FileAccess,
}

/// The client's handlers for session updates, permission requests and file requests.
fn with_files(
    client: v1::Builder<Client, impl HandleDispatchFrom<Agent>>,
    files: Files,
) -> v1::Builder<Client, impl HandleDispatchFrom<Agent>> {
    let Files {
        updates,
        permissions,
        reads,
        writes,
    } = files;
    client
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                for event in translate(notification.update) {
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
}

/// The client's handlers for the terminal capability: each request goes to the
/// session's terminals.
fn with_terminals(
    client: v1::Builder<Client, impl HandleDispatchFrom<Agent>>,
    terminals: &Terminals,
) -> v1::Builder<Client, impl HandleDispatchFrom<Agent>> {
    let [create, output, wait, kill, release] = [(); 5].map(|()| terminals.clone());
    client
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, _cx| {
                handlers::create_terminal(&create, request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                handlers::terminal_output(&output, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx| {
                handlers::wait_for_terminal_exit(&wait, request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx| {
                handlers::kill_terminal(&kill, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                handlers::release_terminal(&release, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
}

/// Why a start failed, with what the agent said on stderr since it was started (from
/// `stderr_mark` on).
fn start_failure(launch: &Launch, stderr_mark: u64) -> impl Fn(String) -> String + use<> {
    let log = launch.stderr_log.clone();
    let program = launch.profile.command.clone();
    move |why: String| {
        let stderr = start_failure::stderr_since(&log, stderr_mark);
        start_failure::explain(&why, &program, &stderr)
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
