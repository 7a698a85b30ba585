//! The workbench's connection to its daemon, or to the daemon it runs inside itself.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{EmbeddedDaemon, Place};
use crate::client::{Answering, Client, StartOptions, connect_or_start_hub, open};
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::Notification;
use crate::protocol::methods as m;

/// A connection to the daemon with its stream of notifications.
pub(super) struct Link {
    pub(super) client: Arc<Client>,
    pub(super) notes: mpsc::UnboundedReceiver<Notification>,
    /// Whether the daemon answers, as the calls on this connection find.
    pub(super) answering: watch::Receiver<Answering>,
}

impl Link {
    /// Connects to the kiln's daemon, starting one if none runs (and the settings files
    /// load: the workbench shows their error itself), or to the person's hub, starting
    /// it likewise; and subscribes.
    pub(super) async fn open(place: &Place) -> anyhow::Result<Self> {
        let client = match place {
            Place::Kiln(kiln) => open(kiln, &StartOptions::default()).await?.client,
            Place::Hub(hub) => connect_or_start_hub(hub, &StartOptions::default()).await?,
        };
        Self::subscribed(client).await
    }

    pub(super) async fn subscribed(client: Client) -> anyhow::Result<Self> {
        let notes = client.subscribe(None).await?;
        Ok(Self {
            answering: client.answering(),
            client: Arc::new(client),
            notes,
        })
    }
}

/// What comes next from the daemon.
pub(super) enum FromLink {
    /// A notification; `None` once the connection closed.
    Note(Option<Notification>),
    /// Whether it answers changed.
    Answering(Answering),
}

/// What comes next on the connection; never, without one.
pub(super) async fn next_from(link: &mut Option<Link>) -> FromLink {
    let Some(link) = link else {
        return std::future::pending().await;
    };
    tokio::select! {
        note = link.notes.recv() => FromLink::Note(note),
        Ok(()) = link.answering.changed() => {
            FromLink::Answering(*link.answering.borrow_and_update())
        }
    }
}

/// Sends a `ping` that waits through a stopped daemon: its answer, once the daemon is
/// continued, says that it answers again.
pub(super) fn probe(client: &Arc<Client>) {
    let client = Arc::clone(client);
    tokio::spawn(async move {
        let ping = m::Request::Ping(m::NoParams {});
        if let Err(e) = client.send_through(&ping).await {
            tracing::debug!("the daemon was not reached: {e}");
        }
    });
}

/// The daemon, run inside this process (`cru --embedded`).
pub(super) struct Embedded {
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Embedded {
    pub(super) fn start(daemon: EmbeddedDaemon, kiln: &Kiln, config: Config) -> Self {
        Self {
            task: tokio::spawn(daemon(kiln.clone(), config)),
        }
    }

    /// Connects once the in-process daemon listens; its start-up error if it failed.
    pub(super) async fn connect(&self, kiln: &Kiln) -> anyhow::Result<Link> {
        let mut delay = Duration::from_millis(5);
        loop {
            if self.task.is_finished() {
                anyhow::bail!(
                    "the embedded daemon did not start (see {})",
                    kiln.log_dir().join("tui.log").display()
                );
            }
            if let Ok(client) = Client::connect(kiln).await {
                return Link::subscribed(client).await;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(200));
        }
    }

    /// Asks the daemon to shut down (its agents stop, their state is kept) and waits.
    pub(super) async fn stop(self, kiln: &Kiln) {
        if !self.task.is_finished() {
            match Client::connect(kiln).await {
                Ok(client) => {
                    let _ = client.call::<m::DaemonShutdown>(&m::NoParams {}).await;
                }
                Err(e) => tracing::warn!("cannot reach the embedded daemon to stop it: {e}"),
            }
        }
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cru: the embedded daemon ended with an error: {e:#}"),
            Err(e) => eprintln!("cru: the embedded daemon failed: {e}"),
        }
    }
}
