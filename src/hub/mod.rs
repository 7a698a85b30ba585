//! The hub: one process per person that reaches every registered kiln's daemon and
//! serves them as one, over a socket beside the kiln registry that speaks the daemons'
//! protocol. A call naming a session or message goes to the kiln that holds it, a
//! listing goes to every kiln and the answers are merged (each row named with its kiln),
//! and every kiln's events reach its subscribers named with their kiln. The kiln daemons
//! stay the only store of their state: the hub keeps no copy, only which kiln holds
//! which id. It starts on demand (as a kiln's daemon does), stops a while after its last
//! client leaves, and lives through a kiln daemon's crash or restart: the kiln is shown
//! lost, reached again with backoff, and the other kilns keep working meanwhile.
//!
//! The person's own `[web]` and `[channels.matrix]` are served here, once for every
//! kiln ([`own`]): one page at one address, one bot. While they run, the hub stays up.

mod answer;
mod conn;
mod door;
mod members;
mod own;
mod road;
mod route;

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::{Notify, watch};

use crate::client::HubPlace;
use crate::daemon::PersonParts;
use crate::kilns::{Registry, RegistryError};
use crate::protocol::{ComponentState, ComponentStatus, DaemonStatus, PROTOCOL_VERSION};
use members::{Members, Reach};

/// What the hub answers as its kiln in the handshake and its status: it is every kiln.
pub const HUB_KILN: &str = "(every kiln, through the hub)";

