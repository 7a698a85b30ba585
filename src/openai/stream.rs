//! Reading a streamed chat completion: the Server-Sent Events of the body, and the
//! chunks' text and tool-call deltas assembled into one [`Reply`].
//!
//! Events end at a blank line; `:` comments and fields other than `data` are skipped;
//! an event the body's end cuts off still counts. Only the first choice is read.
//! Tool-call deltas are matched by `index` (by `id`, for servers that send none); a
//! call's id and name come from the first delta that carries them, its argument
//! fragments are joined (none at all become `{}`), and a call without an id gets
//! `call_{index}` so its result can refer to it. An `{"error": …}` chunk ends the reply.
//! The request's `usage` is read from whichever chunk carries it (OpenAI sends it last,
//! with no choices; llama.cpp with the finish reason); when several do, the last counts,
//! since servers that repeat it send the running total.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::error::{ChatError, error_message};
use super::wire::{Reply, ToolCall, Usage};

/// Splits a byte stream into Server-Sent Events and returns their `data`.
#[derive(Default)]
pub(super) struct SseDecoder {
    pending: Vec<u8>,
    data: Option<Vec<u8>>,
}

impl SseDecoder {
    /// The data of every event completed by `bytes`.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.pending.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&line, &mut events);
        }
        events
    }

    /// The data of an event the stream's end cut off.
    pub(super) fn finish(&mut self) -> Vec<Vec<u8>> {
        let mut events = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            self.line(&rest, &mut events);
        }
        events.extend(self.data.take());
        events
    }

    fn line(&mut self, line: &[u8], events: &mut Vec<Vec<u8>>) {
        if line.is_empty() {
            events.extend(self.data.take());
            return;
        }
        let Some(value) = line.strip_prefix(b"data:") else {
            // Comments (`: keep-alive`) and the fields chat servers do not use.
            return;
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match &mut self.data {
            Some(data) => {
                data.push(b'\n');
                data.extend_from_slice(value);
            }
            None => self.data = Some(value.to_vec()),
        }
    }
}

