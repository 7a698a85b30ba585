//! The store handle: the connection (the embedded engine or a server) and how a query
//! runs through it, with its writer stamped on it.

use std::path::PathBuf;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use surrealdb::Surreal;
use surrealdb::engine::local::Db;
use surrealdb_core::kvs::Datastore;

use super::error::{Result, StoreError, is_unreadable};
use super::journal::Journal;
use super::remote::Remote;
use super::rows::{absent_for_null, decode_rows};
use crate::protocol::StoreHealth;

pub(super) enum Conn {
    /// Embedded engine (surrealkv or memory), with the datastore kept for a clean shutdown.
    Local(Surreal<Db>, Arc<Datastore>),
    /// A SurrealDB server.
    Remote(Remote),
}

/// The embedded engine's folder, its free-space reserve and its journal.
pub(super) struct Disk {
    pub(super) path: PathBuf,
    pub(super) reserve_bytes: u64,
    /// Held from a write's read-back to its journal append, so the journal's order is
    /// the order of the states read.
    pub(super) journal: tokio::sync::Mutex<Journal>,
}

pub struct Store {
    pub(super) conn: Conn,
    pub(super) url: String,
    /// The embedded engine's folder, journal and free-space reserve (not for memory or
    /// a server).
    pub(super) disk: Option<Disk>,
    /// Set by the first storage failure; from then on writes are refused (a persistence
    /// failure fails closed) and the engine is not closed through its flush.
    pub(super) failed: std::sync::Mutex<Option<String>>,
    /// What the engine could not read back: the damaged stretches the last check found
    /// (see [`super::check`]), or a read that failed before any check ran.
    pub(super) damage: std::sync::Mutex<Vec<String>>,
    /// What was rebuilt when the daemon started, and what was lost with it: shown with
    /// the damage however later checks come out.
    pub(super) rebuilt: std::sync::Mutex<Vec<String>>,
    /// Who writes: bound as `$origin` in every query, and kept on the records other
    /// daemons watch, so a daemon can tell its own changes from theirs.
    pub(super) origin: String,
}

impl Store {
    /// The embedded engine's folder, if this store has one.
    pub(super) fn disk_path(&self) -> Option<PathBuf> {
        self.url.strip_prefix("surrealkv://").map(PathBuf::from)
    }

    /// A record as written: with its writer (`origin`) when other daemons watch it.
    pub(super) fn stamped(&self, mut row: surrealdb::types::Object) -> surrealdb::types::Value {
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

    /// Says the server went away (a live query ended), so writes stop until it is back.
    pub fn report_lost(&self, why: String) {
        if let Conn::Remote(r) = &self.conn {
            r.lost(why);
        }
    }

    /// `e`, with what to do when the engine could not read a table file back; the first
    /// such error before any check is logged and kept for `daemon.status`.
    fn unreadable(&self, e: StoreError) -> StoreError {
        if !is_unreadable(&e) {
            return e;
        }
        {
            let mut damage = self.damage.lock().unwrap_or_else(|p| p.into_inner());
            if damage.is_empty() {
                tracing::error!("the database could not read back what it wrote: {e}");
                damage.push(format!("a read failed: {e}"));
            }
        }
        StoreError::Unreadable(Box::new(e))
    }

    pub(super) async fn use_ns(&self, ns: &str, db: &str) -> Result<()> {
        match &self.conn {
            Conn::Local(s, _) => s.use_ns(ns).use_db(db).await?,
            Conn::Remote(r) => r.db.use_ns(ns).use_db(db).await?,
        };
        Ok(())
    }

    /// Runs SurrealQL with bound variables and returns every statement's result as JSON,
    /// failing on the first statement that failed. A JSON `null` binds as `NONE` (absent),
    /// which is what an `option<…>` field holds when it has no value.
    pub(super) async fn run(&self, sql: &str, vars: Value) -> Result<Vec<Value>> {
        self.run_bound(sql, absent_for_null(vars)).await
    }

    pub(super) async fn run_bound(
        &self,
        sql: &str,
        vars: surrealdb::types::Value,
    ) -> Result<Vec<Value>> {
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
    pub(super) async fn rows<T: DeserializeOwned>(
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
