//! The per-kiln daemon: owns the database, serves JSON-RPC on `<kiln>/.crucible/daemon.sock`,
//! runs the agents of the sessions it manages, and exits after a grace period once no
//! client is connected, no agent runs and no component (cron jobs, the webhook listener)
//! keeps it up. Its background parts are [`components`], fed the settings as they change
//! ([`settings`]).

mod accept;
mod caller;
mod components;
mod conn;
mod cron;
mod door;
mod error;
mod gone;
mod hooks_failing;
mod http;
mod lifecycle;
#[cfg(feature = "matrix")]
mod matrix;
mod matrix_share;
mod notify;
mod person;
mod services;
mod settings;
mod web;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;

use accept::Acceptor;
pub(crate) use caller::Caller;
use components::{Components, Task};
pub(crate) use conn::Socket;
use door::Starts;
pub(crate) use door::{Above, Answering, Door, Held, KilnReach, Lines};
pub(crate) use person::PersonParts;
use services::{Services, Shared};
pub(crate) use settings::{LiveSettings, SettingsWatch};

use crate::config::Config;
use crate::kiln::Kiln;
use crate::ledger::Ledger;
use crate::sessions::Sessions;

pub use error::DaemonError;
use error::io_err;
pub use lifecycle::PidLock;

/// How long requests must pause before the daemon hands freed memory back.
const TRIM_AFTER_QUIET: Duration = Duration::from_secs(2);

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

/// Starts the daemon's background parts, each from the door and the settings it starts
/// with: the webhook listener, cron, the web view, Matrix, the notifier, the approval
/// timeouts and, in team mode, the calls other daemons forward.
fn start_components(
    services: &Arc<Services>,
    shared: &Arc<Shared>,
    started_with: &Config,
) -> Result<Components, DaemonError> {
    let door = Door::new(services, shared);
    let mut components = Components::default();
    components.add(webhooks::Webhooks::start(&door, started_with)?);
    components.add(cron::Cron::start(&door, started_with)?);
    components.add(web::Web::start(&door, started_with)?);
    #[cfg(feature = "matrix")]
    components.add(matrix::Matrix::start(&door, started_with)?);
    // Messages that need a human: the notify command, and the approval timeout of
    // background sessions. Both sleep until a message arrives.
    components.add(notify::Notifier::start(&door, started_with)?);
    components.add(Task::spawn(
        "approvals",
        Arc::clone(&services.conversations).watch_approvals(),
    ));
    // Team mode: calls other daemons forward for the sessions this one runs.
    if let Some(mut commands) = services.ledger.team_commands() {
        let (services, shared) = (Arc::clone(services), Arc::clone(shared));
        components.add(Task::spawn("forwarding", async move {
            while let Some(command) = commands.recv().await {
                let (services, shared) = (Arc::clone(&services), Arc::clone(&shared));
                tokio::spawn(conn::run_forwarded(services, shared, command));
            }
        }));
    }
    Ok(components)
}

/// The daemon's two sockets: the owner's and the agents'.
struct Sockets {
    owners: Acceptor,
    agents: Acceptor,
    paths: [std::path::PathBuf; 2],
    /// Each socket file as bound (device and inode): a file of that name that is not this
    /// one means the daemon can no longer be reached.
    bound: [gone::Bound; 2],
}

impl Sockets {
    fn bind(kiln: &Kiln) -> Result<Self, DaemonError> {
        let paths = [kiln.socket_path(), kiln.agent_socket_path()];
        let owners = Acceptor::new(bind(&paths[0])?, "daemon.sock");
        let first = gone::Bound::of(&paths[0]);
        let agents = Acceptor::new(bind(&paths[1])?, "agent.sock");
        let bound = [first, gone::Bound::of(&paths[1])];
        Ok(Self {
            owners,
            agents,
            paths,
            bound,
        })
    }

