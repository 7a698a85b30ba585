//! crucible: a terminal workbench for running many AI coding-agent sessions side by side.
//!
//! Layers, each depending only on those above it:
//! `text`, `context` (the context stack as data), `protocol` and `config` (no I/O of ours)
//! → `store` (the only SurrealQL) → `workbench` (the domain: registry, inbox, context
//! stacks) → `sessions` (the agents crucible runs, over `agent` for ACP and plain-program
//! agents, `internal` for crucible's own agent loop, and `git` for worktrees) → `daemon`
//! (the socket server) and `client` → `tui` (the workbench) and `cli`.

pub mod agent;
pub mod cli;
pub mod client;
pub mod config;
pub mod context;
pub mod daemon;
pub mod git;
pub mod internal;
pub mod kiln;
pub mod logging;
pub mod protocol;
pub mod sessions;
pub mod store;
pub mod sys;
pub mod text;
pub mod tui;
pub mod workbench;
