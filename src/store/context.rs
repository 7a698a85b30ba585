//! Sessions' context stacks, kept in pieces (schema v19): each entry on a stack is a
//! record of `context_entries`, written once when it joins the stack, and the stack's
//! record in `context_stacks` holds the rest (its checkpoints, the next seq, and which
//! entries are on it). A change writes what it adds, the stack's record and the change
//! itself (to `context_history`), so what one change costs does not grow with the stack:
//! a stack of any size keeps recording. Every transaction stays well within the engine's
//! write buffer ([`PIECE_BYTES`]); a change whose history is larger than that (a reset of
//! a large stack) is recorded in several parts, the last of which commits the change.
//!
//! Which entries are on the stack is said by the stack's record alone: an entry record
//! outside its ranges (left by a change a crash cut short, or not yet removed after one
//! that dropped it) is never read as part of the stack.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::conn::Store;
pub use super::context_history::PIECE_BYTES;
use super::context_history::{encode, history_parts};
use super::durable::{Touched, seq_id};
use super::error::{Result, StackDamage, StoreError};
use super::keyspace::quoted;
use crate::context::{Change, Checkpoint, ContextStack, Entry};

/// The largest entry (as stored, its JSON) a context stack keeps: a change adding a larger
/// one is refused, and nothing of it is stored.
pub const ENTRY_BYTES: usize = 2 * 1024 * 1024;

/// Entry records read, or removed, by one statement.
const ENTRY_PAGE: u64 = 500;

/// The highest seq an entry or history record can have (the ids carry 12 digits).
const LAST_SEQ: u64 = 999_999_999_999;

/// A session's context stack as stored, with what goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredContext {
    pub stack: ContextStack,
    /// The stack lost entries an ACP agent still holds in its own session: its next
    /// prompt must open a fresh one.
    pub fresh_start: bool,
    /// How many records the session's history holds (a change is one record, or
    /// several when it is larger than [`PIECE_BYTES`]).
    pub history_len: u64,
}

/// The stack's record: the stack without its entries.
#[derive(Serialize, Deserialize)]
struct Skeleton {
    checkpoints: Vec<Checkpoint>,
    next_seq: u64,
}

#[derive(Deserialize)]
struct Header {
    stack: String,
    #[serde(default)]
    fresh_start: bool,
    #[serde(default)]
    history_len: u64,
    /// The seq ranges (inclusive) of the entries on the stack; absent for a stack
    /// written whole into `stack` (schema v4 to v18).
    #[serde(default)]
    on_stack: Option<Vec<(u64, u64)>>,
}

/// An entry record as read.
#[derive(Deserialize)]
struct EntryRow {
    seq: u64,
    entry: String,
}

/// Sessions' context stacks: their entries, history and summaries.
pub struct ContextRows<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`ContextRows`].
    pub fn contexts(&self) -> ContextRows<'_> {
        ContextRows(self)
    }
}

