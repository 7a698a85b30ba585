//! The web view (`[web]`) as a component of the daemon: a page, served from the binary,
//! that shows every session, the inbox and the transcripts live, in a desktop browser or
//! on a phone, and answers, prompts, starts, stops and merges as the workbench does. A
//! browser is let in only once paired (`cru web` shows a code, [`devices`]); every call it
//! makes goes through the daemon's own dispatch, as a call on the owner's socket, limited
//! to the methods the page needs ([`routes`]).
//!
//! It listens on loopback by default (port 7433, or any free one when another kiln's
//! daemon has it), follows the settings (a new `listen` is bound and the old let go), and
//! keeps a daemon with no client up only when `[web] listen` is set: then the address is
//! meant to be reachable at any time. An open page counts as a client while it is open.

mod assets;
pub(crate) mod devices;
mod events;
mod guard;
mod routes;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;

use super::Shared;
use super::components::Component;
use crate::config::{Config, WebAddress};
use crate::kiln::Kiln;
use devices::Devices;

/// What the socket's `web.*` methods and the page's server share: the paired browsers
/// and where the page is served.
pub(crate) struct WebState {
    pub devices: Devices,
    /// The address listened on, while the web view is on.
    bound: Mutex<Option<SocketAddr>>,
    /// The name of the cookie a paired browser holds: one per kiln, so that browsers
    /// paired with two kilns' daemons on one host keep both.
    pub cookie: String,
}

impl WebState {
    pub fn new(kiln: &Kiln) -> Arc<Self> {
        use sha2::Digest;
        let path = kiln.state_dir().join("web").join("devices.json");
        let kiln_hash = sha2::Sha256::digest(kiln.root().as_os_str().as_encoded_bytes());
        Arc::new(Self {
            devices: Devices::open(&path),
            bound: Mutex::new(None),
            cookie: format!("cru_{}", hex::encode(&kiln_hash[..4])),
        })
    }

    /// The address listened on, while the web view is on.
    pub fn bound(&self) -> Option<SocketAddr> {
        *self.bound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_bound(&self, at: Option<SocketAddr>) {
        *self.bound.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// The address a browser opens, while the web view is on.
    pub fn base_url(&self, config: &Config) -> Option<String> {
        self.bound().map(|at| config.web.base_url(at))
    }
}

/// The socket listened on, and the server on it.
struct Listening {
    asked: WebAddress,
    at: SocketAddr,
    server: JoinHandle<()>,
}

pub(super) struct Web {
    shared: Arc<Shared>,
    fd_limit: Option<u64>,
    listening: Option<Listening>,
}

fn bind(asked: WebAddress) -> std::io::Result<std::net::TcpListener> {
    let socket = match asked {
        WebAddress::Given(at) => std::net::TcpListener::bind(at)?,
        WebAddress::Loopback => {
            let preferred = SocketAddr::from(([127, 0, 0, 1], crate::config::WEB_DEFAULT_PORT));
            std::net::TcpListener::bind(preferred)
                .or_else(|_| std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))?
        }
    };
    socket.set_nonblocking(true)?;
    Ok(socket)
}

impl Web {
    /// Starts serving the page where the settings say. An address that cannot be bound
    /// is logged and the daemon runs on without the page (`cru web` says why).
    pub fn start(shared: Arc<Shared>, config: &Config, fd_limit: Option<u64>) -> Self {
        let mut web = Self {
            shared,
            fd_limit,
            listening: None,
        };
        if let Some(problem) = web.reconfigure(config) {
            tracing::error!("{problem}");
        }
        web
    }

    fn serve(&mut self, asked: WebAddress) -> std::io::Result<SocketAddr> {
        let socket = bind(asked)?;
        let at = socket.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(socket)?;
        let server = tokio::spawn(routes::serve(
            listener,
            Arc::clone(&self.shared),
            self.fd_limit,
        ));
        if let Some(old) = self.listening.replace(Listening { asked, at, server }) {
            old.server.abort();
        }
        self.shared.web.set_bound(Some(at));
        tracing::info!(address = %at, "serving the web view");
        Ok(at)
    }

    fn close(&mut self) {
        if let Some(old) = self.listening.take() {
            old.server.abort();
            tracing::info!(address = %old.at, "the web view is closed");
        }
        self.shared.web.set_bound(None);
    }
}

impl Component for Web {
    fn name(&self) -> &'static str {
        "web"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        // Settings in use have been checked, the address included.
        let asked = config.web.address().ok().flatten();
        let now = self.listening.as_ref().map(|l| (l.asked, l.at));
        match (now, asked) {
            (None, None) => None,
            (Some(_), None) => {
                self.close();
                None
            }
            (Some((was, _)), Some(asked)) if was == asked => None,
            (_, Some(asked)) => match self.serve(asked) {
                Ok(_) => None,
                Err(e) => Some(match now {
                    Some((_, at)) => format!(
                        "the web view's address changed, but it cannot listen there ({e}); still serving on {at}"
                    ),
                    None => format!(
                        "cannot serve the web view ({e}): free the address or change [web] listen"
                    ),
                }),
            },
        }
    }

    fn keeps_daemon_up(&self) -> bool {
        self.listening
            .as_ref()
            .is_some_and(|l| matches!(l.asked, WebAddress::Given(_)))
    }

    fn stop(&mut self) {
        self.close();
    }
}
