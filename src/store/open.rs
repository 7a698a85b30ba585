//! Opening the store (the embedded engine, memory or a server, its schema brought up to
//! date and, after a crash, the journal replayed) and closing it cleanly.
//!
//! The embedded engine (surrealkv) is built here rather than through the SDK's `connect`,
//! because that path gives the engine no settings: its block cache would default to half
//! of the host's memory and its write buffer to a gigabyte. The daemon's memory must not
//! scale with the host, so both are bounded from `[store]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use surrealdb::Surreal;
use surrealdb::engine::local::Db;
use surrealdb_core::kvs::Datastore;

use super::conn::{Conn, Disk, Store};
use super::durable::{MIB, engine_config, journal_dir, prepare_disk};
use super::error::{OpenFailure, Result, StoreError, says_unreadable};
use super::files;
use super::journal::Journal;
use super::remote::Remote;
use crate::config::StoreConfig;

/// What a store is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Reading and writing, schema migrated.
    Serve,
    /// Reading what a damaged engine still gives; nothing written.
    Salvage,
}

impl Store {
    /// Opens (creating if needed) the store described by `cfg`, with `default_path` for the
    /// embedded engine when `cfg.url` is empty, brings its schema up to date, and after a
    /// crash puts back from the journal what the engine lost.
    pub async fn open(cfg: &StoreConfig, default_path: &Path) -> Result<Self> {
        let mut store = Self::connect(cfg, default_path).await?;
        let Some(path) = store.disk_path() else {
            return Ok(store);
        };
        let open_err = |message: String| StoreError::Open {
            url: store.url.clone(),
            message,
        };
        let (mut journal, replay) = Journal::open(&journal_dir(&path), &path.join("wal"))
            .map_err(|e| open_err(format!("cannot open the journal: {e}")))?;
        let ops = replay.ops;
        if ops.is_empty() {
            store.disk = Some(Disk {
                path,
                reserve_bytes: cfg.reserve_mb * MIB,
                journal: tokio::sync::Mutex::new(journal),
            });
            return Ok(store);
        }
        // After a crash: put back whatever the engine lost, and close it cleanly so all
        // of it is in its table files before the journal is emptied.
        store.replay(&ops).await?;
        if !store.close_engine().await {
            return Err(open_err(
                "the engine could not be closed after replaying the journal; the journal is kept"
                    .into(),
            ));
        }
        drop(store);
        journal.clear().map_err(|e| StoreError::Open {
            url: path.display().to_string(),
            message: format!("cannot empty the journal: {e}"),
        })?;
        drop(journal);
        tracing::info!(
            changes = ops.len(),
            damaged_lines = replay.rejected.len(),
            "replayed the journal after a crash"
        );
        Box::pin(Self::open(cfg, default_path)).await
    }

    /// Opens the engine or connects to the server and migrates the schema.
    pub(super) async fn connect(cfg: &StoreConfig, default_path: &Path) -> Result<Self> {
        Self::connect_as(cfg, default_path, Use::Serve).await
    }

    async fn connect_as(cfg: &StoreConfig, default_path: &Path, usage: Use) -> Result<Self> {
        let url = if cfg.url.is_empty() {
            format!("surrealkv://{}", default_path.display())
        } else {
            cfg.url.clone()
        };
        let open_err = |failure: OpenFailure| {
            let message = failure.to_string();
            StoreError::Open {
                url: url.clone(),
                message: if files::says_manifest_damage(&message) {
                    format!("{message}. {}", files::MANIFEST_WHAT_TO_DO)
                } else if says_unreadable(&message) {
                    format!("{message}. {}", files::CATALOG_WHAT_TO_DO)
                } else {
                    message
                },
            }
        };
        let conn = if let Some(path) = url.strip_prefix("surrealkv://") {
            let path = PathBuf::from(path);
            prepare_disk(&path, cfg.reserve_mb * MIB).map_err(open_err)?;
            Self::local(&url, engine_config(cfg, &path), usage)
                .await
                .map_err(open_err)?
        } else if url.starts_with("mem://") {
            Self::local("memory", surrealdb_cnf::ConfigMap::empty(), usage)
                .await
                .map_err(open_err)?
        } else {
            Conn::Remote(Remote::connect(cfg).await.map_err(open_err)?)
        };
        let store = Store {
            conn,
            url,
            disk: None,
            failed: std::sync::Mutex::new(None),
            damage: std::sync::Mutex::new(Vec::new()),
            rebuilt: std::sync::Mutex::new(Vec::new()),
            origin: ulid::Ulid::new().to_string(),
        };
        if let Err(e) = store
            .prepare(&cfg.namespace, &cfg.database, usage == Use::Serve)
            .await
        {
            store.close_engine().await;
            return Err(e);
        }
        Ok(store)
    }

