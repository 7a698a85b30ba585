//! Integration tests: the real `cru` binary, real Unix sockets, the real SurrealDB engine
//! (surrealkv in a temp kiln), real processes.

mod cli;
mod common;
mod daemon;
mod lifecycle;
mod sessions;
