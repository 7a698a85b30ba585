//! The params and result of the context-stack methods: `context.apply`, which looks at a
//! session's stack or changes it, and the `context.<op>` names kept as its aliases, whose
//! params read as `context.apply`'s.

use serde::{Deserialize, Serialize};

use super::params::SessionIdParams;
use crate::context::{Change, ContextOp, ContextStack};

/// A look at a session's context stack, or one change to it: `context.apply`'s `op`. On
/// the wire `"get"`, or the operation as [`ContextOp`] writes it (`"reset"`,
/// `{"pop": 2}`, `{"checkpoint": "name"}`, `{"summarize": null}`…).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextCall {
    Get,
    #[serde(untagged)]
    Apply(ContextOp),
}

/// `context.apply`: which session's stack, and what to do with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextApplyParams {
    pub session_id: String,
    pub op: ContextCall,
}

impl ContextApplyParams {
    fn new(session_id: String, op: ContextOp) -> Self {
        ContextApplyParams {
            session_id,
            op: ContextCall::Apply(op),
        }
    }

    /// The older `context.<op>` methods are `context.apply` with the op their name says;
    /// these and the `From`s below read their params as `context.apply`'s.
    pub fn get(p: SessionIdParams) -> Self {
        ContextApplyParams {
            session_id: p.session_id,
            op: ContextCall::Get,
        }
    }

    pub fn reset(p: SessionIdParams) -> Self {
        Self::new(p.session_id, ContextOp::Reset)
    }

    pub fn checkpoint(p: ContextNameParams) -> Self {
        Self::new(p.session_id, ContextOp::Checkpoint(p.name))
    }

    pub fn rollback(p: ContextNameParams) -> Self {
        Self::new(p.session_id, ContextOp::Rollback(p.name))
    }
}

impl From<ContextPopParams> for ContextApplyParams {
    fn from(p: ContextPopParams) -> Self {
        Self::new(p.session_id, ContextOp::Pop(p.n))
    }
}

impl From<ContextReplaceParams> for ContextApplyParams {
    fn from(p: ContextReplaceParams) -> Self {
        Self::new(p.session_id, ContextOp::ReplaceTop(p.summary))
    }
}

impl From<ContextSummarizeParams> for ContextApplyParams {
    fn from(p: ContextSummarizeParams) -> Self {
        Self::new(p.session_id, ContextOp::Summarize(p.summary))
    }
}

/// `context.pop`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextPopParams {
    pub session_id: String,
    /// How many entries to remove from the top.
    pub n: usize,
}

/// `context.checkpoint` and `context.rollback`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextNameParams {
    pub session_id: String,
    pub name: String,
}

/// `context.replace_top`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextReplaceParams {
    pub session_id: String,
    pub summary: String,
}

/// `context.summarize`: `summary` is the text to collapse into; without it the session
/// writes its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextSummarizeParams {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// What every `context.*` method returns: the stack after the call and what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextResult {
    pub session_id: String,
    pub stack: ContextStack,
    /// Set when the stack no longer matches what an ACP agent holds in its own session:
    /// the next prompt opens a fresh ACP session seeded with the stack.
    #[serde(default)]
    pub fresh_start: bool,
    /// Absent for `context.get`.
    #[serde(default)]
    pub change: Option<Change>,
    /// The change in one line for people, e.g. `pop 2: removed #5 agent, #6 tool_result`.
    #[serde(default)]
    pub description: Option<String>,
}
