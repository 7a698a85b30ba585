//! The SurrealDB store: the schema, and the only code in crucible that writes SurrealQL.
//!
//! The embedded engine (surrealkv) is built here rather than through the SDK's `connect`,
//! because that path gives the engine no settings: its block cache would default to half
//! of the host's memory and its write buffer to a gigabyte. The daemon's memory must not
//! scale with the host, so both are bounded from `[store]`.

mod journal;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use surrealdb::Surreal;
use surrealdb::engine::any::Any;
use surrealdb::engine::local::Db;
use surrealdb_core::kvs::Datastore;

use journal::{Journal, Op};
pub use schema::SCHEMA_VERSION;

use crate::config::StoreConfig;
use crate::protocol::{InboxMessage, Session, TranscriptEntry};

/// A context stack as stored: its JSON form (checked when it is read back), whether the
/// next ACP prompt must start a fresh agent session, and how many changes its history has.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredContext {
    pub stack: String,
    #[serde(default)]
    pub fresh_start: bool,
    #[serde(default)]
    pub history_len: u64,
}

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
}

impl From<surrealdb::Error> for StoreError {
    fn from(e: surrealdb::Error) -> Self {
        StoreError::Db(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

enum Conn {
    /// Embedded engine (surrealkv or memory), with the datastore kept for a clean shutdown.
    Local(Surreal<Db>, Arc<Datastore>),
    /// A SurrealDB server.
    Remote(Surreal<Any>),
}

pub struct Store {
    conn: Conn,
    url: String,
    /// The embedded engine's folder, journal and free-space reserve (not for memory or
    /// a server).
    disk: Option<Disk>,
    /// Set by the first storage failure; from then on writes are refused (seed 002:
    /// persistence failures fail closed) and the engine is not closed through its flush.
    failed: std::sync::Mutex<Option<String>>,
}

struct Disk {
    path: PathBuf,
    reserve_bytes: u64,
    /// Held from a write's read-back to its journal append, so the journal's order is
    /// the order of the states read.
    journal: tokio::sync::Mutex<Journal>,
}

/// What one write touched, for the journal.
#[derive(Default)]
struct Touched {
    records: Vec<(&'static str, String)>,
    ops: Vec<Op>,
}

impl Touched {
    fn record(table: &'static str, id: impl Into<String>) -> Self {
        Self {
            records: vec![(table, id.into())],
            ops: Vec::new(),
        }
    }

    fn and(mut self, table: &'static str, id: impl Into<String>) -> Self {
        self.records.push((table, id.into()));
        self
    }

    fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }
}

/// The fields each table keeps as datetimes (replayed records carry them as text).
fn datetime_fields(table: &str) -> &'static [&'static str] {
    match table {
        "sessions" => &["started_at", "last_heartbeat", "updated_at", "ended_at"],
        "inbox_messages" => &["timestamp"],
        "transcript" | "context_history" | "deleted_sessions" => &["at"],
        "context_stacks" => &["updated_at"],
        _ => &[],
    }
}

/// The record id of a transcript entry or context-history change: the session and the
/// sequence number, so a write can be read back and replayed.
fn seq_id(session_id: &str, seq: u64) -> String {
    format!("{session_id}-{seq:012}")
}

const MIB: u64 = 1024 * 1024;

const SESSION_FIELDS: &str = "record::id(id) AS id, worktree, agent_type, agent_name, status, \
     started_at, last_heartbeat, display_name, state, state_reason, task, branch, \
     worktree_owned, acp_session_id, agent_pid, updated_at, ended_at, exit_code, \
     context_summary, turn_count";
const ENTRY_FIELDS: &str = "session_id, seq, at, kind, text, tool_call_id, status";
const MESSAGE_FIELDS: &str = "record::id(id) AS id, session_id, session_name, timestamp, \
     msg_type, title, body, options, read, responded, response, withdrawn";

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
        let (mut journal, ops) = Journal::open(&journal_dir(&path), &path.join("wal"))
            .map_err(|e| open_err(format!("cannot open the journal: {e}")))?;
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
        tracing::info!(changes = ops.len(), "replayed the journal after a crash");
        Box::pin(Self::open(cfg, default_path)).await
    }

