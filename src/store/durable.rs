//! What keeps acknowledged writes safe in the embedded engine: the free-space reserve,
//! stopping writes at the first storage failure, the journal every write goes through
//! (see `journal.rs`), its replay after a crash, and the engine's settings.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::conn::Store;
use super::error::{OpenFailure, Result, StoreError};
use super::journal::{Journal, Op};
use super::rows::{absent_for_null, typed_row};
use crate::config::StoreConfig;

pub(super) const MIB: u64 = 1024 * 1024;

/// What one write touched, for the journal.
#[derive(Default)]
pub(super) struct Touched {
    pub(super) records: Vec<(&'static str, String)>,
    pub(super) ops: Vec<Op>,
}

impl Touched {
    pub(super) fn record(table: &'static str, id: impl Into<String>) -> Self {
        Self {
            records: vec![(table, id.into())],
            ops: Vec::new(),
        }
    }

    pub(super) fn and(mut self, table: &'static str, id: impl Into<String>) -> Self {
        self.records.push((table, id.into()));
        self
    }

    pub(super) fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// A record the write creates whole: its after-image is known, so it is journaled
    /// as it is, without being read back.
    pub(super) fn put<T: serde::Serialize>(
        &mut self,
        table: &'static str,
        id: impl Into<String>,
        record: &T,
    ) -> Result<()> {
        let mut record = serde_json::to_value(record)?;
        if let Some(map) = record.as_object_mut() {
            map.remove("id");
        }
        self.ops.push(Op::Put {
            table: table.to_string(),
            id: id.into(),
            record,
        });
        Ok(())
    }
}

/// The fields each table keeps as datetimes (replayed records carry them as text).
pub(super) fn datetime_fields(table: &str) -> &'static [&'static str] {
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
pub(super) fn seq_id(session_id: &str, seq: u64) -> String {
    format!("{session_id}-{seq:012}")
}

impl Store {
    /// Why every write is refused, once a storage failure stopped them.
    pub fn writes_refused(&self) -> Option<String> {
        self.failure()
    }

    /// The storage failure that stopped writes, if any.
    pub(super) fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses a write when an earlier storage failure stopped writes, or when the disk
    /// is below the free-space reserve (before the engine can fail half-way through).
    pub(super) fn writable(&self) -> Result<()> {
        if let Some(why) = self.failure() {
            return Err(StoreError::Stopped { why });
        }
        if let Some(disk) = &self.disk
            && let Ok(free) = crate::sys::free_bytes(&disk.path)
            && free < disk.reserve_bytes
        {
            return Err(StoreError::DiskFull {
                path: disk.path.clone(),
                free,
                reserve: disk.reserve_bytes,
            });
        }
        Ok(())
    }

    /// Runs a write of crucible's own, with JSON variables as [`Store::run`] binds them:
    /// refused when [`Store::writable`] says so; a storage failure stops later writes;
    /// what it `touched` is journaled before it is acknowledged.
    pub(super) async fn write(
        &self,
        sql: &str,
        vars: Value,
        touched: Touched,
    ) -> Result<Vec<Value>> {
        self.write_bound(sql, absent_for_null(vars), touched).await
    }

    /// [`Store::write`] with variables already built (typed rows).
    pub(super) async fn write_bound(
        &self,
        sql: &str,
        vars: surrealdb::types::Value,
        touched: Touched,
    ) -> Result<Vec<Value>> {
        self.writable()?;
        if touched.records.is_empty()
            && !touched.ops.is_empty()
            && let Some(disk) = &self.disk
        {
            // Nothing to read back. The journal is held across the commit, so no later
            // state of these records can be journaled ahead of this one.
            let mut journal = disk.journal.lock().await;
            let out = self
                .run_bound(sql, vars)
                .await
                .map_err(|e| self.fail_closed(e))?;
            self.append(&mut journal, &touched.ops)?;
            return Ok(out);
        }
        let out = self
            .run_bound(sql, vars)
            .await
            .map_err(|e| self.fail_closed(e))?;
        self.journal(touched).await?;
        Ok(out)
    }

    fn append(&self, journal: &mut Journal, ops: &[Op]) -> Result<()> {
        journal.append(ops).map_err(|e| {
            self.stop_writes(format!("cannot write the journal: {e}"));
            StoreError::Journal(std::sync::Arc::new(e))
        })
    }

    /// A failed write whose error is the storage's (not a conflict or a refusal of the
    /// data) stops all later writes.
    pub(super) fn fail_closed(&self, e: StoreError) -> StoreError {
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

    pub(super) fn stop_writes(&self, why: String) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if failed.is_none() {
            tracing::error!("storage failure; refusing writes until a restart: {why}");
            *failed = Some(why);
        }
    }

    /// Reads back what a write touched and appends it to the journal, durably.
    pub(super) async fn journal(&self, touched: Touched) -> Result<()> {
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
                let table = table.to_string();
                ops.push(match found.remove(&id) {
                    Some(record) => Op::Put { table, id, record },
                    None => Op::Delete { table, id },
                });
            }
        }
        ops.extend(touched.ops);
        self.append(&mut journal, &ops)
    }

    /// Applies journaled changes in order, in transactions of bounded size.
    pub(super) async fn replay(&self, ops: &[Op]) -> Result<()> {
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
                    self.records().purge_rows(session_id).await?;
                }
            }
        }
        Ok(())
    }
}

