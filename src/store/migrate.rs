//! Bringing a database's schema up to this build's version, one migration at a time.
//! Several daemons of a team may open a new database at once: choosing it and migrating
//! it are run again when they lose a race to another daemon (they find the work done).

use serde_json::{Value, json};

use super::schema::{self, SCHEMA_VERSION};
use std::time::Duration;

use super::{Result, Store, StoreError, again_on_conflict};

/// How many times the migrations are started over when another daemon's write conflicts.
const MIGRATE_TRIES: u32 = 5;

impl Store {
    /// Chooses the namespace and database (a server makes them when they are new) and,
    /// when `migrate`, brings the schema up to date.
    pub(super) async fn prepare(&self, ns: &str, db: &str, migrate: bool) -> Result<()> {
        again_on_conflict(MIGRATE_TRIES, Duration::from_millis(50), || async {
            self.use_ns(ns, db).await?;
            if migrate {
                self.migrate_once().await?;
            }
            Ok(())
        })
        .await
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
