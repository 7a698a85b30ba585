//! Team mode's records: the daemons sharing a server and their leases, the commands one
//! daemon sends another, and the live queries through which each daemon sees the others'
//! changes. Lease times are the server's clock (`time::now()`), so the hosts' clocks
//! need not agree.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::durable::Touched;
use super::{Conn, Result, SESSION_FIELDS, Store, StoreError, decode_rows};
use crate::protocol::{DaemonInfo, Session};

const DAEMON_FIELDS: &str = "record::id(id) AS id, host, kiln, pid, started_at, lease_until, \
     taken_by, (taken_by = NONE AND lease_until > time::now()) AS live";

/// The tables other daemons' changes arrive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveTable {
    Sessions,
    Inbox,
    Transcript,
    Commands,
    Daemons,
}

impl LiveTable {
    const ALL: [LiveTable; 5] = [
        LiveTable::Sessions,
        LiveTable::Inbox,
        LiveTable::Transcript,
        LiveTable::Commands,
        LiveTable::Daemons,
    ];

    fn table(self) -> &'static str {
        match self {
            LiveTable::Sessions => "sessions",
            LiveTable::Inbox => "inbox_messages",
            LiveTable::Transcript => "transcript",
            LiveTable::Commands => "commands",
            LiveTable::Daemons => "daemons",
        }
    }
}

/// One change seen by a live query: the record after it (before it, for a delete), with
/// its key as `id`.
#[derive(Debug, Clone)]
pub struct LiveChange {
    pub table: LiveTable,
    pub deleted: bool,
    pub created: bool,
    pub record: Value,
}

/// A command for the daemon that runs a session: a JSON-RPC call, and its outcome once
/// that daemon has answered it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandRecord {
    pub id: String,
    /// The daemon that is to run it.
    pub target: String,
    /// The daemon that asked (and waits for the answer).
    pub origin: String,
    pub method: String,
    /// The call's params, as JSON text.
    pub params: String,
    #[serde(default)]
    pub done: bool,
    /// The answer, as JSON text.
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
}

pub type LiveStream =
    Pin<Box<dyn Stream<Item = std::result::Result<LiveChange, StoreError>> + Send>>;

impl Store {
    fn server(&self) -> Result<&super::remote::Remote> {
        match &self.conn {
            Conn::Remote(r) => Ok(r),
            Conn::Local(..) => Err(StoreError::Db(
                "team mode needs a SurrealDB server (store.url = \"ws://…\")".into(),
            )),
        }
    }

    /// Records this daemon with a lease of `lease` from now.
    pub async fn register_daemon(&self, me: &DaemonInfo, lease: Duration) -> Result<()> {
        self.write(
            "CREATE type::record('daemons', $id) CONTENT {
                host: $host, kiln: $kiln, pid: $pid, started_at: <datetime>$started_at,
                lease_until: time::now() + <duration>$lease
             } RETURN NONE",
            json!({
                "id": me.id, "host": me.host, "kiln": me.kiln, "pid": me.pid,
                "started_at": me.started_at, "lease": format!("{}ms", lease.as_millis()),
            }),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    /// Extends this daemon's lease; false when another daemon has taken its sessions
    /// over (or its record is gone): it must stop driving them.
    pub async fn renew_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let out = self
            .write(
                "UPDATE type::record('daemons', $id)
                 SET lease_until = time::now() + <duration>$lease
                 WHERE taken_by = NONE RETURN VALUE record::id(id)",
                json!({"id": id, "lease": format!("{}ms", lease.as_millis())}),
                Touched::default(),
            )
            .await?;
        let rows: Vec<Value> = decode_rows(out.into_iter().next().unwrap_or(Value::Null))?;
        Ok(!rows.is_empty())
    }

