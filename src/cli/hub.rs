//! `cru hub`: the person's hub, which serves every kiln as one (`cru --all-kilns` opens
//! the workbench on it and starts it when none runs): run it in the foreground, see what
//! it reaches (and the page and bot it serves), verify its bot, stop it.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::output::outln;
use crate::client::{HubPlace, StartOptions, connect_hub, connect_or_start_hub};
use crate::protocol::methods as m;

#[derive(Debug, Args)]
pub struct HubArgs {
    #[command(subcommand)]
    action: HubAction,
}

#[derive(Debug, Subcommand)]
enum HubAction {
    /// Run the hub in this process until it is stopped (clients start it on their own).
    Run,
    /// Whether the hub runs, and how it reaches each kiln (`--json` for scripts).
    Status {
        /// Print the hub's state and its kilns as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the hub (the kilns' daemons go on).
    Stop,
    /// The emoji verification of the Matrix bot your own settings run through the hub,
    /// and your word on it (as `cru daemon verify` for a kiln's own bot).
    Verify(super::verify::VerifyArgs),
    /// Print the hub's log (`--follow` to keep printing as it writes).
    Logs(super::logs::LogsArgs),
}

pub async fn run(args: HubArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        HubAction::Run => {
            crate::hub::run().await?;
            Ok(ExitCode::SUCCESS)
        }
        HubAction::Status { json } => status(json).await,
        HubAction::Verify(args) => super::verify::run_hub(args).await,
        HubAction::Logs(args) => {
            let log = HubPlace::for_user()?.log_dir().join("hub.log");
            super::logs::run(&log, "the hub", args).await
        }
        HubAction::Stop => {
            let place = HubPlace::for_user()?;
            match connect_hub(&place).await {
                Ok(client) => {
                    client.call::<m::DaemonShutdown>(&m::NoParams {}).await?;
                    outln!("the hub stops");
                }
                Err(_) => outln!("no hub runs"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn status(json: bool) -> anyhow::Result<ExitCode> {
    let place = HubPlace::for_user()?;
    let client = connect_or_start_hub(&place, &StartOptions::default()).await?;
    let status = client.call::<m::DaemonStatusOf>(&m::NoParams {}).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "hub pid {} · {} client(s) · up {} s · socket {}",
        status.pid,
        status.clients,
        status.uptime_secs,
        place.socket_path().display()
    );
    for kiln in &status.components {
        let error = kiln
            .error
            .as_deref()
            .map(|e| format!(" — {e}"))
            .unwrap_or_default();
        outln!("  {}: {}{error}", kiln.name, kiln.detail);
    }
    Ok(ExitCode::SUCCESS)
}