impl ContextRows<'_> {
    /// A session's stored context stack, if it has one. A stack stored whole by an
    /// older version is stored again in pieces first.
    pub async fn load(&self, session_id: &str) -> Result<Option<StoredContext>> {
        let damaged = |damage: StackDamage| StoreError::DamagedStack {
            session_id: session_id.to_string(),
            damage,
        };
        let Some(header) = self
            .0
            .rows::<Header>(
                "SELECT stack, fresh_start, history_len, on_stack
                 FROM type::record('context_stacks', $id)",
                json!({"id": session_id}),
                0,
            )
            .await?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let Some(ranges) = header.on_stack else {
            let stack: ContextStack =
                serde_json::from_str(&header.stack).map_err(|e| damaged(e.into()))?;
            let context = StoredContext {
                stack,
                fresh_start: header.fresh_start,
                history_len: header.history_len,
            };
            self.save(session_id, &context).await?;
            return Ok(Some(context));
        };
        let skeleton: Skeleton =
            serde_json::from_str(&header.stack).map_err(|e| damaged(e.into()))?;
        let mut entries = Vec::new();
        for &(first, last) in &ranges {
            let mut from = first;
            while from <= last {
                let to = last.min(from + ENTRY_PAGE - 1);
                let rows: Vec<EntryRow> = self
                    .0
                    .rows(
                        &format!(
                            "SELECT seq, entry FROM {}",
                            entry_range(session_id, from, to)
                        ),
                        json!({}),
                        0,
                    )
                    .await?;
                let mut expected = from;
                for row in rows {
                    if row.seq != expected {
                        return Err(damaged(StackDamage::Missing(expected)));
                    }
                    let entry: Entry = serde_json::from_str(&row.entry)
                        .map_err(|e| damaged(StackDamage::entry(row.seq, e)))?;
                    entries.push(entry);
                    expected += 1;
                }
                if expected <= to {
                    return Err(damaged(StackDamage::Missing(expected)));
                }
                from = to + 1;
            }
        }
        let stack = ContextStack::from_parts(entries, skeleton.checkpoints, skeleton.next_seq)
            .map_err(|e| damaged(StackDamage::Parts(e)))?;
        Ok(Some(StoredContext {
            stack,
            fresh_start: header.fresh_start,
            history_len: header.history_len,
        }))
    }

    /// Stores a stack whole (a new one, or a copy of another session's): its entries in
    /// transactions of at most [`PIECE_BYTES`], then its record, which makes it the
    /// session's stack. `context.history_len` is kept as it is.
    pub async fn save(&self, session_id: &str, context: &StoredContext) -> Result<()> {
        let entries = context.stack.entries();
        let mut texts = Vec::with_capacity(entries.len());
        for entry in entries {
            texts.push(entry_text(entry)?);
        }
        let mut start = 0;
        let mut bytes = 0;
        for (i, text) in texts.iter().enumerate() {
            if i > start && bytes + text.len() > PIECE_BYTES {
                self.put_entries(session_id, &entries[start..i], &texts[start..i])
                    .await?;
                start = i;
                bytes = 0;
            }
            bytes += text.len();
        }
        let mut sql = String::from("BEGIN TRANSACTION;\n");
        sql.push_str(PUT_ENTRIES);
        sql.push_str(PUT_HEADER);
        sql.push_str(&format!(
            "DELETE {} RETURN NONE;\n",
            entry_range(session_id, context.stack.next_seq(), LAST_SEQ)
        ));
        sql.push_str("COMMIT TRANSACTION;");
        let last = &entries[start..];
        let mut vars = header_vars(
            session_id,
            &context.stack,
            context.fresh_start,
            context.history_len,
        )?;
        vars["rows"] = entry_rows(session_id, last, &texts[start..]);
        let touched = entry_touched(session_id, last).and("context_stacks", session_id);
        self.0.write(&sql, vars, touched).await?;
        Ok(())
    }

    /// Stores the `change` that made `context.stack` from the stack stored before: the
    /// entries it added, the stack's record, and the change appended to the history (in
    /// several records when it is larger than [`PIECE_BYTES`]), committed together by
    /// one transaction; then the records of the entries it removed go. `history_len` is
    /// the history's length before the change; the length after is returned. A change
    /// adding an entry larger than [`ENTRY_BYTES`] is refused ([`StoreError::TooLarge`])
    /// and nothing is stored.
    pub async fn save_change(
        &self,
        session_id: &str,
        context: &StoredContext,
        change: &Change,
    ) -> Result<u64> {
        let mut added = Vec::with_capacity(change.added.len());
        for entry in &change.added {
            added.push(entry_text(entry)?);
        }
        let parts = history_parts(change)?;
        let count = parts.len() as u64;
        let first = context.history_len + 1;
        // The parts before the last: not part of the history until the last commits
        // (a crash leaves them past its end, where the next change writes over them).
        for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
            let history_id = seq_id(session_id, first + i as u64);
            self.0
                .write(
                    PUT_HISTORY,
                    json!({"id": session_id, "history_id": history_id, "seq": first + i as u64,
                       "operation": part.operation, "change": part.change}),
                    Touched::record("context_history", history_id.clone()),
                )
                .await?;
        }
        let after = context.history_len + count;
        let removed = removed_ranges(&change.removed);
        let removed_count: u64 = removed.iter().map(|(a, b)| b - a + 1).sum();
        let mut sql = String::from("BEGIN TRANSACTION;\n");
        sql.push_str(PUT_HISTORY);
        sql.push_str(PUT_ENTRIES);
        sql.push_str(PUT_HEADER);
        // Whatever a change cut short left past the ends.
        sql.push_str(&format!(
            "DELETE {} RETURN NONE;\nDELETE {} RETURN NONE;\n",
            history_range(session_id, after + 1, LAST_SEQ),
            entry_range(session_id, context.stack.next_seq(), LAST_SEQ)
        ));
        if removed_count <= ENTRY_PAGE {
            for &(a, b) in &removed {
                sql.push_str(&format!(
                    "DELETE {} RETURN NONE;\n",
                    entry_range(session_id, a, b)
                ));
            }
        }
        sql.push_str("COMMIT TRANSACTION;");
        let last = &parts[parts.len() - 1];
        let history_id = seq_id(session_id, after);
        let mut vars = header_vars(session_id, &context.stack, context.fresh_start, after)?;
        vars["history_id"] = json!(history_id);
        vars["seq"] = json!(after);
        vars["operation"] = json!(last.operation);
        vars["change"] = json!(last.change);
        vars["rows"] = entry_rows(session_id, &change.added, &added);
        let mut touched = entry_touched(session_id, &change.added)
            .and("context_stacks", session_id)
            .and("context_history", history_id);
        if removed_count <= ENTRY_PAGE {
            for &(a, b) in &removed {
                for seq in a..=b {
                    touched = touched.and("context_entries", seq_id(session_id, seq));
                }
            }
        }
        self.0.write(&sql, vars, touched).await?;
        if removed_count > ENTRY_PAGE {
            // The stack's record no longer names them: removing them is tidying up, and
            // a failure here loses nothing (the purge of the session takes them too).
            if let Err(e) = self.remove_entries(session_id, &removed).await {
                tracing::warn!(
                    session_id,
                    "the context entries a change removed are still stored: {e}"
                );
            }
        }
        Ok(after)
    }

    /// Records whether the stack's next prompt must open a fresh agent session.
    pub async fn mark_fresh(&self, session_id: &str, fresh_start: bool) -> Result<()> {
        self.0
            .write(
                "UPDATE type::record('context_stacks', $id)
             SET fresh_start = $fresh_start, updated_at = time::now() RETURN NONE",
                json!({"id": session_id, "fresh_start": fresh_start}),
                Touched::record("context_stacks", session_id),
            )
            .await?;
        Ok(())
    }

    /// Writes entry records in a transaction of their own (a stack written whole).
    async fn put_entries(
        &self,
        session_id: &str,
        entries: &[Entry],
        texts: &[String],
    ) -> Result<()> {
        self.0
            .write(
                PUT_ENTRIES,
                json!({"id": session_id, "rows": entry_rows(session_id, entries, texts)}),
                entry_touched(session_id, entries),
            )
            .await?;
        Ok(())
    }

    /// Removes the entry records in `ranges`, [`ENTRY_PAGE`] at a time.
    async fn remove_entries(&self, session_id: &str, ranges: &[(u64, u64)]) -> Result<()> {
        for &(first, last) in ranges {
            let mut from = first;
            while from <= last {
                let to = last.min(from + ENTRY_PAGE - 1);
                self.0
                    .write(
                        &format!("DELETE {} RETURN NONE", entry_range(session_id, from, to)),
                        json!({}),
                        Touched::default(),
                    )
                    .await?;
                from = to + 1;
            }
        }
        Ok(())
    }
}

