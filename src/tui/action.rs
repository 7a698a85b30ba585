//! What the pure core asks of the world: the [`Action`]s the runtime performs, through the
//! daemon client or on the terminal. Key handling and event application both return them,
//! so the runtime has one way to carry them out.

use serde::{Deserialize, Serialize};

use crate::protocol::methods::Request;
use crate::protocol::{
    ContextApplyParams, ContextCall, PromptParams, SessionIdParams, TranscriptParams,
};

/// A request for the runtime to perform. Results come back as daemon events (fed to
/// [`Model::apply`](super::Model::apply)), as the reply's effect on the model (the runtime
/// knows what each reply shows: an audit log, a diff, a page, a new session to focus…)
/// or, for failures, as a flash ([`Model::report`](super::Model::report)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
// Nearly every action is a call, and each lives only from a key press to its send: boxing
// the request would cost more than the few bytes a bell or a quit leaves unused.
#[allow(clippy::large_enum_variant)]
pub enum Action {
    /// A call of a method of the daemon. A `session.create` with an empty `agent` starts
    /// the configured default agent.
    Call(Request),
    /// A session that is not focused started waiting for the human: ring the bell (or send
    /// an OSC 9 notification with `message`). Returned once per start of waiting.
    Bell { message: String },
    /// Leave the workbench (agents keep working).
    Quit,
}

impl From<Request> for Action {
    fn from(request: Request) -> Self {
        Action::Call(request)
    }
}

impl Action {
    /// `session.prompt`.
    pub fn prompt(session_id: String, text: String) -> Self {
        Request::SessionPrompt(PromptParams { session_id, text }).into()
    }

    /// `context.apply`: read the session's stack (`Get`) or change it.
    pub fn context(session_id: String, op: ContextCall) -> Self {
        Request::ContextApply(ContextApplyParams { session_id, op }).into()
    }

    /// `session.transcript` after `after`.
    pub fn transcript(session_id: String, after: u64) -> Self {
        Request::SessionTranscript(TranscriptParams {
            session_id,
            after: Some(after),
            limit: None,
        })
        .into()
    }

    /// A method whose params are only the session.
    pub fn on_session(make: fn(SessionIdParams) -> Request, session_id: String) -> Self {
        make(SessionIdParams { session_id }).into()
    }
}
