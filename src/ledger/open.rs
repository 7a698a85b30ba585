//! Opening the ledger: the store, team mode, and the background writers, purger,
//! heartbeat writer, reaper and the check of the database after a start.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};
use tracing::Instrument;

use super::error::Result;
use super::inbox::{MAX_SEND_BATCH, send_writer};
use super::registry::{self, Registry};
use super::{Ledger, team, transcript};
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::Event;
use crate::store::{Store, check};

/// How many events a slow subscriber may fall behind before it is told it missed some.
const EVENT_BUFFER: usize = 8192;

/// Removes deleted sessions' transcripts one session at a time, in the background.
async fn purger(store: Arc<Store>, mut ids: mpsc::UnboundedReceiver<String>) {
    while let Some(id) = ids.recv().await {
        async {
            match store.records().purge_deleted(&id).await {
                Ok(()) => tracing::debug!("purged a deleted session"),
                Err(e) => tracing::warn!(
                    "the deleted session's transcript is not yet purged ({e}); finishing at the next start"
                ),
            }
        }
        .instrument(crate::logging::session_span(&id))
        .await;
    }
}

/// Reads every record once after a start, behind the first answers: damage the engine
/// finds in its table files is logged and shown by `daemon.status` (not found when a
/// read first fails).
async fn check_at_start(ledger: std::sync::Weak<Ledger>) {
    let Some(store) = ledger.upgrade().map(|ledger| Arc::clone(&ledger.store)) else {
        return;
    };
    match store.check().await {
        Ok(check) if check.damaged() => {
            tracing::error!("{}", crate::store::check::WHAT_TO_DO);
            if let Some(ledger) = ledger.upgrade() {
                ledger.publish(Event::Store(crate::protocol::StoreHealth {
                    connected: true,
                    error: None,
                    damaged: store.damage(),
                    rebuilt: store.rebuilt(),
                }));
            }
        }
        Ok(check) => {
            let records: usize = check.tables.iter().map(|t| t.readable).sum();
            tracing::info!(records, "database checked: every record reads back");
        }
        Err(e) => tracing::warn!("the database check at start did not finish: {e}"),
    }
}

impl Ledger {
    /// Opens the store and starts the background writers.
    pub async fn open(kiln: Kiln, config: Config) -> Result<Arc<Self>> {
        let mut store = match Store::open(&config.store, &kiln.db_path()).await {
            Ok(store) => store,
            Err(e) if check::is_catalog_damage(&e) => {
                check::rebuild_at_start(&config.store, &kiln.db_path(), e).await?
            }
            Err(e) => return Err(e.into()),
        };
        let instance = team::instance(&kiln);
        store.set_origin(&instance.id);
        let team = match store.is_shared() {
            true => Some(team::Team::join(&store, &instance, &config.store).await?),
            false => None,
        };
        let store = Arc::new(store);
        let sessions = store.sessions().list().await?;
        let handles = store.sessions().handles().await?.into_iter().collect();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (sends, send_rx) = mpsc::channel(MAX_SEND_BATCH * 4);
        let (purges, purge_rx) = mpsc::unbounded_channel();
        let (appends, append_rx) = mpsc::channel(transcript::MAX_APPEND_JOBS);
        let registry = Registry::new(
            sessions,
            Duration::from_secs(config.daemon.session_timeout_secs),
            Duration::from_secs(config.daemon.heartbeat_interval_secs),
            Duration::from_secs(config.daemon.ended_session_ttl_secs),
            team.as_ref().map(|_| instance.id.clone()),
        );
        let ledger = Arc::new(Self {
            store,
            config,
            kiln,
            events,
            registry,
            sends,
            appends,
            purges,
            ids: Mutex::new(ulid::Generator::new()),
            handles: Mutex::new(handles),
            contexts: tokio::sync::Mutex::new(HashMap::new()),
            instance,
            team,
        });
        if let Some(team) = &ledger.team {
            team::start(&ledger, team);
        }
        tokio::spawn(send_writer(Arc::clone(&ledger.store), send_rx));
        tokio::spawn(transcript::transcript_writer(
            Arc::clone(&ledger.store),
            append_rx,
        ));
        // Purges cut short by a stop are finished behind the first answers.
        for id in ledger.store.records().deleted_sessions().await? {
            let _ = ledger.purges.send(id);
        }
        tokio::spawn(purger(Arc::clone(&ledger.store), purge_rx));
        if ledger.store.kind() == "embedded" {
            tokio::spawn(check_at_start(Arc::downgrade(&ledger)));
        }
        tokio::spawn(registry::heartbeat_writer(
            Arc::clone(&ledger.registry),
            Arc::downgrade(&ledger),
        ));
        tokio::spawn(registry::reaper(
            Arc::clone(&ledger.registry),
            Arc::downgrade(&ledger),
        ));
        Ok(ledger)
    }
}
