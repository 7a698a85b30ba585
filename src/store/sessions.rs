//! The session registry and its handles in the database: writing and listing sessions
//! (retried when the engine reports a conflict), heartbeats written in batches, and the
//! handles' digests.

use serde_json::{Value, json};

use super::check;
use super::conn::Store;
use super::durable::Touched;
use super::error::{Result, again_on_conflict};
use super::journal::Op;
use super::rows::{decode_rows, typed_row};
use crate::protocol::Session;

pub(super) const SESSION_FIELDS: &str = "record::id(id) AS id, worktree, agent_type, agent_name, status, \
     started_at, last_heartbeat, display_name, state, state_reason, task, branch, \
     worktree_owned, acp_session_id, agent_pid, updated_at, ended_at, exit_code, \
     context_summary, turn_count, driver, limits, security, skills, base_branch, usage, spent, \
     handed_from, handed_to, switched, channel, owner, host, queued, turn_prompt";

/// How many times a session's record is written when the engine reports a conflict.
pub(super) const SESSION_WRITE_TRIES: u32 = 5;

/// The sessions table and the handles of registered sessions.
pub struct SessionRows<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`SessionRows`].
    pub fn sessions(&self) -> SessionRows<'_> {
        SessionRows(self)
    }
}

impl SessionRows<'_> {
    pub async fn insert(&self, s: &Session) -> Result<()> {
        self.write_session("CREATE", s).await
    }

    /// Writes the whole session record, creating it if needed.
    pub async fn save(&self, s: &Session) -> Result<()> {
        self.write_session("UPSERT", s).await
    }

    async fn write_session(&self, verb: &str, s: &Session) -> Result<()> {
        let mut row = typed_row(
            s,
            &["started_at", "last_heartbeat", "updated_at", "ended_at"],
        )?;
        row.remove("id");
        // The driver spec is kept as its JSON text (its shape is the protocol's).
        if let Some(spec) = &s.driver {
            let text = serde_json::to_string(spec)?;
            row.insert("driver", surrealdb::types::Value::from_t(text));
        }
        // So are the security state and the usage.
        row.remove("security");
        if !s.security.is_empty() {
            let text = serde_json::to_string(&s.security)?;
            row.insert("security", surrealdb::types::Value::from_t(text));
        }
        row.remove("usage");
        if let Some(usage) = &s.usage {
            let text = serde_json::to_string(usage)?;
            row.insert("usage", surrealdb::types::Value::from_t(text));
        }
        // Measured when asked, never stored.
        row.remove("resources");
        row.remove("spent");
        if let Some(spent) = &s.spent {
            let text = serde_json::to_string(spent)?;
            row.insert("spent", surrealdb::types::Value::from_t(text));
        }
        row.remove("switched");
        if let Some(switched) = &s.switched {
            let text = serde_json::to_string(switched)?;
            row.insert("switched", surrealdb::types::Value::from_t(text));
        }
        row.remove("channel");
        if let Some(channel) = &s.channel {
            let text = serde_json::to_string(channel)?;
            row.insert("channel", surrealdb::types::Value::from_t(text));
        }
        let mut vars = surrealdb::types::Object::new();
        vars.insert("id", surrealdb::types::Value::from_t(s.id.clone()));
        vars.insert("row", self.0.stamped(row));
        let sql = format!("{verb} type::record('sessions', $id) CONTENT $row RETURN NONE");
        // A session's record is written by its actor and from outside it (a channel's
        // record, a rename) at the same moment; the engine refuses the later of two
        // such transactions as a conflict and says it can be tried again. A whole-record
        // write is the same write the second time, so it is.
        let vars = surrealdb::types::Value::Object(vars);
        again_on_conflict(
            SESSION_WRITE_TRIES,
            std::time::Duration::from_millis(1),
            || {
                self.0
                    .write_bound(&sql, vars.clone(), Touched::record("sessions", &s.id))
            },
        )
        .await?;
        Ok(())
    }

    /// Every session (what the daemon starts with): a record the engine cannot read
    /// back is left out, not a reason to stay down.
    pub async fn list(&self) -> Result<Vec<Session>> {
        let sql = format!("SELECT {SESSION_FIELDS} FROM sessions ORDER BY id");
        match self.0.rows(&sql, json!({}), 0).await {
            Err(e) if check::is_unreadable(&e) => {
                self.0.readable_rows("sessions", SESSION_FIELDS).await
            }
            listed => listed,
        }
    }

    pub async fn delete(&self, id: &str) -> Result<bool> {
        let out = self
            .0
            .write(
                "DELETE type::record('sessions', $id) RETURN BEFORE",
                json!({"id": id}),
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
        self.0.write(
            "FOR $b IN $beats {
                UPDATE type::record('sessions', $b.id) SET last_heartbeat = <datetime>$b.at, origin = $origin;
            };",
            json!({"beats": rows}),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    // ---- handles ----

    pub async fn insert_handle(&self, digest: &str, session_id: &str) -> Result<()> {
        self.0
            .write(
                "CREATE type::record('handles', $digest) SET session_id = $session_id RETURN NONE",
                json!({"digest": digest, "session_id": session_id}),
                Touched::record("handles", digest),
            )
            .await?;
        Ok(())
    }

    /// Revokes every handle of a session.
    pub async fn revoke_handles(&self, session_id: &str) -> Result<()> {
        self.0
            .write(
                "DELETE handles WHERE session_id = $session_id RETURN NONE",
                json!({"session_id": session_id}),
                Touched::default().op(Op::RevokeHandles {
                    session_id: session_id.to_string(),
                }),
            )
            .await?;
        Ok(())
    }

    /// (digest, session id) of every live handle.
    pub async fn handles(&self) -> Result<Vec<(String, String)>> {
        #[derive(serde::Deserialize)]
        struct Row {
            digest: String,
            session_id: String,
        }
        const FIELDS: &str = "record::id(id) AS digest, session_id";
        let rows: Vec<Row> = match self
            .0
            .rows(&format!("SELECT {FIELDS} FROM handles"), json!({}), 0)
            .await
        {
            Err(e) if check::is_unreadable(&e) => self.0.readable_rows("handles", FIELDS).await?,
            rows => rows?,
        };
        Ok(rows.into_iter().map(|r| (r.digest, r.session_id)).collect())
    }

    // ---- raw queries ----
}
