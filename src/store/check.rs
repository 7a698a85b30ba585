//! Reading every record the engine holds, to find what it can no longer read, and
//! rebuilding the engine from what it still can (and what the journal holds).
//!
//! The engine checks each block of its table files as it reads it; a changed byte makes
//! every read that touches the block fail ("checksum verification failed"), so a whole
//! `inbox.list` fails for a few damaged records. A walk reads each table in key ranges:
//! when a range fails it finds, by halving (see [`keyspace`]), the last key readable
//! before the damage and the first after it, and goes on from there. What it reports is
//! each damaged stretch by the readable keys around it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::journal::{Journal, Op};
use super::keyspace::{Point, quoted};
use super::{Result, Store, StoreError, journal_dir};
use crate::config::StoreConfig;
pub use crate::protocol::check::{Check, Damaged, TableCheck};

pub use super::schema::TABLES;

pub use crate::protocol::check::WHAT_TO_DO;

/// Whether an engine error says a table file could not be read back as written.
pub fn is_unreadable(e: &StoreError) -> bool {
    let text = e.to_string().to_lowercase();
    text.contains("checksum") || text.contains("corrupt") || text.contains("sstable error")
}

/// Records read at a time.
const PAGE: usize = 1000;

/// What one read of a key range asks for.
#[derive(Clone, Copy)]
enum Fetch<'a> {
    /// Only the keys (a check).
    Keys,
    /// Whole records (a rebuild).
    Records,
    /// These fields, as a `SELECT` names them (loading what the daemon starts with).
    Fields(&'a str),
}

/// One table's readable records (key, and the record without its id when fetched).
struct Walked {
    rows: Vec<(String, Value)>,
    damaged: Vec<Damaged>,
}