    /// The embedded engine's folder, if this store has one.
    fn disk_path(&self) -> Option<PathBuf> {
        self.url.strip_prefix("surrealkv://").map(PathBuf::from)
    }

    /// Opens the engine or connects to the server and migrates the schema.
    async fn connect(cfg: &StoreConfig, default_path: &Path) -> Result<Self> {
        let url = if cfg.url.is_empty() {
            format!("surrealkv://{}", default_path.display())
        } else {
            cfg.url.clone()
        };
        let open_err = |message: String| StoreError::Open {
            url: url.clone(),
            message,
        };
        let conn = if let Some(path) = url.strip_prefix("surrealkv://") {
            let path = PathBuf::from(path);
            prepare_disk(&path, cfg.reserve_mb * MIB).map_err(open_err)?;
            Self::local(&url, engine_config(cfg, &path))
                .await
                .map_err(open_err)?
        } else if url.starts_with("mem://") {
            Self::local("memory", surrealdb_cnf::ConfigMap::empty())
                .await
                .map_err(open_err)?
        } else {
            let db = surrealdb::engine::any::connect(url.as_str())
                .await
                .map_err(|e| open_err(e.to_string()))?;
            if let Some(username) = &cfg.username {
                let password = cfg
                    .password_env
                    .as_deref()
                    .and_then(|var| std::env::var(var).ok())
                    .unwrap_or_default();
                db.signin(surrealdb::opt::auth::Root {
                    username: username.clone(),
                    password,
                })
                .await
                .map_err(|e| open_err(format!("sign-in failed: {e}")))?;
            }
            Conn::Remote(db)
        };
        let store = Store {
            conn,
            url,
            disk: None,
            failed: std::sync::Mutex::new(None),
        };
        store.use_ns(&cfg.namespace, &cfg.database).await?;
        store.migrate().await?;
        Ok(store)
    }