/// Journaled changes replayed in one transaction.
const REPLAY_BATCH: usize = 256;
/// `<db>.journal`, beside the engine's folder.
pub(super) fn journal_dir(path: &Path) -> PathBuf {
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
pub(super) fn prepare_disk(
    path: &Path,
    reserve_bytes: u64,
) -> std::result::Result<(), OpenFailure> {
    let disk = OpenFailure::Disk;
    std::fs::create_dir_all(path).map_err(disk)?;
    let free = crate::sys::free_bytes(path).map_err(disk)?;
    if free < reserve_bytes {
        return Err(OpenFailure::NoRoom {
            free,
            reserve: reserve_bytes,
        });
    }
    let stale = path.join("wal").join("repair_temp");
    if stale.exists() {
        tracing::warn!(
            "removing {} left by a recovery that failed",
            stale.display()
        );
        std::fs::remove_dir_all(&stale).map_err(disk)?;
    }
    Ok(())
}

/// The embedded engine's settings: bounded caches, and values kept inline rather than in
/// the engine's value log, whose writer corrupts earlier values when a disk fills up. A
/// database that already has value-log files keeps the log readable.
pub(super) fn engine_config(cfg: &StoreConfig, path: &Path) -> surrealdb_cnf::ConfigMap {
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
        // Every acknowledged write is fsynced in crucible's journal, which is replayed
        // after a crash; a second fsync of the same write in the engine's log buys nothing.
        .with_key_value("datastore_sync", "never")
}

/// The embedded engine's folder the settings name (`default` when they name no URL), or
/// `None` for memory or a server.
pub fn embedded_path(cfg: &StoreConfig, default: &Path) -> Option<PathBuf> {
    if cfg.url.is_empty() {
        return Some(default.to_path_buf());
    }
    cfg.url.strip_prefix("surrealkv://").map(PathBuf::from)
}

/// `<path>.<suffix>`, beside it.
pub(super) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{EntryKind, InboxMessage, MsgType, TranscriptEntry};

    fn message(id: &str) -> InboxMessage {
        InboxMessage {
            kiln: None,
            digest: None,
            id: id.into(),
            session_id: "s1".into(),
            session_name: "feat/one".into(),
            timestamp: "2026-11-25T10:00:00Z".into(),
            msg_type: MsgType::DecisionNeeded,
            title: format!("decide {id}"),
            body: Some("a body".into()),
            options: Some(vec!["yes".into(), "no".into()]),
            option_kinds: None,
            rule: None,
            operation: None,
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
            answered_by: None,
            purpose: None,
        }
    }

    fn entry(seq: u64) -> TranscriptEntry {
        TranscriptEntry {
            session_id: "s1".into(),
            seq,
            at: "2026-11-25T10:00:01Z".into(),
            kind: EntryKind::Message,
            text: Some(format!("line {seq}")),
            tool_call_id: None,
            status: None,
        }
    }

    /// Whatever the engine loses after a crash, the journal puts back: here the engine
    /// loses everything (its folder is gone) and every acknowledged write comes back,
    /// in its last state.
    #[tokio::test]
    async fn acknowledged_writes_come_back_from_the_journal_when_the_engine_lost_them() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("db");
        let cfg = StoreConfig::default();
        let store = Store::open(&cfg, &path).await.unwrap();
        let sent: Vec<InboxMessage> = ["01A", "01B", "01C"].map(message).to_vec();
        store.inbox().insert(&sent).await.unwrap();
        store.inbox().mark_read(&["01B".to_string()]).await.unwrap();
        store
            .records()
            .append_transcript(&[entry(1), entry(2)])
            .await
            .unwrap();
        // A crash: no clean close, and the engine kept nothing.
        drop(store);
        std::fs::remove_dir_all(&path).unwrap();

        let store = Store::open(&cfg, &path).await.unwrap();
        let mut kept = store.inbox().list(false, None, 10).await.unwrap();
        kept.sort_by(|a, b| a.id.cmp(&b.id));
        let mut expected = sent.clone();
        expected[1].read = true;
        assert_eq!(kept, expected);
        let entries = store.records().transcript("s1", 0, 10).await.unwrap();
        assert_eq!(entries, vec![entry(1), entry(2)]);
        store.close().await;
    }

    /// Changes `from` to `to` in the journal line that holds it.
    fn damage_journal(path: &Path, from: &str, to: &str) {
        for entry in std::fs::read_dir(journal_dir(path)).unwrap() {
            let file = entry.unwrap().path();
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains(from) {
                std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
                return;
            }
        }
        panic!("no journal line holds {from:?}");
    }

    /// A journal record changed after it was written (still valid JSON) is not replayed,
    /// and the records after it are: here the engine lost everything, so only the journal
    /// can bring them back. (That it is not replayed over a record the engine kept is
    /// shown with the real daemon, killed, in the durability tests.)
    #[tokio::test]
    async fn a_damaged_journal_record_is_never_replayed_and_the_rest_is() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = StoreConfig::default();
        let path = tmp.path().join("db");
        let store = Store::open(&cfg, &path).await.unwrap();
        let sent: Vec<InboxMessage> = ["01A", "01B", "01C"].map(message).to_vec();
        for one in &sent {
            store
                .inbox()
                .insert(std::slice::from_ref(one))
                .await
                .unwrap();
        }
        // A crash, and the engine kept nothing.
        drop(store);
        std::fs::remove_dir_all(&path).unwrap();
        damage_journal(&path, "decide 01B", "decide 91B");

        let store = Store::open(&cfg, &path).await.unwrap();
        let mut kept = store.inbox().list(false, None, 10).await.unwrap();
        kept.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(kept, [sent[0].clone(), sent[2].clone()]);
        store.close().await;
        let rejected = std::fs::read_to_string(journal_dir(&path).join("rejected.txt")).unwrap();
        assert!(rejected.contains("decide 91B"), "{rejected}");
    }
}
