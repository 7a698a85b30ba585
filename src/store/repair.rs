//! Rebuilding a damaged embedded engine from what it can still read, then the journal:
//! the new engine is written beside it, the damaged one is kept, and the new one takes
//! its place.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::catalog::{is_catalog_damage, recatalogue};
use super::conn::Store;
use super::durable::journal_dir;
use super::durable::{embedded_path, sibling};
use super::error::{Result, StoreError};
use super::journal::{Journal, Op};
use super::schema::TABLES;
use super::walk::Fetch;
use crate::config::StoreConfig;
use crate::protocol::check::{Check, TableCheck};

/// What a rebuild did.
#[derive(Debug, Clone, Serialize)]
pub struct Repaired {
    /// What the check of the damaged engine found.
    pub check: Check,
    /// Records copied into the new engine.
    pub copied: usize,
    /// Journaled changes applied after them.
    pub journaled: usize,
    /// Of the journaled records, those in a damaged stretch: brought back.
    pub restored: Vec<String>,
    /// Where the damaged engine was kept.
    pub kept_at: PathBuf,
    /// What was rebuilt before the records could be read: a damaged manifest from the
    /// table files, a damaged catalog from crucible's schema.
    pub rebuilt: Vec<String>,
}

/// What the damaged engine still gives.
struct Salvaged {
    check: Check,
    ops: Vec<Op>,
    rebuilt: Vec<String>,
}

/// Rebuilds the embedded engine at `path` from what it can still read, then the journal:
/// the new engine is written beside it, the damaged one is kept as
/// `<path>.damaged-<time>`, and the new one takes its place. The daemon must not run.
pub async fn repair(cfg: &StoreConfig, path: &Path) -> Result<Repaired> {
    let open_err = |message: String| StoreError::Open {
        url: path.display().to_string(),
        message,
    };
    let fresh_path = sibling(path, "repairing");
    let kept_at = sibling(
        path,
        &format!("damaged-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S")),
    );
    if fresh_path.exists() {
        std::fs::remove_dir_all(&fresh_path)
            .map_err(|e| open_err(format!("cannot clear {}: {e}", fresh_path.display())))?;
    }
    let journal_path = journal_dir(path);
    let (journal, replay) = Journal::open(&journal_path, &path.join("wal"))
        .map_err(|e| open_err(format!("cannot open the journal: {e}")))?;
    drop(journal);

    // The engine at `path`, whatever the settings name.
    let cfg = StoreConfig {
        url: String::new(),
        ..cfg.clone()
    };
    let Salvaged {
        check,
        mut ops,
        rebuilt,
    } = salvage(&cfg, path).await?;
    let copied = ops.len();

    // A new engine with the current schema, the copied records, then the journal.
    let fresh = Store::connect(&cfg, &fresh_path).await?;
    // The copied schema record would put back the version the new engine already has.
    ops.retain(|op| !matches!(op, Op::Put { table, .. } if table == "crucible_meta"));
    fresh.replay(&ops).await?;
    fresh.replay(&replay.ops).await?;
    let restored = restored(&check, &replay.ops);
    if !fresh.close_engine().await {
        return Err(open_err(
            "the rebuilt engine could not be closed cleanly; nothing was replaced".into(),
        ));
    }
    drop(fresh);
    let _ = std::fs::remove_dir_all(journal_dir(&fresh_path));
    std::fs::rename(path, &kept_at)
        .map_err(|e| open_err(format!("cannot move the damaged engine aside: {e}")))?;
    std::fs::rename(&fresh_path, path).map_err(|e| {
        open_err(format!(
            "cannot put the rebuilt engine in place ({e}); it is at {}",
            fresh_path.display()
        ))
    })?;
    // Everything the journal held is in the new engine, closed cleanly.
    if let Ok((mut journal, _)) = Journal::open(&journal_path, &path.join("wal"))
        && let Err(e) = journal.clear()
    {
        tracing::warn!("cannot empty the journal after a repair: {e}");
    }
    Ok(Repaired {
        check,
        copied,
        journaled: replay.ops.len(),
        restored,
        kept_at,
        rebuilt,
    })
}

