//! Crucible's own agent (`agent`: the tool loop) and its link to a model: a client for OpenAI-compatible chat
//! completions (OpenAI, Ollama, llama.cpp, vLLM), and a scripted server of that API that
//! tests run it against.

pub mod agent;
pub mod openai;
mod stream;
pub mod test_server;
