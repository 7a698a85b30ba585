//! Team mode's daemons: each daemon sharing a server records itself with a lease, and a
//! daemon whose lease ran out has its sessions claimed by another. Lease times are the
//! server's clock (`time::now()`), so the hosts' clocks need not agree. The commands one
//! daemon sends another are in `commands.rs`, the live queries in `live.rs`.

use std::time::Duration;

use serde_json::{Value, json};

use super::conn::Store;
use super::durable::Touched;
use super::error::{Result, StoreError};
use super::rows::decode_rows;
use super::sessions::SESSION_FIELDS;
use crate::protocol::{DaemonInfo, Session};

const DAEMON_FIELDS: &str = "record::id(id) AS id, host, kiln, pid, started_at, lease_until, \
     taken_by, (taken_by = NONE AND lease_until > time::now()) AS live";

/// Team mode's daemons: their leases and claims, and the sessions each owns.
pub struct TeamRows<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`TeamRows`].
    pub fn team(&self) -> TeamRows<'_> {
        TeamRows(self)
    }
}

impl TeamRows<'_> {
    /// Records this daemon with a lease of `lease` from now.
    pub async fn register(&self, me: &DaemonInfo, lease: Duration) -> Result<()> {
        self.0
            .write(
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
            .0
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
    pub async fn forget_taken(&self, ttl: &str) -> Result<()> {
        self.0.write(
            "DELETE daemons WHERE taken_by != NONE AND lease_until < time::now() - <duration>$ttl
             RETURN NONE",
            json!({"ttl": ttl}),
            Touched::default(),
        )
        .await?;
        Ok(())
    }

    /// Every daemon that shares the database, oldest first.
    pub async fn daemons(&self) -> Result<Vec<DaemonInfo>> {
        self.0
            .rows(
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
    pub async fn claim(&self, old: &str, me: &str, force: bool) -> Result<Option<Vec<Session>>> {
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
            .0
            .write(
                sql,
                json!({"old": old, "me": me, "force": force}),
                Touched::default(),
            )
            .await;
        let out = match out {
            Ok(out) => out,
            // Two daemons claiming at once: the loser's transaction conflicts.
            Err(StoreError::Db(e))
                if e.to_string().contains("conflict") || e.to_string().contains("retry") =>
            {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let last = out.last().cloned().unwrap_or(Value::Null);
        if last.get("claimed").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        let moved: Vec<String> = decode_rows(last.get("moved").cloned().unwrap_or(Value::Null))?;
        let sessions = self.0
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
        self.0
            .rows(
                &format!("SELECT {SESSION_FIELDS} FROM sessions WHERE owner = $me ORDER BY id"),
                json!({"me": me}),
                0,
            )
            .await
    }

    /// Sessions no daemon owns (made before team mode): the first daemon to ask takes them.
    pub async fn claim_unowned(&self, me: &str) -> Result<Vec<String>> {
        let out = self
            .0
            .write(
                "UPDATE sessions SET owner = $me, origin = $origin WHERE owner = NONE
                 RETURN VALUE record::id(id)",
                json!({"me": me}),
                Touched::default(),
            )
            .await?;
        decode_rows(out.into_iter().next().unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::protocol::{DaemonInfo, Session};

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
            .team()
            .register(&daemon("A"), Duration::from_millis(1))
            .await
            .unwrap();
        store
            .team()
            .register(&daemon("B"), Duration::from_secs(60))
            .await
            .unwrap();
        store.sessions().insert(&session("S1", "A")).await.unwrap();
        store.sessions().insert(&session("S2", "A")).await.unwrap();
        store.sessions().insert(&session("S3", "B")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;

        // B's lease is current: nobody may claim it.
        assert_eq!(store.team().claim("B", "C", false).await.unwrap(), None);
        let moved = store.team().claim("A", "B", false).await.unwrap().unwrap();
        let ids: Vec<&str> = moved.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["S1", "S2"]);
        assert!(moved.iter().all(|s| s.owner.as_deref() == Some("B")));
        // A second claim finds it taken; A itself can no longer renew.
        assert_eq!(store.team().claim("A", "C", false).await.unwrap(), None);
        assert!(
            !store
                .team()
                .renew_lease("A", Duration::from_secs(60))
                .await
                .unwrap()
        );
        assert!(
            store
                .team()
                .renew_lease("B", Duration::from_secs(60))
                .await
                .unwrap()
        );
        let daemons = store.team().daemons().await.unwrap();
        let a = daemons.iter().find(|d| d.id == "A").unwrap();
        assert_eq!(a.taken_by.as_deref(), Some("B"));
        assert!(!a.live);
        assert!(daemons.iter().find(|d| d.id == "B").unwrap().live);
        assert_eq!(store.team().owned_sessions("B").await.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_forced_claim_takes_a_current_lease() {
        let store = memory().await;
        store
            .team()
            .register(&daemon("OLD"), Duration::from_secs(60))
            .await
            .unwrap();
        store
            .sessions()
            .insert(&session("S1", "OLD"))
            .await
            .unwrap();
        assert_eq!(store.team().claim("OLD", "NEW", false).await.unwrap(), None);
        let moved = store
            .team()
            .claim("OLD", "NEW", true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(moved.len(), 1);
    }
}
