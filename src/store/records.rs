//! Transcripts, deleted sessions' purges and context stacks.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::durable::{Touched, datetime_fields, seq_id};
use super::journal::Op;
use super::{ENTRY_FIELDS, PURGE_BATCH, Result, Store, StoredContext, typed_row};
use crate::protocol::TranscriptEntry;

impl Store {
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
                touched.put("transcript", id, e)?;
                Ok(self.stamped(row))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        self.write_bound(
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
    /// What is still to go from git (`git`) is kept on the tombstone until
    /// [`Store::git_removed`].
    pub async fn delete_session_records(&self, session_id: &str, git: &GitLeftovers) -> Result<()> {
        self.write(
            "BEGIN TRANSACTION;
             UPDATE type::record('sessions', $id) SET origin = $origin RETURN NONE;
             DELETE type::record('sessions', $id) RETURN NONE;
             DELETE handles WHERE session_id = $id RETURN NONE;
             DELETE type::record('context_stacks', $id) RETURN NONE;
             UPSERT type::record('deleted_sessions', $id) SET at = time::now(),
                 worktree = $worktree, branch = $branch, force = $force RETURN NONE;
             COMMIT TRANSACTION;",
            json!({"id": session_id, "worktree": git.worktree, "branch": git.branch,
                   "force": git.force}),
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
        // A tombstone whose worktree or branch is still to go stays for that.
        self.write(
            "DELETE type::record('deleted_sessions', $id)
             WHERE worktree = NONE AND branch = NONE RETURN NONE",
            json!({"id": session_id}),
            Touched::record("deleted_sessions", session_id).op(Op::Purge {
                session_id: session_id.to_string(),
            }),
        )
        .await?;
        Ok(())
    }

    /// Deletes a session's transcript and context history, `batch` entries a transaction:
    /// each takes the next `batch` ids from the session's index, so a batch costs the
    /// same however long the session was.
    pub(super) async fn purge_rows(&self, session_id: &str, batch: u64) -> Result<()> {
        for table in ["transcript", "context_history"] {
            loop {
                let out = self
                    .write(
                        &format!(
                            "LET $ids = (SELECT VALUE id FROM {table} WHERE session_id = $id LIMIT {batch});
                             DELETE $ids RETURN NONE;
                             RETURN array::len($ids);"
                        ),
                        json!({"id": session_id}),
                        Touched::default(),
                    )
                    .await?;
                let deleted = out.last().and_then(serde_json::Value::as_u64).unwrap_or(0);
                if deleted < batch {
                    break;
                }
            }
        }
        Ok(())
    }

    /// A deleted session's worktree and branch are gone (or could not be removed, and
    /// the person was told).
    pub async fn git_removed(&self, session_id: &str) -> Result<()> {
        self.write(
            "UPDATE type::record('deleted_sessions', $id) SET worktree = NONE, branch = NONE
             RETURN NONE",
            json!({"id": session_id}),
            Touched::record("deleted_sessions", session_id),
        )
        .await?;
        Ok(())
    }

    /// Deletions cut short before their worktree or branch was removed.
    pub async fn git_leftovers(&self) -> Result<Vec<(String, GitLeftovers)>> {
        #[derive(Deserialize)]
        struct Row {
            id: String,
            #[serde(flatten)]
            git: GitLeftovers,
        }
        let rows: Vec<Row> = self
            .rows(
                "SELECT record::id(id) AS id, worktree, branch, force FROM deleted_sessions
                 WHERE worktree != NONE OR branch != NONE",
                json!({}),
                0,
            )
            .await?;
        Ok(rows.into_iter().map(|r| (r.id, r.git)).collect())
    }

    /// Sessions deleted whose purge has not finished.
    pub async fn deleted_sessions(&self) -> Result<Vec<String>> {
        match self
            .rows(
                "SELECT VALUE record::id(id) FROM deleted_sessions",
                json!({}),
                0,
            )
            .await
        {
            // Read around what cannot be read: the daemon starts with the rest.
            Err(e) if super::check::is_unreadable(&e) => {
                #[derive(serde::Deserialize)]
                struct Row {
                    id: String,
                }
                let rows: Vec<Row> = self
                    .readable_rows("deleted_sessions", "record::id(id) AS id")
                    .await?;
                Ok(rows.into_iter().map(|r| r.id).collect())
            }
            ids => ids,
        }
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
            json!({
                "id": session_id,
                "history_id": history_id,
                "stack": context.stack,
                "fresh_start": context.fresh_start,
                "history_len": context.history_len,
                "operation": operation,
                "change": change,
            }),
            touched,
        )
        .await?;
        Ok(())
    }
}

/// What a deletion still has to remove from git.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GitLeftovers {
    /// The worktree's folder.
    #[serde(default)]
    pub worktree: Option<String>,
    /// The branch.
    #[serde(default)]
    pub branch: Option<String>,
    /// Uncommitted changes and unmerged commits go too.
    #[serde(default)]
    pub force: bool,
}
