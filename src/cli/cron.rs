//! `cru cron [list] [--json]`, `cru cron run ID [--json]`: the `[[cron]]` jobs of the
//! settings, their next and last runs, and running one now.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::output::{self, outln};
use crate::kiln::Kiln;
use crate::protocol::CronRunParams;
use crate::protocol::methods as m;
use crate::protocol::methods::NoParams;

#[derive(Debug, Args)]
pub struct CronArgs {
    #[command(subcommand)]
    action: Option<CronAction>,
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum CronAction {
    /// The jobs, with their next run (UTC), last run and skipped runs (the default).
    List,
    /// Run a job now (skipped while its previous run is still working).
    Run { id: String },
}

pub async fn run(kiln: Kiln, args: CronArgs) -> anyhow::Result<ExitCode> {
    let client = super::connect(&kiln).await?;
    match args.action.unwrap_or(CronAction::List) {
        CronAction::List => {
            let reply = client.call::<m::CronList>(&NoParams {}).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&reply)?);
                return Ok(ExitCode::SUCCESS);
            }
            if reply.jobs.is_empty() {
                outln!("no cron jobs: add [[cron]] entries to the settings");
                return Ok(ExitCode::SUCCESS);
            }
            let rows: Vec<Vec<String>> = reply
                .jobs
                .iter()
                .map(|j| {
                    let last = match (&j.last_session_id, j.last_state) {
                        (Some(id), Some(state)) => format!("{id} ({state})"),
                        (Some(id), None) => id.clone(),
                        _ => "—".into(),
                    };
                    vec![
                        j.id.clone(),
                        j.schedule.clone(),
                        j.agent.clone(),
                        if j.enabled {
                            j.next_run.clone().unwrap_or_else(|| "never".into())
                        } else {
                            "disabled".into()
                        },
                        last,
                        match &j.last_skipped_at {
                            Some(at) => format!("{} (last {at})", j.skipped),
                            None => j.skipped.to_string(),
                        },
                    ]
                })
                .collect();
            output::print_table(
                &["ID", "SCHEDULE", "AGENT", "NEXT RUN", "LAST RUN", "SKIPPED"],
                &rows,
            );
        }
        CronAction::Run { id } => {
            let run = client.call::<m::CronRunNow>(&CronRunParams { id }).await?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&run)?);
            } else if run.skipped {
                outln!("skipped: {}", run.note);
            } else {
                outln!("started {} (session {})", run.job, run.session_id);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
