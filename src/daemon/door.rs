//! The one way into the daemon for what runs inside it, and all a component gets of it.
//! Matrix, the web view, webhooks and cron call the methods of the table here, as a
//! client calls them on the socket, with a [`Caller`] that says who they act for. The
//! door checks the call as the socket does (the row's access, in team mode the daemon
//! that runs the session, the request span) and answers it with the same handler; the
//! inbox and the audit record the caller.
//!
//! Besides the calls, the door gives the event stream, the settings in use (and their
//! changes), the kiln, the descriptor limit and, for the engine's own parts (cron, the
//! approval timeout), the sessions. Components start from it and the settings
//! ([`Starts`]).

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};

use super::caller::Caller;
use super::components::Component;
use super::conn::{self, ClientGuard, Local};
use super::error::DaemonError;
use super::services::{Services, Shared};
use super::settings::LiveSettings;
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::methods::Method;
use crate::protocol::{ErrorObject, Event};
use crate::sessions::Sessions;

/// A component starts from the daemon's door and the settings the daemon starts with.
pub(super) trait Starts: Component + Sized {
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError>;
}

/// A handle on the daemon for its components. It does not keep the daemon up: a call
/// made after the daemon went away is refused.
#[derive(Clone)]
pub(crate) struct Door {
    services: Weak<Services>,
    shared: Weak<Shared>,
    settings: Arc<LiveSettings>,
    kiln: Kiln,
    fd_limit: Option<u64>,
}

fn shutting_down() -> ErrorObject {
    ErrorObject::new(
        crate::protocol::code::SHUTTING_DOWN,
        "the daemon is shutting down",
    )
}

impl Door {
    pub(super) fn new(services: &Arc<Services>, shared: &Arc<Shared>) -> Self {
        Door {
            services: Arc::downgrade(services),
            shared: Arc::downgrade(shared),
            settings: Arc::clone(&services.settings),
            kiln: services.ledger.kiln().clone(),
            fd_limit: services.fd_limit,
        }
    }

    fn both(&self) -> Result<(Arc<Services>, Arc<Shared>), ErrorObject> {
        match (self.services.upgrade(), self.shared.upgrade()) {
            (Some(services), Some(shared)) => Ok((services, shared)),
            _ => Err(shutting_down()),
        }
    }

    /// Calls method `M` for `caller`.
    pub(crate) async fn call<M: Method>(
        &self,
        caller: Caller,
        params: &M::Params,
    ) -> Result<M::Result, ErrorObject> {
        let params =
            serde_json::to_value(params).map_err(|e| ErrorObject::internal(e.to_string()))?;
        let answer = self.call_value(caller, M::NAME, params).await?;
        serde_json::from_value(answer)
            .map_err(|e| ErrorObject::internal(format!("cannot read {}'s answer: {e}", M::NAME)))
    }

    /// Calls a method by name with JSON params, for `caller`.
    pub(crate) async fn call_value(
        &self,
        caller: Caller,
        name: &str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        let (services, shared) = self.both()?;
        conn::call_inside(services, shared, caller, name, params).await
    }

    /// A connection of the owner's inside the daemon, for the web view: its calls are
    /// answered as on the socket, and the events it subscribes to come as notification
    /// lines on the receiver.
    pub(crate) fn local(&self) -> Result<(Local, mpsc::Receiver<String>), ErrorObject> {
        let (services, shared) = self.both()?;
        Ok(Local::new(services, shared))
    }

    /// Counts as a client of the daemon (keeping it up) while held: an open page.
    pub(crate) fn client(&self) -> Option<ClientGuard> {
        self.shared.upgrade().map(ClientGuard::count)
    }

    /// What happens in the daemon, from now on (an empty stream once it is gone).
    pub(crate) fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        match self.services.upgrade() {
            Some(services) => services.ledger.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// Tells every subscriber how the Matrix bot's emoji verification stands.
    pub(crate) fn tell_verification(&self, verification: crate::protocol::MatrixVerification) {
        if let Some(services) = self.services.upgrade() {
            services.ledger.publish_verification(verification);
        }
    }

    /// The settings in use (as saved, once a call has looked).
    pub(crate) fn settings(&self) -> Arc<Config> {
        self.settings.current()
    }

    /// The settings in use, and each new version of them.
    pub(crate) fn follow_settings(&self) -> watch::Receiver<Arc<Config>> {
        self.settings.subscribe()
    }

    pub(crate) fn kiln(&self) -> &Kiln {
        &self.kiln
    }

    /// The daemon's descriptor limit, of which a listener holds a share.
    pub(crate) fn fd_limit(&self) -> Option<u64> {
        self.fd_limit
    }

    /// The sessions, for the engine's own parts (cron's schedule, the approval timeout).
    pub(super) fn sessions(&self) -> Option<Arc<Sessions>> {
        self.services
            .upgrade()
            .map(|services| Arc::clone(&services.sessions))
    }
}
