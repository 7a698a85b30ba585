//! Crucible's own redo journal for the embedded engine.
//!
//! surrealkv 0.21.4 (the engine SurrealDB 3.3.5 embeds) can lose a committed, fsynced
//! write after a crash: a commit whose log record lands in write-ahead-log segment N but
//! whose data is applied to the memtable of segment N+1 (the memtable filled up in
//! between) has no log copy once segment N is retired, so a kill before that memtable is
//! flushed loses it. No engine setting avoids this. Crucible therefore keeps every write
//! it acknowledges a second time, here, and replays it at the next start.
//!
//! What is journaled are after-images: after a write commits, the records it touched are
//! read back and appended (or a delete, when a record is gone), and the append is
//! fsynced before the write is acknowledged. Read-back and append happen under one lock,
//! so the journal's order is the order of the states read, and replaying it in order as
//! blind upserts and deletes ends in the state the last write saw, whatever part of it
//! the engine kept.
//!
//! The journal is a folder of files. A file is closed once it is large and retired once
//! the engine's write-ahead log has moved [`RETIRE_MARGIN`] segments past the newest
//! segment that existed when it was closed: by then every memtable its writes could sit
//! in has been flushed to a table file. A clean close of the engine retires them all;
//! after a crash they are replayed, the engine is closed cleanly, and then they go.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A journal file is closed once it holds this much.
const FILE_BYTES: u64 = 16 * 1024 * 1024;
/// How many write-ahead-log segments past a closed file's newest one the engine's oldest
/// remaining segment must be before the file is retired.
const RETIRE_MARGIN: u64 = 2;

/// One change, as it is replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// The record's whole content after the write (without its id).
    Put {
        table: String,
        id: String,
        record: Value,
    },
    Delete {
        table: String,
        id: String,
    },
    /// Every handle of a session was revoked.
    RevokeHandles {
        session_id: String,
    },
    /// A deleted session's transcript and context history were purged.
    Purge {
        session_id: String,
    },
}

pub struct Journal {
    dir: PathBuf,
    /// The engine's write-ahead-log folder, watched to retire files.
    wal_dir: PathBuf,
    /// The open file, its number and size.
    file: File,
    number: u64,
    bytes: u64,
    /// Closed files still needed: (number, newest WAL segment when closed).
    closed: Vec<(u64, u64)>,
}

impl Journal {
    /// Opens the journal folder, returning it with every change still in it, oldest
    /// first. A last line cut short by a crash was never acknowledged and is skipped.
    pub fn open(dir: &Path, wal_dir: &Path) -> std::io::Result<(Self, Vec<Op>)> {
        std::fs::create_dir_all(dir)?;
        let mut numbers: Vec<u64> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        numbers.sort_unstable();
        let mut ops = Vec::new();
        for &number in &numbers {
            let reader = BufReader::new(File::open(file_path(dir, number))?);
            for line in reader.split(b'\n') {
                let line = line?;
                match serde_json::from_slice::<Vec<Op>>(&line) {
                    Ok(batch) => ops.extend(batch),
                    Err(e) => {
                        tracing::warn!(
                            file = number,
                            "journal line unreadable ({e}); it was not acknowledged"
                        );
                        break;
                    }
                }
            }
        }
        let number = numbers.last().map_or(1, |n| n + 1);
        let file = create(dir, number)?;
        let newest = newest_segment(wal_dir).unwrap_or(0);
        let journal = Self {
            dir: dir.to_path_buf(),
            wal_dir: wal_dir.to_path_buf(),
            file,
            number,
            bytes: 0,
            closed: numbers.into_iter().map(|n| (n, newest)).collect(),
        };
        Ok((journal, ops))
    }

