//! The slash commands: one static table ([`COMMANDS`]) drives parsing, `/help` and Tab
//! completion, so the three never disagree. The table is in `commands/table.rs`, the
//! parsed form in `commands/command.rs`, the parsers in `commands/parse.rs` (with `/new`'s
//! in `commands/new.rs`), completion and suggestions in `commands/complete.rs`.

mod command;
mod complete;
mod error;
mod new;
mod parse;
mod table;

pub use command::{ReviewOp, SlashCommand};
pub use complete::{Completion, complete, suggest};
pub use error::{ArgsError, CommandError};
pub use parse::parse;
pub use table::{COMMANDS, CommandSpec, lookup};

#[cfg(test)]
#[path = "commands_tests.rs"]
mod tests;
