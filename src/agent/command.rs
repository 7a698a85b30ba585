//! Plain programs as agents (`type = "command"`): no protocol at all.
//!
//! Each prompt runs the profile's program once, in the session's folder, with the
//! prompt on its stdin and in `CRUCIBLE_PROMPT` (and the session's handle and socket in
//! the environment, so it can still `cru ask`). What it prints on stdout is the agent's
//! reply, streamed line by line as it comes; its stderr goes to the session's stderr
//! log. Its exit ends the turn: status 0 is a finished turn, anything else a failed one.
//! A cancel ends the running program (SIGTERM to its process group, SIGKILL after a
//! grace). Between prompts nothing runs, so such a session can always be reopened after
//! a daemon restart.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};

use super::error::AgentError;
use super::events::{AgentEvent, TurnFailure};
use super::handle::{AgentHandle, Launch, Order};
use super::process::{end_process, spawn};
use crate::protocol::{EntryKind, limits};

use crate::protocol::env::PROMPT as PROMPT_ENV;

/// Starts the host task that runs the program for each prompt. Fails if the program
/// cannot be found, so a session is never made for a typo.
pub(super) fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, AgentError> {
    let found = if launch.environment.remote().is_some() {
        // On another machine: its PATH decides.
        Some(PathBuf::from(&launch.profile.command))
    } else {
        find_program(&launch.profile.command, &launch.cwd)
    };
    let program = found.ok_or_else(|| AgentError::NotFound {
        profile: launch.profile_name.clone(),
        command: launch.profile.command.clone(),
    })?;
    let (commands, orders) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel();
    tokio::spawn(host(launch, program, events, orders, stop_rx));
    Ok(AgentHandle {
        // Between prompts the daemon itself hosts the agent.
        pid: std::process::id(),
        commands,
        stop: Some(stop),
    })
}

/// How one run of the program ended.
enum Run {
    /// The turn is over (finished, failed or cancelled); the host waits for the next.
    Turn,
    /// A stop came while it ran: the host ends with this status and code.
    Stopped(String, Option<i32>),
}

async fn host(
    launch: Launch,
    program: PathBuf,
    events: mpsc::UnboundedSender<AgentEvent>,
    mut orders: mpsc::UnboundedReceiver<Order>,
    mut stop: oneshot::Receiver<()>,
) {
    let session = launch
        .resume
        .clone()
        .unwrap_or_else(|| format!("command-{}", ulid::Ulid::new()));
    let _ = events.send(AgentEvent::Ready {
        acp_session_id: session.clone(),
        resumed: launch.resume.is_some(),
        agent_name: None,
    });
    let mut turn = 0u64;
    let (status, code) = loop {
        tokio::select! {
            order = orders.recv() => match order {
                // Every run starts with no memory, so a fresh start needs nothing more.
                Some(Order::Prompt { text, .. }) => {
                    turn += 1;
                    let message_id = format!("{session}-{turn}");
                    let run = run(&launch, &program, text, message_id, &events, &mut orders, &mut stop);
                    if let Run::Stopped(status, code) = run.await {
                        break (status, code);
                    }
                }
                // Nothing runs between prompts, so there is nothing to cancel.
                Some(Order::Cancel) => {}
                None => break ("ended (no program was running)".to_string(), None),
            },
            _ = &mut stop => break ("ended (no program was running)".to_string(), None),
        }
    };
    let _ = events.send(AgentEvent::Exited { status, code });
}