    /// Opens a damaged engine only to read what it still can (see [`check::repair`]):
    /// nothing is written to it, not even the engine's own node record.
    pub(super) async fn open_to_salvage(cfg: &StoreConfig, path: &Path) -> Result<Self> {
        Self::connect_as(cfg, path, Use::Salvage).await
    }

    async fn local(
        path: &str,
        engine: surrealdb_cnf::ConfigMap,
        usage: Use,
    ) -> std::result::Result<Conn, OpenFailure> {
        let ds = raw_datastore(path, engine).await?;
        // The engine retries reading its version for two minutes whatever the error;
        // one read first tells a damaged block at once.
        // A failed open shuts the engine down before it says so: the next open of the
        // same folder (a rebuild) must not meet it still holding the files.
        let checked = match read_version_once(&ds).await {
            Ok(()) => ds.check_version().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            let _ = ds.shutdown().await;
            return Err(OpenFailure::Engine(e));
        }
        if usage == Use::Serve {
            ds.bootstrap().await.map_err(OpenFailure::Engine)?;
            ds.start_maintenance_tasks();
        }
        let db = Surreal::<Db>::unstable_from_datastore(Arc::clone(&ds), None)
            .await
            .map_err(OpenFailure::Attach)?;
        Ok(Conn::Local(db, ds))
    }

    /// Flushes and closes the embedded engine, then empties the journal: everything is in
    /// the engine's table files. After a storage failure the engine is not flushed (its
    /// flush is what damages data after a full disk); the journal keeps every
    /// acknowledged write for the next start instead.
    pub async fn close(&self) {
        if let Some(why) = self.failure() {
            tracing::warn!(
                "not flushing the database after a storage failure ({why}); the journal is kept"
            );
            return;
        }
        if self.close_engine().await
            && let Some(disk) = &self.disk
            && let Err(e) = disk.journal.lock().await.clear()
        {
            tracing::warn!("cannot empty the journal: {e}");
        }
    }

    /// Shuts the embedded engine down; false if that failed.
    pub(super) async fn close_engine(&self) -> bool {
        if let Conn::Local(db, ds) = &self.conn {
            if let Err(e) = ds.shutdown().await {
                tracing::warn!("database shutdown: {e:#}");
                return false;
            }
            // The engine shuts its datastore down again when its last handle is dropped,
            // and that second shutdown cannot write its node record to the closed engine
            // ("Pipeline stall", logged as an error after every recovery): one handle is
            // kept for the life of the process instead.
            std::mem::forget(db.clone());
        }
        true
    }
}

/// The datastore at `path` (a `surrealkv://` or `memory` URL), opened without reading
/// anything in it: its version and catalog are not checked.
pub(super) async fn raw_datastore(
    path: &str,
    engine: surrealdb_cnf::ConfigMap,
) -> std::result::Result<Arc<Datastore>, OpenFailure> {
    surrealdb_core::kvs::Builder::new()
        .with_config(engine)
        .with_engine_options(quiet_engine_options())
        .without_maintenance_tasks()
        .build_with_path(path)
        .await
        .map_err(OpenFailure::Engine)
}

/// Reads the engine's version key once (it may be absent: a new engine).
async fn read_version_once(ds: &Datastore) -> anyhow::Result<()> {
    let tx = ds.transaction(surrealdb_kvs::TransactionType::Read).await?;
    let read = tx
        .get(surrealdb_core::kvs::copy::VERSION_KEY.into(), None)
        .await;
    let _ = tx.cancel().await;
    read.map(|_| ())
}

/// One process owns the embedded engine, so the cluster and streaming housekeeping that
/// SurrealDB runs on timers has nothing to do here, and an idle daemon should not wake up
/// several times a second for it. Jobs run by SurrealDB's scheduler are disabled with a
/// zero interval; four jobs run on their own ticker, which panics on zero, so those get
/// one tick a day instead. Tombstone reclaim, which returns space after large deletes,
/// stays on, hourly.
#[allow(clippy::field_reassign_with_default)] // most fields keep their defaults
fn quiet_engine_options() -> surrealdb_core::options::EngineOptions {
    use std::time::Duration;
    let off = Duration::ZERO;
    let daily = Duration::from_secs(24 * 3600);
    let mut o = surrealdb_core::options::EngineOptions::default();
    o.node_membership_refresh_interval = daily;
    o.event_processing_interval = daily;
    o.index_compaction_interval = daily;
    o.graph_fold_interval = daily;
    o.node_membership_check_interval = off;
    o.node_membership_cleanup_interval = off;
    o.changefeed_gc_interval = off;
    o.index_build_resume_interval = off;
    o.rpc_session_gc_interval = off;
    o.system_metrics_refresh_interval = off;
    o.reclaim_interval = Duration::from_secs(3600);
    o
}
