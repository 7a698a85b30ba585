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
//! Each line is one write's changes, as JSON, after a checksum of that JSON: the first 8
//! bytes of its SHA-256 in hex, and a space. A line whose checksum does not match (a
//! changed byte, a line half overwritten) is reported by file, line and the records it
//! names, kept aside in `rejected.txt`, and never replayed; the lines after it are. Only
//! the last line of a file, cut short without its newline, is a write a crash
//! interrupted (it was never acknowledged). Lines starting with `[` were written before
//! lines carried a checksum and are read as they are.
//!
//! The journal is a folder of files. A file is closed once it is large and retired once
//! the engine's write-ahead log has moved [`RETIRE_MARGIN`] segments past the newest
//! segment that existed when it was closed: by then every memtable its writes could sit
//! in has been flushed to a table file. A clean close of the engine retires them all;
//! after a crash they are replayed, the engine is closed cleanly, and then they go.

use std::fs::{File, OpenOptions};
use std::io::Write;
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
    /// first, and the lines that were refused.
    pub fn open(dir: &Path, wal_dir: &Path) -> std::io::Result<(Self, Replay)> {
        std::fs::create_dir_all(dir)?;
        let mut numbers: Vec<u64> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        numbers.sort_unstable();
        let mut replay = Replay::default();
        for &number in &numbers {
            read_file(&file_path(dir, number), &mut replay)?;
        }
        if !replay.rejected.is_empty() {
            keep_rejected(dir, &replay.rejected);
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
        Ok((journal, replay))
    }

    /// Appends one write's changes and makes them durable.
    pub fn append(&mut self, ops: &[Op]) -> std::io::Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_vec(ops).map_err(std::io::Error::other)?;
        let mut line = Vec::with_capacity(json.len() + CHECKSUM_HEX + 2);
        line.extend_from_slice(checksum(&json).as_bytes());
        line.push(b' ');
        line.extend_from_slice(&json);
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

/// What the journal holds: the changes to replay, oldest first, and the lines refused.
#[derive(Debug, Default)]
pub struct Replay {
    pub ops: Vec<Op>,
    pub rejected: Vec<Rejected>,
}

/// A line that is not replayed: its checksum does not match, or it is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub file: PathBuf,
    /// Counted from 1.
    pub line: usize,
    /// The records it names (`table:id`), as far as they can be read.
    pub records: Vec<String>,
    pub reason: String,
    /// The line as it is, for `rejected.txt`.
    pub text: Vec<u8>,
}

/// How many hex digits of a line's SHA-256 it carries.
const CHECKSUM_HEX: usize = 16;