    /// Appends one write's changes and makes them durable.
    pub fn append(&mut self, ops: &[Op]) -> std::io::Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut line = serde_json::to_vec(ops).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()?;
        self.bytes += line.len() as u64;
        if self.bytes >= FILE_BYTES {
            self.roll()?;
        }
        Ok(())
    }

    /// Closes the current file, starts the next, and retires what the engine no longer
    /// needs.
    fn roll(&mut self) -> std::io::Result<()> {
        let newest = newest_segment(&self.wal_dir).unwrap_or(u64::MAX);
        self.closed.push((self.number, newest));
        self.number += 1;
        self.file = create(&self.dir, self.number)?;
        self.bytes = 0;
        self.retire();
        Ok(())
    }

    fn retire(&mut self) {
        let Some(oldest) = oldest_segment(&self.wal_dir) else {
            return;
        };
        self.closed.retain(|&(number, newest)| {
            let safe = newest.saturating_add(RETIRE_MARGIN) < oldest;
            if safe {
                let _ = std::fs::remove_file(file_path(&self.dir, number));
            }
            !safe
        });
    }

    /// Empties the journal: the engine was closed cleanly, so everything is in its
    /// table files.
    pub fn clear(&mut self) -> std::io::Result<()> {
        for (number, _) in self.closed.drain(..) {
            let _ = std::fs::remove_file(file_path(&self.dir, number));
        }
        self.file.set_len(0)?;
        self.file.sync_all()?;
        self.bytes = 0;
        Ok(())
    }
}

fn file_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:08}.log"))
}

fn create(dir: &Path, number: u64) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file_path(dir, number))?;
    // The new name must survive a crash too.
    File::open(dir)?.sync_all()?;
    Ok(file)
}

/// The engine's write-ahead-log segment numbers (`00000000000000000004.wal`).
fn segments(wal_dir: &Path) -> Vec<u64> {
    std::fs::read_dir(wal_dir)
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.strip_suffix(".wal")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn newest_segment(wal_dir: &Path) -> Option<u64> {
    segments(wal_dir).into_iter().max()
}

fn oldest_segment(wal_dir: &Path) -> Option<u64> {
    segments(wal_dir).into_iter().min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(id: &str) -> Op {
        Op::Put {
            table: "t".into(),
            id: id.into(),
            record: json!({"a": 1}),
        }
    }

    #[test]
    fn what_was_appended_comes_back_in_order_and_a_torn_tail_is_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, wal) = (tmp.path().join("j"), tmp.path().join("wal"));
        let (mut journal, ops) = Journal::open(&dir, &wal).unwrap();
        assert!(ops.is_empty());
        journal.append(&[put("a"), put("b")]).unwrap();
        journal
            .append(&[Op::Delete {
                table: "t".into(),
                id: "a".into(),
            }])
            .unwrap();
        let number = journal.number;
        drop(journal);
        // A crash in the middle of an append leaves half a line.
        let mut file = OpenOptions::new()
            .append(true)
            .open(file_path(&dir, number))
            .unwrap();
        file.write_all(br#"[{"op":"put","tab"#).unwrap();
        let (mut journal, ops) = Journal::open(&dir, &wal).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0], put("a"));
        assert!(matches!(&ops[2], Op::Delete { id, .. } if id == "a"));
        journal.clear().unwrap();
        drop(journal);
        let (_, ops) = Journal::open(&dir, &wal).unwrap();
        assert!(ops.is_empty());
    }

    #[test]
    fn closed_files_retire_once_the_engine_log_moved_past_them() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, wal) = (tmp.path().join("j"), tmp.path().join("wal"));
        std::fs::create_dir_all(&wal).unwrap();
        let segment = |n: u64| wal.join(format!("{n:020}.wal"));
        std::fs::write(segment(3), "").unwrap();
        let (mut journal, _) = Journal::open(&dir, &wal).unwrap();
        journal.append(&[put("a")]).unwrap();
        let first = journal.number;
        journal.roll().unwrap();
        assert!(file_path(&dir, first).exists());
        // The engine moved on, but not far enough.
        std::fs::remove_file(segment(3)).unwrap();
        std::fs::write(segment(5), "").unwrap();
        journal.retire();
        assert!(file_path(&dir, first).exists());
        std::fs::remove_file(segment(5)).unwrap();
        std::fs::write(segment(6), "").unwrap();
        journal.retire();
        assert!(!file_path(&dir, first).exists());
    }
}
