//! The per-kiln daemon: owns the database, serves JSON-RPC on `<kiln>/.crucible/daemon.sock`,
//! runs the agents of the sessions it manages, and exits after a grace period once no
//! client is connected and no agent runs.

mod conn;
mod lifecycle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::{Notify, watch};

use crate::config::Config;
use crate::kiln::Kiln;
use crate::sessions::Sessions;
use crate::workbench::Workbench;

pub use lifecycle::{PidLock, read_pid};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("a daemon is already running for this kiln (pid {0})")]
    AlreadyRunning(u32),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Workbench(#[from] crate::workbench::WorkbenchError),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

/// How long requests must pause before the daemon hands freed memory back.
const TRIM_AFTER_QUIET: Duration = Duration::from_secs(2);

/// What every connection shares.
pub(crate) struct Shared {
    pub wb: Arc<Workbench>,
    pub sessions: Arc<Sessions>,
    pub clients: watch::Sender<usize>,
    pub shutdown: Notify,
    pub started: Instant,
    /// Poked after every request; see [`trim_after_bursts`].
    pub activity: Notify,
}

/// Once requests have paused for [`TRIM_AFTER_QUIET`], returns the memory the burst
/// freed to the system. Armed only by activity: an idle daemon never wakes for this.
async fn trim_after_bursts(shared: Arc<Shared>) {
    loop {
        shared.activity.notified().await;
        while tokio::time::timeout(TRIM_AFTER_QUIET, shared.activity.notified())
            .await
            .is_ok()
        {}
        crate::sys::trim_heap();
    }
}

/// Runs the daemon until SIGTERM/SIGINT, `daemon.shutdown`, or the grace period after the
/// last client left.
pub async fn run(kiln: Kiln, config: Config) -> Result<(), DaemonError> {
    kiln.ensure_state_dir()
        .map_err(io_err("cannot create the state directory"))?;
    let pid_lock = PidLock::acquire(&kiln)?;
    let grace = Duration::from_secs(config.daemon.grace_period_secs);
    let wb = Workbench::open(kiln.clone(), config).await?;
    let sessions = Sessions::start(Arc::clone(&wb)).await;

    // We hold the pid lock, so any socket file left here belongs to a dead daemon.
    let socket = kiln.socket_path();
    match std::fs::remove_file(&socket) {
        Ok(()) => tracing::info!("removed a stale socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("cannot remove the stale socket")(e)),
    }
    let listener = UnixListener::bind(&socket)
        .map_err(io_err(format!("cannot listen on {}", socket.display())))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err("cannot restrict the socket to its owner"))?;
    }
    tracing::info!(pid = std::process::id(), socket = %socket.display(), db = wb.store().url(), "daemon ready");

    let shared = Arc::new(Shared {
        wb: Arc::clone(&wb),
        sessions: Arc::clone(&sessions),
        clients: watch::channel(0).0,
        shutdown: Notify::new(),
        started: Instant::now(),
        activity: Notify::new(),
    });
    tokio::spawn(trim_after_bursts(Arc::clone(&shared)));
    let mut clients = shared.clients.subscribe();
    let mut agents = sessions.running();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io_err("cannot watch SIGTERM"))?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(io_err("cannot watch SIGINT"))?;

    loop {
        // Idle: nobody connected and no agent running.
        let idle = *clients.borrow_and_update() == 0 && *agents.borrow_and_update() == 0;
        let grace_expiry = async {
            if idle {
                tokio::time::sleep(grace).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.clients.send_modify(|n| *n += 1);
                    tokio::spawn(conn::serve(stream, Arc::clone(&shared)));
                }
                Err(e) => tracing::warn!("accept failed: {e}"),
            },
            _ = clients.changed() => {}
            _ = agents.changed() => {}
            _ = grace_expiry => {
                tracing::info!(grace_secs = grace.as_secs(), "no clients left; shutting down");
                break;
            }
            _ = shared.shutdown.notified() => {
                tracing::info!("shutdown requested");
                break;
            }
            _ = sigterm.recv() => {
                tracing::info!("SIGTERM; shutting down");
                break;
            }
            _ = sigint.recv() => {
                tracing::info!("SIGINT; shutting down");
                break;
            }
        }
    }

    drop(listener);
    let _ = std::fs::remove_file(&socket);
    sessions.shutdown().await;
    wb.close().await;
    drop(pid_lock);
    tracing::info!("daemon stopped");
    Ok(())
}
