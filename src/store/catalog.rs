//! A damaged catalog. The engine keeps its version and the definitions of crucible's
//! namespace, database and tables in its first keys; when a block holding them does not
//! read back, the engine cannot open at all, though every other block may be intact.
//! The catalog is crucible's schema, which crucible can write again: a new engine is made
//! with it, and every record key the table files still give (read around the damaged
//! blocks) is copied into it byte for byte, under the new engine's namespace and
//! database ids. A rebuild then reads that engine as it reads any damaged one.

use std::path::{Path, PathBuf};

use super::conn::{Conn, Store};
use super::error::{OpenFailure, Result, StoreError};
use super::files::{Names, check_files_at, described};
use super::schema::TABLES;
use crate::config::StoreConfig;
use crate::protocol::check::{Check, FileDamage};

/// Keys read, and written, at a time.
const BATCH: u32 = 2_000;

/// What the engine at `path` still gives, in a new engine with crucible's catalog.
pub(super) struct Recatalogued {
    /// The new engine (beside the damaged one, which is left as it was).
    pub(super) path: PathBuf,
    /// The blocks that did not read back, by what they held.
    pub(super) files: Vec<FileDamage>,
    /// Record keys copied.
    pub(super) copied: usize,
}

/// Whether the store could not open because its catalog does not read back (its table
/// files list, the manifest, is another matter: see [`super::files`]).
pub fn is_catalog_damage(e: &StoreError) -> bool {
    matches!(e, StoreError::Open { message, .. }
        if super::error::says_unreadable(message) && !super::files::says_manifest_damage(message))
}

/// The check of an engine that cannot open because its catalog does not read back
/// (`why`): its table files' blocks, named; `why` again when no block is found damaged.
pub async fn check_unopened(cfg: &StoreConfig, default: &Path, why: StoreError) -> Result<Check> {
    let Some(path) = super::durable::embedded_path(cfg, default) else {
        return Err(why);
    };
    let mut files = check_files_at(&path, None).await;
    if files.is_empty() {
        return Err(why);
    }
    // The engine's own records are a file's first keys: a first block that does not read
    // back is what keeps it from opening.
    for file in files.iter_mut().filter(|f| f.offset == Some(0)) {
        file.effect = super::files::CATALOG_EFFECT.into();
    }
    Ok(Check {
        files,
        ..Check::default()
    })
}

/// A stretch of keys no read may touch: after `after` (or from the start), up to and
/// with `through` (or to the end).
struct Skip {
    after: Option<Vec<u8>>,
    through: Option<Vec<u8>>,
}

/// Copies every record of crucible's tables that the engine at `path` still reads,
/// around its damaged blocks, into a new engine at `<path>.recatalogued` made with
/// crucible's schema. Fails when no damaged block is found (the open failed for
/// another reason).
pub(super) async fn recatalogue(cfg: &StoreConfig, path: &Path) -> Result<Recatalogued> {
    let open_err = |message: String| StoreError::Open {
        url: path.display().to_string(),
        message,
    };
    let at = path.to_path_buf();
    let blocks = tokio::task::spawn_blocking(move || surrealkv::verify_tables(&at))
        .await
        .map_err(|e| open_err(format!("the check of the table files did not finish: {e}")))?
        .map_err(|e| open_err(format!("cannot read the table files: {e}")))?;
    let skips: Vec<Skip> = blocks
        .iter()
        .filter(|b| matches!(b.part, "data" | "index"))
        .map(|b| Skip {
            after: b.after.clone(),
            through: b.through.clone(),
        })
        .collect();
    if skips.is_empty() {
        return Err(open_err(
            "the engine's catalog does not read back, yet every block of its table files \
             does: nothing to rebuild around"
                .into(),
        ));
    }
    let fresh_path = super::durable::sibling(path, "recatalogued");
    if fresh_path.exists() {
        std::fs::remove_dir_all(&fresh_path)
            .map_err(|e| open_err(format!("cannot clear {}: {e}", fresh_path.display())))?;
    }
    let fresh = Store::connect(cfg, &fresh_path).await?;
    let names = fresh
        .index_names()
        .await
        .ok_or_else(|| open_err("the new engine's catalog cannot be read".into()))?;
    let url = format!("surrealkv://{}", path.display());
    let damaged = super::open::raw_datastore(&url, super::durable::engine_config(cfg, path))
        .await
        .map_err(|e: OpenFailure| open_err(e.to_string()))?;
    let Conn::Local(_, into) = &fresh.conn else {
        return Err(open_err("the new engine is not embedded".into()));
    };
    let mut copied = 0;
    for (from, to) in readable_ranges(&skips) {
        copied += copy_records(&damaged, into, from, to, &names).await?;
    }
    let _ = damaged.shutdown().await;
    drop(damaged);
    if !fresh.close_engine().await {
        return Err(open_err(
            "the new engine could not be closed cleanly; nothing was replaced".into(),
        ));
    }
    let _ = std::fs::remove_dir_all(super::durable::journal_dir(&fresh_path));
    Ok(Recatalogued {
        path: fresh_path,
        files: described(blocks, None),
        copied,
    })
}

