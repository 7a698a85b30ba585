//! A client for OpenAI-compatible chat completions, as OpenAI, Ollama, llama.cpp and vLLM
//! speak it: `POST {base_url}/chat/completions` with the model, the messages and the
//! tools (function JSON schemas), optionally with a bearer API key.
//!
//! [`ChatClient::stream`] asks for `stream: true` and reads the Server-Sent Events
//! (`data: {chunk}` events, then `data: [DONE]`), handing each text delta to a callback
//! as it arrives and assembling text and tool-call deltas into one [`Reply`] (see the
//! `stream` module). [`ChatClient::complete`] asks for one JSON answer instead (for summaries).
//!
//! Both read the tokens the server says the request used ([`Usage`]): a plain answer's
//! `usage`, and in a stream the chunk that carries it. Streamed requests ask for it with
//! `stream_options: {include_usage: true}`, OpenAI's option, which compatible servers
//! follow or ignore; a server that ignores it, or reports nothing, leaves the usage
//! unknown (never zero).
//!
//! [`messages_from_stack`] turns a context stack into the messages to send: the stack is
//! the conversation, so every stack operation shows in the next request.

mod client;
mod error;
mod stack;
mod stream;
mod wire;

pub use client::ChatClient;
pub use error::ChatError;
#[cfg(test)]
use error::error_message;
pub use stack::{MISSING_RESULT, SUMMARY_PREFIX, messages_from_stack};
pub use wire::{ChatMessage, ChatRequest, FunctionCall, FunctionDef, Reply, Tool, ToolCall, Usage};

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
