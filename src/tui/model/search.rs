//! Search results and the jump to what was found: the overlay lists the hits, Enter
//! focuses a transcript entry's session and scrolls to the entry (reading that stretch of
//! its history first when the workbench does not hold it), opens an inbox message, or
//! focuses a session.

use super::{Action, Flash, Model, Overlay, Zone};
use crate::protocol::methods::Request;
use crate::protocol::{HitKind, IdParams, SearchHit, TranscriptParams};
use crate::tui::transcript::{TRANSCRIPT_CAP, Transcript};

/// Entries read before a found one when its stretch of history is not held, so that it
/// is seen in its place.
const JUMP_CONTEXT: u64 = 20;

/// The last search's results.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub query: String,
    pub hits: Vec<SearchHit>,
    /// Not every match was ranked (the words are in too many entries).
    pub broad: bool,
}

/// A transcript entry a search jumped to: drawn marked, and scrolled to in the first
/// frame that holds it (`placed` from then on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    pub session_id: String,
    pub seq: u64,
    pub placed: bool,
}

impl Model {
    /// The answer to `/search`: the hits listed in an overlay, or a flash when none.
    pub fn show_search(&mut self, query: String, hits: Vec<SearchHit>, broad: bool) {
        if hits.is_empty() {
            self.report(Flash::info(format!("nothing found for “{query}”")));
            return;
        }
        self.found = Some(Found { query, hits, broad });
        self.overlay = Some(Overlay::Search { selected: 0 });
    }

    /// The last search's results.
    pub fn found(&self) -> Option<&Found> {
        self.found.as_ref()
    }

    /// The entry a search jumped to, while its session is focused.
    pub fn jump(&self) -> Option<&Jump> {
        self.jump
            .as_ref()
            .filter(|j| self.focused.as_deref() == Some(j.session_id.as_str()))
    }

    /// The drawn frame put the found entry on screen `offset` rows up from the bottom:
    /// scrolling goes on from there.
    pub(super) fn jump_placed(&mut self, offset: u16) {
        if let Some(jump) = self.jump.as_mut().filter(|j| !j.placed) {
            jump.placed = true;
            self.scroll = offset;
        }
    }

    /// Moves the selection in the results overlay by `delta`, within the hits.
    pub(in crate::tui) fn move_found(&mut self, selected: usize, delta: isize) {
        let count = self.found.as_ref().map_or(0, |f| f.hits.len());
        let next = selected
            .saturating_add_signed(delta)
            .min(count.saturating_sub(1));
        self.overlay = Some(Overlay::Search { selected: next });
    }

    /// Enter on a hit: goes to what it found.
    pub(in crate::tui) fn open_found(&mut self, selected: usize) -> Vec<Action> {
        let Some(hit) = self
            .found
            .as_ref()
            .and_then(|f| f.hits.get(selected))
            .cloned()
        else {
            return Vec::new();
        };
        self.overlay = None;
        self.zone = Zone::Input;
        if hit.kind != HitKind::Inbox && self.session(&hit.session_id).is_none() {
            return self.refuse(format!("{} is gone", hit.session_name));
        }
        match (hit.kind, hit.seq, hit.message_id) {
            (HitKind::Transcript, Some(seq), _) => self.jump_to(&hit.session_id, seq),
            (HitKind::Inbox, _, Some(id)) => {
                if self.inbox.get(&id).is_some() {
                    self.panes.inbox = true;
                    self.zone = Zone::Inbox;
                    self.inbox.select(&id);
                    self.inbox.open_selected();
                    Vec::new()
                } else {
                    // Not among the messages the inbox pane holds: read it to show.
                    vec![Request::InboxGet(IdParams { id }).into()]
                }
            }
            _ => self.focus(&hit.session_id),
        }
    }

    /// Focuses `session_id` and scrolls its transcript to entry `seq`.
    fn jump_to(&mut self, session_id: &str, seq: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        let held = self
            .transcripts
            .get(session_id)
            .is_some_and(|t| t.spans(seq));
        if !held {
            // Hold the stretch of history around the entry (the newest entries come
            // back when the session is read again after a reconnect).
            let transcript = self.transcript_mut(session_id);
            *transcript = Transcript::default();
            transcript.requested = true;
            actions.push(
                Request::SessionTranscript(TranscriptParams {
                    session_id: session_id.to_string(),
                    after: Some(seq.saturating_sub(JUMP_CONTEXT + 1)),
                    limit: Some(TRANSCRIPT_CAP as u32),
                })
                .into(),
            );
        }
        actions.extend(self.focus(session_id));
        self.jump = Some(Jump {
            session_id: session_id.to_string(),
            seq,
            placed: false,
        });
        actions
    }
}
