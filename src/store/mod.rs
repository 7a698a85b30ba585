//! The SurrealDB store: the schema, and the only code in crucible that writes SurrealQL.
//!
//! The embedded engine (surrealkv) is built here rather than through the SDK's `connect`,
//! because that path gives the engine no settings: its block cache would default to half
//! of the host's memory and its write buffer to a gigabyte. The daemon's memory must not
//! scale with the host, so both are bounded from `[store]`.

pub mod check;
mod context;
pub use context::StoredContext;
#[cfg(test)]
mod context_tests;
mod durable;
mod files;
mod inbox;
mod journal;
mod keyspace;
mod migrate;
#[cfg(test)]
mod purge_tests;
mod records;
pub use records::GitLeftovers;
mod remote;
mod schema;
mod search;
pub use search::{RANK_CAP, excerpt};
mod sessions;
#[cfg(test)]
mod sessions_tests;
mod team;
#[cfg(test)]
mod test_store;
#[cfg(test)]
pub(crate) use test_store::memory_store;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use surrealdb::Surreal;
use surrealdb::engine::local::Db;
use surrealdb_core::kvs::Datastore;

use durable::{Disk, Touched, engine_config, journal_dir, prepare_disk};
use journal::{Journal, Op};
use remote::Remote;
pub use schema::SCHEMA_VERSION;
pub use team::{CommandRecord, LiveChange, LiveTable};

use crate::config::StoreConfig;
use crate::protocol::{Session, StoreHealth};

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database at {url}: {message}")]
    Open { url: String, message: String },
    #[error("database error: {0}")]
    Db(String),
    #[error(
        "the database holds schema version {found}, newer than this build understands ({SCHEMA_VERSION}); upgrade crucible"
    )]
    TooNew { found: i64 },
    #[error("unexpected data in the database: {0}")]
    Decode(String),
    /// A storage failure (a full disk, an I/O error) stopped writes until a restart, or
    /// the disk is below the free-space reserve. Nothing was written.
    #[error("{0}")]
    Refused(String),
    /// One change is larger than the store keeps in one piece (a context entry past
    /// its cap); it alone is refused, nothing of it was written, and the store goes on.
    #[error("{0}")]
    TooLarge(String),
    /// The database server does not answer (team mode); see [`remote`].
    #[error("{0}")]
    Unreachable(String),
    /// A live query on the shared database ended or failed (team mode).
    #[error("{0}")]
    LiveEnded(String),
}