impl Store {
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
        super::decode_rows(Value::Array(
            walked.rows.into_iter().map(|(_, row)| row).collect(),
        ))
    }

    /// The records of `table` with keys from `from` (inclusive) to `to` (exclusive), an
    /// open end when `None`; at most `limit` of them, in key order.
    async fn read_keys(
        &self,
        table: &str,
        from: Option<&str>,
        to: Option<&str>,
        fetch: Fetch<'_>,
        limit: Option<usize>,
    ) -> Result<Vec<(String, Value)>> {
        let range = format!(
            "{table}:{}..{}",
            from.map(quoted).unwrap_or_default(),
            to.map(quoted).unwrap_or_default()
        );
        let limit = limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        let sql = match fetch {
            Fetch::Keys => format!("SELECT record::id(id) AS __id FROM {range}{limit}"),
            Fetch::Records => format!("SELECT *, record::id(id) AS __id FROM {range}{limit}"),
            Fetch::Fields(fields) => {
                format!("SELECT {fields}, record::id(id) AS __id FROM {range}{limit}")
            }
        };
        let keep_id = matches!(fetch, Fetch::Fields(_));
        let mut results = self.run(&sql, json!({})).await?;
        let rows = match results.get_mut(0).map(Value::take) {
            Some(Value::Array(rows)) => rows,
            _ => Vec::new(),
        };
        Ok(rows
            .into_iter()
            .filter_map(|mut row| {
                let map = row.as_object_mut()?;
                let id = map.remove("__id")?.as_str()?.to_string();
                if !keep_id {
                    map.remove("id");
                }
                Some((id, row))
            })
            .collect())
    }

    /// Whether the range reads without a damaged block (other errors are errors).
    async fn readable(&self, table: &str, from: Option<&str>, to: &Point) -> Result<bool> {
        match self
            .read_keys(table, from, Some(&to.key()), Fetch::Keys, None)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_unreadable(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads `table` from end to end around its damaged stretches.
    async fn walk(&self, table: &str, fetch: Fetch<'_>) -> Result<Walked> {
        let mut walked = Walked {
            rows: Vec::new(),
            damaged: Vec::new(),
        };
        let mut from: Option<String> = None;
        loop {
            // A page at a time from `from` (inclusive: a page after the first starts
            // with the last record of the one before).
            match self
                .read_keys(table, from.as_deref(), None, fetch, Some(PAGE))
                .await
            {
                Ok(rows) => {
                    let full = rows.len() == PAGE;
                    let skip = usize::from(
                        from.is_some() && rows.first().map(|(k, _)| k) == from.as_ref(),
                    );
                    let last = rows.last().map(|(k, _)| k.clone());
                    walked.rows.extend(rows.into_iter().skip(skip));
                    if !full {
                        return Ok(walked);
                    }
                    from = last;
                    continue;
                }
                Err(e) if is_unreadable(&e) => {}
                Err(e) => return Err(e),
            }
            // Every read from here that fails stops at the damage, and one that does not
            // ends before it: none reads more than about a page.
            // The last point up to which the table reads: halve between a point known
            // readable and one known not.
            let mut good = from
                .as_deref()
                .map(Point::at_or_below)
                .unwrap_or_else(Point::lowest);
            let mut bad = Point::highest();
            loop {
                let mid = good.halfway_to(&bad);
                if mid == good {
                    break;
                }
                if self.readable(table, from.as_deref(), &mid).await? {
                    good = mid;
                } else {
                    bad = mid;
                }
            }
            let start = from.as_deref().map(Point::at_or_below);
            let before = if start.is_some_and(|s| good <= s) {
                Vec::new()
            } else {
                self.read_keys(table, from.as_deref(), Some(&good.key()), fetch, None)
                    .await?
            };
            let after = before
                .last()
                .map(|(k, _)| k.clone())
                .or_else(|| walked.rows.last().map(|(k, _)| k.clone()));
            let skip =
                usize::from(from.is_some() && before.first().map(|(k, _)| k) == from.as_ref());
            walked.rows.extend(before.into_iter().skip(skip));
            // The first point past the damage: a one-point read there succeeds.
            let Some(resume) = self.past_damage(table, &bad).await? else {
                walked.damaged.push(Damaged {
                    after,
                    before: None,
                });
                return Ok(walked);
            };
            let first_after = self
                .read_keys(table, Some(&resume.key()), None, Fetch::Keys, Some(1))
                .await
                .ok()
                .and_then(|rows| rows.first().map(|(k, _)| k.clone()));
            walked.damaged.push(Damaged {
                after,
                before: first_after,
            });
            from = Some(resume.key());
        }
    }

    /// The lowest point above `bad` from which a read does not touch the damage at `bad`:
    /// doubling steps find a readable point, then halving finds the lowest.
    async fn past_damage(&self, table: &str, bad: &Point) -> Result<Option<Point>> {
        let readable_at = |p: Point| async move {
            let next = p.plus(&Point::one());
            self.readable(table, Some(&p.key()), &next).await
        };
        let mut below = bad.clone();
        let mut step = Point::one();
        let mut above = loop {
            let p = bad.plus(&step);
            if readable_at(p.clone()).await? {
                break p;
            }
            if p == Point::highest() {
                return Ok(None);
            }
            below = p;
            step = step.plus(&step);
        };
        loop {
            let mid = below.halfway_to(&above);
            if mid == below {
                return Ok(Some(above));
            }
            if readable_at(mid.clone()).await? {
                above = mid;
            } else {
                below = mid;
            }
        }
    }
}

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
    /// What rebuilding a damaged manifest from the table files did, when it was.
    pub manifest: Vec<String>,
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
    let cfg = &cfg;
    // Read what the damaged engine still gives, without replaying into it. An engine
    // whose manifest (the list of its table files) is damaged gets a new one built from
    // the table files first.
    let mut manifest = Vec::new();
    let old = match Store::open_to_salvage(cfg, path).await {
        Ok(old) => old,
        Err(e) if super::files::is_manifest_damage(&e) => {
            tracing::warn!("{e}");
            manifest = super::files::rebuild_manifest(path).await?;
            Store::open_to_salvage(cfg, path).await?
        }
        Err(e) => return Err(e),
    };
    let mut check = Check::default();
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
    let copied = ops.len();

    // A new engine with the current schema, the copied records, then the journal.
    let fresh = Store::connect(cfg, &fresh_path).await?;
    // The copied schema record would put back the version the new engine already has.
    ops.retain(|op| !matches!(op, Op::Put { table, .. } if table == "crucible_meta"));
    fresh.replay(&ops).await?;
    fresh.replay(&replay.ops).await?;
    let restored = replay
        .ops
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
        .collect();
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
        manifest,
    })
}

/// `<path>.<suffix>`, beside it.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}