    async fn local(
        path: &str,
        engine: surrealdb_cnf::ConfigMap,
    ) -> std::result::Result<Conn, String> {
        let ds = surrealdb_core::kvs::Builder::new()
            .with_config(engine)
            .with_engine_options(quiet_engine_options())
            .without_maintenance_tasks()
            .build_with_path(path)
            .await
            .map_err(|e| format!("{e:#}"))?;
        ds.check_version().await.map_err(|e| format!("{e:#}"))?;
        ds.bootstrap().await.map_err(|e| format!("{e:#}"))?;
        ds.start_maintenance_tasks();
        let db = Surreal::<Db>::unstable_from_datastore(Arc::clone(&ds), None)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Conn::Local(db, ds))
    }

    /// The database URL, for status output.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn use_ns(&self, ns: &str, db: &str) -> Result<()> {
        match &self.conn {
            Conn::Local(s, _) => s.use_ns(ns).use_db(db).await?,
            Conn::Remote(s) => s.use_ns(ns).use_db(db).await?,
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
        if let Conn::Local(_, ds) = &self.conn
            && let Err(e) = ds.shutdown().await
        {
            tracing::warn!("database shutdown: {e:#}");
            return false;
        }
        true
    }

    /// The storage failure that stopped writes, if any.
    pub fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses a write when an earlier storage failure stopped writes, or when the disk
    /// is below the free-space reserve (before the engine can fail half-way through).
    fn writable(&self) -> Result<()> {
        if let Some(why) = self.failure() {
            return Err(StoreError::Refused(format!(
                "the database stopped taking writes after a storage failure ({why}); \
                 everything acknowledged before it is kept. Fix the cause (free disk space), \
                 then restart the daemon (cru daemon stop)"
            )));
        }
        if let Some(disk) = &self.disk
            && let Ok(free) = crate::sys::free_bytes(&disk.path)
            && free < disk.reserve_bytes
        {
            return Err(StoreError::Refused(format!(
                "the disk holding {} is nearly full: {} MiB free, and crucible keeps {} MiB \
                 in reserve so that nothing already stored can be damaged; free some space \
                 (store.reserve_mb sets the reserve)",
                disk.path.display(),
                free / MIB,
                disk.reserve_bytes / MIB
            )));
        }
        Ok(())
    }

    /// Runs a write of crucible's own: refused when [`Store::writable`] says so; a
    /// storage failure stops later writes; what it `touched` is journaled before it is
    /// acknowledged.
    async fn write(
        &self,
        sql: &str,
        vars: surrealdb::types::Value,
        touched: Touched,
    ) -> Result<Vec<Value>> {
        let out = self.write_unjournaled(sql, vars).await?;
        self.journal(touched).await?;
        Ok(out)
    }

    /// A write whose touched records are known only from its result: the caller
    /// journals them.
    async fn write_unjournaled(
        &self,
        sql: &str,
        vars: surrealdb::types::Value,
    ) -> Result<Vec<Value>> {
        self.writable()?;
        self.run_bound(sql, vars)
            .await
            .map_err(|e| self.fail_closed(e))
    }

    /// A failed write whose error is the storage's (not a conflict or a refusal of the
    /// data) stops all later writes.
    fn fail_closed(&self, e: StoreError) -> StoreError {
        let text = e.to_string();
        let storage = [
            "No space left",
            "os error",
            "I/O error",
            "Input/output",
            "Failed to flush",
            "orrupt",
            "Memtable arena",
        ]
        .iter()
        .any(|needle| text.contains(needle));
        if storage && self.disk.is_some() {
            self.stop_writes(text);
        }
        e
    }

    fn stop_writes(&self, why: String) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_none() {
            tracing::error!("storage failure; refusing writes until a restart: {why}");
            *failed = Some(why);
        }
    }

    /// Reads back what a write touched and appends it to the journal, durably.
    async fn journal(&self, touched: Touched) -> Result<()> {
        let Some(disk) = &self.disk else {
            return Ok(());
        };
        if touched.records.is_empty() && touched.ops.is_empty() {
            return Ok(());
        }
        let mut journal = disk.journal.lock().await;
        let mut ops = Vec::with_capacity(touched.records.len() + touched.ops.len());
        for (table, ids) in group_by_table(&touched.records) {
            let rows: Vec<Value> = self
                .rows(
                    "SELECT *, record::id(id) AS __id FROM array::map($ids, |$i| type::record($tb, $i)) WHERE id != NONE",
                    json!({"tb": table, "ids": ids}),
                    0,
                )
                .await?;
            let mut found = std::collections::HashMap::new();
            for mut row in rows {
                let Some(map) = row.as_object_mut() else {
                    continue;
                };
                let id = map
                    .remove("__id")
                    .and_then(|v| v.as_str().map(String::from));
                map.remove("id");
                if let Some(id) = id {
                    found.insert(id, row);
                }
            }
            for id in ids {
                ops.push(match found.remove(&id) {
                    Some(record) => Op::Put {
                        table: table.to_string(),
                        id: id.clone(),
                        record,
                    },
                    None => Op::Delete {
                        table: table.to_string(),
                        id: id.clone(),
                    },
                });
            }
        }
        ops.extend(touched.ops);
        journal.append(&ops).map_err(|e| {
            let why = format!("cannot write the journal: {e}");
            self.stop_writes(why.clone());
            StoreError::Db(why)
        })
    }

    /// Applies journaled changes in order, in transactions of bounded size.
    async fn replay(&self, ops: &[Op]) -> Result<()> {
        use surrealdb::types::Value as Surreal;
        for chunk in ops.chunks(REPLAY_BATCH) {
            let mut sql = String::from("BEGIN TRANSACTION;\n");
            let mut vars = surrealdb::types::Object::new();
            for (i, op) in chunk.iter().enumerate() {
                match op {
                    Op::Put { table, id, record } => {
                        let row = typed_row(record, datetime_fields(table))?;
                        sql.push_str(&format!(
                            "UPSERT type::record($t{i}, $i{i}) CONTENT $r{i} RETURN NONE;\n"
                        ));
                        vars.insert(format!("t{i}"), Surreal::from_t(table.clone()));
                        vars.insert(format!("i{i}"), Surreal::from_t(id.clone()));
                        vars.insert(format!("r{i}"), Surreal::Object(row));
                    }
                    Op::Delete { table, id } => {
                        sql.push_str(&format!("DELETE type::record($t{i}, $i{i}) RETURN NONE;\n"));
                        vars.insert(format!("t{i}"), Surreal::from_t(table.clone()));
                        vars.insert(format!("i{i}"), Surreal::from_t(id.clone()));
                    }
                    Op::RevokeHandles { session_id } => {
                        sql.push_str(&format!(
                            "DELETE handles WHERE session_id = $s{i} RETURN NONE;\n"
                        ));
                        vars.insert(format!("s{i}"), Surreal::from_t(session_id.clone()));
                    }
                    // Purges run on their own, in their own batches, below.
                    Op::Purge { .. } => {}
                }
            }
            sql.push_str("COMMIT TRANSACTION;");
            self.run_bound(&sql, Surreal::Object(vars)).await?;
            for op in chunk {
                if let Op::Purge { session_id } = op {
                    self.purge_rows(session_id, PURGE_BATCH).await?;
                }
            }
        }
        Ok(())
    }

    /// Runs SurrealQL with bound variables and returns every statement's result as JSON,
    /// failing on the first statement that failed. A JSON `null` binds as `NONE` (absent),
    /// which is what an `option<…>` field holds when it has no value.
    async fn run(&self, sql: &str, vars: Value) -> Result<Vec<Value>> {
        self.run_bound(sql, absent_for_null(vars)).await
    }

    async fn run_bound(&self, sql: &str, vars: surrealdb::types::Value) -> Result<Vec<Value>> {
        let mut response = match &self.conn {
            Conn::Local(s, _) => s.query(sql).bind(vars).await?,
            Conn::Remote(s) => s.query(sql).bind(vars).await?,
        };
        let mut out = Vec::with_capacity(response.num_statements());
        for i in 0..response.num_statements() {
            let value: surrealdb::types::Value = response.take(i)?;
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

    async fn migrate(&self) -> Result<()> {
        self.run(schema::META_TABLE, json!({})).await?;
        let current = self.schema_version().await?;
        if current > SCHEMA_VERSION {
            return Err(StoreError::TooNew { found: current });
        }
        for version in current..SCHEMA_VERSION {
            let sql = format!(
                "BEGIN TRANSACTION; {} UPSERT crucible_meta:schema SET version = {}; COMMIT TRANSACTION;",
                schema::MIGRATIONS[version as usize],
                version + 1
            );
            self.run(&sql, json!({})).await?;
            tracing::info!(version = version + 1, "database schema migrated");
        }
        Ok(())
    }

    /// The schema version recorded in the database (0 for a new one).
    pub async fn schema_version(&self) -> Result<i64> {
        let rows = self
            .run("SELECT VALUE version FROM crucible_meta:schema", json!({}))
            .await?;
        Ok(rows
            .first()
            .and_then(|v| v.get(0))
            .and_then(Value::as_i64)
            .unwrap_or(0))
    }

    // ---- sessions ----

    pub async fn insert_session(&self, s: &Session) -> Result<()> {
        self.write_session("CREATE", s).await
    }

    /// Writes the whole session record, creating it if needed.
    pub async fn save_session(&self, s: &Session) -> Result<()> {
        self.write_session("UPSERT", s).await
    }

    async fn write_session(&self, verb: &str, s: &Session) -> Result<()> {
        let mut row = typed_row(
            s,
            &["started_at", "last_heartbeat", "updated_at", "ended_at"],
        )?;
        row.remove("id");
        let mut vars = surrealdb::types::Object::new();
        vars.insert("id", surrealdb::types::Value::from_t(s.id.clone()));
        vars.insert("row", surrealdb::types::Value::Object(row));
        self.write(
            &format!("{verb} type::record('sessions', $id) CONTENT $row RETURN NONE"),
            surrealdb::types::Value::Object(vars),
            Touched::record("sessions", &s.id),
        )
        .await?;
        Ok(())
    }

    pub async fn list_sessions(&self) -> Result<Vec<Session>> {
        let sql = format!("SELECT {SESSION_FIELDS} FROM sessions ORDER BY id");
        self.rows(&sql, json!({}), 0).await
    }

    pub async fn delete_session(&self, id: &str) -> Result<bool> {
        let out = self
            .write(
                "DELETE type::record('sessions', $id) RETURN BEFORE",
                absent_for_null(json!({"id": id})),
                Touched::record("sessions", id),
            )
            .await?;
        let rows = decode_rows::<Value>(out.into_iter().next().unwrap_or(Value::Null))?;
        Ok(!rows.is_empty())
    }

    /// Writes the latest heartbeat time of several sessions in one transaction.
    pub async fn save_heartbeats(&self, beats: &[(String, String)]) -> Result<()> {
        if beats.is_empty() {
            return Ok(());
        }
        let rows: Vec<Value> = beats
            .iter()
            .map(|(id, at)| json!({"id": id, "at": at}))
            .collect();
        // Soft state: not journaled (after a restart every session gets a fresh timeout).
        self.write(
            "FOR $b IN $beats {
                UPDATE type::record('sessions', $b.id) SET last_heartbeat = <datetime>$b.at;
            };",
            absent_for_null(json!({"beats": rows})),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    // ---- handles ----

    pub async fn insert_handle(&self, digest: &str, session_id: &str) -> Result<()> {
        self.write(
            "CREATE type::record('handles', $digest) SET session_id = $session_id RETURN NONE",
            absent_for_null(json!({"digest": digest, "session_id": session_id})),
            Touched::record("handles", digest),
        )
        .await?;
        Ok(())
    }

    /// Revokes every handle of a session.
    pub async fn revoke_handles(&self, session_id: &str) -> Result<()> {
        self.write(
            "DELETE handles WHERE session_id = $session_id RETURN NONE",
            absent_for_null(json!({"session_id": session_id})),
            Touched::default().op(Op::RevokeHandles {
                session_id: session_id.to_string(),
            }),
        )
        .await?;
        Ok(())
    }

    /// (digest, session id) of every live handle.
    pub async fn list_handles(&self) -> Result<Vec<(String, String)>> {
        #[derive(serde::Deserialize)]
        struct Row {
            digest: String,
            session_id: String,
        }
        let rows: Vec<Row> = self
            .rows(
                "SELECT record::id(id) AS digest, session_id FROM handles",
                json!({}),
                0,
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.digest, r.session_id)).collect())
    }

    // ---- transcripts ----

    /// Appends entries in one transaction.
    pub async fn append_transcript(&self, entries: &[TranscriptEntry]) -> Result<()> {
        use surrealdb::types::Value as Surreal;
        if entries.is_empty() {
            return Ok(());
        }
        let mut touched = Touched::default();
        let rows = entries
            .iter()
            .map(|e| {
                let id = seq_id(&e.session_id, e.seq);
                let mut row = typed_row(e, datetime_fields("transcript"))?;
                row.insert("id", Surreal::from_t(id.clone()));
                touched.records.push(("transcript", id));
                Ok(Surreal::Object(row))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        self.write(
            "INSERT INTO transcript $rows RETURN NONE",
            Surreal::Object(vars),
            touched,
        )
        .await?;
        Ok(())
    }

    /// A session's entries after `after`, oldest first.
    pub async fn transcript(
        &self,
        session_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<TranscriptEntry>> {
        let sql = format!(
            "SELECT {ENTRY_FIELDS} FROM transcript
             WHERE session_id = $session_id AND seq > $after ORDER BY seq LIMIT $limit"
        );
        self.rows(
            &sql,
            json!({"session_id": session_id, "after": after, "limit": limit}),
            0,
        )
        .await
    }

    /// The highest sequence number of a session's transcript (0 when empty).
    pub async fn last_seq(&self, session_id: &str) -> Result<u64> {
        let rows: Vec<u64> = self
            .rows(
                "SELECT VALUE seq FROM transcript WHERE session_id = $session_id
                 ORDER BY seq DESC LIMIT 1",
                json!({"session_id": session_id}),
                0,
            )
            .await?;
        Ok(rows.first().copied().unwrap_or(0))
    }

    /// Deletes a session in one transaction: its record, handles and context stack go,
    /// and a tombstone says its transcript and context history are still to be purged
    /// ([`Store::purge_deleted`]). Small whatever the session's length.
    pub async fn delete_session_records(&self, session_id: &str) -> Result<()> {
        self.write(
            "BEGIN TRANSACTION;
             DELETE type::record('sessions', $id) RETURN NONE;
             DELETE handles WHERE session_id = $id RETURN NONE;
             DELETE type::record('context_stacks', $id) RETURN NONE;
             UPSERT type::record('deleted_sessions', $id) SET at = time::now() RETURN NONE;
             COMMIT TRANSACTION;",
            absent_for_null(json!({"id": session_id})),
            Touched::record("sessions", session_id)
                .and("context_stacks", session_id)
                .and("deleted_sessions", session_id)
                .op(Op::RevokeHandles {
                    session_id: session_id.to_string(),
                }),
        )
        .await?;
        Ok(())
    }

    /// Removes a deleted session's transcript and context history in transactions of at
    /// most `batch` entries each, then its tombstone. Safe to repeat after a failure.
    pub async fn purge_deleted(&self, session_id: &str) -> Result<()> {
        self.purge_rows(session_id, PURGE_BATCH).await?;
        self.write(
            "DELETE type::record('deleted_sessions', $id) RETURN NONE",
            absent_for_null(json!({"id": session_id})),
            Touched::record("deleted_sessions", session_id).op(Op::Purge {
                session_id: session_id.to_string(),
            }),
        )
        .await?;
        Ok(())
    }

    /// Deletes a session's transcript and context history, `batch` entries a transaction.
    async fn purge_rows(&self, session_id: &str, batch: u64) -> Result<()> {
        for table in ["transcript", "context_history"] {
            let last: Vec<u64> = self
                .rows(
                    &format!(
                        "SELECT VALUE seq FROM {table} WHERE session_id = $id
                         ORDER BY seq DESC LIMIT 1"
                    ),
                    json!({"id": session_id}),
                    0,
                )
                .await?;
            let last = last.first().copied().unwrap_or(0);
            let mut from = 0;
            while from <= last {
                self.write(
                    &format!(
                        "DELETE {table} WHERE session_id = $id AND seq >= $from AND seq < $to
                         RETURN NONE"
                    ),
                    absent_for_null(json!({"id": session_id, "from": from, "to": from + batch})),
                    Touched::default(),
                )
                .await?;
                from += batch;
            }
        }
        Ok(())
    }

    /// Sessions deleted whose purge has not finished.
    pub async fn deleted_sessions(&self) -> Result<Vec<String>> {
        self.rows(
            "SELECT VALUE record::id(id) FROM deleted_sessions",
            json!({}),
            0,
        )
        .await
    }

    // ---- context stacks ----

    /// A session's stored context stack, if it has one.
    pub async fn load_context(&self, session_id: &str) -> Result<Option<StoredContext>> {
        Ok(self
            .rows(
                "SELECT stack, fresh_start, history_len FROM type::record('context_stacks', $id)",
                json!({"id": session_id}),
                0,
            )
            .await?
            .into_iter()
            .next())
    }

    /// Writes a session's stack and, when there is one, appends the change that made it
    /// to the history as entry `context.history_len`: both or neither.
    pub async fn save_context(
        &self,
        session_id: &str,
        context: &StoredContext,
        change: Option<(&str, &str)>,
    ) -> Result<()> {
        let (operation, change) = change.unzip();
        let history = if change.is_some() {
            "CREATE type::record('context_history', $history_id) CONTENT {
                session_id: $id, seq: $history_len, at: time::now(),
                operation: $operation, change: $change
             } RETURN NONE;"
        } else {
            ""
        };
        let history_id = seq_id(session_id, context.history_len);
        let mut touched = Touched::record("context_stacks", session_id);
        if change.is_some() {
            touched = touched.and("context_history", history_id.clone());
        }
        self.write(
            &format!(
                "BEGIN TRANSACTION;
                 UPSERT type::record('context_stacks', $id) CONTENT {{
                    stack: $stack, fresh_start: $fresh_start, history_len: $history_len,
                    updated_at: time::now()
                 }} RETURN NONE;
                 {history}
                 COMMIT TRANSACTION;"
            ),
            absent_for_null(json!({
                "id": session_id,
                "history_id": history_id,
                "stack": context.stack,
                "fresh_start": context.fresh_start,
                "history_len": context.history_len,
                "operation": operation,
                "change": change,
            })),
            touched,
        )
        .await?;
        Ok(())
    }

    // ---- inbox ----

    /// Stores several messages in one statement (one transaction): all of them or none.
    pub async fn insert_messages(&self, messages: &[InboxMessage]) -> Result<()> {
        use surrealdb::types::Value as Surreal;
        if messages.is_empty() {
            return Ok(());
        }
        let rows = messages
            .iter()
            .map(|m| typed_row(m, &["timestamp"]).map(Surreal::Object))
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        let mut touched = Touched::default();
        for m in messages {
            touched.records.push(("inbox_messages", m.id.clone()));
        }
        self.write(
            "INSERT INTO inbox_messages $rows RETURN NONE",
            Surreal::Object(vars),
            touched,
        )
        .await?;
        Ok(())
    }

    /// Newest first. Each shape is one the planner serves without reading the whole
    /// table: unread ones walk the `(read, timestamp)` index backwards, all ones walk the
    /// table backwards by id (ULIDs are time-ordered); both stop after `limit`.
    pub async fn list_messages(
        &self,
        unread_only: bool,
        session_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<InboxMessage>> {
        let tail = match (unread_only, session_id.is_some()) {
            (true, false) => "WHERE read = false ORDER BY timestamp DESC",
            (false, false) => "ORDER BY id DESC",
            (true, true) => {
                "WHERE session_id = $session_id AND read = false ORDER BY timestamp DESC"
            }
            (false, true) => "WHERE session_id = $session_id ORDER BY timestamp DESC",
        };
        let sql = format!("SELECT {MESSAGE_FIELDS} FROM inbox_messages {tail} LIMIT $limit");
        self.rows(&sql, json!({"session_id": session_id, "limit": limit}), 0)
            .await
    }

    pub async fn get_message(&self, id: &str) -> Result<Option<InboxMessage>> {
        let sql = format!("SELECT {MESSAGE_FIELDS} FROM type::record('inbox_messages', $id)");
        Ok(self
            .rows(&sql, json!({"id": id}), 0)
            .await?
            .into_iter()
            .next())
    }

    /// Marks messages read; returns the ones that changed.
    pub async fn mark_read(&self, ids: &[String]) -> Result<Vec<InboxMessage>> {
        let sql = format!(
            "LET $records = array::map($ids, |$i| type::record('inbox_messages', $i));
             SELECT {MESSAGE_FIELDS} FROM (UPDATE $records SET read = true WHERE read = false RETURN AFTER);"
        );
        let out = self
            .write_unjournaled(&sql, absent_for_null(json!({"ids": ids})))
            .await?;
        let changed: Vec<InboxMessage> =
            decode_rows(out.into_iter().nth(1).unwrap_or(Value::Null))?;
        let mut touched = Touched::default();
        for m in &changed {
            touched.records.push(("inbox_messages", m.id.clone()));
        }
        self.journal(touched).await?;
        Ok(changed)
    }

    /// Records the answer to a message that has none yet (or, `withdrawn`, closes it
    /// without one). `None` when the message does not exist or was already answered (the
    /// caller tells which).
    pub async fn respond(
        &self,
        id: &str,
        response: &str,
        withdrawn: bool,
    ) -> Result<Option<InboxMessage>> {
        let sql = format!(
            "SELECT {MESSAGE_FIELDS} FROM (
                UPDATE type::record('inbox_messages', $id)
                SET responded = true, response = $response, read = true, withdrawn = $withdrawn
                WHERE responded = false RETURN AFTER)"
        );
        let out = self
            .write(
                &sql,
                absent_for_null(json!({"id": id, "response": response, "withdrawn": withdrawn})),
                Touched::record("inbox_messages", id),
            )
            .await?;
        let rows: Vec<InboxMessage> = decode_rows(out.into_iter().next().unwrap_or(Value::Null))?;
        Ok(rows.into_iter().next())
    }

    /// The decisions and approvals of a session that still wait for an answer.
    pub async fn open_blocking(&self, session_id: &str) -> Result<Vec<String>> {
        self.rows(
            "SELECT VALUE record::id(id) FROM inbox_messages
             WHERE session_id = $session_id AND responded = false
                AND msg_type INSIDE ['decision_needed', 'approval_required']",
            json!({"session_id": session_id}),
            0,
        )
        .await
    }

    /// Deletes every read message that needs no answer (or has one); returns their ids.
    pub async fn clear_read(&self) -> Result<Vec<String>> {
        let out = self
            .write_unjournaled(
                "SELECT VALUE record::id(id) FROM (
                DELETE inbox_messages WHERE read = true
                    AND (responded = true OR msg_type NOTINSIDE ['decision_needed', 'approval_required'])
                    RETURN BEFORE)",
                absent_for_null(json!({})),
            )
            .await?;
        let ids: Vec<String> = decode_rows(out.into_iter().next().unwrap_or(Value::Null))?;
        let mut touched = Touched::default();
        for id in &ids {
            touched.records.push(("inbox_messages", id.clone()));
        }
        self.journal(touched).await?;
        Ok(ids)
    }

    pub async fn count_unread(&self) -> Result<u64> {
        let rows = self
            .run(
                "SELECT count() AS n FROM inbox_messages WHERE read = false GROUP ALL",
                json!({}),
            )
            .await?;
        Ok(rows
            .first()
            .and_then(|v| v.get(0))
            .and_then(|row| row.get("n"))
            .and_then(Value::as_u64)
            .unwrap_or(0))
    }

    // ---- raw queries ----

    /// `db.query`: any SurrealQL with bindings (a JSON `null` stays `NULL`); one JSON
    /// result per statement.
    pub async fn query(&self, sql: &str, bindings: Value) -> Result<Vec<Value>> {
        use surrealdb::types::SurrealValue;
        self.run_bound(sql, bindings.into_value()).await
    }
}

/// Journaled changes replayed in one transaction.
const REPLAY_BATCH: usize = 256;
/// Transcript entries (or context changes) one purge transaction deletes.
const PURGE_BATCH: u64 = 2000;

/// `<db>.journal`, beside the engine's folder.
fn journal_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".journal");
    PathBuf::from(name)
}

