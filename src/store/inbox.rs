//! The inbox's records: messages, their answers, reads and clearing.

use serde_json::{Value, json};

use super::conn::Store;
use super::durable::Touched;
use super::error::{Result, again_on_conflict};
use super::rows::{decode_rows, typed_row};
use super::sessions::SESSION_WRITE_TRIES;
use crate::protocol::InboxMessage;

const MESSAGE_FIELDS: &str = "record::id(id) AS id, session_id, session_name, timestamp, \
     msg_type, title, body, options, option_kinds, rule, operation, read, responded, response, \
     withdrawn, answered_by, purpose, digest";

/// The inbox's messages: stored, listed, read, answered and cleared.
pub struct InboxRows<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`InboxRows`].
    pub fn inbox(&self) -> InboxRows<'_> {
        InboxRows(self)
    }
}

impl InboxRows<'_> {
    /// Stores several messages in one statement (one transaction): all of them or none.
    pub async fn insert(&self, messages: &[InboxMessage]) -> Result<()> {
        use surrealdb::types::Value as Surreal;
        if messages.is_empty() {
            return Ok(());
        }
        let records = messages.iter().map(record).collect::<Result<Vec<_>>>()?;
        let rows = records
            .iter()
            .map(|m| typed_row(m, &["timestamp"]).map(|row| self.0.stamped(row)))
            .collect::<Result<Vec<_>>>()?;
        let mut vars = surrealdb::types::Object::new();
        vars.insert("rows", Surreal::Array(rows.into_iter().collect()));
        let mut touched = Touched::default();
        for (m, record) in messages.iter().zip(&records) {
            touched.put("inbox_messages", &m.id, record)?;
        }
        self.0
            .write_bound(
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
    pub async fn list(
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
        self.0
            .rows(&sql, json!({"session_id": session_id, "limit": limit}), 0)
            .await
    }

    pub async fn get(&self, id: &str) -> Result<Option<InboxMessage>> {
        let sql = format!("SELECT {MESSAGE_FIELDS} FROM type::record('inbox_messages', $id)");
        Ok(self
            .0
            .rows(&sql, json!({"id": id}), 0)
            .await?
            .into_iter()
            .next())
    }

    /// Marks messages read; returns the ones that changed.
    pub async fn mark_read(&self, ids: &[String]) -> Result<Vec<InboxMessage>> {
        let sql = format!(
            "LET $records = array::map($ids, |$i| type::record('inbox_messages', $i));
             SELECT {MESSAGE_FIELDS} FROM (UPDATE $records SET read = true, origin = $origin WHERE read = false RETURN AFTER);"
        );
        let touched = Touched {
            records: ids
                .iter()
                .map(|id| ("inbox_messages", id.clone()))
                .collect(),
            ops: Vec::new(),
        };
        let out = self.0.write(&sql, json!({"ids": ids}), touched).await?;
        decode_rows(out.into_iter().nth(1).unwrap_or(Value::Null))
    }

    /// Records the answer to a message that has none yet (or, `withdrawn`, closes it
    /// without one). `None` when the message does not exist or was already answered (the
    /// caller tells which).
    pub async fn respond(
        &self,
        id: &str,
        response: &str,
        withdrawn: bool,
        by: Option<&str>,
    ) -> Result<Option<InboxMessage>> {
        let sql = format!(
            "SELECT {MESSAGE_FIELDS} FROM (
                UPDATE type::record('inbox_messages', $id)
                SET responded = true, response = $response, read = true, withdrawn = $withdrawn,
                    answered_by = $by, origin = $origin
                WHERE responded = false RETURN AFTER)"
        );
        // Two answers at once: the engine refuses the later transaction as a conflict.
        // Run again, it finds the message answered and changes nothing, so its caller is
        // told the message was answered already, never that the store failed.
        let vars = json!({"id": id, "response": response, "withdrawn": withdrawn, "by": by});
        let out = again_on_conflict(
            SESSION_WRITE_TRIES,
            std::time::Duration::from_millis(1),
            || {
                self.0
                    .write(&sql, vars.clone(), Touched::record("inbox_messages", id))
            },
        )
        .await?;
        let rows: Vec<InboxMessage> = decode_rows(out.into_iter().next().unwrap_or(Value::Null))?;
        Ok(rows.into_iter().next())
    }

    /// The decisions and approvals of a session that still wait for an answer.
    pub async fn open_blocking(&self, session_id: &str) -> Result<Vec<String>> {
        self.0
            .rows(
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
        // Which messages go is known only once they are gone: journaled after.
        let out = self.0
            .write(
                "SELECT VALUE record::id(id) FROM (
                DELETE inbox_messages WHERE read = true
                    AND (responded = true OR msg_type NOTINSIDE ['decision_needed', 'approval_required'])
                    RETURN BEFORE)",
                json!({}),
                Touched::default(),
            )
            .await?;
        let ids: Vec<String> = decode_rows(out.into_iter().next().unwrap_or(Value::Null))?;
        let mut touched = Touched::default();
        for id in &ids {
            touched.records.push(("inbox_messages", id.clone()));
        }
        self.0.journal(touched).await?;
        Ok(ids)
    }

    pub async fn count_unread(&self) -> Result<u64> {
        let rows = self
            .0
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
}

/// A message as its record keeps it: its purpose as JSON text (its shape is the
/// protocol's), as a session keeps its usage.
fn record(message: &InboxMessage) -> Result<Value> {
    let mut record = serde_json::to_value(message)?;
    if let Some(purpose) = record.get_mut("purpose") {
        *purpose = Value::String(purpose.to_string());
    }
    Ok(record)
}
