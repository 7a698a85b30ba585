//! Crucible's own agent's link to a model: a client for OpenAI-compatible chat
//! completions (OpenAI, Ollama, llama.cpp, vLLM), and a scripted server of that API that
//! tests run it against.

pub mod openai;
mod stream;
pub mod test_server;
