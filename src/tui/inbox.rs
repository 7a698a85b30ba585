//! The inbox as the TUI holds it: every session's messages, what waits for an answer
//! first and each part newest first (as the web page shows them), the selection
//! and the opened message (both by id, so they survive messages arriving). The workbench
//! tells it what arrived and what the person did ([`InboxMsg`]).

use super::action::Action;
use crate::protocol::methods::Request;
use crate::protocol::{IdsParams, InboxMessage};

/// What the inbox is told.
#[derive(Debug)]
pub(super) enum InboxMsg {
    /// Every message, read again; `keyboard`: the pane has the keyboard (else the
    /// selection goes to the newest).
    Synced {
        messages: Vec<InboxMessage>,
        keyboard: bool,
    },
    /// A new message; until the pane has the keyboard its selection stays on the newest.
    Arrived {
        message: InboxMessage,
        keyboard: bool,
    },
    Changed(InboxMessage),
    Deleted(Vec<String>),
    /// Move the selection by rows.
    Move(isize),
    Select(String),
    /// Open the selected message, marking it read.
    Open,
    /// Select and open a message, as it is.
    Reveal(String),
    Close,
}

/// Whether a message still waits for a human answer.
pub fn is_open(message: &InboxMessage) -> bool {
    message.msg_type.blocks() && !message.responded && !message.withdrawn
}

/// The inbox's order is this, descending: what waits for an answer first, then newest
/// first (ids are ULIDs: time-ordered).
fn order_key(message: &InboxMessage) -> (bool, &str, &str) {
    (is_open(message), &message.timestamp, &message.id)
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inbox {
    /// What waits for an answer first, each part newest first.
    messages: Vec<InboxMessage>,
    selected: Option<String>,
    opened: Option<String>,
}

impl Inbox {
    /// Carries out `msg`; returns the call that marks an opened message read.
    pub(super) fn update(&mut self, msg: InboxMsg) -> Vec<Action> {
        match msg {
            InboxMsg::Synced { messages, keyboard } => {
                self.replace(messages);
                if !keyboard {
                    self.select_newest();
                }
            }
            InboxMsg::Arrived { message, keyboard } => {
                self.upsert(message);
                if !keyboard {
                    self.select_newest();
                }
            }
            InboxMsg::Changed(message) => self.upsert(message),
            InboxMsg::Deleted(ids) => self.remove(&ids),
            InboxMsg::Move(delta) => self.move_selection(delta),
            InboxMsg::Select(id) => self.select(&id),
            InboxMsg::Open => {
                if let Some(m) = self.open_selected().filter(|m| !m.read) {
                    return vec![
                        Request::InboxMarkRead(IdsParams {
                            ids: vec![m.id.clone()],
                        })
                        .into(),
                    ];
                }
            }
            InboxMsg::Reveal(id) => {
                self.select(&id);
                self.open_selected();
            }
            InboxMsg::Close => self.close(),
        }
        Vec::new()
    }

    /// What waits for an answer first, each part newest first.
    pub fn messages(&self) -> &[InboxMessage] {
        &self.messages
    }

    pub fn unread(&self) -> usize {
        self.messages.iter().filter(|m| !m.read).count()
    }

    pub fn get(&self, id: &str) -> Option<&InboxMessage> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// A session's messages that wait for an answer, oldest first.
    pub fn open_items<'a>(&'a self, session_id: &'a str) -> impl Iterator<Item = &'a InboxMessage> {
        self.messages
            .iter()
            .rev()
            .filter(move |m| m.session_id == session_id && is_open(m))
    }

    /// Replaces every message (after a (re)connect).
    pub fn replace(&mut self, mut messages: Vec<InboxMessage>) {
        messages.sort_by(|a, b| order_key(b).cmp(&order_key(a)));
        self.messages = messages;
        if self.opened().is_none() {
            self.opened = None;
        }
        self.keep_selection_valid();
    }

    /// Adds a message or replaces the one with its id.
    pub fn upsert(&mut self, message: InboxMessage) {
        self.messages.retain(|m| m.id != message.id);
        let at = self
            .messages
            .partition_point(|m| order_key(m) > order_key(&message));
        self.messages.insert(at, message);
        self.keep_selection_valid();
    }

    pub fn remove(&mut self, ids: &[String]) {
        let index = self.selected_index();
        self.messages.retain(|m| !ids.contains(&m.id));
        if self.opened.as_ref().is_some_and(|id| ids.contains(id)) {
            self.opened = None;
        }
        if self.selected.as_ref().is_some_and(|id| ids.contains(id)) {
            // Select the message that took its place.
            let at = index
                .unwrap_or(0)
                .min(self.messages.len().saturating_sub(1));
            self.selected = self.messages.get(at).map(|m| m.id.clone());
        }
    }

    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_deref()?;
        self.messages.iter().position(|m| m.id == id)
    }

    pub fn selected(&self) -> Option<&InboxMessage> {
        self.get(self.selected.as_deref()?)
    }

    pub fn opened(&self) -> Option<&InboxMessage> {
        self.get(self.opened.as_deref()?)
    }

    /// Moves the selection by `delta` rows, stopping at the ends.
    pub fn move_selection(&mut self, delta: isize) {
        let Some(index) = self.selected_index() else {
            return;
        };
        let last = self.messages.len().saturating_sub(1);
        let next = index.saturating_add_signed(delta).min(last);
        self.selected = self.messages.get(next).map(|m| m.id.clone());
    }

    /// Selects the first message: the newest question, else the newest.
    pub fn select_newest(&mut self) {
        self.selected = self.messages.first().map(|m| m.id.clone());
    }

    pub fn select(&mut self, id: &str) {
        if self.get(id).is_some() {
            self.selected = Some(id.to_string());
        }
    }

    /// Opens the selected message.
    pub fn open_selected(&mut self) -> Option<&InboxMessage> {
        self.opened.clone_from(&self.selected);
        self.opened()
    }

    pub fn close(&mut self) {
        self.opened = None;
    }

    fn keep_selection_valid(&mut self) {
        if self.selected().is_none() {
            self.selected = self.messages.first().map(|m| m.id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::MsgType;
    use crate::tui::fixture;

    #[test]
    fn what_waits_for_an_answer_comes_first_then_the_newest() {
        let s = &fixture::sessions()[0];
        let question = fixture::message(1, s, MsgType::ApprovalRequired, "Run it?", &["yes"]);
        let done_later = fixture::message(2, s, MsgType::TaskComplete, "done", &[]);
        let newer_question = fixture::message(3, s, MsgType::DecisionNeeded, "Which?", &["a"]);
        let newest_done = fixture::message(4, s, MsgType::TaskComplete, "done again", &[]);
        let mut inbox = Inbox::default();
        inbox.replace(vec![
            question.clone(),
            done_later.clone(),
            newer_question.clone(),
            newest_done.clone(),
        ]);
        let titles = |inbox: &Inbox| {
            inbox
                .messages()
                .iter()
                .map(|m| m.title.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(titles(&inbox), ["Which?", "Run it?", "done again", "done"]);
        inbox.select_newest();
        assert_eq!(inbox.selected().unwrap().title, "Which?");
        // Answered, a question takes its place among the rest by time.
        let mut answered = newer_question;
        answered.responded = true;
        inbox.upsert(answered);
        assert_eq!(titles(&inbox), ["Run it?", "done again", "Which?", "done"]);
        assert_eq!(
            inbox
                .open_items(&s.id)
                .map(|m| m.title.as_str())
                .collect::<Vec<_>>(),
            ["Run it?"]
        );
    }
}
