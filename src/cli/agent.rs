//! `cru notify`, `cru ask`, `cru approve`: what an agent (or any script running inside a
//! crucible session) uses to reach the human. They find the session handle and the
//! daemon's socket in the environment and act for that session only.

use super::output::outln;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::client::agent::{AgentError, AgentLink, Answer};

/// Exit codes, shared by the three commands.
pub mod exit {
    /// `approve`: the human denied.
    pub const DENIED: u8 = 1;
    /// No answer within `--timeout`.
    pub const TIMED_OUT: u8 = 3;
    /// The question was withdrawn: the session stopped or was deleted.
    pub const WITHDRAWN: u8 = 4;
    /// Not inside a live crucible session (no handle, or it was revoked).
    pub const NO_SESSION: u8 = 5;
    /// Anything else: the daemon could not be reached, or refused the request.
    pub const FAILED: u8 = 6;
}

const EXIT_CODES: &str = "Exit status: 0 answered (approve: approved), 1 denied (approve), \
2 usage error, 3 timed out, 4 withdrawn (the session stopped), 5 not in a live crucible \
session, 6 other failure.";

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct NotifyArgs {
    /// What to tell the human.
    title: String,
    /// More detail, shown with the message.
    #[arg(long)]
    body: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct AskArgs {
    /// The question. Blocks until the human answers; prints the answer.
    question: String,
    /// A choice (repeat for more); without any, the human answers in free text.
    #[arg(long = "option", value_name = "CHOICE")]
    options: Vec<String>,
    /// More detail, shown with the question.
    #[arg(long)]
    body: Option<String>,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
}

#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct ApproveArgs {
    /// What is about to happen. Blocks until the human approves or denies.
    action: String,
    /// More detail, shown with the request.
    #[arg(long)]
    body: Option<String>,
    /// Give up after this many seconds (the action is then not approved).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
}

/// Runs an agent command: errors become a message on stderr and their exit code.
async fn report(work: impl Future<Output = Result<ExitCode, AgentError>>) -> ExitCode {
    work.await.unwrap_or_else(|e| {
        eprintln!("cru: {e}");
        ExitCode::from(match e {
            AgentError::Client(_) => exit::FAILED,
            _ => exit::NO_SESSION,
        })
    })
}

/// The exit code for an answer: `chosen` decides for a real one.
fn settle(answer: Answer, chosen: impl FnOnce(String) -> ExitCode) -> ExitCode {
    match answer {
        Answer::Chosen(text) => chosen(text),
        Answer::TimedOut => {
            eprintln!("cru: no answer in time");
            ExitCode::from(exit::TIMED_OUT)
        }
        Answer::Withdrawn(why) => {
            eprintln!("cru: the question was {why}");
            ExitCode::from(exit::WITHDRAWN)
        }
    }
}

pub async fn notify(args: NotifyArgs) -> ExitCode {
    report(async {
        let link = AgentLink::from_env().await?;
        link.notify(&args.title, args.body.as_deref()).await?;
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// `cru secret get NAME`.
#[derive(Debug, clap::Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    action: SecretAction,
}

#[derive(Debug, clap::Subcommand)]
enum SecretAction {
    /// Print a credential's value (the human approves it the first time in a session).
    Get {
        /// The credential's name, as the settings name it.
        name: String,
    },
}

pub async fn secret(args: SecretArgs) -> ExitCode {
    report(async {
        let link = AgentLink::from_env().await?;
        let SecretAction::Get { name } = args.action;
        let value = link.secret(&name).await?;
        outln!("{value}");
        Ok(ExitCode::SUCCESS)
    })
    .await
}

pub async fn ask(args: AskArgs) -> ExitCode {
    report(async {
        let link = AgentLink::from_env().await?;
        let timeout = args.timeout.map(Duration::from_secs);
        let answer = link
            .ask(&args.question, &args.options, args.body.as_deref(), timeout)
            .await?;
        Ok(settle(answer, |text| {
            outln!("{text}");
            ExitCode::SUCCESS
        }))
    })
    .await
}

pub async fn approve(args: ApproveArgs) -> ExitCode {
    report(async {
        let link = AgentLink::from_env().await?;
        let timeout = args.timeout.map(Duration::from_secs);
        let answer = link
            .approve(&args.action, args.body.as_deref(), timeout)
            .await?;
        Ok(settle(answer, |choice| {
            if choice.eq_ignore_ascii_case("approve") {
                outln!("approved");
                ExitCode::SUCCESS
            } else {
                outln!("denied");
                ExitCode::from(exit::DENIED)
            }
        }))
    })
    .await
}
