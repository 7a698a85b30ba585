//! Crucible's own agent (`agent`: the tool loop) and its link to a model: a client for
//! OpenAI-compatible chat completions (OpenAI, Ollama, llama.cpp, vLLM). The scripted
//! server of that API the tests run it against is test equipment, in
//! `tests/equipment/model_server.rs`.

pub mod agent;
pub mod openai;
mod stream;
