//! Whether a call is answered, and by whom: the access its row of the table
//! ([`methods`]) gives, the scope of a connection holding a session handle (only
//! `Session` methods, for its own session), and in team mode the daemon that runs the
//! session. Every call answered here sees the settings files as they are when it comes
//! (`LiveSettings::fresh`). The answers themselves are in `handle`, one function per row.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tracing::Instrument;

use super::call::{Call, agent_door, forbidden};
use super::{Conn, Socket};
use crate::daemon::caller::Caller;
use crate::protocol::methods::{self as m, Access, Method, Route};
use crate::protocol::*;

/// `session.create`'s params without the asking process's environment, and that
/// environment (kept apart: the params may be logged or stored, the values never).
fn split_client_env(mut raw: Value) -> Result<(Value, Option<ClientEnv>), ErrorObject> {
    let given = match raw
        .as_object_mut()
        .and_then(|o| o.remove(client_env::FIELD))
    {
        None | Some(Value::Null) => None,
        // serde's words could quote a value: never echo them.
        Some(value) => Some(serde_json::from_value(value).map_err(|_| {
            ErrorObject::invalid_params(format!(
                "bad {}: expected {{by?, path?, vars?: {{NAME: value}}}}",
                client_env::FIELD
            ))
        })?),
    };
    Ok((raw, given))
}

/// Answers one call on a connection, from whoever the connection is.
pub(super) async fn call(conn: &Arc<Conn>, name: &str, raw: Value) -> Result<Value, ErrorObject> {
    let caller = conn.caller();
    call_as(conn, caller, name, raw).await
}

/// Answers one call from `caller`, inside a span that names the method, the way in and,
/// when its params name one, the session: whatever is logged while answering carries them.
pub(super) async fn call_as(
    conn: &Arc<Conn>,
    caller: Caller,
    name: &str,
    raw: Value,
) -> Result<Value, ErrorObject> {
    let way = caller.way().to_string();
    let span = match raw.get("session_id").and_then(Value::as_str) {
        Some(session) => tracing::info_span!("request", method = name, caller = way, session),
        None => tracing::info_span!("request", method = name, caller = way),
    };
    async {
        let outcome = checked(conn, caller, name, raw).await;
        if let Err(error) = &outcome {
            tracing::debug!("request failed: {error}");
        }
        outcome
    }
    .instrument(span)
    .await
}

/// Answers one call, if its row, the connection's scope and (team mode) the session's
/// owner let this daemon answer it.
async fn checked(
    conn: &Arc<Conn>,
    caller: Caller,
    name: &str,
    raw: Value,
) -> Result<Value, ErrorObject> {
    let Some(row) = m::row(name) else {
        return Err(ErrorObject::method_not_found(name));
    };
    if name == m::Handshake::NAME {
        return m::handle(&Call::new(conn, caller, None, None), name, raw).await;
    }
    if row.route == Route::Peer && !matches!(caller, Caller::Peer { .. }) {
        return Err(forbidden(format!(
            "only another daemon of the team calls {name}"
        )));
    }
    if row.access != Access::Open {
        if conn.refused.load(Ordering::Acquire) {
            return Err(forbidden(
                "this connection presented an unknown or revoked session handle; it is not served",
            ));
        }
        // The handshake is optional on the owner's socket: a client that never makes one
        // (the first clients had none) is served as protocol 1 with the owner's access.
        if !conn.handshaken.load(Ordering::Acquire) && conn.door == Socket::Agent {
            return Err(agent_door());
        }
    }
    let scope = conn.scope.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(scope) = &scope {
        if conn
            .services
            .ledger
            .session_for_handle(&scope.handle)
            .as_deref()
            != Some(scope.session_id.as_str())
        {
            return Err(forbidden("the session handle was revoked"));
        }
        if row.access == Access::Owner {
            return Err(forbidden(row.refusal.map_or_else(
                || format!("a session handle may not call {name}"),
                String::from,
            )));
        }
    }
    if scope.is_none()
        && forwarded(name)
        && let Some(session) = raw
            .get("session_id")
            .and_then(Value::as_str)
            .and_then(|id| conn.services.ledger.get_session(id).ok())
        && conn.services.ledger.is_foreign(&session)
    {
        // Team mode: another daemon runs this session's agent; it answers.
        return conn
            .services
            .ledger
            .forward(&session, name, raw)
            .await
            .map_err(|(code, message)| ErrorObject::new(code, message));
    }
    let mut raw = raw;
    let mut client_env = None;
    if name == m::SessionCreate::NAME {
        (raw, client_env) = split_client_env(raw)?;
    }
    // A handle's messages are its own session's; it may leave the id out.
    if name == m::InboxSend::NAME
        && let (Some(scope), Some(map)) = (&scope, raw.as_object_mut())
    {
        map.entry("session_id")
            .or_insert_with(|| Value::String(scope.session_id.clone()));
    }
    // Read your own writes: a settings file saved just before this call is in use for it
    // (a stat of each file when none changed), whatever the watcher has seen yet.
    conn.services.settings.fresh();
    m::handle(
        &Call::new(conn, caller, scope.as_ref(), client_env),
        name,
        raw,
    )
    .await
}

/// The calls for one session that the daemon running its agent answers (team mode): the
/// rows routed to the session's owner.
pub(super) fn forwarded(name: &str) -> bool {
    m::row(name).is_some_and(|row| row.route == Route::Owner)
}

/// The calls another daemon of the team may send this one: those it forwards for a
/// session this one runs, and those only daemons make of each other.
pub(super) fn from_peers(name: &str) -> bool {
    m::row(name).is_some_and(|row| matches!(row.route, Route::Owner | Route::Peer))
}