/// Rebuilds the embedded engine whose catalog does not read back, as the daemon starts:
/// like `cru daemon repair`, and what it did and lost is kept for `daemon.status`.
pub async fn rebuild_at_start(cfg: &StoreConfig, default: &Path, why: StoreError) -> Result<Store> {
    let Some(path) = embedded_path(cfg, default) else {
        return Err(why);
    };
    tracing::error!("{why}; rebuilding the database from what is readable");
    let repaired = repair(cfg, &path).await?;
    let store = Store::open(cfg, &path).await?;
    let mut lines = vec![format!(
        "the engine's catalog did not read back: {} records copied from what reads, {} \
         journaled changes applied; the damaged database is kept at {}",
        repaired.copied,
        repaired.journaled,
        repaired.kept_at.display()
    )];
    lines.extend(repaired.check.files.iter().map(|f| {
        let at = f
            .offset
            .map(|o| format!(" (the block at byte {o})"))
            .unwrap_or_default();
        format!(
            "{} did not read back in {}{at}: what it held is not in the rebuilt database \
             unless the journal had it",
            f.holds, f.file
        )
    }));
    store.note_rebuilt(lines);
    Ok(store)
}

/// Reads what the damaged engine at `path` still gives, without replaying into it. An
/// engine whose manifest (the list of its table files) is damaged gets a new one built
/// from the table files first.
async fn salvage(cfg: &StoreConfig, path: &Path) -> Result<Salvaged> {
    let mut rebuilt = Vec::new();
    let mut opened = Store::open_to_salvage(cfg, path).await;
    if let Err(e) = &opened
        && super::files::is_manifest_damage(e)
    {
        tracing::warn!("{e}");
        rebuilt = super::files::rebuild_manifest(path).await?;
        opened = Store::open_to_salvage(cfg, path).await;
    }
    // An engine whose catalog does not read back is read through a new catalog.
    let mut recatalogued = None;
    if let Err(e) = &opened
        && is_catalog_damage(e)
    {
        tracing::warn!("{e}");
        let copy = recatalogue(cfg, path).await?;
        opened = Store::open_to_salvage(cfg, &copy.path).await;
        recatalogued = Some(copy);
    }
    let old = opened?;
    let mut check = Check::default();
    if let Some(copy) = &recatalogued {
        check.files = copy.files.clone();
        rebuilt.push(format!(
            "the engine's catalog did not read back: {} records read around the damaged \
             blocks under a new one",
            copy.copied
        ));
    }
    let mut ops = Vec::new();
    for table in TABLES {
        let walked = old.walk(table, Fetch::Records).await?;
        check.tables.push(TableCheck {
            table: table.to_string(),
            readable: walked.rows.len(),
            damaged: walked.damaged.clone(),
        });
        ops.extend(walked.rows.into_iter().map(|(id, record)| Op::Put {
            table: table.to_string(),
            id,
            record,
        }));
    }
    old.close_engine().await;
    drop(old);
    if let Some(copy) = recatalogued {
        let _ = std::fs::remove_dir_all(&copy.path);
    }
    Ok(Salvaged {
        check,
        ops,
        rebuilt,
    })
}

/// Of the journaled records, those in a stretch `check` found damaged (`table:id`).
fn restored(check: &Check, journaled: &[Op]) -> Vec<String> {
    journaled
        .iter()
        .filter_map(|op| match op {
            Op::Put { table, id, .. } => check
                .tables
                .iter()
                .find(|t| &t.table == table)
                .filter(|t| t.damaged.iter().any(|d| d.holds(id)))
                .map(|_| format!("{table}:{id}")),
            _ => None,
        })
        .collect()
}
