//! The chat-completions wire format: the messages, tool calls and tools sent, the
//! request, the tokens a request used, and the model's assembled answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::Message;

/// One message of the conversation, in the wire format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A function call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON arguments, as text.
    pub arguments: String,
}

impl ToolCall {
    pub fn function(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    pub description: String,
    /// A JSON schema of the arguments object.
    pub parameters: Value,
}

impl Tool {
    pub fn function(name: &str, description: &str, parameters: Value) -> Self {
        Tool {
            kind: "function".into(),
            function: FunctionDef {
                name: name.into(),
                description: description.into(),
                parameters,
            },
        }
    }
}

/// What to send; `stream` is set by the call made with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// Left out of the request when empty: some servers refuse an empty list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
}

/// The tokens one request used, as the server reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// `prompt_tokens`: the messages and tools sent, cached ones included.
    pub prompt: u64,
    /// `completion_tokens`: the answer, reasoning included.
    pub completion: u64,
    /// `total_tokens`; the sum of the two when the server leaves it out.
    pub total: u64,
    /// `prompt_tokens_details.cached_tokens`: the part of `prompt` read from the cache.
    pub cached: u64,
}

impl Usage {
    /// The usage a completion or a chunk carries (its `usage`), if it tells a count.
    /// A count that is missing, `null` or not a whole number is left out rather than
    /// failing the reply: the tokens are the server's report, not part of the answer.
    pub(super) fn read(usage: &Value) -> Option<Usage> {
        let prompt = usage["prompt_tokens"].as_u64();
        let completion = usage["completion_tokens"].as_u64();
        let total = usage["total_tokens"].as_u64();
        if prompt.is_none() && completion.is_none() && total.is_none() {
            return None;
        }
        let (prompt, completion) = (prompt.unwrap_or(0), completion.unwrap_or(0));
        Some(Usage {
            prompt,
            completion,
            total: total.unwrap_or_else(|| prompt.saturating_add(completion)),
            cached: usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
        })
    }
}

/// The model's answer, assembled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, … when the server says.
    pub finish_reason: Option<String>,
    /// The tokens the request used, when the server reported them.
    pub usage: Option<Usage>,
}

impl Reply {
    /// The reply as stack messages: the text (when there is any) as an agent entry, then
    /// one tool-call entry per call. [`messages_from_stack`](super::messages_from_stack) turns them back into this
    /// one assistant message.
    pub fn into_stack_messages(self) -> Vec<Message> {
        let text = (!self.content.is_empty()).then_some(Message::Agent { text: self.content });
        let calls = self.tool_calls.into_iter().map(|c| Message::ToolCall {
            call_id: c.id,
            tool: c.function.name,
            arguments: c.function.arguments,
        });
        text.into_iter().chain(calls).collect()
    }
}
