//! The one way into the daemon for what runs inside it: Matrix, webhooks and cron call
//! the methods of the table here, as a client calls them on the socket, with a
//! [`Caller`] that says who they act for. The door checks the call as the socket does
//! (the row's access, in team mode the daemon that runs the session, the request span)
//! and answers it with the same handler; the inbox and the audit record the caller.
//!
//! A component gets a door and nothing else of the daemon: the calls, the event stream,
//! the settings in use and the kiln.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::broadcast;

use super::Shared;
use super::caller::Caller;
use super::conn;
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::methods::Method;
use crate::protocol::{ErrorObject, Event};

/// A handle on the daemon for its components. It does not keep the daemon up: a call
/// made after the daemon went away is refused.
#[derive(Clone)]
pub(crate) struct Door {
    shared: Weak<Shared>,
    kiln: Kiln,
}

impl Door {
    pub(super) fn new(shared: &Arc<Shared>) -> Self {
        Door {
            shared: Arc::downgrade(shared),
            kiln: shared.ledger.kiln().clone(),
        }
    }

    fn shared(&self) -> Result<Arc<Shared>, ErrorObject> {
        self.shared.upgrade().ok_or_else(|| {
            ErrorObject::new(
                crate::protocol::code::SHUTTING_DOWN,
                "the daemon is shutting down",
            )
        })
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
        conn::call_inside(self.shared()?, caller, name, params).await
    }

    /// What happens in the daemon, from now on (an empty stream once it is gone).
    pub(crate) fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        match self.shared.upgrade() {
            Some(shared) => shared.ledger.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// The settings in use (as saved, once a call has looked).
    pub(crate) fn settings(&self) -> Option<Arc<Config>> {
        self.shared
            .upgrade()
            .map(|shared| shared.settings.current())
    }

    pub(crate) fn kiln(&self) -> &Kiln {
        &self.kiln
    }
}
