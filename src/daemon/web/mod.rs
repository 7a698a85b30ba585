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
mod calls;
pub(crate) mod devices;
mod events;
mod guard;
mod pairing;
mod routes;
mod server;
pub(crate) mod state;

use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::components::Component;
use super::door::{Door, Starts};
use super::error::DaemonError;
use crate::config::{Config, WebAddress};
use crate::protocol::{ComponentState, ComponentStatus};
use state::WebState;

/// The socket listened on, and the server on it.
struct Listening {
    asked: WebAddress,
    at: SocketAddr,
    server: JoinHandle<()>,
}

pub(super) struct Web {
    door: Door,
    state: Arc<WebState>,
    listening: Option<Listening>,
    /// Why the address the settings ask for cannot be served, while it cannot.
    problem: Option<String>,
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

impl Starts for Web {
    /// Starts serving the page where the settings say. An address that cannot be bound
    /// is logged and the daemon runs on without the page (`cru web` says why).
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError> {
        let mut web = Self {
            door: door.clone(),
            state: WebState::new(door.kiln()),
            listening: None,
            problem: None,
        };
        if let Some(problem) = web.reconfigure(config) {
            tracing::error!("{problem}");
        }
        Ok(web)
    }
}

impl Web {
    fn serve(&mut self, asked: WebAddress) -> std::io::Result<SocketAddr> {
        let socket = bind(asked)?;
        let at = socket.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(socket)?;
        let server = tokio::spawn(routes::serve(
            listener,
            self.door.clone(),
            Arc::clone(&self.state),
        ));
        if let Some(old) = self.listening.replace(Listening { asked, at, server }) {
            old.server.abort();
        }
        self.state.set_bound(Some(at));
        tracing::info!(address = %at, "serving the web view");
        Ok(at)
    }

    fn close(&mut self) {
        if let Some(old) = self.listening.take() {
            old.server.abort();
            tracing::info!(address = %old.at, "the web view is closed");
        }
        self.state.set_bound(None);
    }
}

impl Component for Web {
    fn name(&self) -> &'static str {
        "web"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        self.problem = self.follow(config);
        self.problem.clone()
    }

    fn keeps_daemon_up(&self) -> bool {
        self.listening
            .as_ref()
            .is_some_and(|l| matches!(l.asked, WebAddress::Given(_)))
    }

    fn status(&self) -> Option<ComponentStatus> {
        let paired = self.state.devices.list().len();
        let (state, detail) = match (&self.listening, &self.problem) {
            (Some(listening), _) => (
                ComponentState::On,
                format!("listening on {}, {paired} paired browsers", listening.at),
            ),
            (None, Some(_)) => (
                ComponentState::Failing,
                format!("not listening, {paired} paired browsers"),
            ),
            (None, None) => (
                ComponentState::Off,
                format!("off in the settings, {paired} paired browsers"),
            ),
        };
        Some(ComponentStatus {
            name: self.name().into(),
            state,
            detail,
            error: self.problem.clone(),
        })
    }

    fn shares(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(Arc::clone(&self.state) as Arc<dyn Any + Send + Sync>)
    }

    fn stop(&mut self) {
        self.close();
    }
}

impl Web {
    /// Serves where `config` asks, if anywhere; what it could not do.
    fn follow(&mut self, config: &Config) -> Option<String> {
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
}
