//! crucible: a terminal workbench for running many AI coding-agent sessions side by side.
//!
//! Layers, lowest first. A module uses only the modules listed before it; the test in
//! `layers_tests.rs` reads this list and fails on any `crate::…` path against it.
//!
//! - `text`, `sys`, `logging`: small helpers that know no crucible types
//! - `context`: the context stack as data
//! - `protocol`: the wire types, method names, caps and agent environment (no I/O)
//! - `proc_tree`: the CPU time and memory of a process tree, read from `/proc`
//! - `markdown`: a session's transcript as readable markdown (its log file, `cru session logs`)
//! - `rules`: what an agent may do (allow, ask, deny), as data
//! - `config`, `kiln`: settings, and where a kiln keeps its state
//! - `kilns`: the kilns a person has (a per-user registry)
//! - `audit`: the per-session audit log
//! - `store`: the database (the only SurrealQL), with its journal
//! - `ledger`: the domain: the kiln's session registry, inbox, transcripts and context stacks
//! - `git`, `openai`: worktrees; an OpenAI-compatible chat client
//! - `driver`: where an agent runs (local, sandbox) and the limits on it
//! - `agent`: agent processes (ACP, plain programs) and crucible's own agent loop
//! - `sessions`: the agents crucible runs, their lifecycle and transcripts
//! - `daemon`: the socket server
//! - `client`: talking to a daemon (and starting one)
//! - `hub`: one process reaching every kiln's daemon, serving them as one
//! - `tui`: the workbench on screen, a client
//! - `cli`: the command line, which wires the rest together

pub(crate) mod agent;
pub(crate) mod audit;
pub mod cli;
pub mod client;
pub mod config;
pub mod context;
pub(crate) mod daemon;
pub(crate) mod driver;
pub(crate) mod git;
pub mod hub;
pub mod kiln;
pub mod kilns;
pub mod ledger;
pub(crate) mod logging;
pub(crate) mod markdown;
pub mod openai;
pub mod proc_tree;
pub mod protocol;
pub(crate) mod rules;
pub mod sessions;
pub mod store;
pub mod sys;
pub(crate) mod text;
pub mod tui;

#[cfg(test)]
mod layers_tests;
