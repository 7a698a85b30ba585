//! `cru completions <shell>`: the shell's completion script. The script asks `cru` itself
//! for the words at each Tab (`COMPLETE=<shell> cru -- <words>`), so subcommands, flags
//! and their values always match the installed binary, and a session argument completes
//! to the numbers and names of the kiln's sessions when its daemon runs (none is started
//! for a Tab).

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};
use clap_complete::{ArgValueCandidates, CompleteEnv, CompletionCandidate};

use crate::cli::output::outln;
use crate::kiln::Kiln;

/// The variable that, set to a shell's name, makes `cru` answer a completion request.
const VAR: &str = "COMPLETE";

/// How long a Tab waits for the daemon's session list before completing without it.
const SESSIONS_WAIT: Duration = Duration::from_millis(1500);

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell whose script to print.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    fn completer(self) -> &'static dyn EnvCompleter {
        match self {
            Shell::Bash => &Bash,
            Shell::Zsh => &Zsh,
            Shell::Fish => &Fish,
        }
    }
}

/// Prints the script that registers `cru`'s completions with the shell.
pub fn run(args: &CompletionsArgs) -> anyhow::Result<std::process::ExitCode> {
    let mut script = Vec::new();
    args.shell
        .completer()
        .write_registration(VAR, "cru", "cru", "cru", &mut script)?;
    outln!("{}", String::from_utf8_lossy(&script).trim());
    Ok(std::process::ExitCode::SUCCESS)
}

/// Answers a completion request and exits, when the shell's script made this run one;
/// otherwise returns and `cru` runs as asked.
pub fn answer_if_asked() {
    CompleteEnv::with_factory(command).var(VAR).complete();
}

/// `cru`'s command tree with every session argument completing to the kiln's sessions.
pub(super) fn command() -> clap::Command {
    with_sessions(super::Cli::command())
}

fn with_sessions(mut cmd: clap::Command) -> clap::Command {
    if cmd.get_arguments().any(|a| a.get_id() == "session") {
        cmd = cmd.mut_arg("session", |a| a.add(ArgValueCandidates::new(sessions)));
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, with_sessions);
    }
    cmd
}

/// The kiln's sessions as `cru session list` numbers them, then their names, each with
/// what it is working on; none when no daemon answers in time.
fn sessions() -> Vec<CompletionCandidate> {
    let given = kiln_given(std::env::args_os()).or_else(|| std::env::var_os("CRU_KILN"));
    let kiln = match given {
        Some(dir) => Kiln::new(std::path::PathBuf::from(dir)),
        None => match std::env::current_dir() {
            Ok(dir) => Kiln::discover(&dir),
            Err(_) => return Vec::new(),
        },
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let listed = runtime.block_on(async {
        tokio::time::timeout(SESSIONS_WAIT, async {
            let client = crate::client::Client::connect(&kiln).await.ok()?;
            super::session::list(&client).await.ok()
        })
        .await
        .ok()
        .flatten()
    });
    candidates(&listed.unwrap_or_default())
}

/// The `--kiln DIR` (or `--kiln=DIR`) of the command line being completed, which the
/// shell passes after a `--`.
fn kiln_given(args: impl IntoIterator<Item = OsString>) -> Option<OsString> {
    let words: Vec<OsString> = args.into_iter().skip_while(|a| a != "--").skip(1).collect();
    words.iter().enumerate().find_map(|(i, word)| {
        if word == "--kiln" {
            return words.get(i + 1).filter(|w| !w.is_empty()).cloned();
        }
        let dir = word.to_str()?.strip_prefix("--kiln=")?;
        (!dir.is_empty()).then(|| dir.into())
    })
}

fn candidates(sessions: &[crate::protocol::Session]) -> Vec<CompletionCandidate> {
    let about = |s: &crate::protocol::Session| {
        let what = s.task.as_deref().unwrap_or(&s.agent_name);
        Some(format!("{} — {}", s.display_name, one_line(what)).into())
    };
    let numbers = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| CompletionCandidate::new((i + 1).to_string()).help(about(s)));
    let names = sessions.iter().map(|s| {
        CompletionCandidate::new(OsString::from(&s.display_name)).help(Some(
            one_line(s.task.as_deref().unwrap_or(&s.status)).into(),
        ))
    });
    numbers.chain(names).collect()
}

/// The first line of `text`, at most 60 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(name: &str, task: Option<&str>) -> crate::protocol::Session {
        serde_json::from_value(serde_json::json!({
            "id": format!("id-{name}"),
            "agent_type": "acp",
            "agent_name": "codex",
            "status": "running",
            "started_at": "2026-01-01T00:00:00Z",
            "last_heartbeat": "2026-01-01T00:00:00Z",
            "display_name": name,
            "task": task,
        }))
        .unwrap()
    }

    #[test]
    fn session_candidates_are_numbers_then_names() {
        let listed = [
            session("fix-login", Some("Fix the login form\nand more")),
            session("docs", None),
        ];
        let words: Vec<String> = candidates(&listed)
            .iter()
            .map(|c| c.get_value().to_string_lossy().into_owned())
            .collect();
        assert_eq!(words, ["1", "2", "fix-login", "docs"]);
        let help = candidates(&listed)[0].get_help().unwrap().to_string();
        assert_eq!(help, "fix-login — Fix the login form");
    }

    #[test]
    fn the_kiln_named_on_the_line_being_completed_is_asked() {
        let given = |args: &[&str]| kiln_given(args.iter().map(OsString::from));
        assert_eq!(
            given(&["cru", "--", "cru", "--kiln", "/k", "session", "stop", ""]),
            Some("/k".into())
        );
        assert_eq!(
            given(&["cru", "--", "cru", "session", "--kiln=/j", "stop", ""]),
            Some("/j".into())
        );
        // Still being typed, or not given: none (CRU_KILN or the folder decide).
        assert_eq!(given(&["cru", "--", "cru", "--kiln", ""]), None);
        assert_eq!(given(&["cru", "--", "cru", "session", "stop", ""]), None);
        // Words before the `--` are the completer's own.
        assert_eq!(
            given(&["cru", "--kiln", "/x", "--", "cru", "session"]),
            None
        );
    }

    #[test]
    fn every_session_argument_completes_sessions() {
        let cmd = command();
        let status = cmd
            .find_subcommand("session")
            .and_then(|s| s.find_subcommand("status"))
            .unwrap();
        let arg = status
            .get_arguments()
            .find(|a| a.get_id() == "session")
            .unwrap();
        assert!(arg.get::<ArgValueCandidates>().is_some());
    }
}
