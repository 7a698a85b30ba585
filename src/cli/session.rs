//! `cru session list`

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::json;

use super::output;
use crate::kiln::Kiln;
use crate::protocol::{Session, method};

#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    action: SessionAction,
}

#[derive(Debug, Subcommand)]
enum SessionAction {
    /// List the sessions in the registry.
    List {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

#[derive(serde::Deserialize)]
struct SessionList {
    sessions: Vec<Session>,
}

pub async fn run(kiln: Kiln, args: SessionArgs) -> anyhow::Result<ExitCode> {
    let client = super::connect(&kiln).await?;
    match args.action {
        SessionAction::List { json } => {
            let list: SessionList = client.call(method::SESSION_LIST, &json!({})).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list.sessions)?);
            } else if list.sessions.is_empty() {
                println!("no sessions");
            } else {
                let rows: Vec<Vec<String>> = list
                    .sessions
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        vec![
                            format!("[{}]", i + 1),
                            s.display_name.clone(),
                            s.status.clone(),
                            s.agent_type.clone(),
                            output::age(&s.started_at),
                            output::age(&s.last_heartbeat),
                            s.id.clone(),
                        ]
                    })
                    .collect();
                output::print_table(
                    &["#", "SESSION", "STATUS", "TYPE", "AGE", "BEAT", "ID"],
                    &rows,
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