    /// Drops the records of daemons whose sessions were taken over longer than `ttl` ago
    /// (a SurrealQL duration).
    pub async fn forget_taken_daemons(&self, ttl: &str) -> Result<()> {
        self.write(
            "DELETE daemons WHERE taken_by != NONE AND lease_until < time::now() - <duration>$ttl
             RETURN NONE",
            json!({"ttl": ttl}),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    /// Every daemon that shares the database, oldest first.
    pub async fn list_daemons(&self) -> Result<Vec<DaemonInfo>> {
        self.rows(
            &format!("SELECT {DAEMON_FIELDS} FROM daemons ORDER BY started_at"),
            json!({}),
            0,
        )
        .await
    }

    /// Takes over the sessions of daemon `old` for `me`, if its lease has run out (or,
    /// `force`, whatever its lease: it ran on this kiln, whose lock we hold). One claim
    /// wins: the daemon's record is marked in the same transaction as its sessions move.
    /// `None` when the claim did not happen (the lease is current, or another daemon took
    /// them first).
    pub async fn claim_daemon(
        &self,
        old: &str,
        me: &str,
        force: bool,
    ) -> Result<Option<Vec<Session>>> {
        let sql = "BEGIN TRANSACTION;
             LET $claimed = (UPDATE type::record('daemons', $old) SET taken_by = $me
                WHERE taken_by = NONE AND ($force OR lease_until < time::now())
                RETURN VALUE record::id(id));
             LET $moved = IF array::len($claimed) > 0 {
                (UPDATE sessions SET owner = $me, origin = $origin WHERE owner = $old
                    RETURN VALUE record::id(id))
             } ELSE { [] };
             COMMIT TRANSACTION;
             RETURN { claimed: array::len($claimed) > 0, moved: $moved };";
        let out = self
            .write(
                sql,
                json!({"old": old, "me": me, "force": force}),
                Touched::default(),
            )
            .await;
        let out = match out {
            Ok(out) => out,
            // Two daemons claiming at once: the loser's transaction conflicts.
            Err(StoreError::Db(e)) if e.contains("conflict") || e.contains("retry") => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let last = out.last().cloned().unwrap_or(Value::Null);
        if last.get("claimed").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        let moved: Vec<String> = decode_rows(last.get("moved").cloned().unwrap_or(Value::Null))?;
        let sessions = self
            .rows(
                &format!(
                    "SELECT {SESSION_FIELDS} FROM array::map($ids, |$i| type::record('sessions', $i))
                     WHERE id != NONE ORDER BY id"
                ),
                json!({"ids": moved}),
                0,
            )
            .await?;
        Ok(Some(sessions))
    }

    /// Sessions of this daemon.
    pub async fn owned_sessions(&self, me: &str) -> Result<Vec<Session>> {
        self.rows(
            &format!("SELECT {SESSION_FIELDS} FROM sessions WHERE owner = $me ORDER BY id"),
            json!({"me": me}),
            0,
        )
        .await
    }

    /// Sessions no daemon owns (made before team mode): the first daemon to ask takes them.
    pub async fn claim_unowned(&self, me: &str) -> Result<Vec<String>> {
        let out = self
            .write(
                "UPDATE sessions SET owner = $me, origin = $origin WHERE owner = NONE
                 RETURN VALUE record::id(id)",
                json!({"me": me}),
                Touched::default(),
            )
            .await?;
        decode_rows(out.into_iter().next().unwrap_or(Value::Null))
    }

    /// Sends a command to the daemon `target`.
    pub async fn insert_command(&self, command: &CommandRecord) -> Result<()> {
        self.write(
            "CREATE type::record('commands', $id) CONTENT {
                target: $target, origin: $origin, method: $method, params: $params,
                at: time::now(), done: false
             } RETURN NONE",
            json!({
                "id": command.id, "target": command.target, "origin": command.origin,
                "method": command.method, "params": command.params,
            }),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    /// Records a command's answer (once).
    pub async fn finish_command(
        &self,
        id: &str,
        outcome: std::result::Result<Value, (i64, String)>,
    ) -> Result<()> {
        let (result, code, error) = match outcome {
            Ok(value) => (Some(value.to_string()), None, None),
            Err((code, message)) => (None, Some(code), Some(message)),
        };
        self.write(
            "UPDATE type::record('commands', $id)
             SET done = true, result = $result, error_code = $code, error = $error
             WHERE done = false RETURN NONE",
            json!({"id": id, "result": result, "code": code, "error": error}),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    pub async fn get_command(&self, id: &str) -> Result<Option<CommandRecord>> {
        Ok(self
            .rows(
                "SELECT *, record::id(id) AS id FROM type::record('commands', $id)",
                json!({"id": id}),
                0,
            )
            .await?
            .into_iter()
            .next())
    }

    /// Commands for `me` not yet answered (sent while it was away from the server).
    pub async fn pending_commands(&self, me: &str) -> Result<Vec<CommandRecord>> {
        self.rows(
            "SELECT *, record::id(id) AS id FROM commands WHERE target = $me AND done = false
             ORDER BY id",
            json!({"me": me}),
            0,
        )
        .await
    }

    pub async fn delete_command(&self, id: &str) -> Result<()> {
        self.write(
            "DELETE type::record('commands', $id) RETURN NONE",
            json!({"id": id}),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    /// Live queries on the tables other daemons change, merged into one stream. It ends
    /// (or yields an error) when the connection to the server breaks.
    pub async fn live(&self) -> Result<LiveStream> {
        let remote = self.server()?;
        let sql: String = LiveTable::ALL
            .iter()
            .map(|t| format!("LIVE SELECT *, record::id(id) AS id FROM {};", t.table()))
            .collect();
        let mut response = tokio::time::timeout(remote.timeout(), remote.db.query(sql))
            .await
            .map_err(|_| StoreError::Db("the server did not start the live queries".into()))?
            .map_err(|e| remote.check(e))?;
        let mut streams = Vec::with_capacity(LiveTable::ALL.len());
        for (index, table) in LiveTable::ALL.into_iter().enumerate() {
            let stream = response
                .stream::<surrealdb::types::Value>(index)
                .map_err(|e| remote.check(e))?;
            streams.push(
                stream
                    .map(move |item| match item {
                        Ok(note) => change(table, note),
                        Err(e) => Err(StoreError::LiveEnded(e.to_string())),
                    })
                    .boxed(),
            );
        }
        Ok(futures::stream::select_all(streams).boxed())
    }
}

fn change(
    table: LiveTable,
    note: surrealdb::Notification<surrealdb::types::Value>,
) -> std::result::Result<LiveChange, StoreError> {
    use surrealdb::types::Action;
    let (created, deleted) = match note.action {
        Action::Create => (true, false),
        Action::Update => (false, false),
        Action::Delete => (false, true),
        other => {
            return Err(StoreError::LiveEnded(format!(
                "the live query on {} ended ({other:?})",
                table.table()
            )));
        }
    };
    let mut record = note.data.into_json_value();
    if let Some(map) = record.as_object_mut()
        && let Some(Value::String(id)) = map.get("id")
    {
        let key = record_key(id);
        map.insert("id".into(), Value::String(key));
    }
    Ok(LiveChange {
        table,
        deleted,
        created,
        record,
    })
}

/// `table:⟨key⟩` or `table:key` to `key`; a bare key as it is.
fn record_key(id: &str) -> String {
    let key = match id.split_once(':') {
        Some((table, key)) if !table.is_empty() && !table.contains(['⟨', '`']) => key,
        _ => id,
    };
    key.trim_start_matches(['⟨', '`'])
        .trim_end_matches(['⟩', '`'])
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::record_key;
    use crate::protocol::{DaemonInfo, Session};
    use crate::store::CommandRecord;

    use crate::store::memory_store as memory;

    fn daemon(id: &str) -> DaemonInfo {
        DaemonInfo {
            id: id.into(),
            host: "host".into(),
            kiln: "/kiln".into(),
            pid: 1,
            started_at: crate::ledger::now_rfc3339(),
            lease_until: String::new(),
            taken_by: None,
            live: true,
        }
    }

    fn session(id: &str, owner: &str) -> Session {
        let mut s: Session = serde_json::from_value(serde_json::json!({
            "id": id, "agent_type": "command", "agent_name": "a", "status": "active",
            "started_at": "2026-11-25T08:00:00Z", "last_heartbeat": "2026-11-25T08:00:00Z",
            "display_name": "main @ a", "state": "working",
        }))
        .unwrap();
        s.owner = Some(owner.into());
        s
    }

    #[tokio::test]
    async fn one_claim_of_a_lapsed_lease_wins_and_moves_only_that_daemons_sessions() {
        let store = memory().await;
        store
            .register_daemon(&daemon("A"), Duration::from_millis(1))
            .await
            .unwrap();
        store
            .register_daemon(&daemon("B"), Duration::from_secs(60))
            .await
            .unwrap();
        store.insert_session(&session("S1", "A")).await.unwrap();
        store.insert_session(&session("S2", "A")).await.unwrap();
        store.insert_session(&session("S3", "B")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;

        // B's lease is current: nobody may claim it.
        assert_eq!(store.claim_daemon("B", "C", false).await.unwrap(), None);
        let moved = store.claim_daemon("A", "B", false).await.unwrap().unwrap();
        let ids: Vec<&str> = moved.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["S1", "S2"]);
        assert!(moved.iter().all(|s| s.owner.as_deref() == Some("B")));
        // A second claim finds it taken; A itself can no longer renew.
        assert_eq!(store.claim_daemon("A", "C", false).await.unwrap(), None);
        assert!(
            !store
                .renew_lease("A", Duration::from_secs(60))
                .await
                .unwrap()
        );
        assert!(
            store
                .renew_lease("B", Duration::from_secs(60))
                .await
                .unwrap()
        );
        let daemons = store.list_daemons().await.unwrap();
        let a = daemons.iter().find(|d| d.id == "A").unwrap();
        assert_eq!(a.taken_by.as_deref(), Some("B"));
        assert!(!a.live);
        assert!(daemons.iter().find(|d| d.id == "B").unwrap().live);
        assert_eq!(store.owned_sessions("B").await.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_forced_claim_takes_a_current_lease() {
        let store = memory().await;
        store
            .register_daemon(&daemon("OLD"), Duration::from_secs(60))
            .await
            .unwrap();
        store.insert_session(&session("S1", "OLD")).await.unwrap();
        assert_eq!(store.claim_daemon("OLD", "NEW", false).await.unwrap(), None);
        let moved = store
            .claim_daemon("OLD", "NEW", true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(moved.len(), 1);
    }

    #[tokio::test]
    async fn a_command_is_answered_once() {
        let store = memory().await;
        let command = CommandRecord {
            id: "C1".into(),
            target: "A".into(),
            origin: "B".into(),
            method: "session.prompt".into(),
            params: r#"{"session_id":"S1","text":"hi"}"#.into(),
            done: false,
            result: None,
            error_code: None,
            error: None,
        };
        store.insert_command(&command).await.unwrap();
        assert_eq!(
            store.pending_commands("A").await.unwrap(),
            vec![command.clone()]
        );
        assert!(store.pending_commands("B").await.unwrap().is_empty());
        store
            .finish_command("C1", Ok(serde_json::json!({"queued": true})))
            .await
            .unwrap();
        store
            .finish_command("C1", Err((-32003, "late".into())))
            .await
            .unwrap();
        let done = store.get_command("C1").await.unwrap().unwrap();
        assert!(done.done);
        assert_eq!(done.result.as_deref(), Some(r#"{"queued":true}"#));
        assert_eq!(done.error, None);
        assert!(store.pending_commands("A").await.unwrap().is_empty());
        store.delete_command("C1").await.unwrap();
        assert_eq!(store.get_command("C1").await.unwrap(), None);
    }

    #[test]
    fn record_keys() {
        assert_eq!(record_key("sessions:⟨01ABC⟩"), "01ABC");
        assert_eq!(record_key("commands:01ABC"), "01ABC");
        assert_eq!(record_key("01ABC"), "01ABC");
        assert_eq!(
            record_key("transcript:`01A-000000000001`"),
            "01A-000000000001"
        );
    }
}
