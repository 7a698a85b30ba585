//! The context pane's own state: the context stacks read for it, by session, each with
//! the last change made to it.

use std::collections::HashMap;

use crate::context::ContextStack;
use crate::protocol::{ContextResult, ContextUpdate};

/// A session's context stack as the context pane shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextView {
    pub stack: ContextStack,
    /// The last operation or push, in one line (`pop 2: removed #5 agent, …`).
    pub last_change: Option<String>,
    /// The next prompt opens a fresh ACP session seeded with the stack.
    pub fresh_start: bool,
}

/// What the context pane is told.
#[derive(Debug)]
pub(in crate::tui) enum ContextMsg {
    /// A stack read with `context.get` or returned by an operation.
    Loaded(ContextResult),
    /// A session's stack changed (a `session.context` event).
    Changed(ContextUpdate),
}

/// The context stacks read for the context pane, by session.
#[derive(Debug, Default)]
pub struct Contexts {
    by_session: HashMap<String, ContextView>,
}

impl Contexts {
    pub(in crate::tui) fn update(&mut self, msg: ContextMsg) {
        match msg {
            ContextMsg::Loaded(result) => {
                let last_change = result
                    .description
                    .or_else(|| result.change.as_ref().map(ToString::to_string))
                    .or_else(|| {
                        self.by_session
                            .get(&result.session_id)
                            .and_then(|v| v.last_change.clone())
                    });
                self.by_session.insert(
                    result.session_id,
                    ContextView {
                        stack: result.stack,
                        last_change,
                        fresh_start: result.fresh_start,
                    },
                );
            }
            ContextMsg::Changed(update) => {
                if let Some(view) = self.by_session.get_mut(&update.session_id) {
                    view.last_change = Some(update.change.to_string());
                    view.fresh_start = update.fresh_start;
                }
            }
        }
    }

    /// A session's stack, once read.
    pub fn get(&self, session_id: &str) -> Option<&ContextView> {
        self.by_session.get(session_id)
    }
}
