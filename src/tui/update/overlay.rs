//! Keys while an overlay is open, and opening and closing overlays. The overlays with a
//! state of their own have a sub-model each, which takes the keys as its messages and
//! says what the workbench does next: the sessions picker, the search results, the diff
//! under review. Help and pages only scroll.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::protocol::methods::Request;
use crate::protocol::{HitKind, IdParams, SearchHit};
use crate::tui::action::Action;
use crate::tui::inbox::InboxMsg;
use crate::tui::keymap::{KeyAction, Scope};
use crate::tui::model::{
    Flash, Model, Overlay, Picked, PickerMsg, SearchMsg, Searched, TranscriptMsg, Zone,
};
use crate::tui::review::{ReviewMsg, Reviewed};

impl Model {
    /// A key while an overlay other than the diff is open.
    pub(super) fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Vec<Action> {
        if let Overlay::Sessions { selected } = overlay
            && let Some(msg) = PickerMsg::from_key(key, selected)
        {
            let lines = self.picker_lines();
            let picked = self.picker.update(msg, &lines);
            return self.on_picked(picked);
        }
        match self.keymap.lookup(Scope::Global, &key) {
            Some(KeyAction::Quit) => return vec![Action::Quit],
            Some(action @ (KeyAction::Help | KeyAction::Sessions)) => return self.perform(action),
            _ => {}
        }
        match (overlay, key.code) {
            // A page comes up by itself (a failure in words): only Esc, Enter and the
            // arrows are its own; every other key closes it and does what it would
            // have done, so nothing typed while it came up is lost or swallowed.
            (Overlay::Page { .. }, KeyCode::Esc | KeyCode::Enter) => self.close_overlay(),
            (Overlay::Search { selected }, KeyCode::Enter) => {
                return self.search_msg(SearchMsg::Open { selected });
            }
            (Overlay::Search { selected }, KeyCode::Up | KeyCode::Char('k')) => {
                return self.search_msg(SearchMsg::Move {
                    selected,
                    delta: -1,
                });
            }
            (Overlay::Search { selected }, KeyCode::Down | KeyCode::Char('j')) => {
                return self.search_msg(SearchMsg::Move { selected, delta: 1 });
            }
            (Overlay::Search { selected }, KeyCode::PageUp) => {
                return self.search_msg(SearchMsg::Move {
                    selected,
                    delta: -10,
                });
            }
            (Overlay::Search { selected }, KeyCode::PageDown) => {
                return self.search_msg(SearchMsg::Move {
                    selected,
                    delta: 10,
                });
            }
            (Overlay::Page { .. }, _) if !page_key(key) => {
                self.close_overlay();
                return self.handle_key(key);
            }
            (_, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q' | '?')) => self.close_overlay(),
            (
                Overlay::Help {
                    scroll,
                    commands_first,
                },
                KeyCode::Up | KeyCode::PageUp | KeyCode::Char('k'),
            ) => {
                let step = if key.code == KeyCode::PageUp { 10 } else { 1 };
                self.overlay = Some(Overlay::Help {
                    scroll: scroll.saturating_sub(step),
                    commands_first,
                });
            }
            (
                Overlay::Help {
                    scroll,
                    commands_first,
                },
                KeyCode::Down | KeyCode::PageDown | KeyCode::Char('j'),
            ) => {
                let step = if key.code == KeyCode::PageDown { 10 } else { 1 };
                self.overlay = Some(Overlay::Help {
                    scroll: scroll.saturating_add(step),
                    commands_first,
                });
            }
            (Overlay::Page { scroll }, KeyCode::Up | KeyCode::PageUp) => {
                let step = if key.code == KeyCode::PageUp { 10 } else { 1 };
                self.overlay = Some(Overlay::Page {
                    scroll: scroll.saturating_sub(step),
                });
            }
            (Overlay::Page { scroll }, KeyCode::Down | KeyCode::PageDown) => {
                let step = if key.code == KeyCode::PageDown { 10 } else { 1 };
                self.overlay = Some(Overlay::Page {
                    scroll: scroll.saturating_add(step),
                });
            }
            // Any other printable key is typing: the overlay closes and the key goes to
            // the input, so nothing typed while an overlay came up is lost.
            (_, KeyCode::Char(_))
                if !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
            {
                self.close_overlay();
                return self.type_key(key);
            }
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn toggle_overlay(&mut self, overlay: Overlay) -> Vec<Action> {
        let same = matches!(
            (self.overlay, overlay),
            (Some(Overlay::Help { .. }), Overlay::Help { .. })
                | (Some(Overlay::Sessions { .. }), Overlay::Sessions { .. })
        );
        if same {
            self.close_overlay();
            return Vec::new();
        }
        self.overlay = Some(overlay);
        if let Overlay::Sessions { .. } = overlay {
            // Opens with an empty filter, the focused session chosen.
            self.picker.clear();
            let selected = self.focused_index().unwrap_or(0);
            self.overlay = Some(Overlay::Sessions { selected });
            // What each agent costs the machine, read when the list is opened.
            return vec![
                Request::SessionList(crate::protocol::SessionListParams {
                    resources: true,
                    ..crate::protocol::SessionListParams::default()
                })
                .into(),
            ];
        }
        Vec::new()
    }

    /// Closes the overlay; the keys go to the input after it, whatever had them before.
    pub(super) fn close_overlay(&mut self) {
        self.overlay = None;
        self.zone = Zone::Input;
        self.picker.clear();
    }

    /// A key while the diff overlay is open.
    pub(super) fn review_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let reviewed = self.review.update(ReviewMsg::Key(key));
        self.on_reviewed(reviewed)
    }

    /// Carries out what the review said to do.
    pub(super) fn on_reviewed(&mut self, reviewed: Reviewed) -> Vec<Action> {
        match reviewed {
            Reviewed::Open => self.overlay = Some(Overlay::Diff),
            Reviewed::Close => self.close_overlay(),
            Reviewed::Gone => self.overlay = None,
            Reviewed::Stay => {}
            Reviewed::Flash(text) => self.flash = Some(Flash::info(text)),
            Reviewed::Refuse(text) => return self.refuse(text),
            Reviewed::Page(title, lines) => self.show_page(title, lines),
            Reviewed::Prompt(session_id, text) => return vec![Action::prompt(session_id, text)],
        }
        Vec::new()
    }

    /// Carries out what the picker said to do.
    fn on_picked(&mut self, picked: Picked) -> Vec<Action> {
        match picked {
            Picked::Choose(selected) => self.overlay = Some(Overlay::Sessions { selected }),
            Picked::Focus(index) => {
                self.overlay = None;
                self.zone = Zone::Input;
                let id = self.sessions[index].id.clone();
                return self.focus(&id);
            }
            Picked::Close => {
                self.overlay = None;
                self.zone = Zone::Input;
            }
            Picked::NoMatch(why) => return self.refuse(why),
        }
        Vec::new()
    }

    /// Gives the search results `msg` and carries out what they say to do.
    pub(super) fn search_msg(&mut self, msg: SearchMsg) -> Vec<Action> {
        match self.search.update(msg) {
            Searched::Choose(selected) => self.overlay = Some(Overlay::Search { selected }),
            Searched::Nothing(text) => self.report(Flash::info(text)),
            Searched::Open(hit) => return self.open_hit(hit),
            Searched::Stay => {}
        }
        Vec::new()
    }

    /// Enter on a hit: focuses a transcript entry's session and scrolls to the entry
    /// (reading that stretch of its history first when the workbench does not hold it),
    /// opens an inbox message, or focuses a session.
    fn open_hit(&mut self, hit: SearchHit) -> Vec<Action> {
        self.overlay = None;
        self.zone = Zone::Input;
        if hit.kind != HitKind::Inbox && self.session(&hit.session_id).is_none() {
            return self.refuse(format!("{} is gone", hit.session_name));
        }
        match (hit.kind, hit.seq, hit.message_id) {
            (HitKind::Transcript, Some(seq), _) => self.jump_to(hit.session_id, seq),
            (HitKind::Inbox, _, Some(id)) => {
                if self.inbox.get(&id).is_some() {
                    self.panes.inbox = true;
                    self.zone = Zone::Inbox;
                    self.inbox.update(InboxMsg::Reveal(id))
                } else {
                    // Not among the messages the inbox pane holds: read it to show.
                    vec![Request::InboxGet(IdParams { id }).into()]
                }
            }
            _ => self.focus(&hit.session_id),
        }
    }

    /// Focuses `session_id` and scrolls its transcript to entry `seq`.
    fn jump_to(&mut self, session_id: String, seq: u64) -> Vec<Action> {
        let mut actions = self.transcripts.update(TranscriptMsg::Hold {
            session_id: session_id.clone(),
            seq,
        });
        actions.extend(self.focus(&session_id));
        self.transcripts
            .update(TranscriptMsg::Jumped { session_id, seq });
        actions
    }
}

/// The keys a page keeps: scrolling it.
fn page_key(key: KeyEvent) -> bool {
    key.modifiers.is_empty()
        && matches!(
            key.code,
            KeyCode::Up | KeyCode::Down | KeyCode::PageUp | KeyCode::PageDown
        )
}
