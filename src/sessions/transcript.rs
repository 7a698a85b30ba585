//! The writer of a session's transcript: stored entries, the markdown log beside them,
//! and agent text still streaming in (announced at once, stored in bounded pieces). It
//! remembers the first entry it could not store, for the session to fail its turn with.

use super::machine::Line;
use super::wording;
use crate::ledger::{Ledger, now_rfc3339};
use crate::markdown::MarkdownLog;
use crate::protocol::{EntryKind, OutputChunk, Session, SessionState, TranscriptEntry, limits};

/// The session's transcript: stored entries, the markdown log, and the text still
/// streaming in.
pub(super) struct TranscriptWriter {
    session_id: String,
    seq: u64,
    log: MarkdownLog,
    /// The agent message streaming in: its kind and id (if the agent gives them), how
    /// much of it was kept and cut so far ([`limits::MESSAGE_BYTES`]).
    message: Option<Streaming>,
    /// Text of that message not yet stored.
    pending: String,
    /// The first store failure since it was last taken: the turn must not end as if
    /// everything it produced was kept.
    failure: Option<String>,
}

struct Streaming {
    kind: EntryKind,
    id: Option<String>,
    kept: usize,
    cut: usize,
}

impl TranscriptWriter {
    pub async fn open(ledger: &Ledger, session: &Session) -> Self {
        let seq = match ledger.store().records().last_seq(&session.id).await {
            Ok(seq) => seq,
            Err(e) => {
                tracing::error!("cannot read the transcript: {e}");
                0
            }
        };
        Self {
            session_id: session.id.clone(),
            seq,
            log: MarkdownLog::open(&ledger.kiln().sessions_dir(), session),
            message: None,
            pending: String::new(),
            failure: None,
        }
    }

    /// Ends the streaming message, then writes `line`.
    pub async fn append(&mut self, ledger: &Ledger, line: Line) {
        self.flush(ledger).await;
        self.write(ledger, line).await;
    }

    async fn write(&mut self, ledger: &Ledger, line: Line) {
        self.seq += 1;
        let entry = TranscriptEntry {
            session_id: self.session_id.clone(),
            seq: self.seq,
            at: now_rfc3339(),
            kind: line.kind,
            text: line.text.map(|t| crate::text::cap(t, limits::ENTRY_BYTES)),
            tool_call_id: line.tool_call_id,
            status: line.status,
        };
        self.log.write(&entry);
        if let Err(e) = ledger.append_transcript(vec![entry]).await {
            tracing::error!("cannot store a transcript entry: {e}");
            self.failure
                .get_or_insert_with(|| wording::transcript_failed(e));
        }
    }

    /// The store failure since the last call, if any.
    pub fn take_failure(&mut self) -> Option<String> {
        self.failure.take()
    }

    /// Streamed text: announced now, stored in entries of at most
    /// [`limits::ENTRY_BYTES`] as it comes and when the message is complete (the next
    /// message, or anything else, begins). Of one message at most
    /// [`limits::MESSAGE_BYTES`] are kept; the cut is marked at its end. Returns the
    /// part of `text` that was kept.
    pub async fn chunk(
        &mut self,
        ledger: &Ledger,
        kind: EntryKind,
        mut text: String,
        message_id: Option<String>,
    ) -> String {
        let same = self
            .message
            .as_ref()
            .is_some_and(|m| m.kind == kind && m.id == message_id);
        if !same {
            self.flush(ledger).await;
            self.message = Some(Streaming {
                kind,
                id: message_id,
                kept: 0,
                cut: 0,
            });
        }
        let Some(message) = self.message.as_mut() else {
            return String::new();
        };
        let room = limits::MESSAGE_BYTES.saturating_sub(message.kept);
        let keep = crate::text::floor_boundary(&text, room);
        message.cut += text.len() - keep;
        message.kept += keep;
        text.truncate(keep);
        if text.is_empty() {
            return text;
        }
        ledger.publish_output(OutputChunk {
            session_id: self.session_id.clone(),
            kind,
            text: text.clone(),
        });
        self.pending.push_str(&text);
        while self.pending.len() >= limits::ENTRY_BYTES {
            let at = crate::text::floor_boundary(&self.pending, limits::ENTRY_BYTES);
            let rest = self.pending.split_off(at);
            let piece = std::mem::replace(&mut self.pending, rest);
            self.write(ledger, Line::new(kind).text(piece)).await;
        }
        text
    }

    /// Ends the streaming message: stores what is pending and marks a cut.
    pub async fn flush(&mut self, ledger: &Ledger) {
        let Some(message) = self.message.take() else {
            return;
        };
        let mut text = std::mem::take(&mut self.pending);
        if message.cut > 0 {
            let marker = crate::text::cut_marker(message.cut);
            ledger.publish_output(OutputChunk {
                session_id: self.session_id.clone(),
                kind: message.kind,
                text: marker.clone(),
            });
            text.push_str(&marker);
        }
        if !text.is_empty() {
            self.write(ledger, Line::new(message.kind).text(text)).await;
        }
    }

    pub async fn state(&mut self, ledger: &Ledger, state: SessionState, reason: Option<&str>) {
        let line = Line {
            kind: EntryKind::State,
            text: reason.map(String::from),
            tool_call_id: None,
            status: Some(state.as_str().into()),
        };
        self.append(ledger, line).await;
    }
}
