//! Integration tests: the real `cru` binary, real Unix sockets, the real SurrealDB engine
//! (surrealkv in a temp kiln), real processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a scenario reads as one story, start to end

// The test kit's equipment, under the names the tests use.
use testkit::{browser, team_server, tmux};
#[cfg(feature = "matrix")]
use testkit::{matrix_human, synapse};

mod admission;
mod agents;
mod bound_answers;
mod budget;
mod cli;
mod cli_conventions;
mod client_env;
mod command_agents;
mod common;
mod context;
mod daemon;
mod daemon_logs;
mod damaged_catalog;
mod deliberate;
mod doctor;
mod durability;
mod engine;
mod failures;
mod fallback_chain;
mod full_disk;
mod glibc;
mod hardening;
mod hub;
mod hub_page;
mod hub_remote;
mod kilns;
mod kilns_cli;
mod land;
mod lifecycle;
#[cfg(feature = "matrix")]
mod matrix;
#[cfg(feature = "matrix")]
mod matrix_channel;
#[cfg(feature = "matrix")]
mod matrix_commands;
#[cfg(feature = "matrix")]
mod matrix_element;
#[cfg(feature = "matrix")]
mod matrix_hub;
#[cfg(feature = "matrix")]
mod matrix_once;
mod mcp;
mod moving;
mod one_door;
mod package;
mod person_budget;
mod plan_review;
#[cfg(feature = "matrix")]
mod plan_review_matrix;
mod podman;
mod qemu;
mod restart;
mod rules;
mod sandbox;
mod search;
mod sessions;
mod settings;
mod ssh;
mod ssh_memory;
mod suspended;
mod team;
mod truth;
mod tui;
mod web;
mod web_land;
mod webhooks;
mod worktree_git;
mod zero_setup;
