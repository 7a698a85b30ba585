//! ACP's vocabulary in crucible's terms: a schema enum's wire name, the text of a
//! content block, a session update as an [`AgentEvent`], a tool call as the rules'
//! [`Operation`], and a refusal as the ACP error the agent gets.

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate};

use crate::agent::events::AgentEvent;
use crate::protocol::EntryKind;
use crate::rules::Operation;

/// The name a schema enum has on the wire (`end_turn`, `in_progress`, …).
pub(crate) fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "unknown".into(),
    }
}

pub(crate) fn text_of(content: &ContentBlock) -> Option<String> {
    match content {
        ContentBlock::Text(t) => Some(t.text.clone()),
        ContentBlock::ResourceLink(link) => Some(format!("[{}]({})", link.name, link.uri)),
        _ => None,
    }
}

/// Turns a session update into events; updates crucible has no use for are dropped.
pub(crate) fn translate(update: SessionUpdate) -> impl Iterator<Item = AgentEvent> {
    let ahead = match &update {
        SessionUpdate::UsageUpdate(usage) => usage.meta.as_ref().and_then(limit_ahead),
        _ => None,
    };
    event(update).into_iter().chain(ahead)
}

/// claude-agent-acp's rate-limit event on a `usage_update` (`_meta["_claude/rateLimit"]`):
/// a limit reached (`status: "rejected"`) that extra usage does not cover, with its reset
/// (`resetsAt`, Unix seconds) and kind (`rateLimitType`).
pub(crate) fn limit_ahead(meta: &serde_json::Map<String, serde_json::Value>) -> Option<AgentEvent> {
    let info = meta.get("_claude/rateLimit")?;
    if info.get("status")?.as_str()? != "rejected" {
        return None;
    }
    let overage = info.get("overageStatus").and_then(|s| s.as_str());
    if matches!(overage, Some("allowed" | "allowed_warning")) {
        return None;
    }
    let resets_at = info
        .get("resetsAt")
        .and_then(serde_json::Value::as_f64)
        .and_then(|secs| chrono::DateTime::from_timestamp(secs as i64, 0));
    let kind = info
        .get("rateLimitType")
        .and_then(|t| t.as_str())
        .map(|t| t.replace('_', "-"))
        .unwrap_or_else(|| "usage".into());
    Some(AgentEvent::LimitAhead {
        why: format!("the agent announced its {kind} limit is reached"),
        resets_at,
    })
}

fn event(update: SessionUpdate) -> Option<AgentEvent> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(chunk) => AgentEvent::Chunk {
            kind: EntryKind::Message,
            text: text_of(&chunk.content)?,
            message_id: chunk.message_id.map(|id| id.0.to_string()),
        },
        SessionUpdate::AgentThoughtChunk(chunk) => AgentEvent::Chunk {
            kind: EntryKind::Thought,
            text: text_of(&chunk.content)?,
            message_id: chunk.message_id.map(|id| id.0.to_string()),
        },
        SessionUpdate::ToolCall(call) => AgentEvent::ToolCall {
            operation: operation(
                Some(&call.kind),
                &call.title,
                &call.locations,
                call.raw_input.as_ref(),
            ),
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            status: wire_name(&call.status),
        },
        SessionUpdate::ToolCallUpdate(update) => AgentEvent::ToolUpdate {
            id: update.tool_call_id.0.to_string(),
            title: update.fields.title,
            status: update.fields.status.as_ref().map(wire_name),
        },
        SessionUpdate::AvailableCommandsUpdate(update) => AgentEvent::Skills(
            update
                .available_commands
                .iter()
                .map(|c| format!("/{} — {}", c.name, c.description))
                .collect(),
        ),
        SessionUpdate::UsageUpdate(usage) => AgentEvent::Usage(crate::protocol::Usage {
            used: usage.used,
            size: usage.size,
            cost: usage.cost.as_ref().map(|c| c.amount),
            currency: usage.cost.map(|c| c.currency),
        }),
        SessionUpdate::Plan(plan) => AgentEvent::Plan(
            plan.entries
                .into_iter()
                .map(|e| crate::rules::PlanStep {
                    status: wire_name(&e.status),
                    content: e.content,
                })
                .collect(),
        ),
        _ => return None,
    })
}

/// What an ACP tool call does, for the rules: its kind, its command (from `raw_input`'s
/// `command`, as agents' shell tools give it), the paths it names, and its title.
pub(crate) fn operation(
    kind: Option<&agent_client_protocol::v1::schema::ToolKind>,
    title: &str,
    locations: &[agent_client_protocol::v1::schema::ToolCallLocation],
    raw_input: Option<&serde_json::Value>,
) -> Operation {
    let command = raw_input
        .and_then(|v| v.get("command"))
        .and_then(|c| match c {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        });
    Operation {
        // ACP's kinds have the rules' names.
        kind: kind
            .and_then(|k| serde_json::to_value(k).ok())
            .and_then(|k| serde_json::from_value(k).ok())
            .unwrap_or_default(),
        command,
        paths: locations
            .iter()
            .map(|l| l.path.display().to_string())
            .collect(),
        tool: Some(title.to_string()),
    }
}

/// A refused or failed file or terminal request, as the ACP error the agent gets.
pub(crate) fn fs_error(message: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(
        agent_client_protocol::ErrorCode::INVALID_PARAMS,
        message.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(info: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        let mut meta = serde_json::Map::new();
        meta.insert("_claude/rateLimit".into(), info);
        meta
    }

    #[test]
    fn a_rejected_rate_limit_event_is_a_limit_ahead_with_its_reset() {
        let event = limit_ahead(&meta(json!({
            "status": "rejected",
            "resetsAt": 1_795_000_000,
            "rateLimitType": "five_hour",
        })));
        let Some(AgentEvent::LimitAhead { why, resets_at }) = event else {
            panic!("no limit: {event:?}");
        };
        assert_eq!(why, "the agent announced its five-hour limit is reached");
        assert_eq!(resets_at.map(|t| t.timestamp()), Some(1_795_000_000));
    }

    #[test]
    fn a_warning_extra_usage_or_another_meta_is_no_limit() {
        for info in [
            json!({"status": "allowed_warning", "utilization": 0.9}),
            json!({"status": "allowed"}),
            json!({"status": "rejected", "overageStatus": "allowed"}),
            json!("rejected"),
        ] {
            assert!(limit_ahead(&meta(info.clone())).is_none(), "{info}");
        }
        assert!(limit_ahead(&serde_json::Map::new()).is_none());
    }
}
