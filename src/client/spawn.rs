//! Auto-start: a client that finds no daemon starts one, made race-free with a start-up lock:
//!
//! 1. Connect and handshake. Done if that works.
//! 2. A daemon of another protocol version is stopped (SIGTERM via its pid file).
//! 3. Take `daemon.start.lock`. Whoever holds it is the only client starting a daemon;
//!    the others wait for it and then find the daemon running (step 4).
//! 4. Under the lock, try to connect again; if a daemon named in the pid file is alive but
//!    does not answer (it is idling out, or starting), wait for it to answer or go. If still
//!    nobody answers, remove a socket file that refuses connections (stale), start
//!    `cru daemon run` detached, and wait until it answers.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Client, ClientError, Result};
use crate::kiln::Kiln;
use crate::sys;

/// How long a new daemon may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The `cru` executable to start the daemon with; this executable when `None`
    /// (overridable with `CRU_DAEMON_EXE`).
    pub exe: Option<PathBuf>,
}

impl StartOptions {
    pub(super) fn exe(&self) -> std::io::Result<PathBuf> {
        if let Some(exe) = &self.exe {
            return Ok(exe.clone());
        }
        if let Some(exe) = std::env::var_os("CRU_DAEMON_EXE") {
            return Ok(exe.into());
        }
        std::env::current_exe()
    }
}

/// Connects to the kiln's daemon, starting one if none answers.
pub async fn connect_or_start(kiln: &Kiln, opts: &StartOptions) -> Result<Client> {
    match Client::connect(kiln).await {
        Ok(client) => return Ok(client),
        Err(ClientError::VersionMismatch { daemon, client }) => {
            tracing::info!(
                daemon,
                client,
                "restarting a daemon of another protocol version"
            );
            stop_daemon(kiln).await?;
        }
        // Stopped by a signal, it is not hung: starting another or stopping it would end
        // every agent's work.
        Err(e @ ClientError::Suspended { .. }) => return Err(e),
        // Another user's daemon: starting one here would fail on its files, less clearly.
        Err(e @ ClientError::Connect { .. }) if e.is_not_ours() => return Err(e),
        Err(ClientError::Timeout(t)) => {
            let pid = kiln.read_pid();
            // A suspended daemon is not hung: stopping it would end every agent's work.
            if let Some(pid) = pid.filter(|&p| sys::is_suspended(p)) {
                return Err(ClientError::Suspended { pid, sent: false });
            }
            let pid = pid.map_or("?".into(), |p| p.to_string());
            return Err(ClientError::Start(format!(
                "a daemon (pid {pid}) holds the socket but did not answer within {t:?}; stop it with `cru daemon stop` or kill it"
            )));
        }
        Err(_) => {}
    }
    kiln.ensure_state_dir()
        .map_err(|e| ClientError::Start(e.to_string()))?;
    let lock = start_lock(&kiln.start_lock_path()).await?;

    // Someone may have started it while we waited for the lock.
    if let Ok(client) = Client::connect(kiln).await {
        return Ok(client);
    }
    // A daemon that holds the kiln but does not answer is on its way out (its grace
    // period ended) or on its way in (started by hand): wait for it to answer or go.
    if let Some(client) = wait_for_holder(kiln).await {
        return Ok(client);
    }
    remove_stale_socket(kiln);
    let child = spawn_daemon(kiln, opts)?;
    let stderr = daemon_stderr(kiln);
    let result = until_answered(child, "the daemon", &stderr, || Client::connect(kiln)).await;
    drop(lock);
    result
}

/// Takes the start-up lock at `path`, waiting for whoever holds it: the one starting a
/// process of that place. Held while the returned file lives.
pub(super) async fn start_lock(path: &std::path::Path) -> Result<std::fs::File> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| ClientError::Start(format!("cannot open {}: {e}", path.display())))?;
    tokio::task::spawn_blocking(move || sys::lock(&lock).map(|()| lock))
        .await
        .map_err(|e| ClientError::Start(e.to_string()))?
        .map_err(|e| {
            ClientError::Start(format!(
                "cannot take the start-up lock {}: {e}",
                path.display()
            ))
        })
}

