//! The embedded engine's own files, read block by block: what a record walk (see
//! [`super::check`]) cannot see, namely the search and lookup indexes' entries and the
//! manifest listing the table files, is checked here and named by what it holds.
//!
//! The engine keeps every key in its table files, sorted: a record under
//! `/*<ns>*<db>*<table>\0*<id>`, an index entry under `/*<ns>*<db>*<table>\0+<index id>…`
//! (namespace, database and index ids are four bytes each). A damaged block is known by
//! the keys around it, and those keys say whose data it held.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::json;
use surrealdb_catalog::providers::{DatabaseProvider, TableProvider};

use super::conn::{Conn, Store};
use super::error::{Result, StoreError};
use super::schema::TABLES;
use crate::protocol::check::FileDamage;

/// What to do when the manifest is damaged; every error opening such a database ends
/// with it.
pub const MANIFEST_WHAT_TO_DO: &str = "The engine's manifest (its list of table files) is \
     damaged; the table files themselves may be intact: `cru daemon repair` (with the \
     daemon stopped) rebuilds the list from them, then the database from what they hold \
     and the journal";

/// What a damaged catalog (the engine's version and the definitions of crucible's
/// namespace, database and tables) does.
pub const CATALOG_EFFECT: &str = "the database cannot open without it: the daemon rebuilds \
     the database at its next start from crucible's schema and every record that reads, then \
     the journal, and keeps the damaged one (`cru daemon repair` does the same by hand)";

/// What to do when the engine cannot open because its catalog does not read back; every
/// error opening such a database ends with it.
pub const CATALOG_WHAT_TO_DO: &str = "The engine's catalog (its version and the definitions \
     of crucible's tables) does not read back: `cru daemon check` names the damaged block; the \
     daemon rebuilds the database as it starts (`cru daemon repair` does it with the daemon \
     stopped) from crucible's schema, every record that reads and the journal, and keeps the \
     damaged one";

/// Whether the engine could not open because of its manifest (or a table file it
/// lists).
pub fn is_manifest_damage(e: &StoreError) -> bool {
    says_manifest_damage(&e.to_string())
}

/// Whether an engine's message says its manifest could not be loaded.
pub(super) fn says_manifest_damage(text: &str) -> bool {
    text.contains("Failed to load manifest") || text.contains("Manifest corruption")
}

/// The ids crucible's database has in the engine's keys, and its indexes by id.
pub(super) struct Names {
    pub(super) ns: u32,
    pub(super) db: u32,
    /// (table, index id) → index name.
    pub(super) indexes: HashMap<(String, u32), String>,
}

/// Whose data a key is.
#[derive(Debug, Clone, PartialEq)]
enum Owner {
    Records(String),
    Index {
        table: String,
        index: Option<String>,
    },
    Definitions(String),
    Other(String),
    Engine,
}

impl Owner {
    fn words(&self) -> String {
        match self {
            Owner::Records(t) => format!("records of {t}"),
            Owner::Index {
                table,
                index: Some(ix),
            } => format!("entries of the index {ix} on {table}"),
            Owner::Index { table, index: None } => format!("entries of an index on {table}"),
            Owner::Definitions(t) => format!("the definitions of {t}"),
            Owner::Other(t) => format!("the engine's data for {t}"),
            Owner::Engine => "the engine's own records (its catalog)".into(),
        }
    }

    fn table(&self) -> Option<&str> {
        match self {
            Owner::Records(t) | Owner::Definitions(t) | Owner::Other(t) => Some(t),
            Owner::Index { table, .. } => Some(table),
            Owner::Engine => None,
        }
    }

    fn effect(&self) -> &'static str {
        match self {
            Owner::Index { .. } => {
                "searches and lookups through it fail or miss records; `cru daemon repair` \
                 (with the daemon stopped) rebuilds it from the records"
            }
            Owner::Engine | Owner::Definitions(_) => CATALOG_EFFECT,
            _ => {
                "every read that touches it fails; `cru daemon repair` (with the daemon \
                 stopped) rebuilds the database from what is readable and the journal"
            }
        }
    }
}

fn u32_at(key: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(key.get(at..at + 4)?.try_into().ok()?))
}

