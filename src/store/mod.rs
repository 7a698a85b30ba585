//! The SurrealDB store: the schema, and the only code in crucible that writes SurrealQL.
//!
//! The embedded engine (surrealkv) is built here rather than through the SDK's `connect`,
//! because that path gives the engine no settings: its block cache would default to half
//! of the host's memory and its write buffer to a gigabyte. The daemon's memory must not
//! scale with the host, so both are bounded from `[store]`.

mod schema;

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use surrealdb::Surreal;
use surrealdb::engine::any::Any;
use surrealdb::engine::local::Db;
use surrealdb_core::kvs::Datastore;

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

#[derive(Debug, thiserror::Error)]
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
    /// embedded engine when `cfg.url` is empty, and brings its schema up to date.
    pub async fn open(cfg: &StoreConfig, default_path: &Path) -> Result<Self> {
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
            if let Some(parent) = Path::new(path).parent() {
                std::fs::create_dir_all(parent).map_err(|e| open_err(e.to_string()))?;
            }
            let engine = surrealdb_cnf::ConfigMap::empty()
                .with_key_value(
                    "surrealkv_block_cache_capacity",
                    (cfg.cache_mb * MIB).to_string(),
                )
                .with_key_value(
                    "surrealkv_max_memtable_size",
                    (cfg.write_buffer_mb * MIB).to_string(),
                );
            Self::local(&format!("surrealkv://{path}"), engine)
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
        let store = Store { conn, url };
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

    /// Flushes and closes the embedded engine.
    pub async fn close(&self) {
        if let Conn::Local(_, ds) = &self.conn
            && let Err(e) = ds.shutdown().await
        {
            tracing::warn!("database shutdown: {e:#}");
        }
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
        self.run_bound(
            &format!("{verb} type::record('sessions', $id) CONTENT $row RETURN NONE"),
            surrealdb::types::Value::Object(vars),
        )
        .await?;
        Ok(())
    }

    pub async fn list_sessions(&self) -> Result<Vec<Session>> {
        let sql = format!("SELECT {SESSION_FIELDS} FROM sessions ORDER BY id");
        self.rows(&sql, json!({}), 0).await
    }

    pub async fn delete_session(&self, id: &str) -> Result<bool> {
        let rows: Vec<Value> = self
            .rows(
                "DELETE type::record('sessions', $id) RETURN BEFORE",
                json!({"id": id}),
                0,
            )
            .await?;
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
        self.run(
            "FOR $b IN $beats {
                UPDATE type::record('sessions', $b.id) SET last_heartbeat = <datetime>$b.at;
            };",
            json!({"beats": rows}),
        )
        .await?;
        Ok(())
    }

    // ---- handles ----

    pub async fn insert_handle(&self, digest: &str, session_id: &str) -> Result<()> {
        self.run(
            "CREATE type::record('handles', $digest) SET session_id = $session_id RETURN NONE",
            json!({"digest": digest, "session_id": session_id}),
        )
        .await?;
        Ok(())
    }

    /// Revokes every handle of a session.
    pub async fn revoke_handles(&self, session_id: &str) -> Result<()> {
        self.run(
            "DELETE handles WHERE session_id = $session_id RETURN NONE",
            json!({"session_id": session_id}),
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
        let rows = entries
            .iter()
            .map(|e| typed_row(e, &["at"]).map(Surreal::Object))
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        self.run_bound(
            "INSERT INTO transcript $rows RETURN NONE",
            Surreal::Object(vars),
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

    pub async fn delete_transcript(&self, session_id: &str) -> Result<()> {
        self.run(
            "DELETE transcript WHERE session_id = $session_id RETURN NONE",
            json!({"session_id": session_id}),
        )
        .await?;
        Ok(())
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
            "CREATE context_history CONTENT {
                session_id: $id, seq: $history_len, at: time::now(),
                operation: $operation, change: $change
             } RETURN NONE;"
        } else {
            ""
        };
        self.run(
            &format!(
                "BEGIN TRANSACTION;
                 UPSERT type::record('context_stacks', $id) CONTENT {{
                    stack: $stack, fresh_start: $fresh_start, history_len: $history_len,
                    updated_at: time::now()
                 }} RETURN NONE;
                 {history}
                 COMMIT TRANSACTION;"
            ),
            json!({
                "id": session_id,
                "stack": context.stack,
                "fresh_start": context.fresh_start,
                "history_len": context.history_len,
                "operation": operation,
                "change": change,
            }),
        )
        .await?;
        Ok(())
    }

    pub async fn delete_context(&self, session_id: &str) -> Result<()> {
        self.run(
            "DELETE type::record('context_stacks', $session_id) RETURN NONE;
             DELETE context_history WHERE session_id = $session_id RETURN NONE;",
            json!({"session_id": session_id}),
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
        self.run_bound(
            "INSERT INTO inbox_messages $rows RETURN NONE",
            Surreal::Object(vars),
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
        self.rows(&sql, json!({"ids": ids}), 1).await
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
        Ok(self
            .rows(
                &sql,
                json!({"id": id, "response": response, "withdrawn": withdrawn}),
                0,
            )
            .await?
            .into_iter()
            .next())
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
        self.rows(
            "SELECT VALUE record::id(id) FROM (
                DELETE inbox_messages WHERE read = true
                    AND (responded = true OR msg_type NOTINSIDE ['decision_needed', 'approval_required'])
                    RETURN BEFORE)",
            json!({}),
            0,
        )
        .await
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
