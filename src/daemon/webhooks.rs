//! The webhook listener (`[channels.http]`) as a component of the daemon. It follows the
//! settings: a new `listen` address is bound and the old one let go, `listen` taken out
//! closes it, and a new `max_body_kb` is served on the same socket. When a new address
//! cannot be bound, the old listener stays and the daemon says so. The hooks themselves
//! (`[[webhooks]]`) are looked up in the live settings at each request (`http.rs`).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::components::Component;
use super::door::{Door, Starts};
use super::error::{DaemonError, io_err};
use super::{hooks_failing, http};
use crate::config::{Config, HttpConfig};
use crate::protocol::{ComponentState, ComponentStatus};

/// A socket the listener accepts on, and the server on it.
struct Listening {
    address: SocketAddr,
    max_body: usize,
    socket: std::net::TcpListener,
    server: JoinHandle<()>,
}

pub(super) struct Webhooks {
    door: Door,
    settings: watch::Receiver<Arc<Config>>,
    listening: Option<Listening>,
    /// The daemon's descriptor limit, of which the listener holds a share.
    fd_limit: Option<u64>,
}

fn max_body(http: &HttpConfig) -> usize {
    usize::try_from(http.max_body_kb.saturating_mul(1024)).unwrap_or(usize::MAX)
}

fn bind(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = std::net::TcpListener::bind(address)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

impl Starts for Webhooks {
    /// Starts listening if the settings say where; an address that cannot be bound at
    /// start is an error of the daemon's start.
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError> {
        let mut webhooks = Self {
            door: door.clone(),
            settings: door.follow_settings(),
            listening: None,
            fd_limit: door.fd_limit(),
        };
        let address = config.channels.http.address().map_err(|why| {
            io_err("cannot start the webhook listener")(std::io::Error::other(why))
        })?;
        if let Some(address) = address {
            let socket = bind(address)
                .map_err(io_err(format!("cannot listen for webhooks on {address}")))?;
            webhooks
                .serve(address, socket, max_body(&config.channels.http))
                .map_err(io_err(format!("cannot listen for webhooks on {address}")))?;
        }
        Ok(webhooks)
    }
}

impl Webhooks {
    /// Serves webhooks on `socket` (replacing the server there was).
    fn serve(
        &mut self,
        address: SocketAddr,
        socket: std::net::TcpListener,
        max_body: usize,
    ) -> std::io::Result<()> {
        let listener = tokio::net::TcpListener::from_std(socket.try_clone()?)?;
        let server = tokio::spawn(http::serve(
            listener,
            self.settings.clone(),
            self.door.clone(),
            max_body,
            self.fd_limit,
        ));
        if let Some(old) = self.listening.replace(Listening {
            address,
            max_body,
            socket,
            server,
        }) {
            old.server.abort();
        }
        tracing::info!(%address, max_body, "listening for webhooks");
        Ok(())
    }

    /// Serves the same socket with another body limit.
    fn relimit(&mut self, max_body: usize) -> std::io::Result<()> {
        let Some(now) = &self.listening else {
            return Ok(());
        };
        let (address, socket) = (now.address, now.socket.try_clone()?);
        self.serve(address, socket, max_body)
    }

    fn close(&mut self) {
        if let Some(old) = self.listening.take() {
            old.server.abort();
            tracing::info!(address = %old.address, "the webhook listener is closed");
        }
    }
}

impl Component for Webhooks {
    fn name(&self) -> &'static str {
        "webhooks"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        // Settings in use have been checked, address included.
        let address = config.channels.http.address().ok().flatten();
        let limit = max_body(&config.channels.http);
        let now = self.listening.as_ref().map(|l| (l.address, l.max_body));
        match (now, address) {
            (None, None) => None,
            (Some(_), None) => {
                self.close();
                None
            }
            (Some((at, limit_now)), Some(to)) if at == to => {
                if limit_now == limit {
                    return None;
                }
                match self.relimit(limit) {
                    Ok(()) => None,
                    Err(e) => Some(format!(
                        "the webhook body limit could not change ({e}): restart the daemon (cru daemon stop) to use it"
                    )),
                }
            }
            (_, Some(to)) => match bind(to).and_then(|socket| self.serve(to, socket, limit)) {
                Ok(()) => None,
                Err(e) => Some(match now {
                    Some((at, _)) => format!(
                        "the webhook address changed, but {to} cannot be listened on ({e}); still listening on {at}: free the address and restart the daemon (cru daemon stop) to listen on {to}"
                    ),
                    None => format!(
                        "cannot listen for webhooks on {to} ({e}): free the address and restart the daemon (cru daemon stop)"
                    ),
                }),
            },
        }
    }

    fn keeps_daemon_up(&self) -> bool {
        self.listening.is_some()
    }

    fn status(&self) -> Option<ComponentStatus> {
        let hooks = self.settings.borrow().webhooks.len();
        let failing = hooks_failing::listed(self.door.kiln()).len();
        let (state, listening) = match &self.listening {
            Some(l) => (ComponentState::On, format!("listening on {}", l.address)),
            None => (ComponentState::Off, "not listening".to_string()),
        };
        let failing = match failing {
            0 => String::new(),
            n => format!(", {n} failing (cron list says why)"),
        };
        Some(ComponentStatus {
            name: self.name().into(),
            state,
            detail: format!("{listening}, {hooks} hooks{failing}"),
            error: None,
        })
    }

    fn stop(&mut self) {
        if let Some(old) = self.listening.take() {
            old.server.abort();
        }
    }
}
