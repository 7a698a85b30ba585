//! A context change as history records: one, or, for a change too large for one record,
//! parts of a bounded size.

use serde::Serialize;

use super::error::Result;
use crate::context::{Change, Entry};

/// The most text (entries' and history's JSON) one transaction of a context save carries
/// besides one entry, a quarter of the engine's default write buffer (8 MiB).
pub const PIECE_BYTES: usize = 2 * 1024 * 1024;

/// A value as stored: its JSON.
pub(super) fn encode<T: Serialize>(value: &T) -> Result<String> {
    Ok(serde_json::to_string(value)?)
}

/// One record of a change's history.
pub(super) struct Part {
    pub(super) operation: String,
    pub(super) change: String,
}

/// The history records of `change`: one when its JSON fits [`PIECE_BYTES`]; otherwise
/// its removed entries in parts of at most that, each a change of the same operation
/// (`reset (part 1 of 3)`), the last with what it added and its checkpoints.
pub(super) fn history_parts(change: &Change) -> Result<Vec<Part>> {
    let whole = encode(change)?;
    let operation = change.operation.to_string();
    if whole.len() <= PIECE_BYTES {
        return Ok(vec![Part {
            operation,
            change: whole,
        }]);
    }
    let piece = |removed: Vec<Entry>| Change {
        operation: change.operation.clone(),
        removed,
        added: Vec::new(),
        checkpoint_added: None,
        checkpoints_dropped: Vec::new(),
    };
    let mut pieces: Vec<Change> = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for entry in &change.removed {
        let size = encode(entry)?.len();
        if !current.is_empty() && bytes + size > PIECE_BYTES {
            pieces.push(piece(std::mem::take(&mut current)));
            bytes = 0;
        }
        bytes += size;
        current.push(entry.clone());
    }
    // The last part commits the change: what it added and its checkpoints, with the
    // last of the removed entries when they fit beside them.
    let mut last = piece(Vec::new());
    last.added = change.added.clone();
    last.checkpoint_added = change.checkpoint_added.clone();
    last.checkpoints_dropped = change.checkpoints_dropped.clone();
    let rest = encode(&last)?.len();
    if !current.is_empty() {
        if bytes + rest <= PIECE_BYTES {
            last.removed = current;
        } else {
            pieces.push(piece(current));
        }
    }
    pieces.push(last);
    let count = pieces.len();
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            Ok(Part {
                operation: format!("{operation} (part {} of {count})", i + 1),
                change: encode(&part)?,
            })
        })
        .collect()
}
