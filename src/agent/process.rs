//! An agent's process: started in the session's folder and its own process group, with
//! stdin and stdout piped and stderr appended to the session's log; supervised while its
//! ACP connection runs; ended (SIGTERM, then SIGKILL after a grace); and its exit told.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};

use super::acp;
use super::error::{AgentError, describe};
use super::events::AgentEvent;
use super::fs::Firewall;
use super::handle::{AgentHandle, Launch, Order};
use super::start_failure;

/// How long a stopped agent gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Starts an ACP agent's process and its supervisor. Fails only if the process cannot
/// be spawned; everything later arrives as events.
pub(super) fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, AgentError> {
    let firewall = match launch.environment.remote() {
        Some(remote) => Firewall::remote(Path::new(&remote.worktree)),
        None => Firewall::new(&launch.cwd, &launch.denied)
            .map_err(|source| AgentError::Folder {
                path: launch.cwd.clone(),
                source,
            })?
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
pub(super) fn spawn(
    launch: &Launch,
    program: &Path,
    extra: &[(&str, &str)],
) -> Result<Child, AgentError> {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.stderr_log)
        .map_err(|source| AgentError::StderrLog {
            path: launch.stderr_log.clone(),
            source,
        })?;
    let mut command = launch
        .environment
        .command(
            program,
            &launch.profile.args,
            &launch.vars(extra),
            &launch.cwd,
        )
        .map_err(|source| AgentError::Environment {
            profile: launch.profile_name.clone(),
            source,
        })?;
    crate::sys::user_umask(&mut command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| AgentError::Spawn {
            profile: launch.profile_name.clone(),
            command: launch.profile.command.clone(),
            source,
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
                            let why = format!("the agent's connection failed: {}", describe(&e));
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
        Ok(status) => {
            let exit = launch.environment.exit(status);
            (exit.status, exit.code)
        }
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
pub(super) async fn end_process(child: &mut Child, pid: Option<u32>) {
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