/// How long the hub stays up after its last client left.
const IDLE_GRACE: Duration = Duration::from_secs(10);
/// How long calls must pause before the hub hands freed memory back.
const TRIM_AFTER_QUIET: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("a hub already runs (pid {0}); `cru hub stop` stops it")]
    AlreadyRunning(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HubError {
    let what = what.into();
    move |source| HubError::Io { what, source }
}

/// The running hub.
pub(crate) struct Hub {
    members: Arc<Members>,
    shutdown: Notify,
    started: Instant,
    clients: watch::Sender<usize>,
    /// The person's web view and Matrix bot, once started.
    parts: Mutex<Option<PersonParts>>,
    /// Told of every call: once they pause, the memory merging answers took goes back.
    activity: Notify,
}

/// Counts as a client of the hub while held (an open page).
pub(super) struct Counted(Arc<Hub>);

impl Counted {
    fn new(hub: &Arc<Hub>) -> Self {
        hub.clients.send_modify(|n| *n += 1);
        Self(Arc::clone(hub))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.clients.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Hub {
    /// Works on the person's web view and bot, if they were started.
    fn with_parts<T>(&self, work: impl FnOnce(&mut PersonParts) -> T) -> Option<T> {
        self.parts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .map(work)
    }

    fn status(&self) -> DaemonStatus {
        let mut components: Vec<ComponentStatus> = self
            .members
            .all()
            .iter()
            .map(|member| {
                let entry = member.entry();
                let reach = member.reach();
                ComponentStatus {
                    name: format!("kiln {}", entry.name),
                    state: match reach {
                        Reach::Connected => ComponentState::On,
                        Reach::Resting => ComponentState::Off,
                        Reach::Lost(_) => ComponentState::Failing,
                    },
                    detail: match member.host() {
                        Some(host) => {
                            format!("{} on {host} ({})", entry.path.display(), reach.word())
                        }
                        None => format!("{} ({})", entry.path.display(), reach.word()),
                    },
                    error: match reach {
                        Reach::Lost(why) => Some(why),
                        _ => None,
                    },
                }
            })
            .collect();
        components.extend(
            self.with_parts(|parts| parts.statuses())
                .unwrap_or_default(),
        );
        let matrix = self
            .with_parts(|parts| parts.matrix())
            .flatten()
            .and_then(|share| share.status());
        DaemonStatus {
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: PROTOCOL_VERSION,
            kiln: HUB_KILN.into(),
            database: String::new(),
            uptime_secs: self.started.elapsed().as_secs(),
            clients: *self.clients.borrow(),
            sessions: 0,
            agents: 0,
            unread: 0,
            store_kind: "hub".into(),
            store: None,
            instance: None,
            daemons: Vec::new(),
            settings_error: None,
            settings_pending: Vec::new(),
            writes_refused: None,
            matrix,
            components,
        }
    }
}

/// The hub's pid file, locked while it runs: one hub per person.
struct PidFile {
    _file: File,
    path: std::path::PathBuf,
}

impl PidFile {
    fn acquire(place: &HubPlace) -> Result<Self, HubError> {
        let path = place.pid_path();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(format!("cannot open {}", path.display())))?;
        if !crate::sys::try_lock(&file).map_err(io("cannot lock the hub's pid file"))? {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(HubError::AlreadyRunning(holder.trim().to_string()));
        }
        file.set_len(0).map_err(io("cannot write the pid file"))?;
        writeln!(file, "{}", std::process::id()).map_err(io("cannot write the pid file"))?;
        Ok(Self { _file: file, path })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs the person's hub until `daemon.shutdown`, SIGTERM/SIGINT, or a while after its
/// last client left.
pub async fn run() -> Result<(), HubError> {
    let registry = Registry::for_user()?;
    let place = HubPlace::beside(&registry);
    place
        .ensure_dir()
        .map_err(io(format!("cannot make {}", place.dir().display())))?;
    crate::sys::private_umask();
    let _log = crate::logging::to_file_and_journal(&place.log_dir(), "hub.log")
        .map_err(io("cannot open the hub's log"))?;
    let pid = PidFile::acquire(&place)?;
    let socket = place.socket_path();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(io(format!("cannot listen on {}", socket.display())))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io("cannot make the hub's socket owner-only"))?;
    let members = Members::new(registry);
    members.refresh();
    // Kilns on other machines, from the person's settings (a folder of the hub's own has
    // no settings file: only the person's are read).
    match crate::config::Config::load_person() {
        Ok(config) => members.add_remotes(&config.hub.remotes),
        Err(e) => tracing::warn!("the person's settings do not load, no remote kilns: {e}"),
    }
    let _watcher = watch_registry(&members)
        .inspect_err(|e| tracing::warn!("the registry is not watched: {e}"))
        .ok();
    let hub = Arc::new(Hub {
        members,
        shutdown: Notify::new(),
        started: Instant::now(),
        clients: watch::channel(0).0,
        parts: Mutex::default(),
        activity: Notify::new(),
    });
    let quieted = Arc::clone(&hub);
    let trimming = tokio::spawn(async move {
        crate::sys::trim_after_bursts(&quieted.activity, TRIM_AFTER_QUIET).await;
    });
    let _settings = own::start(&hub, &place);
    tracing::info!(socket = %socket.display(), "the hub listens");
    crate::sys::notify_ready();
    serve(&hub, listener).await;
    hub.with_parts(PersonParts::stop);
    trimming.abort();
    let _ = std::fs::remove_file(&socket);
    drop(pid);
    tracing::info!("the hub stopped");
    Ok(())
}

/// Accepts clients until asked to stop, or idle.
async fn serve(hub: &Arc<Hub>, listener: UnixListener) {
    let mut clients = hub.clients.subscribe();
    let mut terminate = signal(tokio::signal::unix::SignalKind::terminate());
    let mut interrupt = signal(tokio::signal::unix::SignalKind::interrupt());
    loop {
        let idle = *clients.borrow_and_update() == 0
            && !hub.with_parts(|parts| parts.keep_up()).unwrap_or(false);
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let hub = Arc::clone(hub);
                    hub.clients.send_modify(|n| *n += 1);
                    tokio::spawn(async move {
                        conn::serve(Arc::clone(&hub), stream).await;
                        hub.clients.send_modify(|n| *n -= 1);
                    });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = clients.changed() => {}
            () = tokio::time::sleep(IDLE_GRACE), if idle => {
                tracing::info!("no client for {IDLE_GRACE:?}: stopping");
                return;
            }
            () = hub.shutdown.notified() => return,
            _ = recv(&mut terminate) => return,
            _ = recv(&mut interrupt) => return,
        }
    }
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind).ok()
}

async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// Reads the registry again whenever it is written: a kiln's daemon that starts records
/// itself there, and is then reached.
fn watch_registry(members: &Arc<Members>) -> notify::Result<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let path = members.registry().path();
    let dir = path
        .parent()
        .map_or_else(std::path::PathBuf::new, std::path::Path::to_path_buf);
    let file = path.file_name().map(std::ffi::OsStr::to_os_string);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if file.as_deref().is_some_and(|file| written(&event, file)) {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?;
    let members = Arc::clone(members);
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            while rx.try_recv().is_ok() {}
            members.refresh();
        }
    });
    Ok(watcher)
}

/// Whether `event` wrote the file named `file`: made, changed, renamed or removed it.
/// Reading it is no change (the hub reads it itself on every change, as other commands
/// do): only a write is.
fn written(event: &notify::Event, file: &std::ffi::OsStr) -> bool {
    use notify::EventKind;
    matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
    ) && event.paths.iter().any(|p| p.file_name() == Some(file))
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};
    use notify::{Event, EventKind};

    use super::written;

    #[test]
    fn only_a_write_of_the_registry_is_a_change_never_a_read() {
        let file = std::ffi::OsStr::new("kilns.json");
        let at = |kind: EventKind, name: &str| {
            Event::new(kind).add_path(std::path::PathBuf::from("/state/crucible").join(name))
        };
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Read));
        assert!(!written(&at(open, "kilns.json"), file));
        assert!(!written(&at(closed, "kilns.json"), file));
        let renamed = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert!(written(&at(renamed, "kilns.json"), file));
        assert!(written(
            &at(EventKind::Create(CreateKind::File), "kilns.json"),
            file
        ));
        assert!(!written(&at(renamed, "bots.json"), file));
    }
}
