//! `/new`'s flags: the synopsis `/help` shows, the flags Tab completes, and the parser that
//! reads them (the same flags `cru session new` takes).

use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::command::SlashCommand;
use super::error::ArgsError;
use crate::protocol::driver::parse_new_words;

/// The argument synopsis `/help` shows for `/new`.
pub const SYNOPSIS: &str = "[--kiln <name>] [--worktree <path>] [--agent <type>] [--driver local|sandbox|ssh|podman|qemu] [--mount <src[:dst][:ro]>] [--network none|host] [--env <NAME>] [--memory <MB>] [--cpus <n>] [--pids <n>] [--image <image>] [--host <user@host>] [--remote-path <path>] [--kernel <path>] [task…]";

/// The flags Tab completes as `/new`'s first argument: the long flags of the definition
/// `/new` is parsed with (a test holds them equal).
pub const COMPLETED_FLAGS: &[&str] = &[
    "--worktree",
    "--agent",
    "--driver",
    "--mount",
    "--network",
    "--env",
    "--memory",
    "--cpus",
    "--pids",
    "--image",
    "--host",
    "--remote-path",
    "--kernel",
];

/// `[--worktree <path>] [--agent <type>] [driver options…] [task…]`: flags until the task
/// begins, then the rest is the task; read by the same definition as `cru session new`'s
/// flags.
pub fn parse_new(rest: &str) -> Result<SlashCommand, ArgsError> {
    let mut words: Vec<&str> = rest.split_whitespace().collect();
    let kiln = take_kiln(&mut words)?;
    let new = parse_new_words(&words).map_err(args_error)?;
    Ok(SlashCommand::New {
        worktree: new.worktree,
        agent: new.agent,
        task: new.task,
        driver: new.driver,
        kiln,
    })
}

/// `--kiln NAME` (or `--kiln=NAME`) among the flags before the task: the workbench's own
/// flag (across kilns, where to start the session), taken out before the others are read.
fn take_kiln(words: &mut Vec<&str>) -> Result<Option<String>, ArgsError> {
    let flags_end = flags_end(words);
    let Some(at) = words[..flags_end]
        .iter()
        .position(|w| *w == "--kiln" || w.starts_with("--kiln="))
    else {
        return Ok(None);
    };
    let word = words.remove(at);
    let value = match word.strip_prefix("--kiln=") {
        Some(value) => value.to_string(),
        None if at < words.len() && !words[at].starts_with("--") => words.remove(at).to_string(),
        None => String::new(),
    };
    if value.is_empty() {
        return Err(ArgsError::NeedsValue("--kiln".into()));
    }
    Ok(Some(value))
}

/// Where the flags end and the task begins: at the first word that is neither a flag nor
/// a flag's value.
fn flags_end(words: &[&str]) -> usize {
    let mut i = 0;
    while i < words.len() && words[i].starts_with("--") {
        i += if words[i].contains('=') { 1 } else { 2 };
    }
    i.min(words.len())
}

/// What the user is told of a flag clap refused, in the words of the other commands.
fn args_error(e: clap::Error) -> ArgsError {
    let flag = || match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.split_whitespace().next().unwrap_or(arg).to_string(),
        _ => String::new(),
    };
    let empty_value = matches!(
        e.get(ContextKind::InvalidValue),
        Some(ContextValue::String(value)) if value.is_empty()
    );
    match e.kind() {
        ErrorKind::UnknownArgument => ArgsError::UnknownOption(flag()),
        ErrorKind::InvalidValue if empty_value => ArgsError::NeedsValue(flag()),
        _ => {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            ArgsError::BadValue(line.trim_start_matches("error: ").to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_completed_flags_are_the_parsed_ones() {
        let long: Vec<String> = crate::protocol::driver::options::new_flags()
            .into_iter()
            .filter(|f| f.starts_with("--"))
            .collect();
        assert_eq!(long, super::COMPLETED_FLAGS);
    }
}
