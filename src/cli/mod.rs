//! The command line: `cru` and its subcommands. Each subcommand lives in its own file.

mod across;
mod agent;
mod agents;
mod bridge;
mod completions;
mod config;
mod cron;
mod daemon;
mod doctor;
mod hub;
mod inbox;
mod kilns;
mod logs;
mod man;
mod mcp;
mod output;
mod progress;
mod rules;
mod search;
mod session;
mod usage;
mod verify;
mod web;

#[cfg(test)]
mod help_tests;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::client::{Client, StartOptions, open};
use crate::config::Config;
use crate::kiln::Kiln;
use crate::tui::palette::ColorChoice;

/// `cru --version`: the version, the commit it was built from and the day.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CRU_COMMIT"),
    ", built ",
    env!("CRU_BUILD_DATE"),
    ")"
);

/// A terminal workbench for running many AI coding-agent sessions side by side.
#[derive(Debug, Parser)]
#[command(name = "cru", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// The kiln (project directory) to work in. Default: found from the current directory.
    #[arg(long, global = true, env = "CRU_KILN", value_name = "DIR")]
    pub kiln: Option<PathBuf>,

    /// Run the workbench with the daemon inside this process (one terminal; agents stop
    /// when it quits) instead of connecting to the kiln's daemon.
    #[arg(long)]
    pub embedded: bool,

    /// Open the workbench on every kiln you have, through your hub (from any folder).
    #[arg(long, conflicts_with = "embedded")]
    pub all_kilns: bool,

    /// Colour the output and the workbench: auto (on a terminal, unless NO_COLOR is set),
    /// always or never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value_t = ColorChoice::Auto
    )]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run, inspect or stop the kiln's daemon.
    Daemon(daemon::DaemonArgs),
    /// Read and answer what sessions need: decisions, approvals, reports.
    Inbox(inbox::InboxArgs),
    /// Agent sessions: start, watch, talk to, stop and delete them.
    Session(session::SessionArgs),
    /// Every kiln (project) you have: its daemon, sessions and waiting questions;
    /// `cru kilns forget NAME` removes one from the list.
    Kilns(kilns::KilnsArgs),
    /// Your hub, which serves every kiln as one: `cru hub status` shows how it reaches
    /// each; clients start it when they need it.
    Hub(hub::HubArgs),
    /// For agents: tell the human something, without waiting.
    Notify(agent::NotifyArgs),
    /// For agents: ask the human a question and wait for the answer.
    Ask(agent::AskArgs),
    /// For agents: ask the human to approve an action and wait.
    Approve(agent::ApproveArgs),
    /// For agents: a credential by name (`cru secret get NAME`).
    Secret(agent::SecretArgs),
    /// For agents: serve notify, ask and approve as MCP tools over stdio.
    Mcp,
    /// The rules that judge what agents do: list them, switch one off or on for a
    /// session.
    Rules(rules::RulesArgs),
    /// The agents crucible can start: built-in and configured profiles, whether each
    /// is installed, and (`--check`) whether it answers.
    Agents(agents::AgentsArgs),
    /// The `[[cron]]` jobs: their next and last runs; run one now.
    Cron(cron::CronArgs),
    /// The web view: pair a browser or phone (a link and QR code), list and revoke
    /// paired browsers (`cru web tokens`).
    Web(web::WebArgs),
    /// What the sessions spent, in tokens and US dollars, by day, agent or session
    /// (what an agent did not report is shown as unknown).
    Usage(usage::UsageArgs),
    /// Check the machine and the kiln for what crucible needs: each check passes, warns
    /// or fails, with the fix; exits 1 when something blocks.
    Doctor(doctor::DoctorArgs),
    /// Find words in the transcripts, the inbox and sessions' names and tasks, best
    /// first, the matched words marked.
    Search(search::SearchArgs),
    /// Print the shell's completion script (bash, zsh, fish); it completes
    /// subcommands, flags and session names and numbers.
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff), or write every page into a folder (`--out DIR`).
    Man(man::ManArgs),
    /// The settings files: `cru config schema` prints their JSON Schema, for editors.
    Config(config::ConfigArgs),
}