/// Whose data `key` is, as far as its bytes say.
fn owner(key: &[u8], names: Option<&Names>) -> Owner {
    // `/*` ns `*` db `*` table `\0` sigil …
    let (Some(ns), Some(db)) = (u32_at(key, 2), u32_at(key, 7)) else {
        return Owner::Engine;
    };
    if !key.starts_with(b"/*") || key.get(6) != Some(&b'*') || key.get(11) != Some(&b'*') {
        return Owner::Engine;
    }
    if names.is_some_and(|n| (n.ns, n.db) != (ns, db)) {
        return Owner::Engine;
    }
    let rest = &key[12..];
    let Some(end) = rest.iter().position(|&b| b == 0) else {
        return Owner::Engine;
    };
    let table = String::from_utf8_lossy(&rest[..end]).into_owned();
    let rest = &rest[end + 1..];
    match rest.first() {
        Some(b'*') => Owner::Records(table),
        Some(b'+') => {
            let index = u32_at(rest, 1)
                .and_then(|id| names.and_then(|n| n.indexes.get(&(table.clone(), id)).cloned()));
            Owner::Index { table, index }
        }
        Some(b'!') => Owner::Definitions(table),
        _ => Owner::Other(table),
    }
}

impl Store {
    /// Reads every block of the embedded engine's table files (nothing for a server or
    /// memory) and names each that does not read back; a manifest that cannot be read
    /// is named too.
    pub(super) async fn check_files(&self) -> Vec<FileDamage> {
        let Some(path) = self.disk_path() else {
            return Vec::new();
        };
        let names = self.index_names().await;
        check_files_at(&path, names.as_ref()).await
    }

    /// The namespace and database ids of crucible's keys, and its indexes by id, from
    /// the engine's catalog (`None` when it cannot be read).
    pub(super) async fn index_names(&self) -> Option<Names> {
        let Conn::Local(_, ds) = &self.conn else {
            return None;
        };
        let current = self
            .run("RETURN [session::ns(), session::db()]", json!({}))
            .await
            .ok()?;
        let current = current.first()?.as_array()?;
        let (ns, db) = (current.first()?.as_str()?, current.get(1)?.as_str()?);
        let tx = ds
            .transaction(surrealdb_kvs::TransactionType::Read)
            .await
            .ok()?;
        let names = async {
            let db = tx.get_db_by_name(ns, db, None).await.ok()??;
            let mut indexes = HashMap::new();
            for table in TABLES {
                let name = surrealdb_strand::TableName::from(*table);
                let Ok(defined) = tx
                    .all_tb_indexes(db.namespace_id, db.database_id, &name, None)
                    .await
                else {
                    continue;
                };
                for ix in defined.iter() {
                    indexes.insert((table.to_string(), ix.index_id.0), ix.name.to_string());
                }
            }
            Some(Names {
                ns: db.namespace_id.0,
                db: db.database_id.0,
                indexes,
            })
        }
        .await;
        let _ = tx.cancel().await;
        names
    }
}

/// Reads every block of the table files of the engine at `path` and names each that does
/// not read back (and a manifest that cannot be read), by whose data it held as far as
/// `names` (the catalog's ids) says.
pub(super) async fn check_files_at(path: &Path, names: Option<&Names>) -> Vec<FileDamage> {
    let manifest = manifest_path(path);
    let path = path.to_path_buf();
    let verified = tokio::task::spawn_blocking(move || surrealkv::verify_tables(&path)).await;
    let blocks = match verified {
        Ok(Ok(blocks)) => blocks,
        Ok(Err(e)) => {
            return vec![FileDamage {
                file: manifest.display().to_string(),
                offset: None,
                holds: "the engine's manifest (its list of table files)".into(),
                table: None,
                index: None,
                error: e.to_string(),
                effect: "the database does not open once the daemon stops; `cru daemon \
                         repair` (with the daemon stopped) rebuilds it from the table files"
                    .into(),
            }];
        }
        Err(e) => {
            tracing::warn!("the check of the engine's table files did not finish: {e}");
            return Vec::new();
        }
    };
    described(blocks, names)
}

