//! The SurrealDB store: the schema, and the only code in crucible that writes SurrealQL.
//!
//! The store is one handle ([`Store`], `conn.rs`) whose methods live with the tables and
//! concerns they serve: opening and closing (`open.rs`), durability (`durable.rs`,
//! `journal.rs`), the schema (`schema.rs`, `migrate.rs`), sessions, transcripts and git
//! leftovers (`sessions.rs`, `records.rs`), the inbox, context stacks, search, checks and
//! repair (`check.rs`, `files.rs`), and team mode (`team.rs`, `commands.rs`, `live.rs`).

mod catalog;
pub mod check;
mod commands;
mod conn;
mod context;
pub use context::StoredContext;
#[cfg(test)]
mod context_tests;
mod durable;
mod error;
pub use error::{OpenFailure, Result, StoreError};
mod files;
mod inbox;
mod journal;
mod keyspace;
mod live;
mod migrate;
mod open;
#[cfg(test)]
mod purge_tests;
mod records;
pub use records::GitLeftovers;
mod remote;
mod repair;
mod rows;
mod schema;
mod search;
pub use search::{RANK_CAP, excerpt};
mod sessions;
#[cfg(test)]
mod sessions_tests;
mod team;
#[cfg(test)]
mod test_store;
mod walk;
#[cfg(test)]
pub(crate) use test_store::memory_store;

pub use commands::CommandRecord;
pub use conn::Store;
pub use live::{LiveChange, LiveTable};
pub use schema::SCHEMA_VERSION;
