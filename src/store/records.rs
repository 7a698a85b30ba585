//! Transcripts and deleted sessions' purges.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::conn::Store;
use super::durable::{Touched, datetime_fields, seq_id};
use super::error::Result;
use super::journal::Op;
use super::keyspace::quoted;
use super::rows::typed_row;
use crate::protocol::TranscriptEntry;

const ENTRY_FIELDS: &str = "session_id, seq, at, kind, text, tool_call_id, status";

/// What a session leaves: its transcript, and what is kept of it once deleted (its git leftovers, the deletions not yet finished).
pub struct Records<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`Records`].
    pub fn records(&self) -> Records<'_> {
        Records(self)
    }
}

impl Records<'_> {
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
                Ok(self.0.stamped(row))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        self.0
            .write_bound(
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
        self.0
            .rows(
                &sql,
                json!({"session_id": session_id, "after": after, "limit": limit}),
                0,
            )
            .await
    }

    /// The highest sequence number of a session's transcript (0 when empty).
    pub async fn last_seq(&self, session_id: &str) -> Result<u64> {
        let rows: Vec<u64> = self
            .0
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
    /// and a tombstone says its transcript, context history and context entries are
    /// still to be purged
    /// ([`Store::purge_deleted`]). Small whatever the session's length.
    /// What is still to go from git (`git`) is kept on the tombstone until
    /// [`Store::git_removed`].
    pub async fn delete_session(&self, session_id: &str, git: &GitLeftovers) -> Result<()> {
        self.0
            .write(
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

    /// Removes a deleted session's transcript, context history and context entries in
    /// transactions of at most [`PURGE_BATCH`] records each, then its tombstone. Safe to
    /// repeat after a failure.
    pub async fn purge_deleted(&self, session_id: &str) -> Result<()> {
        self.purge_rows(session_id).await?;
        // A tombstone whose worktree or branch is still to go stays for that.
        self.0
            .write(
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

    /// Deletes a session's transcript, context history and context entries, at most
    /// [`PURGE_BATCH`] records a transaction. Their records are keyed `<session>-<seq>`, so each
    /// batch is a range of keys: it starts at the first record left (one read of one
    /// key, past the ranges already deleted rather than through their remains in the
    /// session's index) and is deleted by one statement, with no query per record. Safe
    /// to repeat after a failure: it goes on from what is left.
    pub(super) async fn purge_rows(&self, session_id: &str) -> Result<()> {
        let batch = PURGE_BATCH;
        for table in ["transcript", "context_history", "context_entries"] {
            let mut from = 0;
            loop {
                let first: Vec<String> = self
                    .0
                    .rows(
                        &format!(
                            "SELECT VALUE record::id(id) FROM {} LIMIT 1",
                            seq_range(table, session_id, from, MAX_SEQ)
                        ),
                        json!({}),
                        0,
                    )
                    .await?;
                let Some(first) = first.first() else {
                    break;
                };
                // The key's seq (never below `from`, where the range started).
                let first = first
                    .rsplit('-')
                    .next()
                    .and_then(|seq| seq.parse::<u64>().ok())
                    .unwrap_or(from)
                    .max(from);
                let last = first.saturating_add(batch - 1).min(MAX_SEQ);
                self.0
                    .write(
                        &format!(
                            "DELETE {} RETURN NONE",
                            seq_range(table, session_id, first, last)
                        ),
                        json!({}),
                        Touched::default(),
                    )
                    .await?;
                if last == MAX_SEQ {
                    break;
                }
                from = last + 1;
            }
        }
        // Records keyed otherwise (written before their keys carried the seq), found
        // through the session's index.
        for table in ["transcript", "context_history"] {
            loop {
                let out = self.0
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
        self.0
            .write(
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
            .0
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
            .0
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
                    .0
                    .readable_rows("deleted_sessions", "record::id(id) AS id")
                    .await?;
                Ok(rows.into_iter().map(|r| r.id).collect())
            }
            ids => ids,
        }
    }
}

/// Records (transcript entries, context changes or entries) one purge transaction
/// deletes. Each transaction of a purge costs a pass of the search index's compaction
/// over what it removed, so fewer, larger ones cost less: 2,000 took a quarter less CPU
/// than 1,000 (and half of 500) for entries of 40 words.
const PURGE_BATCH: u64 = 2000;

/// The highest seq a record key carries (twelve digits).
const MAX_SEQ: u64 = 999_999_999_999;

/// The records of `table` keyed `<session>-<first>` to `<session>-<last>`, as a range.
fn seq_range(table: &str, session_id: &str, first: u64, last: u64) -> String {
    format!(
        "{table}:{}..={}",
        quoted(&seq_id(session_id, first)),
        quoted(&seq_id(session_id, last))
    )
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