    /// Stops listening and removes the socket files.
    fn close(self) {
        drop(self.owners);
        drop(self.agents);
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Records this daemon in the person's registry of kilns, so `cru kilns` and every view
/// across kilns find it. A registry that cannot be written costs only that.
fn register_kiln(kiln: &Kiln, config: &Config) {
    let name = crate::kilns::name_of(kiln, config.kiln.name.as_deref());
    let recorded = crate::kilns::Registry::for_user()
        .and_then(|registry| registry.record(kiln, &name, std::process::id()));
    if let Err(e) = recorded {
        tracing::warn!("cannot record this kiln in the person's registry: {e}");
    }
}

/// Runs the daemon until SIGTERM/SIGINT, `daemon.shutdown`, or the grace period after the
/// last client left.
pub async fn run(kiln: Kiln, config: Config) -> Result<(), DaemonError> {
    // A kiln deleted before its daemon started is not made again: a daemon there could
    // never be reached, and would run on for nobody.
    if !kiln.root().is_dir() {
        return Err(
            io_err(format!("cannot start in {}", kiln.root().display()))(
                std::io::ErrorKind::NotFound.into(),
            ),
        );
    }
    kiln.ensure_state_dir()
        .map_err(io_err("cannot create the state directory"))?;
    let pid_lock = PidLock::acquire(&kiln)?;
    crate::sys::private_umask();
    let fd_limit = raise_fd_limit();
    crate::sys::quiet_process_metrics();
    let live = LiveSettings::of_kiln(&kiln, config.clone());
    let settings = live.subscribe();
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
    let mut sockets = Sockets::bind(&kiln)?;
    // Watched from the moment they exist, before any session resumes: a kiln deleted while
    // its sessions resume is noticed as the daemon starts to serve.
    let kiln_watch = gone::KilnWatch::start(&kiln.state_dir(), &sockets.bound);
    // Recorded once it can be reached: the person's hub reaches a kiln when it is recorded.
    register_kiln(&kiln, &started_with);
    person::wake_the_hub();
    let sessions = Sessions::start(Arc::clone(&ledger)).await;
    sessions.follow_settings(live.subscribe());
    tracing::info!(pid = std::process::id(), socket = %sockets.paths[0].display(), db = ledger.store().url(), "daemon ready");
    crate::sys::notify_ready();

    let services = Arc::new(Services::new(
        Arc::clone(&ledger),
        Arc::clone(&sessions),
        Arc::clone(&live),
        fd_limit,
    ));
    let shared = Arc::new(Shared::default());
    // Once requests pause, the memory a burst freed goes back to the system.
    let quieted = Arc::clone(&shared);
    tokio::spawn(async move {
        crate::sys::trim_after_bursts(&quieted.activity, TRIM_AFTER_QUIET).await;
    });
    *services.components() = start_components(&services, &shared, &started_with)?;
    let _settings_watch = SettingsWatch::start(&kiln, Arc::clone(&live));
    let ends = Ends {
        kiln_watch,
        settings,
        started_with,
    };
    serve(&services, &shared, &mut sockets, ends).await?;

    services.components().stop();
    sockets.close();
    sessions.shutdown().await;
    ledger.close().await;
    drop(pid_lock);
    tracing::info!("daemon stopped");
    Ok(())
}

/// What the serving loop follows besides its clients: the kiln's state folder, and the
/// settings since the ones the daemon started with.
struct Ends {
    kiln_watch: gone::KilnWatch,
    settings: tokio::sync::watch::Receiver<Arc<Config>>,
    started_with: Arc<Config>,
}

/// Accepts clients and follows the settings until something ends the daemon.
async fn serve(
    services: &Arc<Services>,
    shared: &Arc<Shared>,
    sockets: &mut Sockets,
    ends: Ends,
) -> Result<(), DaemonError> {
    let live = &services.settings;
    let Ends {
        mut kiln_watch,
        mut settings,
        started_with,
    } = ends;
    let fenced = services.ledger.fenced();
    tokio::pin!(fenced);
    let mut clients = shared.clients.subscribe();
    let mut agents = services.sessions.running();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(io_err("cannot watch SIGTERM"))?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(io_err("cannot watch SIGINT"))?;
    let accepted = |socket: Socket, stream| {
        shared.clients.send_modify(|n| *n += 1);
        let (services, shared) = (Arc::clone(services), Arc::clone(shared));
        tokio::spawn(conn::serve(stream, services, shared, socket));
    };
    loop {
        // Idle: nobody connected, no agent running or waiting for memory to start, no
        // component keeping it up.
        let idle = *clients.borrow_and_update() == 0
            && *agents.borrow_and_update() == 0
            && !services.sessions.has_queued()
            && !services.components().keep_daemon_up();
        let grace = Duration::from_secs(settings.borrow().daemon.grace_period_secs);
        let grace_expiry = async {
            if idle {
                tokio::time::sleep(grace).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            stream = sockets.owners.accept() => accepted(Socket::Owner, stream),
            stream = sockets.agents.accept() => accepted(Socket::Agent, stream),
            why = kiln_watch.gone() => {
                tracing::warn!("{why}; nobody can reach this daemon any more, shutting down");
                break;
            }
            Ok(()) = settings.changed() => {
                let config = Arc::clone(&settings.borrow_and_update());
                let mut notes = services.components().reconfigure(&config);
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
    Ok(())
}
