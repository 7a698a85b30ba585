//! The transcript pane's own state: every session's transcript as held, how far the
//! focused one is scrolled, whether thoughts are unfolded, and the entry a search jumped
//! to. The workbench tells it what happened ([`TranscriptMsg`]); it answers with the
//! history to read.

use std::collections::{HashMap, HashSet};

use super::fields::ScrollExtent;
use crate::protocol::methods::Request;
use crate::protocol::{OutputChunk, TranscriptEntry, TranscriptParams};
use crate::tui::action::Action;
use crate::tui::transcript::{TRANSCRIPT_CAP, Transcript};

/// Entries read before a found one when its stretch of history is not held, so that it
/// is seen in its place.
const JUMP_CONTEXT: u64 = 20;

/// A transcript entry a search jumped to: drawn marked, and scrolled to in the first
/// frame that holds it (`placed` from then on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    pub session_id: String,
    pub seq: u64,
    pub placed: bool,
}

/// What the transcript pane is told.
#[derive(Debug)]
pub(in crate::tui) enum TranscriptMsg {
    /// A stored entry arrived live.
    Entry(TranscriptEntry),
    /// Streamed text arrived.
    Chunk(OutputChunk),
    /// History read with `session.transcript`.
    Loaded {
        session_id: String,
        entries: Vec<TranscriptEntry>,
    },
    /// The state was read again: only these sessions remain, and their history is asked
    /// for again from where it stopped.
    Resynced(HashSet<String>),
    /// A session is gone.
    Removed(String),
    /// The focus is on `session_id` (`moved`: it was elsewhere): reads its history the
    /// first time.
    Focused {
        session_id: String,
        moved: bool,
    },
    /// Scroll by rows, up for positive.
    ScrollRows(i32),
    /// Scroll by pages, up for positive.
    ScrollPages(i32),
    /// Back to following the tail (a prompt was sent).
    FollowTail,
    /// How far the focused transcript could scroll in the frame just drawn.
    Drawn(ScrollExtent),
    ToggleThoughts,
    /// A search is about to show entry `seq`: reads that stretch of history when it is
    /// not held.
    Hold {
        session_id: String,
        seq: u64,
    },
    /// A search showed entry `seq` of the (now focused) session: mark it, scroll to it.
    Jumped {
        session_id: String,
        seq: u64,
    },
}

/// The transcript pane.
#[derive(Debug, Default)]
pub struct Transcripts {
    by_session: HashMap<String, Transcript>,
    /// Rows scrolled up from the bottom of the focused transcript; 0 follows the tail.
    pub(in crate::tui) scroll: u16,
    /// How far the focused transcript could scroll in the last frame.
    extent: ScrollExtent,
    pub(in crate::tui) show_thoughts: bool,
    /// The transcript entry the last search result opened.
    jump: Option<Jump>,
}

impl Transcripts {
    /// Carries out `msg`; returns the history to read.
    pub(in crate::tui) fn update(&mut self, msg: TranscriptMsg) -> Vec<Action> {
        match msg {
            TranscriptMsg::Entry(entry) => {
                let session_id = entry.session_id.clone();
                self.of_mut(&session_id).push(entry);
            }
            TranscriptMsg::Chunk(chunk) => {
                self.of_mut(&chunk.session_id)
                    .chunk(chunk.kind, &chunk.text);
            }
            TranscriptMsg::Loaded {
                session_id,
                entries,
            } => {
                let transcript = self.of_mut(&session_id);
                for entry in entries {
                    transcript.push(entry);
                }
            }
            TranscriptMsg::Resynced(ids) => {
                self.by_session.retain(|id, _| ids.contains(id));
                for transcript in self.by_session.values_mut() {
                    transcript.requested = false;
                    transcript.forget_streamed();
                }
            }
            TranscriptMsg::Removed(session_id) => {
                self.by_session.remove(&session_id);
            }
            TranscriptMsg::Focused { session_id, moved } => return self.focused(session_id, moved),
            TranscriptMsg::ScrollRows(rows) => self.scroll_rows(rows),
            TranscriptMsg::ScrollPages(pages) => {
                let page = self.extent.page;
                self.scroll_rows(pages * i32::from(page.saturating_sub(2).max(1)));
            }
            TranscriptMsg::FollowTail => self.scroll = 0,
            TranscriptMsg::Drawn(extent) => {
                self.extent = extent;
                if let Some(offset) = extent.jumped
                    && let Some(jump) = self.jump.as_mut().filter(|j| !j.placed)
                {
                    jump.placed = true;
                    self.scroll = offset;
                }
            }
            TranscriptMsg::ToggleThoughts => self.show_thoughts = !self.show_thoughts,
            TranscriptMsg::Hold { session_id, seq } => return self.hold(session_id, seq),
            TranscriptMsg::Jumped { session_id, seq } => {
                self.jump = Some(Jump {
                    session_id,
                    seq,
                    placed: false,
                });
            }
        }
        Vec::new()
    }

    pub fn get(&self, session_id: &str) -> Option<&Transcript> {
        self.by_session.get(session_id)
    }

    /// The entry a search jumped to (whichever session it is in).
    pub fn jump(&self) -> Option<&Jump> {
        self.jump.as_ref()
    }

    fn of_mut(&mut self, session_id: &str) -> &mut Transcript {
        self.by_session.entry(session_id.to_string()).or_default()
    }

    fn focused(&mut self, session_id: String, moved: bool) -> Vec<Action> {
        if moved {
            self.scroll = 0;
            self.jump = None;
        }
        let transcript = self.of_mut(&session_id);
        if transcript.requested {
            return Vec::new();
        }
        transcript.requested = true;
        let after = transcript.last_seq();
        vec![Action::transcript(session_id, after)]
    }

    /// Scrolls by rows, up for positive `rows`, within what was drawn.
    fn scroll_rows(&mut self, rows: i32) {
        let max = i32::from(self.extent.max);
        let target = (i32::from(self.scroll) + rows).clamp(0, max);
        self.scroll = u16::try_from(target).unwrap_or(0);
    }

    fn hold(&mut self, session_id: String, seq: u64) -> Vec<Action> {
        if self.get(&session_id).is_some_and(|t| t.spans(seq)) {
            return Vec::new();
        }
        // Hold the stretch of history around the entry (the newest entries come back
        // when the session is read again after a reconnect).
        let transcript = self.of_mut(&session_id);
        *transcript = Transcript::default();
        transcript.requested = true;
        vec![
            Request::SessionTranscript(TranscriptParams {
                session_id,
                after: Some(seq.saturating_sub(JUMP_CONTEXT + 1)),
                limit: Some(TRANSCRIPT_CAP as u32),
            })
            .into(),
        ]
    }
}
