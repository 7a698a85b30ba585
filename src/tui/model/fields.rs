//! The shapes of the model's fields: what has the keyboard, the overlays and side panes,
//! flashes, a session's activity, the transcript's scroll extent and an approval waiting
//! for `y`.

use crate::protocol::{Session, SessionState};

/// What has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Input,
    Inbox,
}

/// A full-screen overlay over the workbench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    /// Bindings and commands; `scroll` is the first row shown. `/help` puts the
    /// commands first, F1 and `?` the keys.
    Help { scroll: u16, commands_first: bool },
    /// The sessions, filtered by what is typed ([`Model::picker_filter`]); `selected` is
    /// the one Enter focuses, among those the filter keeps.
    Sessions { selected: usize },
    /// A read-only page ([`Model::page`]: an audit log, the rules, the security state, the
    /// context summary); `scroll` is the first row.
    Page { scroll: u16 },
    /// A session's changes ([`Model::diff`]), with a cursor for review comments.
    Diff,
    /// The last search's results ([`Model::found`]); `selected` is the hit Enter opens.
    Search { selected: usize },
}

/// Which side panes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panes {
    pub inbox: bool,
    pub context: bool,
}

/// A one-line message to the user, shown until the next key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub is_error: bool,
}

impl Flash {
    pub fn info(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

/// A session's state as the status bar shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Its agent waits for memory to start (`[fleet]`).
    Queued,
    Starting,
    Working,
    Waiting,
    Done,
    /// The last turn was cancelled.
    Cancelled,
    /// The last turn was cut short (a restart, its agent's end): alt-r sends it again.
    Interrupted,
    Stopped,
    /// Idle long enough that its environment was torn down; a prompt brings it back.
    Parked,
    Error,
    /// A self-registered session with a recent heartbeat.
    Active,
    /// A self-registered session without one.
    Idle,
}

impl Activity {
    /// A session's activity; `open`: it has a decision or approval that waits for an
    /// answer (what says a self-registered session waits).
    pub fn of(session: &Session, open: bool) -> Self {
        match session.state {
            Some(SessionState::Queued) => Activity::Queued,
            Some(SessionState::Creating | SessionState::Starting) => Activity::Starting,
            Some(SessionState::Working) => Activity::Working,
            Some(SessionState::Waiting) => Activity::Waiting,
            Some(SessionState::Complete) => Activity::Done,
            Some(SessionState::Cancelled) => Activity::Cancelled,
            Some(SessionState::Interrupted) => Activity::Interrupted,
            Some(SessionState::Stopped) => Activity::Stopped,
            Some(SessionState::Parked) => Activity::Parked,
            Some(SessionState::Error) => Activity::Error,
            None if open => Activity::Waiting,
            None if session.status == "active" => Activity::Active,
            None => Activity::Idle,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Activity::Queued => "queued",
            Activity::Starting => "starting",
            Activity::Working => "working",
            Activity::Waiting => "waiting",
            Activity::Done => "done",
            Activity::Cancelled => "cancelled",
            Activity::Interrupted => "interrupted",
            Activity::Stopped => "stopped",
            Activity::Parked => "parked",
            Activity::Error => "error",
            Activity::Active => "active",
            Activity::Idle => "idle",
        }
    }
}

/// How far the focused transcript can scroll, as last drawn (the view returns it and the
/// runtime passes it to the model, so that scrolling stops at the top).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrollExtent {
    /// Rows above the bottom that can be scrolled to.
    pub max: u16,
    /// Rows visible.
    pub page: u16,
    /// Where the frame put the entry a search jumped to (rows above the bottom), the
    /// first time it could.
    pub jumped: Option<u16>,
}

/// An answer to an approval a rule asked for, waiting for `y`: the confirmation names the
/// operation, so what is approved is on the screen when it is approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub message_id: String,
    /// The option the answer picks.
    pub response: String,
    pub rule: String,
    pub operation: String,
}
