//! One session's transcript as the TUI holds it: stored entries in `seq` order (capped),
//! tool-call updates folded into their call, and the text streamed since the last stored
//! message (`session.output` chunks), which a stored `message`/`thought` entry replaces.

use crate::protocol::{EntryKind, TranscriptEntry};

/// The most entries kept per session; older ones are dropped from the view.
pub const TRANSCRIPT_CAP: usize = 2_000;

/// Streamed text not yet stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streamed {
    /// `Message` or `Thought`.
    pub kind: EntryKind,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    entries: Vec<TranscriptEntry>,
    /// Beside each entry, when it last changed (from `revision`): what was drawn of an
    /// entry whose revision is the same needs no drawing again.
    revisions: Vec<u64>,
    revision: u64,
    streamed: Vec<Streamed>,
    /// Whether history was asked for since the last (re)connect.
    pub(super) requested: bool,
}

impl Transcript {
    pub fn entries(&self) -> &[TranscriptEntry] {
        &self.entries
    }

    /// Beside each of [`Transcript::entries`], a number that changes whenever the entry
    /// does.
    pub fn revisions(&self) -> &[u64] {
        &self.revisions
    }

    fn next_revision(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    pub fn streamed(&self) -> &[Streamed] {
        &self.streamed
    }

    /// Whether `seq` is within the stretch of history held.
    pub fn spans(&self, seq: u64) -> bool {
        match (self.entries.first(), self.entries.last()) {
            (Some(first), Some(last)) => first.seq <= seq && seq <= last.seq,
            _ => false,
        }
    }

    /// The highest `seq` held (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.entries.last().map_or(0, |e| e.seq)
    }

    /// Adds a stored entry, live (`session.transcript`) or from history. Entries already
    /// held are ignored, so history and live events may overlap.
    pub fn push(&mut self, entry: TranscriptEntry) {
        let live = entry.seq > self.last_seq();
        if live {
            self.settle_streamed(&entry);
        }
        if entry.kind == EntryKind::ToolUpdate && self.fold_update(&entry) {
            return;
        }
        if let Err(at) = self.entries.binary_search_by_key(&entry.seq, |e| e.seq) {
            self.entries.insert(at, entry);
            let revision = self.next_revision();
            self.revisions.insert(at, revision);
        }
        if self.entries.len() > TRANSCRIPT_CAP {
            let excess = self.entries.len() - TRANSCRIPT_CAP;
            self.entries.drain(..excess);
            self.revisions.drain(..excess);
        }
    }

    /// Appends streamed text to the block of its kind that is still streaming.
    pub fn chunk(&mut self, kind: EntryKind, text: &str) {
        match self.streamed.last_mut() {
            Some(last) if last.kind == kind => last.text.push_str(text),
            _ => self.streamed.push(Streamed {
                kind,
                text: text.to_string(),
            }),
        }
    }

    /// Drops streamed text that may be stale (after a reconnect).
    pub fn forget_streamed(&mut self) {
        self.streamed.clear();
    }

    /// A stored message or thought replaces the streamed text it was made of; the end of
    /// a turn ends all streaming.
    fn settle_streamed(&mut self, entry: &TranscriptEntry) {
        match entry.kind {
            EntryKind::TurnEnd => self.streamed.clear(),
            EntryKind::Message | EntryKind::Thought => {
                let Some(at) = self.streamed.iter().position(|s| s.kind == entry.kind) else {
                    return;
                };
                let stored = entry.text.as_deref().unwrap_or_default();
                let block = &mut self.streamed[at];
                match block.text.strip_prefix(stored) {
                    // More of the next message already streamed in after it.
                    Some(rest) if !rest.is_empty() && !stored.is_empty() => {
                        block.text = rest.to_string();
                    }
                    _ => {
                        self.streamed.remove(at);
                    }
                }
            }
            _ => {}
        }
    }

