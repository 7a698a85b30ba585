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
//!
//! The person's hub runs the same components (the web view, the Matrix bot) for every
//! kiln at once: its door leads to the hub instead of a daemon ([`Above`]), which sends
//! each call to the kiln it belongs to and gives every kiln's events.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
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
use crate::sessions::Conversations;

/// What a component holds while it counts as a client (an open page), or while it reads
/// events: dropped, it counts no more or reads no more.
pub(crate) type Held = Box<dyn Any + Send + Sync>;

/// An answer to come.
pub(crate) type Answering<'a> =
    Pin<Box<dyn Future<Output = Result<Value, ErrorObject>> + Send + 'a>>;

/// What a door leads into when it is not a kiln's daemon: the person's hub, which answers
/// a call through the kiln it belongs to (or every kiln, merged) and gives every kiln's
/// events, each named with its kiln.
pub(crate) trait Above: Send + Sync + 'static {
    /// Answers a call by name for `caller`.
    fn call<'a>(&'a self, caller: &'a Caller, name: &'a str, params: Value) -> Answering<'a>;
    /// Every kiln's events from now on.
    fn events(&self) -> broadcast::Receiver<Arc<Event>>;
    /// Every kiln's events from now on as notification lines, the hub's own included
    /// (a kiln reached or lost).
    fn lines(&self) -> Lines;
    /// Every kiln it serves, and how it is reached now.
    fn kiln_states(&self) -> Vec<KilnReach>;
    /// Counts as a client of the hub (keeping it up) while held.
    fn client(&self) -> Held;
    /// Tells every subscriber how the Matrix bot's emoji verification stands.
    #[cfg(feature = "matrix")]
    fn tell_verification(&self, verification: crate::protocol::MatrixVerification);
}

/// How the hub reaches one kiln now, as the person's page shows it (and `hub.kiln`
/// events tell its changes).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct KilnReach {
    pub kiln: String,
    /// `connected`, `resting` or `lost`.
    pub state: &'static str,
    /// The machine, for a kiln on another one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Why it is lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a door leads.
#[derive(Clone)]
enum Inside {
    Daemon {
        services: Weak<Services>,
        shared: Weak<Shared>,
    },
    Above(Arc<dyn Above>),
}

/// The events a component reads, as notification lines (the web view's event stream),
/// while it holds them.
pub(crate) struct Lines {
    pub lines: mpsc::Receiver<String>,
    _held: Held,
}

impl Lines {
    /// Lines read while `held` is.
    pub(crate) fn new(lines: mpsc::Receiver<String>, held: Held) -> Self {
        Self { lines, _held: held }
    }
}

/// A component starts from the daemon's door and the settings the daemon starts with.
pub(super) trait Starts: Component + Sized {
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError>;
}

/// A handle on the daemon for its components. It does not keep the daemon up: a call
/// made after the daemon went away is refused.
#[derive(Clone)]
pub(crate) struct Door {
    inside: Inside,
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
            inside: Inside::Daemon {
                services: Arc::downgrade(services),
                shared: Arc::downgrade(shared),
            },
            settings: Arc::clone(&services.settings),
            kiln: services.ledger.kiln().clone(),
            fd_limit: services.fd_limit,
        }
    }

    /// A door into the person's hub: `kiln` is the hub's own folder (where its
    /// components keep their state), `settings` the person's.
    pub(crate) fn above(
        above: Arc<dyn Above>,
        settings: Arc<LiveSettings>,
        kiln: Kiln,
        fd_limit: Option<u64>,
    ) -> Self {
        Door {
            inside: Inside::Above(above),
            settings,
            kiln,
            fd_limit,
        }
    }

    /// The kilns behind the door, by name, when it leads to the person's hub; `None`
    /// for one kiln's daemon.
    pub(crate) fn kilns(&self) -> Option<Vec<String>> {
        let states = self.kiln_states()?;
        Some(states.into_iter().map(|state| state.kiln).collect())
    }

    /// How each kiln behind the door is reached, when it leads to the person's hub.
    pub(crate) fn kiln_states(&self) -> Option<Vec<KilnReach>> {
        match &self.inside {
            Inside::Above(above) => Some(above.kiln_states()),
            Inside::Daemon { .. } => None,
        }
    }

    fn both(&self) -> Result<(Arc<Services>, Arc<Shared>), ErrorObject> {
        let Inside::Daemon { services, shared } = &self.inside else {
            return Err(ErrorObject::internal("the hub has no daemon of its own"));
        };
        match (services.upgrade(), shared.upgrade()) {
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
        if let Inside::Above(above) = &self.inside {
            return above.call(&caller, name, params).await;
        }
        let (services, shared) = self.both()?;
        conn::call_inside(services, shared, caller, name, params).await
    }

    /// Every event from now on as notification lines, for the web view's event stream,
    /// while the returned [`Lines`] are held.
    pub(crate) async fn lines(&self) -> Result<Lines, ErrorObject> {
        if let Inside::Above(above) = &self.inside {
            return Ok(above.lines());
        }
        let (services, shared) = self.both()?;
        let (local, lines) = Local::new(services, shared);
        local
            .call(
                crate::protocol::methods::Subscribe::NAME,
                serde_json::json!({}),
            )
            .await?;
        Ok(Lines {
            lines,
            _held: Box::new(local),
        })
    }

    /// Counts as a client of the daemon (keeping it up) while held: an open page.
    pub(crate) fn client(&self) -> Option<Held> {
        match &self.inside {
            Inside::Above(above) => Some(above.client()),
            Inside::Daemon { shared, .. } => shared
                .upgrade()
                .map(|shared| Box::new(ClientGuard::count(shared)) as Held),
        }
    }

    /// What happens in the daemon, from now on (an empty stream once it is gone).
    pub(crate) fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        match &self.inside {
            Inside::Above(above) => above.events(),
            Inside::Daemon { services, .. } => match services.upgrade() {
                Some(services) => services.ledger.subscribe(),
                None => broadcast::channel(1).1,
            },
        }
    }

    /// Tells every subscriber how the Matrix bot's emoji verification stands.
    #[cfg(feature = "matrix")]
    pub(crate) fn tell_verification(&self, verification: crate::protocol::MatrixVerification) {
        match &self.inside {
            Inside::Above(above) => above.tell_verification(verification),
            Inside::Daemon { services, .. } => {
                if let Some(services) = services.upgrade() {
                    services.ledger.publish_verification(verification);
                }
            }
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

    /// The conversations, for the engine's own parts (cron's schedule).
    pub(super) fn conversations(&self) -> Option<Arc<Conversations>> {
        let Inside::Daemon { services, .. } = &self.inside else {
            return None;
        };
        services
            .upgrade()
            .map(|services| Arc::clone(&services.conversations))
    }
}
