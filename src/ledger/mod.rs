//! The ledger, the domain: the session registry, the inbox, transcripts and the context
//! stacks, over the store. No terminal, no socket.
//!
//! - Sessions are cached in memory; heartbeats touch only the cache and are written behind
//!   in batches (a heartbeat is soft state: after a restart every session gets a fresh
//!   timeout). Everything else is written through before it is acknowledged.
//! - `inbox.send` calls and transcript entries are group-committed: concurrent writes
//!   share one transaction and every caller is answered only after it is durable.
//! - Every change is published on a broadcast channel that the daemon turns into
//!   JSON-RPC notifications.

mod context;
mod error;
mod inbox;
mod open;
mod registry;
mod search;
mod sessions;
mod team;
mod transcript;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::Event;
use crate::store::Store;

pub use context::ContextState;
pub(crate) use error::coded_error;
pub use error::{LedgerError, Result};
pub use inbox::no_message;
use registry::Registry;
pub use registry::display_name;
pub use search::{DEFAULT_HITS, MAX_HITS};
pub use team::Takeover;

pub struct Ledger {
    store: Arc<Store>,
    config: Config,
    kiln: Kiln,
    /// Each event is shared by its subscribers, so a slot of the buffer is one pointer
    /// (a whole `Event` a slot made the buffer 8 MB, resident from the start).
    events: broadcast::Sender<Arc<Event>>,
    registry: Arc<Registry>,
    sends: mpsc::Sender<inbox::SendJob>,
    appends: mpsc::Sender<transcript::AppendJob>,
    /// Deleted sessions whose transcript and context history are still to be removed.
    purges: mpsc::UnboundedSender<String>,
    ids: Mutex<ulid::Generator>,
    /// Live handles: digest → session id.
    handles: Mutex<HashMap<String, String>>,
    /// Context stacks read so far, by session; see [`context`].
    contexts: tokio::sync::Mutex<HashMap<String, ContextState>>,
    /// This daemon: the owner its sessions name.
    instance: crate::protocol::DaemonInfo,
    /// Team mode (a shared SurrealDB server); see [`team`].
    team: Option<Arc<team::Team>>,
}

pub use crate::text::now_rfc3339;

impl Ledger {
    pub fn kiln(&self) -> &Kiln {
        &self.kiln
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Receives every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    fn publish(&self, event: Event) {
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(Arc::new(event));
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A new, time-ordered id.
    pub fn next_id(&self) -> String {
        let mut generator = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        match generator.generate() {
            Ok(id) => id.to_string(),
            // Only on overflow within one millisecond: fall back to a fresh random id.
            Err(_) => ulid::Ulid::new().to_string(),
        }
    }

    /// `db.query`.
    pub async fn query(&self, sql: &str, bindings: Value) -> Result<Vec<Value>> {
        if sql.trim().is_empty() {
            return Err(LedgerError::Invalid("sql must not be empty".into()));
        }
        Ok(self.store.query(sql, bindings).await?)
    }

    /// Writes pending soft state and closes the store.
    pub async fn close(&self) {
        registry::flush_heartbeats(self).await;
        self.store.close().await;
    }
}
