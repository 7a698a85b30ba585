//! The driver options a user gives, defined once: the flags of `cru session new` and of
//! `/new` (clap), and the keys of a session file, of `[drivers.<name>]` and of
//! `session.create`'s `driver` (serde). Resolving them checks them against the driver
//! and gives the [`DriverSpec`] a session records.

use clap::Parser;
use clap::builder::NonEmptyStringValueParser;
use serde::{Deserialize, Serialize};

use super::spec::Confinement;
use super::{DriverKind, DriverSpec, MountText, Network, SpecError, whole};

/// What a user asks for; anything left out comes from the profile, `[drivers.<name>]`
/// and the defaults. The same names as flags, in settings, session files and on the
/// wire.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, clap::Args, schemars::JsonSchema,
)]
#[serde(default, deny_unknown_fields)]
pub struct DriverOptions {
    /// Where the agent runs: local (as you, the default), sandbox (bubblewrap, default
    /// deny), ssh, podman or qemu (a microVM).
    #[arg(long, value_parser = DriverKind::parse)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverKind>,
    /// A host path to show inside, read-write unless `:ro` (repeatable; added to the
    /// configured mounts).
    #[arg(long = "mount", value_name = "SRC[:DST][:ro]", value_parser = MountText::parse)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountText>,
    /// none (the default for sandbox, podman and qemu) or host.
    #[arg(long, value_parser = Network::parse)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// Pass this variable to the agent (by name; repeatable; added to the configured):
    /// its value from this shell, else from the daemon's environment; never written
    /// anywhere.
    #[arg(long = "env", value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Memory limit in MiB.
    #[arg(long, value_name = "MB", value_parser = whole::<u64>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// CPU limit, whole CPUs.
    #[arg(long, value_name = "N", value_parser = whole::<u32>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Process limit.
    #[arg(long, value_name = "N", value_parser = whole::<u64>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// podman: the image, or an absolute path: a folder to use as the root.
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// ssh: USER@HOST (your ssh config and agent are used).
    #[arg(long, value_name = "USER@HOST", value_parser = NonEmptyStringValueParser::new())]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// ssh: the repository's clone on the host, where the session's worktree is made.
    #[arg(long, value_name = "PATH", value_parser = NonEmptyStringValueParser::new())]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_path: Option<String>,
    /// qemu: the kernel to boot (default: the newest /boot/vmlinuz-*). Boxed: these
    /// options ride in every `/new` command, kept small.
    #[arg(long, value_name = "PATH", value_parser = boxed_path)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Box<str>>,
}

impl DriverOptions {
    /// `self` over `base`: single values from `self` when given, lists joined.
    pub fn over(&self, base: &DriverOptions) -> DriverOptions {
        let mut mounts = base.mounts.clone();
        mounts.extend(self.mounts.iter().cloned());
        let mut env = base.env.clone();
        for name in &self.env {
            if !env.contains(name) {
                env.push(name.clone());
            }
        }
        let or = |mine: &Option<String>, theirs: &Option<String>| mine.clone().or(theirs.clone());
        DriverOptions {
            driver: self.driver.or(base.driver),
            mounts,
            network: self.network.or(base.network),
            env,
            memory: self.memory.or(base.memory),
            cpus: self.cpus.or(base.cpus),
            pids: self.pids.or(base.pids),
            image: or(&self.image, &base.image),
            host: or(&self.host, &base.host),
            remote_path: or(&self.remote_path, &base.remote_path),
            kernel: self.kernel.clone().or(base.kernel.clone()),
        }
    }

    /// The spec a session records, checked: what the driver needs is there, names are
    /// names, and nothing is given that the local driver would silently ignore. Options
    /// of other drivers are left out.
    pub fn resolve(&self) -> Result<DriverSpec, SpecError> {
        let kind = self.driver.unwrap_or_default();
        for name in &self.env {
            if name.contains('=') {
                return Err(SpecError::EnvValue);
            }
            if !crate::protocol::client_env::is_name(name) {
                return Err(SpecError::NotAName(name.clone()));
            }
        }
        if self.cpus == Some(0) || self.memory == Some(0) || self.pids == Some(0) {
            return Err(SpecError::ZeroLimit);
        }
        kind.spec_of(self)
    }

    /// A value the driver cannot run without (`what`: the flag to give).
    pub(super) fn needs(
        &self,
        given: &Option<String>,
        driver: DriverKind,
        what: &'static str,
    ) -> Result<String, SpecError> {
        given.clone().ok_or(SpecError::Needs { driver, what })
    }

    /// Whether anything is given that confines the agent or passes it variables.
    pub(super) fn confines_or_passes(&self) -> bool {
        !self.mounts.is_empty()
            || self.network.is_some()
            || !self.env.is_empty()
            || self.memory.is_some()
            || self.cpus.is_some()
            || self.pids.is_some()
    }

    pub(super) fn confinement(&self) -> Confinement {
        Confinement {
            mounts: self.mounts.iter().map(|m| m.0.clone()).collect(),
            network: self.network.unwrap_or_default(),
            env: self.env.clone(),
            memory: self.memory,
            cpus: self.cpus,
            pids: self.pids,
        }
    }
}

/// A path flag's value, boxed (see [`DriverOptions::kernel`]).
fn boxed_path(text: &str) -> Result<Box<str>, SpecError> {
    if text.is_empty() {
        return Err(SpecError::BadPath);
    }
    Ok(text.into())
}

/// What `/new` takes after its name: the session's worktree, agent and task, and the
/// driver options of `cru session new`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWords {
    pub worktree: Option<String>,
    pub agent: Option<String>,
    /// The words from the first that is not an option on, joined by spaces; dashes in
    /// them are part of the task.
    pub task: Option<String>,
    pub driver: DriverOptions,
}

/// `/new`'s words as clap reads them: a later flag wins over an earlier one.
#[derive(Debug, Parser)]
#[command(
    name = "/new",
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
struct NewLine {
    /// A branch (existing, or new from HEAD) or the path of an existing worktree.
    #[arg(short = 'w', long, value_parser = NonEmptyStringValueParser::new())]
    worktree: Option<String>,
    /// The agent profile.
    #[arg(short = 'a', long, value_parser = NonEmptyStringValueParser::new())]
    agent: Option<String>,
    #[command(flatten)]
    driver: DriverOptions,
    /// The first prompt.
    #[arg(trailing_var_arg = true)]
    task: Vec<String>,
}

/// Parses the words after `/new` (`["--agent", "codex", "fix", "it"]`).
pub fn parse_new_words(words: &[&str]) -> Result<NewWords, clap::Error> {
    let line = NewLine::try_parse_from(words)?;
    Ok(NewWords {
        worktree: line.worktree,
        agent: line.agent,
        task: (!line.task.is_empty()).then(|| line.task.join(" ")),
        driver: line.driver,
    })
}

/// Every flag `/new` takes, long names first as written (`--worktree`, `-w`, …), for
/// completion.
pub fn new_flags() -> Vec<String> {
    use clap::CommandFactory;
    let command = NewLine::command();
    let mut flags: Vec<String> = Vec::new();
    for arg in command.get_arguments() {
        flags.extend(arg.get_long().map(|l| format!("--{l}")));
        flags.extend(arg.get_short().map(|s| format!("-{s}")));
    }
    flags
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