/// Parses the command line, runs it, and turns errors into a message and exit code.
pub fn main() -> ExitCode {
    // A Tab in a shell whose completion script `cru completions` printed.
    completions::answer_if_asked();
    let cli = parse();
    output::set_color(cli.color);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cru: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, clap's own help and errors coloured as `--color` and `NO_COLOR` say.
fn parse() -> Cli {
    let color = match output::color_asked(std::env::args_os()) {
        ColorChoice::Auto => clap::ColorChoice::Auto,
        ColorChoice::Always => clap::ColorChoice::Always,
        ColorChoice::Never => clap::ColorChoice::Never,
    };
    let matches = Cli::command().color(color).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Before any thread starts allocating.
    crate::sys::limit_heap_arenas();
    let kiln = match &cli.kiln {
        Some(dir) => Kiln::new(
            dir.canonicalize()
                .with_context(|| format!("kiln {} does not exist", dir.display()))?,
        ),
        None => Kiln::discover(&std::env::current_dir().context("no current directory")?),
    };
    // Where the daemon runs (its own process, or in the workbench's), at least four
    // workers: the database engine runs its compaction on the runtime and blocks the
    // worker it runs on while it waits for a lock; on a two-core machine that can leave no
    // worker for the task that would release it. A client needs no more than the cores.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let hosts_daemon = cli.embedded || matches!(cli.command, Some(Command::Daemon(_)));
    let workers = if hosts_daemon { cores.max(4) } else { cores };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        // The database engine needs deep stacks.
        .thread_stack_size(10 * 1024 * 1024)
        .build()
        .context("cannot start the async runtime")?;
    crate::client::name_this_client(match cli.command {
        None => "workbench".into(),
        Some(_) => command_words(std::env::args().skip(1)),
    });
    // Every command but the daemon and the workbench logs to standard error (the MCP
    // server's standard output carries its frames only).
    if !matches!(
        cli.command,
        None | Some(Command::Daemon(_) | Command::Hub(_))
    ) {
        crate::logging::to_stderr();
    }
    match cli.command {
        Some(Command::Daemon(args)) => runtime.block_on(daemon::run(kiln, args)),
        Some(Command::Inbox(args)) => runtime.block_on(inbox::run(kiln, args)),
        Some(Command::Session(args)) => runtime.block_on(session::run(kiln, args)),
        Some(Command::Notify(args)) => Ok(runtime.block_on(agent::notify(args))),
        Some(Command::Ask(args)) => Ok(runtime.block_on(agent::ask(args))),
        Some(Command::Approve(args)) => Ok(runtime.block_on(agent::approve(args))),
        Some(Command::Secret(args)) => Ok(runtime.block_on(agent::secret(args))),
        Some(Command::Kilns(args)) => runtime.block_on(kilns::run(args)),
        Some(Command::Hub(args)) => runtime.block_on(hub::run(args)),
        Some(Command::Rules(args)) => runtime.block_on(rules::run(kiln, args)),
        Some(Command::Agents(args)) => runtime.block_on(agents::run(kiln, args)),
        Some(Command::Cron(args)) => runtime.block_on(cron::run(kiln, args)),
        Some(Command::Web(args)) => runtime.block_on(web::run(kiln, args)),
        Some(Command::Usage(args)) => runtime.block_on(usage::run(kiln, args)),
        Some(Command::Search(args)) => runtime.block_on(search::run(kiln, args)),
        Some(Command::Doctor(args)) => runtime.block_on(doctor::run(kiln, args)),
        Some(Command::Mcp) => runtime.block_on(mcp::run()),
        Some(Command::Completions(args)) => completions::run(&args),
        Some(Command::Man(args)) => man::run(&args),
        Some(Command::Config(args)) => config::run(&args),
        None if cli.all_kilns || (cli.kiln.is_none() && nowhere_with_kilns(&kiln)) => {
            let place = crate::client::HubPlace::for_user()?;
            runtime.block_on(crate::tui::run::run(
                crate::tui::run::Place::Hub(place),
                crate::tui::run::Options {
                    color: cli.color,
                    ..Default::default()
                },
            ))
        }
        None => {
            let embedded = cli.embedded.then(|| {
                let daemon: crate::tui::run::EmbeddedDaemon = Box::new(|kiln: Kiln, config| {
                    Box::pin(async move { Ok(crate::daemon::run(kiln, config).await?) })
                });
                daemon
            });
            runtime.block_on(crate::tui::run::run(
                crate::tui::run::Place::Kiln(kiln),
                crate::tui::run::Options {
                    embedded,
                    color: cli.color,
                },
            ))
        }
    }
}

/// Whether `kiln`, found from the current folder, is no kiln and in no repository while
/// the person has kilns: `cru` there opens the workbench on all of them. (With none yet,
/// the folder becomes a kiln, as on a first run.)
fn nowhere_with_kilns(kiln: &Kiln) -> bool {
    let root = kiln.root();
    let somewhere = root.join(".crucible.toml").exists()
        || kiln.state_dir().is_dir()
        || root.join(".git").exists();
    !somewhere
        && crate::kilns::Registry::for_user()
            .and_then(|r| r.entries())
            .is_ok_and(|kilns| !kilns.is_empty())
}

/// The command as people say it (`cru inbox respond`): its first words, without options
/// or the ids and texts it was given.
fn command_words(args: impl Iterator<Item = String>) -> String {
    let mut after_kiln = false;
    let words: Vec<String> = args
        .filter(|a| {
            let value_of_kiln = std::mem::replace(&mut after_kiln, a == "--kiln");
            !value_of_kiln && !a.starts_with('-')
        })
        .take_while(|a| !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .take(2)
        .collect();
    format!("cru {}", words.join(" "))
}

/// Loads the kiln's settings, with the file and key named on error.
pub(crate) fn load_config(kiln: &Kiln) -> anyhow::Result<Config> {
    Ok(Config::load(&kiln.settings_path())?)
}

/// Connects to the kiln's daemon, starting it if needed. Settings files that do not load
/// lock no one out: the daemon that runs keeps its last good settings, and the file's
/// error is one line on standard error. Only with no daemon running is it the error
/// (none can start on such files).
pub(crate) async fn connect(kiln: &Kiln) -> anyhow::Result<Client> {
    let opened = open(kiln, &StartOptions::default()).await?;
    if let Some(broken) = &opened.settings_error {
        warn_settings(broken);
    }
    Ok(opened.client)
}

/// Says on standard error that the settings files do not load and the last good ones are
/// in use.
pub(crate) fn warn_settings(broken: &crate::config::ConfigError) {
    eprintln!(
        "warning: {} — using the last good settings",
        broken.summary()
    );
}
