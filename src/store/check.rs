//! Reading every record the engine holds, to find what it can no longer read, and
//! rebuilding the engine from what it still can (and what the journal holds).
//!
//! The engine checks each block of its table files as it reads it; a changed byte makes
//! every read that touches the block fail ("checksum verification failed"), so a whole
//! `inbox.list` fails for a few damaged records. A walk reads each table in key ranges:
//! when a range fails it finds, by halving (see [`keyspace`]), the last key readable
//! before the damage and the first after it, and goes on from there. What it reports is
//! each damaged stretch by the readable keys around it.

use serde_json::Value;

pub use super::catalog::{check_unopened, is_catalog_damage};
use super::conn::Store;
pub use super::durable::embedded_path;
use super::error::Result;
pub use super::error::is_unreadable;
pub use super::repair::{Repaired, rebuild_at_start, repair};
pub use super::schema::TABLES;
use super::walk::Fetch;
pub use crate::protocol::check::{Check, Damaged, TableCheck};

pub use crate::protocol::check::WHAT_TO_DO;

impl Store {
    /// The damage the engine is known to have, one line per damaged stretch.
    pub fn damage(&self) -> Vec<String> {
        self.damage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the daemon rebuilt as it started, and what the rebuild lost.
    pub fn rebuilt(&self) -> Vec<String> {
        self.rebuilt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remembers (and logs) what a rebuild at start did and lost, for `daemon.status`.
    pub fn note_rebuilt(&self, lines: Vec<String>) {
        for line in &lines {
            tracing::error!("database rebuilt: {line}");
        }
        *self.rebuilt.lock().unwrap_or_else(|e| e.into_inner()) = lines;
    }

    /// Remembers what a check found (and logs it).
    fn set_damage(&self, lines: Vec<String>) {
        for line in &lines {
            tracing::error!("database damaged: {line}");
        }
        *self.damage.lock().unwrap_or_else(|e| e.into_inner()) = lines;
    }

    /// Reads every record of every table and names the stretches it cannot read; what
    /// it found is kept for `daemon.status` and logged.
    pub async fn check(&self) -> Result<Check> {
        let mut check = Check::default();
        for table in TABLES {
            let walked = self.walk(table, Fetch::Keys).await?;
            check.tables.push(TableCheck {
                table: table.to_string(),
                readable: walked.rows.len(),
                damaged: walked.damaged,
            });
        }
        // What the walk cannot see: the indexes' entries, and the manifest.
        check.files = self.check_files().await;
        check.merging_stopped = self
            .disk_path()
            .and_then(|path| surrealkv::compaction_halted(&path));
        self.set_damage(check.describe());
        Ok(check)
    }

    /// `SELECT {fields} FROM {table}` in key order, read around what the engine cannot
    /// read back: for what the daemon loads to start, which a damaged record must not
    /// stop. What is left out is logged (and the check at start names it).
    pub(super) async fn readable_rows<T: serde::de::DeserializeOwned>(
        &self,
        table: &str,
        fields: &str,
    ) -> Result<Vec<T>> {
        let walked = self.walk(table, Fetch::Fields(fields)).await?;
        let left_out = TableCheck {
            table: table.to_string(),
            readable: walked.rows.len(),
            damaged: walked.damaged,
        };
        let left_out = Check {
            tables: vec![left_out],
            ..Check::default()
        };
        for line in left_out.describe() {
            tracing::error!("left out of what the daemon loads: {line}");
        }
        super::rows::decode_rows(Value::Array(
            walked.rows.into_iter().map(|(_, row)| row).collect(),
        ))
    }
}