/// Runs the program for one prompt, streaming its stdout, until it exits, is cancelled
/// or the agent is stopped.
async fn run(
    launch: &Launch,
    program: &Path,
    prompt: String,
    message_id: String,
    events: &mpsc::UnboundedSender<AgentEvent>,
    orders: &mut mpsc::UnboundedReceiver<Order>,
    stop: &mut oneshot::Receiver<()>,
) -> Run {
    let mut child = match spawn(launch, program, &[(PROMPT_ENV, &prompt)]) {
        Ok(child) => child,
        Err(why) => {
            let _ = events.send(AgentEvent::TurnEnded(Err(TurnFailure::Failed(
                why.to_string(),
            ))));
            return Run::Turn;
        }
    };
    let pid = child.id();
    let _ = events.send(AgentEvent::Process(pid));
    if let Some(mut stdin) = child.stdin.take() {
        let preamble = launch
            .environment
            .preamble(&launch.vars(&[(PROMPT_ENV, &prompt)]))
            .unwrap_or_default();
        // A program that does not read its stdin must not block the turn.
        tokio::spawn(async move {
            let _ = stdin.write_all(&preamble).await;
            let _ = stdin.write_all(prompt.as_bytes()).await;
        });
    }
    let mut stdout = child.stdout.take().map(BufReader::new);
    let mut cancelled = false;
    let mut line = Vec::new();
    let ended = loop {
        tokio::select! {
            read = next_line(stdout.as_mut(), &mut line), if stdout.is_some() => match read {
                Some(text) => {
                    let _ = events.send(AgentEvent::Chunk {
                        kind: EntryKind::Message,
                        text,
                        message_id: Some(message_id.clone()),
                    });
                }
                None => stdout = None,
            },
            status = child.wait(), if stdout.is_none() => break status,
            order = orders.recv() => match order {
                Some(Order::Cancel) => {
                    cancelled = true;
                    end_process(&mut child, pid).await;
                }
                // The session queues prompts while a turn runs; one arriving here is a bug
                // upstream, and dropping it silently would lose it.
                Some(Order::Prompt { .. }) => {
                    tracing::warn!(agent = %launch.profile_name, "a prompt arrived while the program ran; it was dropped");
                }
                None => return stopped(&mut child, pid, launch, events).await,
            },
            _ = &mut *stop => return stopped(&mut child, pid, launch, events).await,
        }
    };
    let _ = events.send(AgentEvent::Process(None));
    let outcome = match ended {
        _ if cancelled => Ok("cancelled".to_string()),
        Ok(status) => match launch.environment.exit(status) {
            exit if exit.success() => Ok("end_turn".to_string()),
            exit => Err(TurnFailure::Failed(format!(
                "{} {}",
                launch.profile.command, exit.status
            ))),
        },
        Err(e) => Err(TurnFailure::Failed(format!(
            "{} could not be waited for: {e}",
            launch.profile.command
        ))),
    };
    let _ = events.send(AgentEvent::TurnEnded(outcome));
    Run::Turn
}

/// Ends a running program because the agent is being stopped.
async fn stopped(
    child: &mut Child,
    pid: Option<u32>,
    launch: &Launch,
    events: &mpsc::UnboundedSender<AgentEvent>,
) -> Run {
    end_process(child, pid).await;
    let _ = events.send(AgentEvent::Process(None));
    match child.wait().await {
        Ok(status) => {
            let exit = launch.environment.exit(status);
            Run::Stopped(exit.status, exit.code)
        }
        Err(e) => Run::Stopped(format!("could not be waited for: {e}"), None),
    }
}

/// The next line of output, newline included; `None` at the end. Bytes that are not
/// UTF-8 are shown as replacement characters rather than dropped. A line longer than
/// [`limits::AGENT_LINE_BYTES`] keeps its start and says how much of it was cut: the rest
/// is read and discarded as it arrives, never held.
async fn next_line(
    reader: Option<&mut BufReader<tokio::process::ChildStdout>>,
    line: &mut Vec<u8>,
) -> Option<String> {
    let reader = reader?;
    line.clear();
    let mut cut = 0usize;
    loop {
        let available = match reader.fill_buf().await {
            Ok(bytes) => bytes,
            Err(_) => return None,
        };
        if available.is_empty() {
            break;
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], true),
            None => (available, false),
        };
        let room = limits::AGENT_LINE_BYTES.saturating_sub(line.len());
        let keep = chunk.len().min(room);
        line.extend_from_slice(&chunk[..keep]);
        cut += chunk.len() - keep;
        let used = chunk.len() + usize::from(found);
        reader.consume(used);
        if found {
            if cut == 0 {
                line.push(b'\n');
            }
            break;
        }
    }
    if line.is_empty() && cut == 0 {
        return None;
    }
    let mut text = String::from_utf8_lossy(line).into_owned();
    if cut > 0 {
        // The newline, if the line had one, was in the part cut off.
        text.push_str(&crate::text::cut_marker(cut));
        text.push('\n');
    }
    Some(text)
}

/// Where `command` is: a path (relative to the session's folder) if it has a slash,
/// otherwise the first executable of that name on `PATH`.
fn find_program(command: &str, cwd: &Path) -> Option<PathBuf> {
    if command.contains('/') {
        let path = cwd.join(command);
        return crate::sys::is_executable(&path).then_some(path);
    }
    crate::sys::on_path(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        let dir = tempfile::tempdir().unwrap();
        assert!(find_program("sh", dir.path()).is_some());
        assert!(find_program("no-such-program-for-crucible", dir.path()).is_none());
        let script = dir.path().join("agent.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(
            find_program("./agent.sh", dir.path()).is_none(),
            "not executable"
        );
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(
            find_program("./agent.sh", dir.path()),
            Some(dir.path().join("./agent.sh"))
        );
    }
}
