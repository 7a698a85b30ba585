//! crucible's test support, shared by the integration tests (`tests/`) and the
//! benchmarks (`benches/`): temp kilns made by a builder ([`TestKiln::builder`]), the
//! daemon under test with typed calls over the protocol's method table
//! ([`TestDaemon::call`]), raw connections for the conformance tests, waits with
//! deadlines, and the equipment the tests build and start (the scripted agent, a
//! scripted OpenAI-compatible model server, a SurrealDB server, an sshd on loopback, a tmux terminal, a headless browser, a Matrix
//! homeserver), and what the benchmarks share ([`bench`]).
//!
//! The `cru` under test is the binary cargo builds beside the running test or benchmark
//! ([`cru`]).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run

pub mod bench;
pub mod browser;
pub mod built;
pub mod cargo_env;
pub mod daemon;
pub mod kiln;
#[cfg(feature = "matrix")]
pub mod matrix_human;
pub mod model_server;
pub mod params;
pub mod process;
pub mod raw;
pub mod reliability;
pub mod sessions;
pub mod sshd;
pub mod synapse;
pub mod team_server;
pub mod tmux;

pub use daemon::{DaemonProcess, KillOnDrop, TestDaemon, call};
pub use kiln::{TestKiln, TestKilnBuilder};
pub use process::{
    COMMAND_LIMIT, assert_in_no_file, cru, cru_on_path, daemon_processes, free_port,
    limit_descriptors, run_bounded, scripted_agent, stderr, stdout, wait_until, write_script,
};
pub use raw::{Raw, error_code, register};
pub use sshd::Sshd;