fn group_by_table(records: &[(&'static str, String)]) -> Vec<(&'static str, Vec<String>)> {
    let mut groups: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (table, id) in records {
        match groups.iter_mut().find(|(t, _)| t == table) {
            Some((_, ids)) => ids.push(id.clone()),
            None => groups.push((table, vec![id.clone()])),
        }
    }
    groups
}

/// Before the engine opens: refuse to start on a disk below the reserve (the engine's
/// own recovery needs room, and fails badly without it), and remove what a recovery
/// that failed that way left behind, which would poison the next one.
fn prepare_disk(path: &Path, reserve_bytes: u64) -> std::result::Result<(), String> {
    std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
    let free = crate::sys::free_bytes(path).map_err(|e| e.to_string())?;
    if free < reserve_bytes {
        return Err(format!(
            "only {} MiB free on the disk holding the database; crucible needs {} MiB in \
             reserve to open it safely (store.reserve_mb)",
            free / MIB,
            reserve_bytes / MIB
        ));
    }
    let stale = path.join("wal").join("repair_temp");
    if stale.exists() {
        tracing::warn!(
            "removing {} left by a recovery that failed",
            stale.display()
        );
        std::fs::remove_dir_all(&stale).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The embedded engine's settings: bounded caches, and values kept inline rather than in
/// the engine's value log, whose writer corrupts earlier values when a disk fills up. A
/// database that already has value-log files keeps the log readable.
fn engine_config(cfg: &StoreConfig, path: &Path) -> surrealdb_cnf::ConfigMap {
    let has_vlog = std::fs::read_dir(path.join("vlog")).is_ok_and(|dir| {
        dir.filter_map(|e| e.ok())
            .any(|e| e.metadata().is_ok_and(|m| m.len() > 0))
    });
    surrealdb_cnf::ConfigMap::empty()
        .with_key_value(
            "surrealkv_block_cache_capacity",
            (cfg.cache_mb * MIB).to_string(),
        )
        .with_key_value(
            "surrealkv_max_memtable_size",
            (cfg.write_buffer_mb * MIB).to_string(),
        )
        .with_key_value("surrealkv_enable_vlog", has_vlog.to_string())
        .with_key_value("surrealkv_vlog_threshold", (1024 * MIB).to_string())
}

/// One process owns the embedded engine, so the cluster and streaming housekeeping that
/// SurrealDB runs on timers has nothing to do here, and an idle daemon should not wake up
/// several times a second for it. Jobs run by SurrealDB's scheduler are disabled with a
/// zero interval; four jobs run on their own ticker, which panics on zero, so those get
/// one tick a day instead. Tombstone reclaim, which returns space after large deletes,
/// stays on, hourly.
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