/// Each damaged block, named by whose data it held as far as `names` (the catalog's ids)
/// says, and what its damage does.
pub(super) fn described(
    blocks: Vec<surrealkv::DamagedBlock>,
    names: Option<&Names>,
) -> Vec<FileDamage> {
    blocks
        .into_iter()
        .map(|block| {
            let from = block.after.as_deref().map(|k| owner(k, names));
            let to = block.through.as_deref().map(|k| owner(k, names));
            // The block's keys lie after `from`'s key and up to `to`'s: when both
            // name one owner, that is whose data the block held.
            // A file's first block starts wherever the file does (the engine's own
            // records, when it holds them, come first).
            let one = match (&from, &to) {
                (Some(a), Some(b)) if a == b => Some(a.clone()),
                (Some(b), None) => Some(b.clone()),
                _ => None,
            };
            let mut holds = match (&one, &from, &to) {
                (Some(o), ..) => o.words(),
                (None, Some(a), Some(b)) => format!("{} up to {}", a.words(), b.words()),
                (None, None, Some(b)) => format!("the file's first keys up to {}", b.words()),
                _ => "keys of unknown owner".into(),
            };
            let effect = match block.part {
                "filter" => {
                    holds = "a table file's filter".into();
                    "reads stay right but look in every block; `cru daemon repair` \
                     rewrites it"
                        .to_string()
                }
                "table" => {
                    holds = "a whole table file (its index or footer)".into();
                    "the database does not open once the daemon stops; `cru daemon \
                     repair` (with the daemon stopped) sets the file aside and rebuilds \
                     from the rest and the journal"
                        .to_string()
                }
                _ if [&one, &from, &to]
                    .iter()
                    .any(|o| matches!(o, Some(Owner::Engine | Owner::Definitions(_)))) =>
                {
                    CATALOG_EFFECT.to_string()
                }
                _ => one
                    .as_ref()
                    .or(to.as_ref())
                    .map(|o| o.effect())
                    .unwrap_or(Owner::Engine.effect())
                    .to_string(),
            };
            let (table, index) = match &one {
                Some(Owner::Index { table, index }) => (Some(table.clone()), index.clone()),
                Some(o) => (o.table().map(String::from), None),
                None => (None, None),
            };
            FileDamage {
                file: block.file.display().to_string(),
                offset: block.offset,
                holds,
                table,
                index,
                error: block.error,
                effect,
            }
        })
        .collect()
}

/// The manifest of the engine at `path`.
fn manifest_path(path: &Path) -> PathBuf {
    path.join("manifest").join(format!("{:020}.manifest", 0))
}

/// What rebuilding a manifest did, in lines for the person repairing.
pub(super) async fn rebuild_manifest(path: &Path) -> Result<Vec<String>> {
    let at = path.to_path_buf();
    let rebuilt = tokio::task::spawn_blocking(move || surrealkv::rebuild_manifest(&at))
        .await
        .map_err(|e| StoreError::Task(std::sync::Arc::new(e)))?
        .map_err(|e| StoreError::Open {
            url: path.display().to_string(),
            message: format!("cannot rebuild the manifest from the table files: {e}"),
        })?;
    let mut lines = vec![format!(
        "rebuilt the engine's manifest from its {} table files{}",
        rebuilt.tables,
        rebuilt
            .kept
            .as_ref()
            .map(|k| format!(" (the damaged one is kept as {})", k.display()))
            .unwrap_or_default()
    )];
    for (file, why) in &rebuilt.set_aside {
        lines.push(format!(
            "a table file could not be opened and was set aside as {} ({why}): records whose \
             last version it held are lost, or back at an earlier version",
            file.display()
        ));
    }
    for line in &lines {
        tracing::warn!("{line}");
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(table: &str, tail: &[u8]) -> Vec<u8> {
        let mut k = b"/*".to_vec();
        k.extend(7u32.to_be_bytes());
        k.push(b'*');
        k.extend(2u32.to_be_bytes());
        k.push(b'*');
        k.extend(table.as_bytes());
        k.push(0);
        k.extend(tail);
        k
    }

    #[test]
    fn a_key_names_the_table_and_index_whose_data_it_is() {
        let names = Names {
            ns: 7,
            db: 2,
            indexes: HashMap::from([(("sessions".into(), 5), "search_session_task".into())]),
        };
        let names = Some(&names);
        assert_eq!(
            owner(&key("sessions", b"*\x0001ABC"), names),
            Owner::Records("sessions".into())
        );
        let mut ix = b"+".to_vec();
        ix.extend(5u32.to_be_bytes());
        ix.extend(b"!tdword");
        assert_eq!(
            owner(&key("sessions", &ix), names).words(),
            "entries of the index search_session_task on sessions"
        );
        ix[4] = 9;
        assert_eq!(
            owner(&key("sessions", &ix), names).words(),
            "entries of an index on sessions"
        );
        assert_eq!(
            owner(&key("inbox_messages", b"!fdtitle"), names),
            Owner::Definitions("inbox_messages".into())
        );
        assert_eq!(owner(b"/!ndsomething", names), Owner::Engine);
        let mut other_db = key("sessions", b"*x");
        other_db[10] = 3;
        assert_eq!(owner(&other_db, names), Owner::Engine);
    }
}