    /// Folds a tool update into its call; false when the call is not held.
    fn fold_update(&mut self, update: &TranscriptEntry) -> bool {
        let Some(id) = update.tool_call_id.as_deref() else {
            return false;
        };
        let Some(at) = self
            .entries
            .iter()
            .rposition(|e| e.kind == EntryKind::ToolCall && e.tool_call_id.as_deref() == Some(id))
        else {
            return false;
        };
        let revision = self.next_revision();
        self.revisions[at] = revision;
        let call = &mut self.entries[at];
        if update.status.is_some() {
            call.status.clone_from(&update.status);
        }
        if update.text.is_some() {
            call.text.clone_from(&update.text);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, kind: EntryKind, text: &str) -> TranscriptEntry {
        TranscriptEntry {
            session_id: "s".into(),
            seq,
            at: "2026-11-02T10:00:00Z".into(),
            kind,
            text: Some(text.into()),
            tool_call_id: None,
            status: None,
        }
    }

    fn tool(seq: u64, kind: EntryKind, id: &str, status: &str) -> TranscriptEntry {
        TranscriptEntry {
            tool_call_id: Some(id.into()),
            status: Some(status.into()),
            ..entry(seq, kind, "cargo test")
        }
    }

    #[test]
    fn chunks_coalesce_and_the_stored_message_replaces_them() {
        let mut t = Transcript::default();
        t.chunk(EntryKind::Thought, "hmm, ");
        t.chunk(EntryKind::Thought, "tests first");
        t.chunk(EntryKind::Message, "I will ");
        t.chunk(EntryKind::Message, "fix it");
        assert_eq!(t.streamed().len(), 2);
        assert_eq!(t.streamed()[1].text, "I will fix it");
        t.push(entry(1, EntryKind::Thought, "hmm, tests first"));
        assert_eq!(t.streamed().len(), 1);
        assert_eq!(t.streamed()[0].kind, EntryKind::Message);
        t.push(entry(2, EntryKind::Message, "I will fix it"));
        assert!(t.streamed().is_empty());
        assert_eq!(t.entries().len(), 2);
    }

    #[test]
    fn text_streamed_past_a_stored_message_stays() {
        let mut t = Transcript::default();
        // Same kind, next message: the TUI cannot see the boundary until it is stored.
        t.chunk(EntryKind::Message, "first.second");
        t.push(entry(1, EntryKind::Message, "first."));
        assert_eq!(t.streamed()[0].text, "second");
    }

    #[test]
    fn turn_end_clears_leftover_streaming() {
        let mut t = Transcript::default();
        t.chunk(EntryKind::Message, "partial");
        t.push(entry(1, EntryKind::TurnEnd, "end_turn"));
        assert!(t.streamed().is_empty());
    }

    #[test]
    fn history_and_live_entries_merge_in_order_without_duplicates() {
        let mut t = Transcript::default();
        t.push(entry(3, EntryKind::Message, "c"));
        t.chunk(EntryKind::Message, "d");
        // History arriving late neither reorders nor eats the streamed text.
        for seq in 1..=3 {
            t.push(entry(seq, EntryKind::Message, "d"));
        }
        let seqs: Vec<u64> = t.entries().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert_eq!(t.entries()[2].text.as_deref(), Some("c"));
        assert_eq!(t.streamed()[0].text, "d");
    }

    #[test]
    fn tool_updates_fold_into_their_call() {
        let mut t = Transcript::default();
        t.push(tool(1, EntryKind::ToolCall, "t1", "pending"));
        t.push(tool(2, EntryKind::ToolUpdate, "t1", "completed"));
        t.push(tool(3, EntryKind::ToolUpdate, "unknown", "failed"));
        assert_eq!(t.entries().len(), 2);
        assert_eq!(t.entries()[0].status.as_deref(), Some("completed"));
        assert_eq!(t.entries()[1].kind, EntryKind::ToolUpdate);
    }

    #[test]
    fn the_cap_drops_the_oldest() {
        let mut t = Transcript::default();
        for seq in 1..=(TRANSCRIPT_CAP as u64 + 5) {
            t.push(entry(seq, EntryKind::Message, "x"));
        }
        assert_eq!(t.entries().len(), TRANSCRIPT_CAP);
        assert_eq!(t.entries()[0].seq, 6);
    }
}
