//! Bringing a database's schema up to this build's version, one migration at a time.
//! Several daemons of a team may open a new database at once: choosing it and migrating
//! it are run again when they lose a race to another daemon (they find the work done).

use serde_json::{Value, json};

use super::schema::{self, SCHEMA_VERSION};
use std::time::Duration;

use super::conn::Store;
use super::error::{Result, StoreError, again_on_conflict};

/// How many times the migrations are started over when another daemon's write conflicts.
const MIGRATE_TRIES: u32 = 5;

impl Store {
    /// Chooses the namespace and database (a server makes them when they are new) and,
    /// when `migrate`, brings the schema up to date.
    pub(super) async fn prepare(&self, ns: &str, db: &str, migrate: bool) -> Result<()> {
        let mut pause = Duration::from_millis(50);
        let mut tried = 1;
        loop {
            let prepared = again_on_conflict(MIGRATE_TRIES, pause, || async {
                self.use_ns(ns, db).await?;
                if migrate {
                    self.migrate_once().await?;
                }
                Ok(())
            })
            .await;
            match prepared {
                // A migration that failed as a whole while another daemon ran the same one
                // (the server says only that the transaction failed): the work is found
                // done, or done, when it is started over.
                Err(e) if tried < MIGRATE_TRIES && lost_a_race(&e) => {
                    tracing::debug!(error = %e, "a migration lost a race; again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    tried += 1;
                }
                done => return done,
            }
        }
    }

    async fn migrate_once(&self) -> Result<()> {
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
            if let Err(e) = self.run(&sql, json!({})).await {
                // Team mode: another daemon sharing the server may have just done it.
                if self.schema_version().await? > version {
                    continue;
                }
                return Err(e);
            }
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
}

/// Whether a migration's transaction failed as a whole, as it does when another daemon
/// changes the same definitions at the same time.
fn lost_a_race(error: &StoreError) -> bool {
    matches!(error, StoreError::Db(e) if e.to_string().contains("failed transaction"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::protocol::{InboxMessage, MsgType, Purpose};
    use crate::store::{SCHEMA_VERSION, memory_store};

    fn message(id: &str, purpose: Option<Purpose>) -> InboxMessage {
        InboxMessage {
            kiln: None,
            digest: None,
            id: id.into(),
            session_id: "s".into(),
            session_name: "s".into(),
            timestamp: "2026-01-01T00:00:00Z".into(),
            msg_type: MsgType::DecisionNeeded,
            title: "Context miss".into(),
            body: None,
            options: Some(vec!["Widen and restart".into(), "Leave it stopped".into()]),
            option_kinds: None,
            rule: None,
            operation: None,
            read: false,
            responded: false,
            response: None,
            withdrawn: false,
            answered_by: None,
            purpose,
        }
    }

    /// v18: a database of the version before keeps its messages, which read without a
    /// purpose; a purpose, refused by the old schema, is kept once migrated.
    #[tokio::test]
    async fn messages_gain_a_purpose_at_v18_and_older_ones_read_without_one() {
        let store = memory_store().await;
        store
            .run(
                "REMOVE FIELD purpose ON inbox_messages; \
                 UPSERT crucible_meta:schema SET version = 17;",
                json!({}),
            )
            .await
            .unwrap();
        store.inbox().insert(&[message("old", None)]).await.unwrap();
        let miss = Purpose::ContextMiss {
            path: "/k/README.md".into(),
        };
        assert!(
            store
                .inbox()
                .insert(&[message("early", Some(miss.clone()))])
                .await
                .is_err(),
            "the old schema has no place for a purpose"
        );

        store.migrate_once().await.unwrap();
        assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        let old = store.inbox().get("old").await.unwrap().unwrap();
        assert_eq!(old, message("old", None));
        let asked = message("new", Some(miss));
        store
            .inbox()
            .insert(std::slice::from_ref(&asked))
            .await
            .unwrap();
        assert_eq!(store.inbox().get("new").await.unwrap().unwrap(), asked);
        let listed = store.inbox().list(false, Some("s"), 10).await.unwrap();
        assert!(
            listed.contains(&asked) && listed.contains(&old),
            "{listed:?}"
        );
    }
}