/// How long a daemon that holds the kiln without answering may take to answer or go.
const HOLDER_WAIT: Duration = Duration::from_secs(15);

/// Waits while a daemon holds the kiln (its pid file's lock) and does not answer: a
/// client if it comes to answer, `None` once it is gone (or never was, or the wait ran
/// out).
async fn wait_for_holder(kiln: &Kiln) -> Option<Client> {
    let deadline = Instant::now() + HOLDER_WAIT;
    loop {
        let file = std::fs::File::open(kiln.pid_path()).ok()?;
        // Taken: nobody holds the kiln (dropping the file lets it go again).
        if sys::try_lock(&file).unwrap_or(true) {
            return None;
        }
        drop(file);
        if let Ok(client) = Client::connect(kiln).await {
            return Some(client);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A socket nobody listens on is left over from a crash: connecting is refused.
fn remove_stale_socket(kiln: &Kiln) {
    let path = kiln.socket_path();
    if let Err(e) = std::os::unix::net::UnixStream::connect(&path)
        && e.kind() == std::io::ErrorKind::ConnectionRefused
    {
        tracing::info!("removing stale socket {}", path.display());
        let _ = std::fs::remove_file(&path);
    }
}

/// Waits for `what`, just started as `child`, to answer (`connect`), until it exits or
/// [`START_TIMEOUT`] passes; the child is reaped when it exits, without waiting here.
pub(super) async fn until_answered<F, Fut>(
    mut child: tokio::process::Child,
    what: &str,
    stderr: &std::path::Path,
    mut connect: F,
) -> Result<Client>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Client>>,
{
    let deadline = Instant::now() + START_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    let result = loop {
        match connect().await {
            Ok(client) => break Ok(client),
            Err(e @ ClientError::VersionMismatch { .. }) => break Err(e),
            Err(_) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            break Err(ClientError::Start(format!(
                "{what} exited ({status}) before answering: {}",
                tail_of(stderr)
            )));
        }
        if Instant::now() >= deadline {
            break Err(ClientError::Start(format!(
                "{what} did not answer within {START_TIMEOUT:?}: {}",
                tail_of(stderr)
            )));
        }
        tokio::time::sleep(pause).await;
        // A refused connect costs one system call; answering soon after the process is
        // ready is what the user waits for.
        pause = (pause * 2).min(Duration::from_millis(10));
    };
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    result
}

/// The last lines of a started process's standard error, on one line.
pub(super) fn tail_of(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

fn daemon_stderr(kiln: &Kiln) -> PathBuf {
    kiln.log_dir().join("daemon.stderr")
}

fn spawn_daemon(kiln: &Kiln, opts: &StartOptions) -> Result<tokio::process::Child> {
    let exe = opts
        .exe()
        .map_err(|e| ClientError::Start(format!("cannot find the cru executable: {e}")))?;
    std::fs::create_dir_all(kiln.log_dir()).map_err(|e| ClientError::Start(e.to_string()))?;
    let stderr = std::fs::File::create(daemon_stderr(kiln))
        .map_err(|e| ClientError::Start(e.to_string()))?;
    tokio::process::Command::new(&exe)
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Its own process group: a Ctrl-C in the terminal that started it does not stop it.
        .process_group(0)
        .spawn()
        .map_err(|e| ClientError::Start(format!("cannot run {}: {e}", exe.display())))
}

/// Stops the kiln's daemon with SIGTERM and waits for it to go. Ok if none runs.
pub async fn stop_daemon(kiln: &Kiln) -> Result<bool> {
    let Some(pid) = kiln.read_pid() else {
        return Ok(false);
    };
    if !sys::pid_alive(pid) {
        return Ok(false);
    }
    sys::terminate(pid)
        .map_err(|e| ClientError::Stop(format!("cannot signal daemon {pid}: {e}")))?;
    // A stopped daemon acts on the signal only once continued: asked to stop, it is.
    if sys::is_suspended(pid) {
        tracing::info!(pid, "continuing the stopped daemon so that it can stop");
        let _ = sys::resume(pid);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while sys::pid_alive(pid) && kiln.pid_path().exists() {
        if Instant::now() >= deadline {
            return Err(ClientError::Stop(format!(
                "daemon {pid} did not stop within 10 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(true)
}
