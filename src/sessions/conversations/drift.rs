//! The optional topic-drift check of channel conversations: a model (an `internal` agent profile's
//! OpenAI-compatible endpoint, `channels.drift_agent`) says whether a new message leaves
//! the conversation's topic, with a confidence; at or above `channels.drift_threshold`
//! (0.80) the message starts a new session carrying the old one's summary. Off unless
//! configured; when the model cannot answer, the message continues the session.

use std::time::Duration;

use crate::config::{AgentKind, AgentProfile};
use crate::openai::{ChatMessage, ChatRequest};

/// How long the model may take.
const DRIFT_TIMEOUT: Duration = Duration::from_secs(20);

const INSTRUCTIONS: &str = "You decide whether a new message continues the current \
conversation or changes to an unrelated topic. Answer with JSON only, no prose: \
{\"drift\": true or false, \"confidence\": a number from 0 to 1}.";

/// The model's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Verdict {
    pub drift: bool,
    pub confidence: f64,
}

/// Why a drift check could not be made (it then counts as no drift).
#[derive(Debug, PartialEq, thiserror::Error)]
pub(super) enum DriftError {
    /// `channels.drift_agent` names no agent profile.
    #[error(transparent)]
    Profile(#[from] crate::config::ProfileError),
    /// `channels.drift_agent` names an agent that is not crucible's own.
    #[error("channels.drift_agent {0:?} is not an internal agent (it needs base_url and model)")]
    NotInternal(String),
    /// The agent's chat client cannot be made (no API key, say).
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
    #[error("no answer within {0}s")]
    TimedOut(u64),
    /// The model's API failed.
    #[error("{0}")]
    Model(String),
    /// The model answered, but not with a verdict.
    #[error("{0}")]
    Answer(String),
}

/// Asks `profile`'s model whether `message` drifts from the conversation `summary`
/// describes.
pub(super) async fn classify(
    name: &str,
    profile: &AgentProfile,
    summary: &str,
    message: &str,
) -> Result<Verdict, DriftError> {
    if profile.kind != AgentKind::Internal {
        return Err(DriftError::NotInternal(name.to_string()));
    }
    let client = crate::agent::internal::chat_client(profile)?;
    let request = ChatRequest {
        model: profile.model.clone(),
        messages: vec![
            ChatMessage::System {
                content: INSTRUCTIONS.into(),
            },
            ChatMessage::User {
                content: format!(
                    "The conversation so far:\n{summary}\n\nThe new message:\n{message}"
                ),
            },
        ],
        tools: Vec::new(),
    };
    let reply = tokio::time::timeout(DRIFT_TIMEOUT, client.complete(&request))
        .await
        .map_err(|_| DriftError::TimedOut(DRIFT_TIMEOUT.as_secs()))?
        .map_err(|e| DriftError::Model(e.to_string()))?;
    parse(&reply.content)
}

/// The verdict in a reply: the first JSON object in it, with `drift` and `confidence`.
fn parse(text: &str) -> Result<Verdict, DriftError> {
    let start = text.find('{');
    let end = text.rfind('}');
    let object = match (start, end) {
        (Some(s), Some(e)) if s < e => &text[s..=e],
        _ => {
            return Err(DriftError::Answer(format!(
                "the answer is not JSON: {text:?}"
            )));
        }
    };
    let value: serde_json::Value = serde_json::from_str(object)
        .map_err(|e| DriftError::Answer(format!("the answer is not JSON ({e}): {text:?}")))?;
    let drift = value["drift"].as_bool().ok_or_else(|| {
        DriftError::Answer(format!("the answer has no drift true/false: {text:?}"))
    })?;
    let confidence = value["confidence"]
        .as_f64()
        .filter(|c| (0.0..=1.0).contains(c))
        .ok_or_else(|| {
            DriftError::Answer(format!(
                "the answer has no confidence from 0 to 1: {text:?}"
            ))
        })?;
    Ok(Verdict { drift, confidence })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_the_first_object_and_checked() {
        assert_eq!(
            parse("```json\n{\"drift\": true, \"confidence\": 0.91}\n```"),
            Ok(Verdict {
                drift: true,
                confidence: 0.91
            })
        );
        assert_eq!(
            parse("{\"confidence\": 0.2, \"drift\": false}"),
            Ok(Verdict {
                drift: false,
                confidence: 0.2
            })
        );
        assert!(parse("yes").is_err());
        assert!(parse("{\"drift\": \"yes\", \"confidence\": 0.9}").is_err());
        assert!(parse("{\"drift\": true, \"confidence\": 3}").is_err());
    }
}
