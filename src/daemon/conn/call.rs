//! One call on a connection as the answers see it: who asks (its scope, when it
//! presented a session handle), and the refusals that both the checks in `dispatch` and
//! the answers in `handle` give.

use std::sync::Arc;

use super::{Conn, Scope};
use crate::daemon::caller::Caller;
use crate::protocol::*;

pub(super) fn forbidden(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(code::FORBIDDEN, message)
}

pub(super) fn agent_door() -> ErrorObject {
    forbidden("this socket serves agents only: handshake with your session handle first")
}

/// One call on a connection: who asks (its scope, when it presented a session handle).
pub(super) struct Call<'a> {
    pub(super) conn: &'a Arc<Conn>,
    /// Who asks: the owner's client, a handle's session, someone in a channel, a browser.
    pub(super) caller: Caller,
    pub(super) scope: Option<&'a Scope>,
    /// `session.create`'s asking process's environment, taken apart from its params
    /// (the params may be logged or stored, these values never).
    client_env: std::sync::Mutex<Option<ClientEnv>>,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        conn: &'a Arc<Conn>,
        caller: Caller,
        scope: Option<&'a Scope>,
        client_env: Option<ClientEnv>,
    ) -> Self {
        Call {
            conn,
            caller,
            scope,
            client_env: std::sync::Mutex::new(client_env),
        }
    }

    pub(super) fn take_client_env(&self) -> Option<ClientEnv> {
        self.client_env
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// A handle acts for its own session only: `session_id` must be its own.
    pub(super) fn own(&self, session_id: &str) -> Result<(), ErrorObject> {
        match self.scope {
            Some(scope) if scope.session_id != session_id => Err(forbidden(
                "a session handle may act only for its own session",
            )),
            _ => Ok(()),
        }
    }

    /// An inbox message a handle may see: its own session's; any other is "not found",
    /// as if it did not exist, so a handle learns nothing of other sessions.
    pub(super) async fn visible(&self, id: &str) -> Result<InboxMessage, ErrorObject> {
        let message = self.conn.services.ledger.get_message(id).await?;
        match self.scope {
            Some(scope) if message.session_id != scope.session_id => {
                Err(ErrorObject::from(crate::ledger::no_message(id)))
            }
            _ => Ok(message),
        }
    }
}
