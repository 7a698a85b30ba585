//! `cru config`: about the settings files themselves. `cru config schema` prints their
//! JSON Schema, for an editor to complete and check `.crucible.toml` with.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::output::out;

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the JSON Schema (draft-07) of `.crucible.toml` and
    /// `~/.config/crucible/config.toml`, made from the settings types; the repository
    /// keeps a copy in `assets/crucible.schema.json`.
    Schema,
}

pub fn run(args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::Schema => out!("{}", crate::config::schema_text()),
    }
    Ok(ExitCode::SUCCESS)
}
