//! What crucible answers when the agent asks something of its client over ACP: permission
//! for a tool call (put to the human), reading and writing text files (through the
//! firewall and the rules), and running commands in terminals.

use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, TerminalOutputRequest, TerminalOutputResponse,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Error};
use tokio::sync::{mpsc, oneshot};

use super::wire::{fs_error, operation, wire_name};
use crate::agent::events::{AgentEvent, OptionKind, PermissionChoice, ask_gate};
use crate::agent::fs::{self, Firewall};
use crate::agent::terminal::Terminals;
use crate::driver::ssh::Remote;
use crate::rules::{Operation, OperationKind};

/// What the file handlers need: where to report, the firewall, and the remote host the
/// files live on when the agent runs over SSH.
pub(super) struct FileAccess {
    pub(super) events: mpsc::UnboundedSender<AgentEvent>,
    pub(super) firewall: Firewall,
    pub(super) remote: Option<Remote>,
}

/// Passes a file request through the firewall, recording it either way.
pub(super) fn gate(
    events: &mpsc::UnboundedSender<AgentEvent>,
    firewall: &Firewall,
    op: &'static str,
    path: &std::path::Path,
) -> Result<PathBuf, Error> {
    let checked = firewall.check(path);
    let _ = events.send(AgentEvent::File {
        op,
        path: path.display().to_string(),
        refused: checked.as_ref().err().map(ToString::to_string),
    });
    checked.map_err(fs_error)
}

impl FileAccess {
    /// Passes a file request through the firewall, then the rules (`kind`: the rules'
    /// operation kind); the real path, or the refusal as the agent gets it.
    async fn admit(
        &self,
        op: &'static str,
        kind: OperationKind,
        path: &std::path::Path,
    ) -> Result<PathBuf, Error> {
        let real = gate(&self.events, &self.firewall, op, path)?;
        let operation = Operation {
            kind,
            paths: vec![real.display().to_string()],
            tool: Some(format!("fs/{kind}")),
            ..Default::default()
        };
        ask_gate(&self.events, operation).await.map_err(fs_error)?;
        Ok(real)
    }
}

/// A permission request becomes a question to the human; the answer (or its absence, as a
/// cancel) goes back to the agent whenever it comes.
pub(super) fn ask_permission(
    events: &mpsc::UnboundedSender<AgentEvent>,
    request: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
) -> Result<(), Error> {
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
    let _ = events.send(AgentEvent::Permission {
        operation,
        title,
        tool_call_id: request.tool_call.tool_call_id.0.to_string(),
        options,
        reply,
    });
    // The human may take hours: wait off the dispatch loop.
    tokio::spawn(async move {
        let outcome = match answer.await {
            Ok(Some(id)) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
            _ => RequestPermissionOutcome::Cancelled,
        };
        let _ = responder.respond(RequestPermissionResponse::new(outcome));
    });
    Ok(())
}

/// Reads a text file (or the requested lines of it) once the firewall and the rules allow.
pub(super) async fn read_text_file(
    access: &FileAccess,
    request: ReadTextFileRequest,
    responder: Responder<ReadTextFileResponse>,
) -> Result<(), Error> {
    let path = request.path.display().to_string();
    let real = match access
        .admit("read", OperationKind::Read, &request.path)
        .await
    {
        Ok(real) => real,
        Err(refusal) => return responder.respond_with_error(refusal),
    };
    let read = match &access.remote {
        Some(remote) => remote
            .read(&real.to_string_lossy())
            .await
            .map_err(|e| e.to_string()),
        None => tokio::fs::read_to_string(&real)
            .await
            .map_err(|e| e.to_string()),
    };
    match read {
        Ok(text) => responder.respond(ReadTextFileResponse::new(fs::slice_lines(
            &text,
            request.line,
            request.limit,
        ))),
        Err(e) => responder.respond_with_error(fs_error(format!("{path}: {e}"))),
    }
}

/// Writes a text file, making its directories, once the firewall and the rules allow.
pub(super) async fn write_text_file(
    access: &FileAccess,
    request: WriteTextFileRequest,
    responder: Responder<WriteTextFileResponse>,
) -> Result<(), Error> {
    let path = request.path.display().to_string();
    let real = match access
        .admit("write", OperationKind::Edit, &request.path)
        .await
    {
        Ok(real) => real,
        Err(refusal) => return responder.respond_with_error(refusal),
    };
    let written = match &access.remote {
        Some(remote) => remote
            .write(&real.to_string_lossy(), &request.content)
            .await
            .map_err(|e| e.to_string()),
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
}

/// Starts a command in a new terminal and answers with its id.
pub(super) async fn create_terminal(
    terminals: &Terminals,
    request: CreateTerminalRequest,
    responder: Responder<CreateTerminalResponse>,
) -> Result<(), Error> {
    match terminals.create(request).await {
        Ok(id) => responder.respond(CreateTerminalResponse::new(id)),
        Err(why) => responder.respond_with_error(fs_error(why)),
    }
}

/// A terminal's output so far, whether it was cut, and its exit once it has one.
pub(super) fn terminal_output(
    terminals: &Terminals,
    request: TerminalOutputRequest,
    responder: Responder<TerminalOutputResponse>,
) -> Result<(), Error> {
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

/// Answers when the terminal's command exits.
pub(super) fn wait_for_terminal_exit(
    terminals: &Terminals,
    request: WaitForTerminalExitRequest,
    responder: Responder<WaitForTerminalExitResponse>,
    cx: &ConnectionTo<Agent>,
) -> Result<(), Error> {
    // The command may run for long: wait off the dispatch loop.
    let terminals = terminals.clone();
    cx.spawn(async move {
        match terminals.wait(&request.terminal_id.0).await {
            Ok(exit) => responder.respond(WaitForTerminalExitResponse::new(exit.status())),
            Err(why) => responder.respond_with_error(fs_error(why)),
        }
    })
}

/// Kills the terminal's command; the terminal stays until released.
pub(super) fn kill_terminal(
    terminals: &Terminals,
    request: KillTerminalRequest,
    responder: Responder<KillTerminalResponse>,
) -> Result<(), Error> {
    match terminals.kill(&request.terminal_id.0) {
        Ok(()) => responder.respond(KillTerminalResponse::new()),
        Err(why) => responder.respond_with_error(fs_error(why)),
    }
}

/// Releases the terminal, killing its command if it still runs.
pub(super) fn release_terminal(
    terminals: &Terminals,
    request: ReleaseTerminalRequest,
    responder: Responder<ReleaseTerminalResponse>,
) -> Result<(), Error> {
    match terminals.release(&request.terminal_id.0) {
        Ok(()) => responder.respond(ReleaseTerminalResponse::new()),
        Err(why) => responder.respond_with_error(fs_error(why)),
    }
}