impl From<surrealdb::Error> for StoreError {
    fn from(e: surrealdb::Error) -> Self {
        StoreError::Db(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Why the database could not be opened; [`StoreError::Open`] joins it with the URL.
#[derive(Debug, thiserror::Error)]
pub enum OpenFailure {
    /// The embedded engine refused: its files, its version, its bootstrap.
    #[error("{0}")]
    Engine(String),
    /// The disk holding the database: its folder, or too little free space.
    #[error("{0}")]
    Disk(String),
    /// The database server: no answer, another version, a refused sign-in, or the TLS
    /// settings to reach it.
    #[error("{0}")]
    Server(String),
}

enum Conn {
    /// Embedded engine (surrealkv or memory), with the datastore kept for a clean shutdown.
    Local(Surreal<Db>, Arc<Datastore>),
    /// A SurrealDB server.
    Remote(Remote),
}

/// What a store is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Reading and writing, schema migrated.
    Serve,
    /// Reading what a damaged engine still gives; nothing written.
    Salvage,
}

pub struct Store {
    conn: Conn,
    url: String,
    /// The embedded engine's folder, journal and free-space reserve (not for memory or
    /// a server).
    disk: Option<Disk>,
    /// Set by the first storage failure; from then on writes are refused (a persistence
    /// failure fails closed) and the engine is not closed through its flush.
    failed: std::sync::Mutex<Option<String>>,
    /// What the engine could not read back: the damaged stretches the last check found
    /// (see [`check`]), or a read that failed before any check ran.
    damage: std::sync::Mutex<Vec<String>>,
    /// Who writes: bound as `$origin` in every query, and kept on the records other
    /// daemons watch, so a daemon can tell its own changes from theirs.
    origin: String,
}

const MIB: u64 = 1024 * 1024;

const SESSION_FIELDS: &str = "record::id(id) AS id, worktree, agent_type, agent_name, status, \
     started_at, last_heartbeat, display_name, state, state_reason, task, branch, \
     worktree_owned, acp_session_id, agent_pid, updated_at, ended_at, exit_code, \
     context_summary, turn_count, driver, limits, security, skills, base_branch, usage, spent, \
     handed_from, handed_to, channel, owner, host, queued, turn_prompt";
const ENTRY_FIELDS: &str = "session_id, seq, at, kind, text, tool_call_id, status";
const MESSAGE_FIELDS: &str = "record::id(id) AS id, session_id, session_name, timestamp, \
     msg_type, title, body, options, option_kinds, rule, operation, read, responded, response, \
     withdrawn, answered_by, purpose";

/// How many times a session's record is written when the engine reports a conflict.
const SESSION_WRITE_TRIES: u32 = 5;

/// Whether the engine refused a transaction because another wrote the same keys first
/// (it rolled back, and may be run again).
fn is_conflict(error: &StoreError) -> bool {
    matches!(error, StoreError::Db(e) if e.contains("Transaction conflict") || e.contains("can be retried"))
}

/// Runs `attempt` again while the engine refuses it as a conflict, `tries` times in all,
/// pausing `pause` after the first refusal and twice as long after each next one.
async fn again_on_conflict<T, F>(
    tries: u32,
    mut pause: std::time::Duration,
    mut attempt: impl FnMut() -> F,
) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut tried = 1;
    loop {
        match attempt().await {
            Err(e) if tried < tries && is_conflict(&e) => {
                tracing::debug!(error = %e, "a conflicting write; again");
                tokio::time::sleep(pause).await;
                pause *= 2;
                tried += 1;
            }
            done => return done,
        }
    }
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

    /// The embedded engine's folder, if this store has one.
    fn disk_path(&self) -> Option<PathBuf> {
        self.url.strip_prefix("surrealkv://").map(PathBuf::from)
    }

    /// Opens the engine or connects to the server and migrates the schema.
    async fn connect(cfg: &StoreConfig, default_path: &Path) -> Result<Self> {
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
            let failure = StoreError::Db(message.clone());
            StoreError::Open {
                url: url.clone(),
                message: if files::is_manifest_damage(&failure) {
                    format!("{message}. {}", files::MANIFEST_WHAT_TO_DO)
                } else if check::is_unreadable(&failure) {
                    format!("{message}. {}", check::WHAT_TO_DO)
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
            origin: ulid::Ulid::new().to_string(),
        };
        store
            .prepare(&cfg.namespace, &cfg.database, usage == Use::Serve)
            .await?;
        Ok(store)
    }

    /// Opens a damaged engine only to read what it still can (see [`check::repair`]):
    /// nothing is written to it, not even the engine's own node record.
    async fn open_to_salvage(cfg: &StoreConfig, path: &Path) -> Result<Self> {
        Self::connect_as(cfg, path, Use::Salvage).await
    }

    async fn local(
        path: &str,
        engine: surrealdb_cnf::ConfigMap,
        usage: Use,
    ) -> std::result::Result<Conn, OpenFailure> {
        let ds = surrealdb_core::kvs::Builder::new()
            .with_config(engine)
            .with_engine_options(quiet_engine_options())
            .without_maintenance_tasks()
            .build_with_path(path)
            .await
            .map_err(|e| OpenFailure::Engine(format!("{e:#}")))?;
        ds.check_version()
            .await
            .map_err(|e| OpenFailure::Engine(format!("{e:#}")))?;
        if usage == Use::Serve {
            ds.bootstrap()
                .await
                .map_err(|e| OpenFailure::Engine(format!("{e:#}")))?;
            ds.start_maintenance_tasks();
        }
        let db = Surreal::<Db>::unstable_from_datastore(Arc::clone(&ds), None)
            .await
            .map_err(|e| OpenFailure::Engine(e.to_string()))?;
        Ok(Conn::Local(db, ds))
    }

    /// A record as written: with its writer (`origin`) when other daemons watch it.
    fn stamped(&self, mut row: surrealdb::types::Object) -> surrealdb::types::Value {
        if self.is_shared() {
            row.insert(
                "origin",
                surrealdb::types::Value::from_t(self.origin.clone()),
            );
        }
        surrealdb::types::Value::Object(row)
    }

    /// The database URL, for status output.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `embedded`, `memory` or `server`.
    pub fn kind(&self) -> &'static str {
        match &self.conn {
            Conn::Remote(_) => "server",
            Conn::Local(..) if self.disk_path().is_some() => "embedded",
            Conn::Local(..) => "memory",
        }
    }

    /// Whether the store is a SurrealDB server shared with other daemons.
    pub fn is_shared(&self) -> bool {
        matches!(self.conn, Conn::Remote(_))
    }

    /// Writes from now on are this daemon's (`origin` on the records other daemons
    /// watch).
    pub fn set_origin(&mut self, origin: &str) {
        self.origin = origin.to_string();
    }

    /// Whether the database answers; told on every change (a server only).
    pub fn health(&self) -> Option<tokio::sync::watch::Receiver<StoreHealth>> {
        match &self.conn {
            Conn::Remote(r) => Some(r.health()),
            Conn::Local(..) => None,
        }
    }

    /// Why every write is refused, once a storage failure stopped them.
    pub fn writes_refused(&self) -> Option<String> {
        self.failure()
    }

    /// The damage the engine is known to have, one line per damaged stretch.
    pub fn damage(&self) -> Vec<String> {
        self.damage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remembers what a check found (and logs it).
    fn set_damage(&self, lines: Vec<String>) {
        for line in &lines {
            tracing::error!("database damaged: {line}");
        }
        *self.damage.lock().unwrap_or_else(|e| e.into_inner()) = lines;
    }

    /// `e`, with what to do when the engine could not read a table file back; the first
    /// such error before any check is logged and kept for `daemon.status`.
    fn unreadable(&self, e: StoreError) -> StoreError {
        if !check::is_unreadable(&e) {
            return e;
        }
        {
            let mut damage = self.damage.lock().unwrap_or_else(|p| p.into_inner());
            if damage.is_empty() {
                tracing::error!("the database could not read back what it wrote: {e}");
                damage.push(format!("a read failed: {e}"));
            }
        }
        StoreError::Db(format!("{e}. {}", check::WHAT_TO_DO))
    }

    /// Says the server went away (a live query ended), so writes stop until it is back.
    pub fn report_lost(&self, why: String) {
        if let Conn::Remote(r) = &self.conn {
            r.lost(why);
        }
    }

    pub(super) async fn use_ns(&self, ns: &str, db: &str) -> Result<()> {
        match &self.conn {
            Conn::Local(s, _) => s.use_ns(ns).use_db(db).await?,
            Conn::Remote(r) => r.db.use_ns(ns).use_db(db).await?,
        };
        Ok(())
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
    async fn close_engine(&self) -> bool {
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

    /// Runs SurrealQL with bound variables and returns every statement's result as JSON,
    /// failing on the first statement that failed. A JSON `null` binds as `NONE` (absent),
    /// which is what an `option<…>` field holds when it has no value.
    async fn run(&self, sql: &str, vars: Value) -> Result<Vec<Value>> {
        self.run_bound(sql, absent_for_null(vars)).await
    }

    async fn run_bound(&self, sql: &str, vars: surrealdb::types::Value) -> Result<Vec<Value>> {
        let vars = match vars {
            surrealdb::types::Value::Object(mut map) => {
                if !map.contains_key("origin") {
                    map.insert(
                        "origin",
                        surrealdb::types::Value::from_t(self.origin.clone()),
                    );
                }
                surrealdb::types::Value::Object(map)
            }
            other => other,
        };
        let (mut response, remote) = match &self.conn {
            Conn::Local(s, _) => (
                s.query(sql)
                    .bind(vars)
                    .await
                    .map_err(|e| self.unreadable(StoreError::from(e)))?,
                None,
            ),
            Conn::Remote(r) => (r.run(sql, vars).await?, Some(r)),
        };
        let mut out = Vec::with_capacity(response.num_statements());
        for i in 0..response.num_statements() {
            let value: surrealdb::types::Value = match (response.take(i), remote) {
                (Ok(value), _) => value,
                (Err(e), Some(r)) => return Err(r.check(e)),
                (Err(e), None) => return Err(self.unreadable(StoreError::from(e))),
            };
            out.push(value.into_json_value());
        }
        Ok(out)
    }

    /// Runs one query and decodes the rows of statement `index`.
    async fn rows<T: DeserializeOwned>(
        &self,
        sql: &str,
        vars: Value,
        index: usize,
    ) -> Result<Vec<T>> {
        let mut results = self.run(sql, vars).await?;
        let rows = results
            .get_mut(index)
            .map(Value::take)
            .unwrap_or(Value::Null);
        decode_rows(rows)
    }

    /// `db.query`: any SurrealQL with bindings (a JSON `null` stays `NULL`); one JSON
    /// result per statement.
    pub async fn query(&self, sql: &str, bindings: Value) -> Result<Vec<Value>> {
        use surrealdb::types::SurrealValue;
        self.run_bound(sql, bindings.into_value()).await
    }
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

/// JSON to a SurrealDB value, with `null` as `NONE`.
fn absent_for_null(value: Value) -> surrealdb::types::Value {
    use surrealdb::types::{Array, Object, SurrealValue, Value as Surreal};
    match value {
        Value::Null => Surreal::None,
        Value::Array(items) => {
            Surreal::Array(items.into_iter().map(absent_for_null).collect::<Array>())
        }
        Value::Object(map) => Surreal::Object(
            map.into_iter()
                .map(|(k, v)| (k, absent_for_null(v)))
                .collect::<Object>(),
        ),
        leaf => leaf.into_value(),
    }
}

/// A record as a SurrealDB object: `null` fields absent, and the named RFC 3339 fields as
/// datetimes (a string would not pass a `datetime` field).
fn typed_row<T: serde::Serialize>(
    value: &T,
    datetime_fields: &[&str],
) -> Result<surrealdb::types::Object> {
    use surrealdb::types::{Datetime, Value as Surreal};
    let surrealdb::types::Value::Object(mut row) = absent_for_null(to_vars(value)?) else {
        return Err(StoreError::Decode("a record is not an object".into()));
    };
    for field in datetime_fields {
        let Some(Surreal::String(text)) = row.get(*field) else {
            continue;
        };
        let at = chrono::DateTime::parse_from_rfc3339(text)
            .map_err(|e| StoreError::Decode(format!("{field} {text:?}: {e}")))?
            .with_timezone(&chrono::Utc);
        row.insert(*field, Surreal::Datetime(Datetime::from(at)));
    }
    Ok(row)
}

fn to_vars<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| StoreError::Decode(e.to_string()))
}

fn decode_rows<T: DeserializeOwned>(rows: Value) -> Result<Vec<T>> {
    let rows = match rows {
        Value::Null => return Ok(Vec::new()),
        Value::Array(rows) => rows,
        single => vec![single],
    };
    rows.into_iter()
        .map(|row| serde_json::from_value(row).map_err(|e| StoreError::Decode(e.to_string())))
        .collect()
}
