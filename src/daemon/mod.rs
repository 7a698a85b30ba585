//! The per-kiln daemon: owns the database, serves JSON-RPC on `<kiln>/.crucible/daemon.sock`,
//! runs the agents of the sessions it manages, and exits after a grace period once no
//! client is connected, no agent runs and no component (cron jobs, the webhook listener)
//! keeps it up. Its background parts are [`components`], fed the settings as they change
//! ([`settings`]).

mod accept;
mod caller;
mod components;
mod conn;
mod door;
mod gone;
mod hooks_failing;
mod http;
mod lifecycle;
#[cfg(feature = "matrix")]
mod matrix;
mod notify;
mod settings;
mod web;
mod webhooks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::{Notify, watch};

use accept::Acceptor;
use components::{Components, Cron, Task};
pub(crate) use conn::Socket;
use settings::{LiveSettings, SettingsWatch};

use crate::config::Config;
use crate::kiln::Kiln;
use crate::ledger::Ledger;
use crate::sessions::Sessions;

pub use lifecycle::PidLock;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The pid is `None` while the other daemon is starting (it holds the lock and has
    /// not written its pid yet).
    #[error("a daemon is already running for this kiln ({})", match .0 {
        Some(pid) => format!("pid {pid}"),
        None => "it is starting".to_string(),
    })]
    AlreadyRunning(Option<u32>),
    #[error(
        "the kiln's pid file is still locked, but daemon {0} that wrote it is gone: a process it started may hold the file open"
    )]
    LockOutlivedDaemon(u32),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

/// How long requests must pause before the daemon hands freed memory back.
const TRIM_AFTER_QUIET: Duration = Duration::from_secs(2);

