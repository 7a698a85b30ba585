//! The SurrealDB store: the schema, and the only code in crucible that writes SurrealQL.
//!
//! [`Store`] (`conn.rs`) is the connection and what every table shares: opening and
//! closing (`open.rs`), durability (`durable.rs`, `journal.rs`), the schema (`schema.rs`,
//! `migrate.rs`), checks and repair (`check.rs`, `files.rs`), live queries (`live.rs`) and
//! search over the indexed tables (`search.rs`). Each table's records are reached through
//! the view of their owner, which has that table's methods and no other: the sessions
//! and handles ([`SessionRows`], `store.sessions()`), the inbox ([`InboxRows`]), what a
//! session leaves ([`Records`]: its transcript and git leftovers), context stacks
//! ([`ContextRows`]), and in team mode the daemons ([`TeamRows`]) and the commands asked
//! of each other ([`CommandRows`]).

mod catalog;
pub mod check;
mod commands;
mod conn;
mod context;
mod context_history;
pub use context::{ContextRows, StoredContext};
#[cfg(test)]
mod context_tests;
mod durable;
mod error;
pub use error::{OpenFailure, Result, StoreError};
mod files;
mod inbox;
pub use inbox::InboxRows;
mod journal;
mod keyspace;
mod live;
mod migrate;
mod open;
#[cfg(test)]
mod purge_tests;
mod records;
pub use records::{GitLeftovers, Records};
mod remote;
mod repair;
mod rows;
mod schema;
mod search;
pub use search::{RANK_CAP, excerpt};
mod sessions;
pub use sessions::SessionRows;
#[cfg(test)]
mod sessions_tests;
mod team;
pub use team::TeamRows;
#[cfg(test)]
mod test_store;
mod walk;
#[cfg(test)]
pub(crate) use test_store::memory_store;

pub use commands::{CommandRecord, CommandRows};
pub use conn::Store;
pub use live::{LiveChange, LiveTable};
pub use schema::SCHEMA_VERSION;