#[derive(Deserialize)]
struct Chunk {
    choices: Option<Vec<ChunkChoice>>,
    error: Option<Value>,
    /// Read leniently, by [`Usage::read`].
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// A stream event the assembler could not take; [`StreamError::at`] names the server.
pub(super) enum StreamError {
    /// A chunk that is not JSON of a chunk: the parser's error, and the chunk's start.
    Malformed {
        chunk: String,
        error: serde_json::Error,
    },
    /// The server's own error, said in the stream.
    Remote { message: String },
}

impl StreamError {
    pub(super) fn at(self, url: &str) -> ChatError {
        let url = url.to_string();
        match self {
            StreamError::Malformed { chunk, error } => ChatError::Malformed {
                url,
                message: format!("{error} in chunk {chunk}"),
                source: Some(error),
            },
            StreamError::Remote { message } => ChatError::InStream { url, message },
        }
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Builds the [`Reply`] from the stream's chunks.
#[derive(Default)]
pub(super) struct Assembler {
    content: String,
    calls: BTreeMap<usize, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Assembler {
    /// Takes one event's data; true once it is `[DONE]`.
    pub(super) fn apply(
        &mut self,
        data: &str,
        on_text: &mut impl FnMut(&str),
    ) -> Result<bool, StreamError> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| StreamError::Malformed {
            chunk: clip(data, 200),
            error,
        })?;
        if let Some(error) = chunk.error {
            return Err(StreamError::Remote {
                message: error_message(&error.to_string(), None),
            });
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(Usage::read) {
            self.usage = Some(usage);
        }
        // Crucible asks for one choice; only the first is read.
        let Some(choice) = chunk.choices.unwrap_or_default().into_iter().next() else {
            return Ok(false);
        };
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta else {
            return Ok(false);
        };
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            on_text(&text);
            self.content.push_str(&text);
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.call_delta(call);
        }
        Ok(false)
    }

    fn call_delta(&mut self, delta: CallDelta) {
        let index = delta
            .index
            .unwrap_or_else(|| self.index_by_id(delta.id.as_deref()));
        let call = self.calls.entry(index).or_default();
        if let Some(id) = delta.id.filter(|_| call.id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name.filter(|_| call.name.is_empty()) {
                call.name = name;
            }
            call.arguments
                .push_str(&function.arguments.unwrap_or_default());
        }
    }

    /// For servers that send no index: the call with this id, a new call for a new id,
    /// else the latest call.
    fn index_by_id(&self, id: Option<&str>) -> usize {
        let next = self.calls.keys().next_back().map_or(0, |k| k + 1);
        match id {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map_or(next, |(k, _)| *k),
            None => next.saturating_sub(1),
        }
    }

    pub(super) fn finish(self) -> Reply {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, c)| {
                let id = if c.id.is_empty() {
                    format!("call_{index}")
                } else {
                    c.id
                };
                let arguments = if c.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    c.arguments
                };
                ToolCall::function(id, c.name, arguments)
            })
            .collect();
        Reply {
            content: self.content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sse_decoder_handles_crlf_comments_split_bytes_and_a_cut_end() {
        let mut decoder = SseDecoder::default();
        let wire =
            ": keep-alive\r\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata:1\ndata: 2\n\ndata: tail"
                .as_bytes();
        let mut events = Vec::new();
        // Feed one byte at a time: lines and the two-byte 'é' are split across chunks.
        for byte in wire {
            events.extend(decoder.feed(std::slice::from_ref(byte)));
        }
        events.extend(decoder.finish());
        let events: Vec<String> = events
            .into_iter()
            .map(|e| String::from_utf8(e).unwrap())
            .collect();
        assert_eq!(events, ["{\"a\":\"é\"}", "1\n2", "tail"]);
    }

    fn assemble(events: &[Value]) -> Result<Reply, StreamError> {
        let mut assembler = Assembler::default();
        for event in events {
            assembler.apply(&event.to_string(), &mut |_| {})?;
        }
        Ok(assembler.finish())
    }

    #[test]
    fn calls_without_index_or_id_still_assemble() {
        let delta = |calls: Value| json!({"choices": [{"delta": {"tool_calls": calls}}]});
        let reply = assemble(&[
            delta(json!([{"id": "x1", "function": {"name": "read_file", "arguments": "{\"pa"}}])),
            delta(json!([{"function": {"arguments": "th\":1}"}}])),
            delta(json!([{"id": "x2", "function": {"name": "list_dir"}}])),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 5, "function": {"name": "noid"}}]}}]}),
        ])
        .ok()
        .unwrap();
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall::function("x1", "read_file", r#"{"path":1}"#),
                ToolCall::function("x2", "list_dir", "{}"),
                ToolCall::function("call_5", "noid", "{}"),
            ]
        );
    }

    #[test]
    fn usage_is_read_from_any_chunk_and_the_last_report_counts() {
        let usage = |prompt: u64| json!({"prompt_tokens": prompt, "completion_tokens": 5});
        let reply = assemble(&[
            json!({"choices": [{"delta": {"content": "hi"}}], "usage": null}),
            // llama.cpp: with the finish reason.
            json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": usage(10)}),
            // A running total repeated: the last one is the request's.
            json!({"choices": [], "usage": usage(12)}),
        ])
        .ok()
        .unwrap();
        assert_eq!(reply.content, "hi");
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt: 12,
                completion: 5,
                total: 17,
                cached: 0
            })
        );
    }

    #[test]
    fn usage_that_tells_no_count_leaves_it_unknown_and_the_reply_whole() {
        for odd in [
            json!({}),
            json!("lots"),
            json!({"prompt_tokens": -3, "completion_tokens": 1.5, "total_tokens": null}),
        ] {
            let reply = assemble(&[
                json!({"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}),
                json!({"choices": [], "usage": odd}),
            ])
            .ok()
            .unwrap();
            assert_eq!((reply.content.as_str(), reply.usage), ("ok", None), "{odd}");
        }
        let only_total = assemble(&[json!({"choices": [], "usage": {"total_tokens": 9}})])
            .ok()
            .unwrap();
        assert_eq!(
            only_total.usage,
            Some(Usage {
                total: 9,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn an_error_event_mid_stream_is_reported() {
        let err = assemble(&[json!({"error": {"message": "model overloaded"}})])
            .err()
            .unwrap();
        let err = err.at("http://x");
        assert!(
            matches!(&err, ChatError::InStream { message, .. } if message == "model overloaded")
        );
    }
}