/// What every connection shares.
pub(crate) struct Shared {
    pub ledger: Arc<Ledger>,
    pub sessions: Arc<Sessions>,
    pub clients: watch::Sender<usize>,
    pub shutdown: Notify,
    pub started: Instant,
    /// Poked after every request; see [`trim_after_bursts`].
    pub activity: Notify,
    /// The settings in use, followed live.
    pub settings: Arc<LiveSettings>,
    /// The Matrix channel's state, when it runs.
    pub matrix: Arc<std::sync::Mutex<Option<crate::protocol::MatrixStatus>>>,
    /// The web view's paired browsers and address.
    pub web: Arc<web::WebState>,
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

/// Binds a socket, owner-only. We hold the pid lock, so any socket file already there
/// belongs to a dead daemon.
fn bind(path: &std::path::Path) -> Result<UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!(socket = %path.display(), "removed a stale socket"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("cannot remove the stale socket")(e)),
    }
    let listener =
        UnixListener::bind(path).map_err(io_err(format!("cannot listen on {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("cannot restrict the socket to its owner"))?;
    Ok(listener)
}

/// Raises the descriptor limit as far as allowed; the limit, if it could be read.
fn raise_fd_limit() -> Option<u64> {
    match crate::sys::raise_fd_limit() {
        Ok(limit) => {
            tracing::info!(limit, "descriptor limit");
            Some(limit)
        }
        Err(e) => {
            tracing::warn!("cannot read the descriptor limit: {e}");
            None
        }
    }
}

/// Starts the daemon's background parts: the webhook listener, cron, the web view, the notifier, the
/// approval timeouts and, in team mode, the calls other daemons forward.
fn start_components(
    shared: &Arc<Shared>,
    live: &Arc<LiveSettings>,
    started_with: &Arc<Config>,
    fd_limit: Option<u64>,
) -> Result<Components, DaemonError> {
    let mut components = Components::default();
    let (ledger, sessions) = (&shared.ledger, &shared.sessions);
    components.add(webhooks::Webhooks::start(
        door::Door::new(shared),
        live.subscribe(),
        started_with,
        fd_limit,
    )?);
    components.add(Cron::start(
        Arc::clone(sessions),
        door::Door::new(shared),
        started_with,
    ));
    components.add(web::Web::start(Arc::clone(shared), started_with, fd_limit));
    #[cfg(feature = "matrix")]
    components.add(matrix::Matrix::start(
        door::Door::new(shared),
        started_with,
        Arc::clone(&shared.matrix),
    ));
    // Messages that need a human: the notify command, and the approval timeout of
    // background sessions. Both sleep until a message arrives.
    components.add(notify::Notifier::start(
        door::Door::new(shared),
        started_with,
    ));
    components.add(Task::spawn(
        "approvals",
        Arc::clone(sessions).watch_approvals(),
    ));
    // Team mode: calls other daemons forward for the sessions this one runs.
    if let Some(mut commands) = ledger.team_commands() {
        let shared = Arc::clone(shared);
        components.add(Task::spawn("forwarding", async move {
            while let Some(command) = commands.recv().await {
                tokio::spawn(conn::run_forwarded(Arc::clone(&shared), command));
            }
        }));
    }
    Ok(components)
}

/// Runs the daemon until SIGTERM/SIGINT, `daemon.shutdown`, or the grace period after the
/// last client left.
pub async fn run(kiln: Kiln, config: Config) -> Result<(), DaemonError> {
    kiln.ensure_state_dir()
        .map_err(io_err("cannot create the state directory"))?;
    let pid_lock = PidLock::acquire(&kiln)?;
    crate::sys::private_umask();
    let fd_limit = raise_fd_limit();
    crate::sys::quiet_process_metrics();
    let live = LiveSettings::of_kiln(&kiln, config.clone());
    let mut settings = live.subscribe();
    let started_with = Arc::clone(&settings.borrow());
    let ledger = Ledger::open(kiln.clone(), config).await?;
    // Once the engine has opened, so what it made is covered too. (It marks its log
    // folder 0750 whenever it starts a log segment; the 0700 state directory keeps others
    // out.)
    if let Err(e) = kiln.secure_state_dir() {
        tracing::warn!("cannot make the state directory owner-only: {e}");
    }
    // Both sockets are bound before any session resumes: a contained agent's sandbox or
    // container mounts the agent socket as it starts, and an agent may call in at once
    // (its connection waits in the socket's backlog until the loop below accepts it).
    let socket = kiln.socket_path();
    let agent_socket = kiln.agent_socket_path();
    let mut owners = Acceptor::new(bind(&socket)?, "daemon.sock");
    let mut agents_door = Acceptor::new(bind(&agent_socket)?, "agent.sock");
    let sessions = Sessions::start(Arc::clone(&ledger)).await;
    sessions.follow_settings(live.subscribe());

    let mut kiln_watch =
        gone::KilnWatch::start(&kiln.state_dir(), &[socket.clone(), agent_socket.clone()]);
    tracing::info!(pid = std::process::id(), socket = %socket.display(), db = ledger.store().url(), "daemon ready");

    let shared = Arc::new(Shared {
        ledger: Arc::clone(&ledger),
        sessions: Arc::clone(&sessions),
        clients: watch::channel(0).0,
        shutdown: Notify::new(),
        started: Instant::now(),
        activity: Notify::new(),
        settings: Arc::clone(&live),
        matrix: Arc::default(),
        web: web::WebState::new(&kiln),
    });
    tokio::spawn(trim_after_bursts(Arc::clone(&shared)));
    let mut components = start_components(&shared, &live, &started_with, fd_limit)?;
    let _settings_watch = SettingsWatch::start(&kiln, Arc::clone(&live));
    let fenced = ledger.fenced();
    tokio::pin!(fenced);
    let mut clients = shared.clients.subscribe();
    let mut agents = sessions.running();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io_err("cannot watch SIGTERM"))?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(io_err("cannot watch SIGINT"))?;

    loop {
        // Idle: nobody connected, no agent running, no component keeping it up.
        let idle = *clients.borrow_and_update() == 0
            && *agents.borrow_and_update() == 0
            && !components.keep_daemon_up();
        let grace = Duration::from_secs(settings.borrow().daemon.grace_period_secs);
        let grace_expiry = async {
            if idle {
                tokio::time::sleep(grace).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            stream = owners.accept() => {
                shared.clients.send_modify(|n| *n += 1);
                tokio::spawn(conn::serve(stream, Arc::clone(&shared), Socket::Owner));
            }
            stream = agents_door.accept() => {
                shared.clients.send_modify(|n| *n += 1);
                tokio::spawn(conn::serve(stream, Arc::clone(&shared), Socket::Agent));
            }
            why = kiln_watch.gone() => {
                tracing::warn!("{why}; nobody can reach this daemon any more, shutting down");
                break;
            }
            Ok(()) = settings.changed() => {
                let config = Arc::clone(&settings.borrow_and_update());
                let mut notes = components.reconfigure(&config);
                notes.extend(settings::restart_needed(&started_with, &config));
                live.set_pending(notes);
            }
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
            why = &mut fenced => {
                tracing::error!("{why}; stopping this daemon's agents, which are no longer its own");
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

    components.stop();
    drop(owners);
    drop(agents_door);
    for path in [&socket, &agent_socket] {
        let _ = std::fs::remove_file(path);
    }
    sessions.shutdown().await;
    ledger.close().await;
    drop(pid_lock);
    tracing::info!("daemon stopped");
    Ok(())
}