fn checksum(json: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(json)
        .iter()
        .take(CHECKSUM_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a journal line is not replayed.
#[derive(Debug, thiserror::Error)]
enum LineFault {
    #[error("not a journal record: {0}")]
    NotARecord(serde_json::Error),
    #[error("no checksum")]
    NoChecksum,
    #[error("its checksum does not match: it changed after it was written")]
    ChecksumMismatch,
}

/// One line's changes, if its checksum holds (or it has none: an older line).
fn decode(line: &[u8]) -> Result<Vec<Op>, LineFault> {
    if line.first() == Some(&b'[') {
        return serde_json::from_slice(line).map_err(LineFault::NotARecord);
    }
    let Some((sum, json)) = line
        .iter()
        .position(|b| *b == b' ')
        .map(|at| (&line[..at], &line[at + 1..]))
    else {
        return Err(LineFault::NoChecksum);
    };
    if sum != checksum(json).as_bytes() {
        return Err(LineFault::ChecksumMismatch);
    }
    serde_json::from_slice(json).map_err(LineFault::NotARecord)
}

/// The records a (refused) line names, read as leniently as possible.
fn named_records(line: &[u8]) -> Vec<String> {
    let json = match line.iter().position(|b| *b == b' ') {
        Some(at) if line.first() != Some(&b'[') => &line[at + 1..],
        _ => line,
    };
    if let Ok(ops) = serde_json::from_slice::<Vec<Op>>(json) {
        return ops
            .iter()
            .map(|op| match op {
                Op::Put { table, id, .. } | Op::Delete { table, id } => format!("{table}:{id}"),
                Op::RevokeHandles { session_id } => format!("handles of {session_id}"),
                Op::Purge { session_id } => format!("purge of {session_id}"),
            })
            .collect();
    }
    // Not JSON any more: the ids it still shows.
    let text = String::from_utf8_lossy(json);
    text.split("\"id\":\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(String::from)
        .collect()
}

/// Reads one journal file into `replay`.
fn read_file(path: &Path, replay: &mut Replay) -> std::io::Result<()> {
    let bytes = std::fs::read(path)?;
    let whole = bytes.last().is_none_or(|b| *b == b'\n');
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        if last && line.is_empty() {
            continue;
        }
        match decode(line) {
            Ok(batch) => replay.ops.extend(batch),
            Err(why) if last && !whole => tracing::warn!(
                file = %path.display(),
                line = i + 1,
                "the journal's last line is cut short ({why}): a write a crash interrupted, \
                 never acknowledged; skipped"
            ),
            Err(reason) => {
                let records = named_records(line);
                tracing::error!(
                    file = %path.display(),
                    line = i + 1,
                    records = %records.join(", "),
                    "a journal record is damaged ({reason}); it is not replayed (the lines \
                     after it are), and is kept in rejected.txt beside it"
                );
                replay.rejected.push(Rejected {
                    file: path.to_path_buf(),
                    line: i + 1,
                    records,
                    reason: reason.to_string(),
                    text: line.to_vec(),
                });
            }
        }
    }
    Ok(())
}

/// Appends the refused lines to `rejected.txt` in the journal's folder, each after a line
/// naming where it was.
fn keep_rejected(dir: &Path, rejected: &[Rejected]) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut text = Vec::new();
    for r in rejected {
        text.extend_from_slice(
            format!("# {} line {}: {}\n", r.file.display(), r.line, r.reason).as_bytes(),
        );
        text.extend_from_slice(&r.text);
        text.push(b'\n');
    }
    let path = dir.join("rejected.txt");
    let kept = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| file.write_all(&text));
    if let Err(e) = kept {
        tracing::warn!(file = %path.display(), "cannot keep the damaged journal lines: {e}");
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
        let (mut journal, replay) = Journal::open(&dir, &wal).unwrap();
        assert!(replay.ops.is_empty());
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
        file.write_all(br#"0123456789abcdef [{"op":"put","tab"#)
            .unwrap();
        let (mut journal, replay) = Journal::open(&dir, &wal).unwrap();
        assert!(replay.rejected.is_empty(), "a torn tail is not damage");
        let ops = replay.ops;
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0], put("a"));
        assert!(matches!(&ops[2], Op::Delete { id, .. } if id == "a"));
        journal.clear().unwrap();
        drop(journal);
        let (_, replay) = Journal::open(&dir, &wal).unwrap();
        assert!(replay.ops.is_empty());
    }

    /// One changed byte that leaves valid JSON, and a line broken in the middle of a
    /// file: each is refused by name and not replayed, and everything after it is.
    #[test]
    fn a_damaged_record_is_named_and_skipped_and_the_rest_is_replayed() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, wal) = (tmp.path().join("j"), tmp.path().join("wal"));
        let (mut journal, _) = Journal::open(&dir, &wal).unwrap();
        let titled = |id: &str, title: &str| Op::Put {
            table: "inbox_messages".into(),
            id: id.into(),
            record: json!({"title": title}),
        };
        journal.append(&[titled("m1", "build 41 passed")]).unwrap();
        journal.append(&[titled("m2", "build 42 passed")]).unwrap();
        journal.append(&[put("c")]).unwrap();
        journal.append(&[put("d")]).unwrap();
        let path = file_path(&dir, journal.number);
        drop(journal);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines[1] = lines[1].replace("42", "43");
        lines[2] = lines[2][..lines[2].len() - 5].to_string();
        // A line written before lines carried a checksum is still read.
        lines.push(r#"[{"op":"put","table":"t","id":"old","record":{"a":1}}]"#.into());
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();

        let (_, replay) = Journal::open(&dir, &wal).unwrap();
        assert_eq!(
            replay.ops,
            [titled("m1", "build 41 passed"), put("d"), put("old")]
        );
        let named: Vec<(usize, Vec<String>)> = replay
            .rejected
            .iter()
            .map(|r| (r.line, r.records.clone()))
            .collect();
        assert_eq!(
            named,
            [
                (2, vec!["inbox_messages:m2".to_string()]),
                (3, vec!["c".into()])
            ]
        );
        assert!(replay.rejected.iter().all(|r| r.file == path));
        assert!(
            replay.rejected[0].reason.contains("checksum"),
            "{:?}",
            replay.rejected
        );
        let kept = std::fs::read_to_string(dir.join("rejected.txt")).unwrap();
        assert!(
            kept.contains("build 43 passed") && kept.contains("line 3"),
            "{kept}"
        );
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
