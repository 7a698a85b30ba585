//! Answering the inbox: only a deliberate act answers. A key answers only the message that
//! is open (in the inbox pane, or brought there by `answer`); `/approve`, `/deny` and
//! `/answer` only the open message or the focused session's question shown above the
//! input; and an approval a rule asked for is approved only after `y` on a confirmation
//! that names the operation. Nothing answers the merely selected row.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Action;
use super::inbox::is_open;
use super::model::{Confirm, Flash, Model};
use crate::protocol::{InboxMessage, MsgType, Purpose};

/// How the human answers a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Choice {
    /// 1-based.
    Option(usize),
    Approve,
    Deny,
    Text(String),
}

impl Model {
    /// The message `/approve`, `/deny` and `/answer` are for: the opened one, else the
    /// focused session's question shown above the input.
    pub(super) fn answer_target(&self) -> Option<String> {
        self.inbox
            .opened()
            .or_else(|| self.inline_item())
            .map(|m| m.id.clone())
    }

    /// `/approve`, `/deny`: the open approval here (opened in the inbox, or the focused
    /// session's).
    pub(super) fn answer_approval(&mut self, choice: Choice) -> Vec<Action> {
        match self.answer_target() {
            Some(id) => self.answer(&id, choice),
            None => self.refuse("nothing to answer: no open approval here"),
        }
    }

    /// A key of the opened message: `a`, `d`, a digit.
    pub(super) fn answer_opened(&mut self, choice: Choice) -> Vec<Action> {
        match self.inbox.opened().map(|m| m.id.clone()) {
            Some(id) => self.answer(&id, choice),
            None => Vec::new(),
        }
    }

    /// Answers `message_id` with `choice`, or asks to confirm first when a rule flagged it
    /// and the answer is anything but a denial.
    pub(super) fn answer(&mut self, message_id: &str, choice: Choice) -> Vec<Action> {
        let Some(message) = self.inbox.get(message_id) else {
            return Vec::new();
        };
        let response = match response_for(message, choice) {
            Ok(response) => response,
            Err(why) => return self.refuse(why.to_string()),
        };
        if let Some(rule) = &message.rule {
            let denial = message.answer_for("deny");
            if denial.as_deref() != Some(response.as_str()) {
                self.confirm = Some(Confirm {
                    message_id: message_id.to_string(),
                    response,
                    rule: rule.clone(),
                    operation: message
                        .operation
                        .clone()
                        .unwrap_or_else(|| message.title.clone()),
                });
                return Vec::new();
            }
        }
        self.respond(message_id, response)
    }

    /// A key while a confirmation is shown: `y` approves the named operation; Esc or `n`
    /// cancels; any other key cancels and then does what it does.
    pub(super) fn confirm_key(&mut self, confirm: Confirm, key: KeyEvent) -> Vec<Action> {
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('y') if plain => self.respond(&confirm.message_id, confirm.response),
            KeyCode::Esc => self.not_approved(&confirm),
            KeyCode::Char('n') if plain => self.not_approved(&confirm),
            _ => {
                let actions = self.handle_key(key);
                if self.flash.is_none() {
                    self.not_approved(&confirm);
                }
                actions
            }
        }
    }

    fn respond(&mut self, message_id: &str, response: String) -> Vec<Action> {
        let Some(message) = self.inbox.get(message_id) else {
            return Vec::new();
        };
        if !is_open(message) {
            // Answered elsewhere, or withdrawn, while the confirmation was shown.
            let why = response_for(message, Choice::Text(response)).err();
            return self.refuse(why.map(|e| e.to_string()).unwrap_or_default());
        }
        let asked = message.digest.clone();
        self.flash = Some(Flash::info(format!(
            "answered \"{}\": {response}",
            message.title
        )));
        self.inbox.close();
        vec![Action::Call(
            crate::protocol::methods::Request::InboxRespond(crate::protocol::RespondParams {
                id: message_id.to_string(),
                response,
                // What the screen showed: an answer to another question is refused.
                asked,
            }),
        )]
    }

    fn not_approved(&mut self, confirm: &Confirm) -> Vec<Action> {
        self.flash = Some(Flash::info(format!(
            "not approved: {} (still waiting)",
            confirm.operation
        )));
        Vec::new()
    }
}

/// Why a choice cannot answer a message; `Display` is what the user is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum AnswerError {
    /// Needs no answer, was withdrawn, or is already answered.
    #[error("\"{title}\" {state}")]
    Closed { title: String, state: &'static str },
    #[error("\"{title}\" takes a free answer: /answer <text> (you chose {chosen})")]
    FreeAnswer { title: String, chosen: usize },
    #[error("choose 1–{count}")]
    NoSuchOption { count: usize },
    #[error("a decision, not an approval: choose 1–{count}")]
    NotAnApproval { count: usize },
    #[error("no option approves: choose 1–{count}")]
    NoneApproves { count: usize },
    #[error("no option denies: choose 1–{count}")]
    NoneDenies { count: usize },
    #[error("answer one of: {}", .options.join(", "))]
    NotAnOption { options: Vec<String> },
}

/// The response a choice makes for a message, or why it cannot answer it.
fn response_for(message: &InboxMessage, choice: Choice) -> Result<String, AnswerError> {
    if !is_open(message) {
        let state = match (message.msg_type.blocks(), message.withdrawn) {
            (false, _) => "needs no answer",
            (true, true) => "was withdrawn",
            (true, false) => "is already answered",
        };
        return Err(AnswerError::Closed {
            title: message.title.clone(),
            state,
        });
    }
    let options = message.accepted_answers().unwrap_or_default();
    let count = options.len();
    match choice {
        Choice::Option(n) if options.is_empty() => Err(AnswerError::FreeAnswer {
            title: message.title.clone(),
            chosen: n,
        }),
        Choice::Option(n) => options
            .get(n.wrapping_sub(1))
            .cloned()
            .ok_or(AnswerError::NoSuchOption { count }),
        Choice::Approve | Choice::Deny if message.msg_type != MsgType::ApprovalRequired => {
            Err(AnswerError::NotAnApproval { count })
        }
        // By the options' ACP kinds where the agent gave them, else their words.
        Choice::Approve => message
            .answer_for("approve")
            .ok_or(AnswerError::NoneApproves { count }),
        Choice::Deny => message
            .answer_for("deny")
            .ok_or(AnswerError::NoneDenies { count }),
        Choice::Text(text) if options.is_empty() => Ok(text),
        // Comments on a plan's steps (`2: use the view`).
        Choice::Text(text)
            if matches!(message.purpose, Some(Purpose::PlanReview { .. }))
                && text.trim().parse::<usize>().is_err() =>
        {
            message
                .answer_for(text.trim())
                .ok_or_else(|| AnswerError::NotAnOption {
                    options: options.clone(),
                })
        }
        Choice::Text(text) => match text.trim().parse::<usize>() {
            Ok(n) => response_for(message, Choice::Option(n)),
            Err(_) => options
                .iter()
                .find(|o| o.eq_ignore_ascii_case(text.trim()))
                .cloned()
                .ok_or_else(|| AnswerError::NotAnOption {
                    options: options.clone(),
                }),
        },
    }
}