/// Writes `$rows` (`{id, seq, entry}`) as entry records of session `$id`.
const PUT_ENTRIES: &str = "FOR $r IN $rows {
    UPSERT type::record('context_entries', $r.id)
        CONTENT { session_id: $id, seq: $r.seq, entry: $r.entry } RETURN NONE;
};\n";

/// Writes the stack's record.
const PUT_HEADER: &str = "UPSERT type::record('context_stacks', $id) CONTENT {
    stack: $stack, on_stack: $on_stack, fresh_start: $fresh_start,
    history_len: $history_len, updated_at: time::now()
} RETURN NONE;\n";

/// Writes one record of the history (over one a change cut short left there).
const PUT_HISTORY: &str = "UPSERT type::record('context_history', $history_id) CONTENT {
    session_id: $id, seq: $seq, at: time::now(), operation: $operation, change: $change
} RETURN NONE;\n";

/// The variables of [`PUT_HEADER`].
fn header_vars(
    session_id: &str,
    stack: &ContextStack,
    fresh_start: bool,
    history_len: u64,
) -> Result<serde_json::Value> {
    Ok(json!({
        "id": session_id,
        "stack": skeleton(stack)?,
        "on_stack": on_stack(stack),
        "fresh_start": fresh_start,
        "history_len": history_len,
    }))
}

fn skeleton(stack: &ContextStack) -> Result<String> {
    encode(&Skeleton {
        checkpoints: stack.checkpoints().to_vec(),
        next_seq: stack.next_seq(),
    })
}

/// An entry as stored, refused when larger than [`ENTRY_BYTES`].
fn entry_text(entry: &Entry) -> Result<String> {
    let text = encode(entry)?;
    if text.len() > ENTRY_BYTES {
        return Err(StoreError::TooLarge {
            seq: entry.seq,
            kind: entry.message.kind(),
            bytes: text.len(),
            cap: ENTRY_BYTES,
        });
    }
    Ok(text)
}

fn entry_rows(session_id: &str, entries: &[Entry], texts: &[String]) -> serde_json::Value {
    entries
        .iter()
        .zip(texts)
        .map(|(e, text)| json!({"id": seq_id(session_id, e.seq), "seq": e.seq, "entry": text}))
        .collect()
}

fn entry_touched(session_id: &str, entries: &[Entry]) -> Touched {
    let mut touched = Touched::default();
    for e in entries {
        touched = touched.and("context_entries", seq_id(session_id, e.seq));
    }
    touched
}

/// The seq ranges of the entries on `stack`, in order.
fn on_stack(stack: &ContextStack) -> Vec<(u64, u64)> {
    ranges(stack.entries().iter().map(|e| e.seq))
}

fn removed_ranges(removed: &[Entry]) -> Vec<(u64, u64)> {
    ranges(removed.iter().map(|e| e.seq))
}

/// Increasing seqs as inclusive ranges of consecutive ones.
fn ranges(seqs: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for seq in seqs {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == seq => *last = seq,
            _ => out.push((seq, seq)),
        }
    }
    out
}

/// `context_entries` records `first..=last` of a session, as a record range.
fn entry_range(session_id: &str, first: u64, last: u64) -> String {
    format!(
        "context_entries:{}..={}",
        quoted(&seq_id(session_id, first)),
        quoted(&seq_id(session_id, last))
    )
}

fn history_range(session_id: &str, first: u64, last: u64) -> String {
    format!(
        "context_history:{}..={}",
        quoted(&seq_id(session_id, first)),
        quoted(&seq_id(session_id, last))
    )
}
