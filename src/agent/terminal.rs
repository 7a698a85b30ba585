//! ACP's `terminal` client capability: agents that support it run commands through
//! crucible instead of on their own. Every command is judged by the session's rules
//! first (an `execute` operation with its command line), then runs in the session's
//! environment (its sandbox, remote machine or container), with its output kept for
//! `terminal/output` (the newest `output_byte_limit` bytes), killable, and released
//! (killed if still running) when the agent lets go of it.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{CreateTerminalRequest, TerminalExitStatus};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::error::AgentError;
use super::events::{AgentEvent, ask_gate};
use super::handle::Launch;
use crate::driver::Environment;
use crate::rules::{Operation, OperationKind};

/// The most output kept per terminal when the agent names no limit.
const DEFAULT_LIMIT: usize = 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub(super) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

impl Exit {
    pub(super) fn status(&self) -> TerminalExitStatus {
        let mut status = TerminalExitStatus::new();
        if let Some(code) = self.code {
            status = status.exit_code(u32::try_from(code).unwrap_or(u32::MAX));
        }
        if let Some(signal) = &self.signal {
            status = status.signal(signal.clone());
        }
        status
    }
}

struct Terminal {
    output: Mutex<(String, bool)>,
    exit: watch::Receiver<Option<Exit>>,
    kill: Mutex<Option<oneshot::Sender<()>>>,
}

/// The terminals of one agent connection.
#[derive(Clone)]
pub(super) struct Terminals {
    environment: Arc<Environment>,
    vars: Vec<(String, String)>,
    cwd: std::path::PathBuf,
    events: mpsc::UnboundedSender<AgentEvent>,
    open: Arc<Mutex<HashMap<String, Arc<Terminal>>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Terminals {
    pub(super) fn new(launch: &Launch, events: mpsc::UnboundedSender<AgentEvent>) -> Terminals {
        Terminals {
            environment: Arc::clone(&launch.environment),
            vars: launch.vars(&[]),
            cwd: launch.cwd.clone(),
            events,
            open: Arc::new(Mutex::new(HashMap::new())),
            next: Arc::new(std::sync::atomic::AtomicU64::new(1)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Terminal>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, id: &str) -> Result<Arc<Terminal>, AgentError> {
        self.lock()
            .get(id)
            .cloned()
            .ok_or_else(|| AgentError::NoTerminal { id: id.to_string() })
    }

    /// Judges and starts the command; its terminal id.
    pub(super) async fn create(
        &self,
        request: CreateTerminalRequest,
    ) -> Result<String, AgentError> {
        let line = std::iter::once(request.command.clone())
            .chain(request.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        let operation = Operation {
            kind: OperationKind::Execute,
            command: Some(line.clone()),
            paths: Vec::new(),
            tool: Some("terminal".into()),
        };
        ask_gate(&self.events, operation).await?;
        let mut vars = self.vars.clone();
        vars.extend(
            request
                .env
                .iter()
                .map(|v| (v.name.clone(), v.value.clone())),
        );
        let cwd = request.cwd.clone().unwrap_or_else(|| self.cwd.clone());
        let mut command = self
            .environment
            .command(Path::new(&request.command), &request.args, &vars, &cwd)
            .map_err(AgentError::Driver)?;
        let mut child = crate::sys::user_umask(&mut command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| AgentError::Run {
                command: request.command.clone(),
                source,
            })?;
        let limit = request
            .output_byte_limit
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(DEFAULT_LIMIT);
        let (exit_tx, exit) = watch::channel(None);
        let (kill, killed) = oneshot::channel();
        let terminal = Arc::new(Terminal {
            output: Mutex::new((String::new(), false)),
            exit,
            kill: Mutex::new(Some(kill)),
        });
        let id = format!(
            "term-{}",
            self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        self.lock().insert(id.clone(), Arc::clone(&terminal));
        let readers = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ];
        let mut reading = Vec::new();
        for reader in readers.into_iter().flatten() {
            let terminal = Arc::clone(&terminal);
            reading.push(tokio::spawn(collect(reader, terminal, limit)));
        }
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status.ok(),
                _ = killed => {
                    let _ = child.kill().await;
                    child.wait().await.ok()
                }
            };
            for task in reading {
                let _ = task.await;
            }
            use std::os::unix::process::ExitStatusExt;
            let exit = Exit {
                code: status.and_then(|s| s.code()),
                signal: status
                    .and_then(|s| s.signal())
                    .map(|s| format!("signal {s}")),
            };
            let _ = exit_tx.send(Some(exit));
        });
        Ok(id)
    }

    /// The output so far, whether older output was dropped, and the exit if it ended.
    pub(super) fn output(&self, id: &str) -> Result<(String, bool, Option<Exit>), AgentError> {
        let terminal = self.get(id)?;
        let (text, truncated) = terminal
            .output
            .lock()
            .map(|o| o.clone())
            .unwrap_or_default();
        let exit = terminal.exit.borrow().clone();
        Ok((text, truncated, exit))
    }

    pub(super) async fn wait(&self, id: &str) -> Result<Exit, AgentError> {
        let terminal = self.get(id)?;
        let mut exit = terminal.exit.clone();
        let ended = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| AgentError::TerminalLost)?;
        Ok(ended.clone().unwrap_or_default())
    }

    pub(super) fn kill(&self, id: &str) -> Result<(), AgentError> {
        let terminal = self.get(id)?;
        let kill = terminal.kill.lock().ok().and_then(|mut k| k.take());
        if let Some(kill) = kill {
            let _ = kill.send(());
        }
        Ok(())
    }

    pub(super) fn release(&self, id: &str) -> Result<(), AgentError> {
        self.kill(id)?;
        self.lock().remove(id);
        Ok(())
    }
}

/// Appends what `reader` gives to the terminal's output, keeping the newest `limit`
/// bytes (cut at a character boundary).
async fn collect(
    mut reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    terminal: Arc<Terminal>,
    limit: usize,
) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Ok(mut output) = terminal.output.lock() else {
            return;
        };
        output.0.push_str(&String::from_utf8_lossy(&buf[..n]));
        if output.0.len() > limit {
            let mut cut = output.0.len() - limit;
            while !output.0.is_char_boundary(cut) {
                cut += 1;
            }
            output.0.drain(..cut);
            output.1 = true;
        }
    }
}
