//! `/new`'s flags: the synopsis `/help` shows, the flags Tab completes, and the parser that
//! reads them (the same flags `cru session new` takes).

use super::command::SlashCommand;
use super::error::ArgsError;
use crate::protocol::driver::MountText;
use crate::protocol::{DriverKind, DriverOptions, Mount, Network};

/// The argument synopsis `/help` shows for `/new`.
pub const SYNOPSIS: &str = "[--worktree <path>] [--agent <type>] [--driver local|sandbox|ssh|podman] [--mount <src[:dst][:ro]>] [--network none|host] [--env <NAME>] [--memory <MB>] [--cpus <n>] [--pids <n>] [--image <image>] [--host <user@host>] [--remote-path <path>] [task…]";

/// The flags Tab completes as `/new`'s first argument.
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
];

/// `[--worktree <path>] [--agent <type>] [driver options…] [task…]`: flags until the task
/// begins, then the rest is the task.
pub fn parse_new(rest: &str) -> Result<SlashCommand, ArgsError> {
    let (mut worktree, mut agent, mut task) = (None, None, Vec::new());
    let mut driver = DriverOptions::default();
    let mut words = rest.split_whitespace();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (word, None),
        };
        if !flag.starts_with('-') || !task.is_empty() {
            task.push(word);
            continue;
        }
        const FLAGS: &[&str] = &[
            "--worktree",
            "-w",
            "--agent",
            "-a",
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
        ];
        if !FLAGS.contains(&flag) {
            return Err(ArgsError::UnknownOption(flag.to_string()));
        }
        let value = inline
            .or_else(|| words.next().map(String::from))
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ArgsError::NeedsValue(flag.to_string()))?;
        let number = |v: &str| {
            v.parse::<u64>().map_err(|_| ArgsError::NotANumber {
                flag: flag.to_string(),
                value: v.to_string(),
            })
        };
        match flag {
            "--worktree" | "-w" => worktree = Some(value),
            "--agent" | "-a" => agent = Some(value),
            "--driver" => {
                driver.driver = Some(DriverKind::parse(&value).map_err(ArgsError::Driver)?)
            }
            "--mount" => driver
                .mounts
                .push(MountText(Mount::parse(&value).map_err(ArgsError::Driver)?)),
            "--network" => {
                driver.network = Some(Network::parse(&value).map_err(ArgsError::Driver)?)
            }
            "--env" => driver.env.push(value),
            "--memory" => driver.memory = Some(number(&value)?),
            "--cpus" => {
                let n = number(&value)?;
                driver.cpus = Some(u32::try_from(n).map_err(|_| ArgsError::TooManyCpus(n))?);
            }
            "--pids" => driver.pids = Some(number(&value)?),
            "--image" => driver.image = Some(value),
            "--host" => driver.host = Some(value),
            _ => driver.remote_path = Some(value),
        }
    }
    Ok(SlashCommand::New {
        worktree,
        agent,
        task: (!task.is_empty()).then(|| task.join(" ")),
        driver,
    })
}
