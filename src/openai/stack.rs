//! The context stack as the conversation to send: every stack entry becomes the chat
//! message a server takes, so every stack operation shows in the next request.

use super::wire::{ChatMessage, ToolCall};
use crate::context::{Entry, Message};

/// The content of a tool message that stands in for a result no longer on the stack
/// (a `pop` took it): every tool call must be answered before the server accepts the
/// conversation.
pub const MISSING_RESULT: &str = "(no result: it was removed from the context)";

/// Starts the user message that carries a summary entry.
pub const SUMMARY_PREFIX: &str =
    "Summary of the conversation so far (it replaces the earlier messages):";

/// The messages to send for a context stack (bottom to top):
/// - system → `system` (left out when empty: an ACP agent's stack has none of its own);
/// - human → `user`; agent → `assistant`;
/// - tool calls → the `tool_calls` of one `assistant` message per run of consecutive
///   calls, whose content is the agent entry just below the run, if there is one;
/// - tool results → `tool` messages; a failed one's content starts with `error: `. A call
///   whose result is not right after its run (a `pop` took it) is answered with
///   [`MISSING_RESULT`], since servers refuse a call without an answer;
/// - summary → a `user` message starting with [`SUMMARY_PREFIX`]. Not `system`: many
///   local models' chat templates refuse a system message after the first.
pub fn messages_from_stack(entries: &[Entry]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    let mut rest = entries;
    while let Some(first) = rest.first() {
        rest = match &first.message {
            Message::Agent { text } => push_assistant(&mut out, Some(text.clone()), &rest[1..]),
            Message::ToolCall { .. } => push_assistant(&mut out, None, rest),
            other => {
                out.extend(single_message(other));
                &rest[1..]
            }
        };
    }
    out
}

/// The message for an entry that stands alone (not an agent entry or a tool call).
fn single_message(message: &Message) -> Option<ChatMessage> {
    match message {
        Message::System { text } if text.is_empty() => None,
        Message::System { text } => Some(ChatMessage::System {
            content: text.clone(),
        }),
        Message::Human { text } => Some(ChatMessage::User {
            content: text.clone(),
        }),
        Message::Summary { text } => Some(ChatMessage::User {
            content: format!("{SUMMARY_PREFIX}\n{text}"),
        }),
        _ => tool_message(message),
    }
}

/// Pushes one assistant message with `content` and the tool calls at the start of
/// `rest`, then their results; returns what follows.
fn push_assistant<'a>(
    out: &mut Vec<ChatMessage>,
    content: Option<String>,
    rest: &'a [Entry],
) -> &'a [Entry] {
    let calls_end = rest
        .iter()
        .position(|e| !matches!(e.message, Message::ToolCall { .. }))
        .unwrap_or(rest.len());
    let (calls, rest) = rest.split_at(calls_end);
    let tool_calls: Vec<ToolCall> = calls
        .iter()
        .filter_map(|e| match &e.message {
            Message::ToolCall {
                call_id,
                tool,
                arguments,
            } => Some(ToolCall::function(call_id, tool, arguments)),
            _ => None,
        })
        .collect();
    let results_end = rest
        .iter()
        .position(|e| !matches!(e.message, Message::ToolResult { .. }))
        .unwrap_or(rest.len());
    let (results, rest) = rest.split_at(results_end);
    let answered: Vec<ChatMessage> = results
        .iter()
        .filter_map(|e| tool_message(&e.message))
        .collect();
    let missing: Vec<ChatMessage> = tool_calls
        .iter()
        .filter(|c| {
            !answered.iter().any(
                |m| matches!(m, ChatMessage::Tool { tool_call_id, .. } if *tool_call_id == c.id),
            )
        })
        .map(|c| ChatMessage::Tool {
            tool_call_id: c.id.clone(),
            content: MISSING_RESULT.to_string(),
        })
        .collect();
    out.push(ChatMessage::Assistant {
        content,
        tool_calls,
    });
    out.extend(answered);
    out.extend(missing);
    rest
}

fn tool_message(message: &Message) -> Option<ChatMessage> {
    let Message::ToolResult {
        call_id, ok, text, ..
    } = message
    else {
        return None;
    };
    Some(ChatMessage::Tool {
        tool_call_id: call_id.clone(),
        content: if *ok {
            text.clone()
        } else {
            format!("error: {text}")
        },
    })
}
