//! SurrealDB's server, as the `surreal` binary runs it (`cru-surreal-server start …`).
//! Test equipment for team mode: see tests/it/team.rs.

// The engine's async code is deep; as in the `surreal` binary.
#![recursion_limit = "256"]

use std::process::ExitCode;

use surrealdb_server::core::CommunityComposer;

fn main() -> ExitCode {
    surrealdb_server::init(CommunityComposer())
}
