//! `cru cron [list] [--json]`, `cru cron run ID [--json]`: the `[[cron]]` jobs the
//! daemon runs, their next and last runs, the runs in a row that could not start (with
//! the last error), and running one now. With no daemon running, the list is the
//! settings' jobs, and says so (it starts no daemon).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::output::{self, outln};
use crate::client::{Client, ClientError};
use crate::kiln::Kiln;
use crate::protocol::methods as m;
use crate::protocol::methods::NoParams;
use crate::protocol::{CronJobView, CronJobs, CronRunParams};

#[derive(Debug, Args)]
pub struct CronArgs {
    #[command(subcommand)]
    action: Option<CronAction>,
    /// Print the jobs (or the run started) as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum CronAction {
    /// The jobs the daemon runs, with their next run (UTC), last run, skipped runs and
    /// runs in a row that could not start (the default).
    List,
    /// Run a job now (skipped while its previous run is still working).
    Run {
        /// The job's id, as `cru cron` lists it.
        id: String,
    },
}

/// The webhooks whose deliveries fail in a row, each with its count and last error.
fn say_failing_hooks(reply: &CronJobs) {
    for hook in &reply.hooks {
        outln!(
            "webhook {}: {} deliveries in a row failed since {}; the last: {}",
            hook.name,
            hook.failures,
            hook.since,
            hook.last_error
        );
    }
}

pub async fn run(kiln: Kiln, args: CronArgs) -> anyhow::Result<ExitCode> {
    match args.action.unwrap_or(CronAction::List) {
        CronAction::List => {
            let (reply, running) = match Client::connect(&kiln).await {
                Ok(client) => (client.call::<m::CronList>(&NoParams {}).await?, true),
                // It runs: its jobs are not the settings' ones.
                Err(e @ ClientError::Suspended { .. }) => return Err(e.into()),
                Err(e) => {
                    tracing::debug!("no daemon answered: {e}");
                    (from_settings(&kiln)?, false)
                }
            };
            if args.json {
                let mut value = serde_json::to_value(&reply)?;
                value["daemon_running"] = running.into();
                outln!("{}", serde_json::to_string_pretty(&value)?);
                return Ok(ExitCode::SUCCESS);
            }
            if !running {
                outln!(
                    "no daemon runs for this kiln: these are the jobs of the settings, which run once one does (cru daemon run)"
                );
            }
            if let Some(why) = &reply.settings_error {
                outln!("the settings cannot be used ({why}): the daemon runs the last good ones");
            }
            say_failing_hooks(&reply);
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
                        match &j.last_failed_at {
                            Some(at) if j.failures > 0 => format!("{} (last {at})", j.failures),
                            _ => j.failures.to_string(),
                        },
                    ]
                })
                .collect();
            output::print_table(
                &[
                    "ID", "SCHEDULE", "AGENT", "NEXT RUN", "LAST RUN", "SKIPPED", "FAILING",
                ],
                &rows,
            );
            for job in reply.jobs.iter().filter(|j| j.failures > 0) {
                let error = job.last_error.as_deref().unwrap_or("(not kept)");
                outln!(
                    "\n{}: {} run(s) in a row could not start; the last: {error}",
                    job.id,
                    job.failures
                );
            }
        }
        CronAction::Run { id } => {
            let client = super::connect(&kiln).await?;
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

/// The jobs of the settings file, as a daemon would start running them now.
fn from_settings(kiln: &Kiln) -> anyhow::Result<CronJobs> {
    let config = super::load_config(kiln)?;
    let now = chrono::Utc::now();
    let jobs = config
        .cron
        .iter()
        .map(|job| CronJobView {
            id: job.id.clone(),
            schedule: job.schedule.clone(),
            agent: job.agent.clone(),
            enabled: job.enabled,
            next_run: job
                .enabled
                .then(|| job.next_after(now))
                .flatten()
                .map(|t| t.to_rfc3339()),
            last_session_id: None,
            last_run_at: None,
            last_state: None,
            skipped: 0,
            last_skipped_at: None,
            failures: 0,
            last_error: None,
            last_failed_at: None,
        })
        .collect();
    Ok(CronJobs {
        jobs,
        hooks: Vec::new(),
        settings_error: None,
    })
}