/// The key ranges `[from, to)` between the damaged stretches, over every key the engine
/// writes (all below `0xff`).
fn readable_ranges(skips: &[Skip]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> = skips
        .iter()
        .map(|s| (s.after.clone().unwrap_or_default(), s.through.clone()))
        .collect();
    bounds.sort();
    let mut ranges = Vec::new();
    let mut from = vec![0x00];
    for (after, through) in bounds {
        // The damaged block's keys are after `after`: up to and with it reads.
        let mut end = after.clone();
        end.push(0x00);
        if end > from {
            ranges.push((from.clone(), end));
        }
        let Some(mut through) = through else {
            return ranges;
        };
        through.push(0x00);
        from = from.max(through);
    }
    ranges.push((from, vec![0xff]));
    ranges
}

/// Copies the record keys of crucible's tables in `[from, to)` from `damaged` into
/// `into`, under `names`' namespace and database ids; returns how many.
async fn copy_records(
    damaged: &surrealdb_core::kvs::Datastore,
    into: &surrealdb_core::kvs::Datastore,
    mut from: Vec<u8>,
    to: Vec<u8>,
    names: &Names,
) -> Result<usize> {
    use surrealdb_kvs::TransactionType::{Read, Write};
    let engine = |e: anyhow::Error| StoreError::Engine(std::sync::Arc::new(e));
    let mut copied = 0;
    // A read that reaches the end of the block before a damaged one reads into it to see
    // where the range ends: smaller reads get every key up to it.
    let mut size = BATCH;
    loop {
        let tx = damaged.transaction(Read).await.map_err(engine)?;
        let batch = tx
            .batch_keys_vals_raw(
                surrealdb_kvs::key::RawRange::of_bytes(&from, &to),
                size,
                None,
            )
            .await;
        let _ = tx.cancel().await;
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) if super::error::says_unreadable(&format!("{e:#}")) => {
                if size == 1 {
                    // The next key is past the damage's edge: the range ends here.
                    return Ok(copied);
                }
                size = (size / 2).max(1);
                continue;
            }
            Err(e) => return Err(engine(e)),
        };
        let Some((last, _)) = batch.result.last() else {
            return Ok(copied);
        };
        from = last.clone();
        from.push(0x00);
        let write = into.transaction(Write).await.map_err(engine)?;
        for (key, value) in batch.result {
            if let Some(key) = record_key(&key, names) {
                write.set(key.into(), value).await.map_err(engine)?;
                copied += 1;
            }
        }
        write.commit().await.map_err(engine)?;
        if batch.next.is_none() {
            return Ok(copied);
        }
    }
}

/// `key` under `names`' namespace and database ids, when it is a record of one of
/// crucible's tables (`/*<ns>*<db>*<table>\0*<id>`); other keys (the catalog, index
/// entries) are written anew.
fn record_key(key: &[u8], names: &Names) -> Option<Vec<u8>> {
    if !key.starts_with(b"/*") || key.get(6) != Some(&b'*') || key.get(11) != Some(&b'*') {
        return None;
    }
    let rest = key.get(12..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    let table = std::str::from_utf8(&rest[..end]).ok()?;
    if !TABLES.contains(&table) || rest.get(end + 1) != Some(&b'*') {
        return None;
    }
    let mut out = key.to_vec();
    out[2..6].copy_from_slice(&names.ns.to_be_bytes());
    out[7..11].copy_from_slice(&names.db.to_be_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(after: Option<&[u8]>, through: Option<&[u8]>) -> Skip {
        Skip {
            after: after.map(<[u8]>::to_vec),
            through: through.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn the_readable_ranges_leave_out_each_damaged_block_and_nothing_else() {
        // The first block damaged, and one in the middle.
        let ranges = readable_ranges(&[skip(Some(b"m"), Some(b"p")), skip(None, Some(b"c"))]);
        assert_eq!(
            ranges,
            vec![
                (b"c\0".to_vec(), b"m\0".to_vec()),
                (b"p\0".to_vec(), vec![0xff]),
            ]
        );
        // The last block damaged, to the end.
        let ranges = readable_ranges(&[skip(Some(b"x"), None)]);
        assert_eq!(ranges, vec![(vec![0x00], b"x\0".to_vec())]);
    }

    #[test]
    fn only_records_of_crucibles_tables_are_copied_under_the_new_ids() {
        let names = Names {
            ns: 7,
            db: 9,
            indexes: Default::default(),
        };
        let key = |table: &[u8], sigil: u8| {
            let mut k = b"/*".to_vec();
            k.extend(1u32.to_be_bytes());
            k.push(b'*');
            k.extend(2u32.to_be_bytes());
            k.push(b'*');
            k.extend(table);
            k.extend([0, sigil]);
            k.extend(b"id1");
            k
        };
        let copied = record_key(&key(b"sessions", b'*'), &names).expect("a record");
        assert_eq!(&copied[2..6], &7u32.to_be_bytes());
        assert_eq!(&copied[7..11], &9u32.to_be_bytes());
        assert!(copied.ends_with(b"sessions\0*id1"));
        assert_eq!(
            record_key(&key(b"sessions", b'+'), &names),
            None,
            "an index entry"
        );
        assert_eq!(
            record_key(&key(b"sessions", b'!'), &names),
            None,
            "a definition"
        );
        assert_eq!(record_key(&key(b"elsewhere", b'*'), &names), None);
        assert_eq!(record_key(b"!v", &names), None);
    }
}
