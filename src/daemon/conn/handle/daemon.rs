//! The daemon itself: liveness, the handshake, the database, subscriptions, status and shutdown.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::super::{Scope, Socket, subscribe as start_subscription};
use super::*;
use crate::daemon::caller::Caller;
use crate::daemon::matrix_share::MatrixShare;

/// The handshake: the protocol version, and for a session handle the session it acts for.
impl Answer<m::Handshake> for Call<'_> {
    async fn answer(&self, p: HandshakeParams) -> Result<HandshakeResult, ErrorObject> {
        let conn = self.conn;
        let ledger = &conn.services.ledger;
        if conn.handshaken.load(Ordering::Acquire) {
            return Err(ErrorObject::invalid_request(
                "this connection has already made its handshake; open a new connection for another",
            ));
        }
        if p.protocol_version != PROTOCOL_VERSION {
            return Err(ErrorObject::new(
                code::VERSION_MISMATCH,
                format!(
                    "this daemon speaks protocol {PROTOCOL_VERSION}, the client {}",
                    p.protocol_version
                ),
            )
            .with_data(json!({"protocol_version": PROTOCOL_VERSION, "daemon_version": env!("CARGO_PKG_VERSION")})));
        }
        let scope = match p.handle.as_deref() {
            None if conn.door == Socket::Agent => return Err(agent_door()),
            None => None,
            Some(text) => {
                let found = Handle::parse(text)
                    .and_then(|handle| Some((ledger.session_for_handle(&handle)?, handle)));
                let Some((session_id, handle)) = found else {
                    conn.refused.store(true, Ordering::Release);
                    return Err(forbidden("unknown or revoked session handle"));
                };
                Some(Scope { session_id, handle })
            }
        };
        let session_id = scope.as_ref().map(|s| s.session_id.clone());
        *conn.scope.lock().unwrap_or_else(|e| e.into_inner()) = scope;
        if let Some(client) = crate::daemon::caller::client_name(p.client.as_deref()) {
            *conn.caller.lock().unwrap_or_else(|e| e.into_inner()) = Caller::Owner {
                client: Some(client),
            };
        }
        conn.handshaken.store(true, Ordering::Release);
        Ok(HandshakeResult {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            kiln: ledger.kiln().root().display().to_string(),
            session_id,
        })
    }
}

impl Answer<m::Ping> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<m::Pong, ErrorObject> {
        Ok(m::Pong { pong: true })
    }
}

impl Answer<m::DbQuery> for Call<'_> {
    async fn answer(&self, p: QueryParams) -> Result<QueryResult, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        let bindings = Value::Object(p.bindings.unwrap_or_default());
        Ok(m::QueryResult {
            result: ledger.query(&p.sql, bindings).await?,
        })
    }
}

impl Answer<m::DbCheck> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<Check, ErrorObject> {
        let ledger = &self.conn.services.ledger;
        ledger
            .store()
            .check()
            .await
            .map_err(|e| ErrorObject::from(crate::ledger::LedgerError::from(e)))
    }
}

impl Answer<m::Subscribe> for Call<'_> {
    async fn answer(&self, p: SubscribeParams) -> Result<Subscribed, ErrorObject> {
        let conn = self.conn;
        start_subscription(conn, p.topics).await;
        Ok(m::Subscribed { subscribed: true })
    }
}

impl Answer<m::Unsubscribe> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<Subscribed, ErrorObject> {
        let conn = self.conn;
        if let Some(task) = conn.subscription.lock().await.take() {
            task.abort();
        }
        Ok(m::Subscribed { subscribed: false })
    }
}

impl Answer<m::DaemonStatusOf> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<DaemonStatus, ErrorObject> {
        let services = &self.conn.services;
        let ledger = &services.ledger;
        let store = ledger.store();
        // A server that is away must not hide the rest of the status.
        let unread = match ledger.unread_count().await {
            Ok(n) => n,
            // Damage is reported below, not in place of the status.
            Err(_) if store.is_shared() || !store.damage().is_empty() => 0,
            Err(e) => return Err(ErrorObject::from(e)),
        };
        let mut instance = ledger.instance().clone();
        instance.lease_until.clear();
        let (components, matrix) = {
            let components = services.components();
            let matrix = components
                .part::<MatrixShare>()
                .and_then(|share| share.status());
            (components.statuses(), matrix)
        };
        Ok(DaemonStatus {
            store_kind: store.kind().into(),
            store: Some(store_health(store)),
            instance: Some(instance),
            daemons: if store.is_shared() {
                ledger.daemons().await
            } else {
                Vec::new()
            },
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: PROTOCOL_VERSION,
            kiln: ledger.kiln().root().display().to_string(),
            database: store.url().to_string(),
            uptime_secs: services.started.elapsed().as_secs(),
            clients: *self.conn.shared.clients.borrow(),
            sessions: ledger.session_count(),
            agents: *services.sessions.running().borrow(),
            unread,
            settings_error: services.settings.error(),
            settings_pending: services.settings.pending(),
            writes_refused: store.writes_refused(),
            matrix,
            components,
        })
    }
}

/// Whether the database answers, and what of it is damaged.
fn store_health(store: &crate::store::Store) -> StoreHealth {
    StoreHealth {
        damaged: store.damage(),
        rebuilt: store.rebuilt(),
        ..store
            .health()
            .map(|h| h.borrow().clone())
            .unwrap_or(StoreHealth {
                connected: true,
                error: None,
                damaged: Vec::new(),
                rebuilt: Vec::new(),
            })
    }
}

impl Answer<m::DaemonShutdown> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<Stopping, ErrorObject> {
        self.conn.shared.shutdown.notify_one();
        Ok(m::Stopping { stopping: true })
    }
}

/// The person's word on the emoji of the Matrix bot's verification.
impl Answer<m::MatrixVerify> for Call<'_> {
    async fn answer(&self, p: MatrixVerifyParams) -> Result<MatrixVerification, ErrorObject> {
        let share = self.conn.services.components().part::<MatrixShare>();
        let Some(share) = share else {
            return Err(ErrorObject::new(
                code::NOT_FOUND,
                "this daemon runs no Matrix bot ([channels.matrix])",
            ));
        };
        share.say(p.confirm).await
    }
}
