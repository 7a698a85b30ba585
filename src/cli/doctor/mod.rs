//! `cru doctor [--json]`: checks the machine and the kiln for what crucible needs (git,
//! bubblewrap, podman, the inotify watch limit, the agents, the settings, the kiln's
//! daemon), one line each with what was found and, when something is wrong, the fix.
//! Exits 1 when a check failed (warnings do not block); starts no daemon and runs no
//! agent's program.

mod kiln;
mod machine;

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use crate::cli::output::outln;
use crate::kiln::Kiln;
use crate::protocol::DriverKind;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the checks as a JSON array of `{check, status, found, fix}`.
    #[arg(long)]
    json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    Pass,
    /// Something only some of crucible needs, or that may bite later.
    Warn,
    /// Something crucible cannot work without.
    Fail,
}

/// One check: what it looked at, how it came out, what it found and how to mend it.
#[derive(Debug, Serialize)]
pub(super) struct Check {
    check: String,
    status: Status,
    found: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    pub(super) fn pass(check: &str, found: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            status: Status::Pass,
            found: found.into(),
            fix: None,
        }
    }

    pub(super) fn warn(check: &str, found: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            status: Status::Warn,
            fix: Some(fix.into()),
            ..Self::pass(check, found)
        }
    }

    /// A warning made a failure when the profiles named in `users` need what is missing
    /// (their `driver` is `driver`).
    pub(super) fn needed_by(mut self, users: &[String], driver: &str) -> Self {
        if self.status == Status::Warn && !users.is_empty() {
            self.status = Status::Fail;
            self.found = format!(
                "{}; the {driver} driver needs it, which {} use",
                self.found,
                users.join(", ")
            );
        }
        self
    }

    pub(super) fn fail(check: &str, found: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            status: Status::Fail,
            fix: Some(fix.into()),
            ..Self::pass(check, found)
        }
    }
}

pub async fn run(kiln: Kiln, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut settings = Vec::new();
    let config = kiln::settings(&kiln, &mut settings);
    let mut checks = vec![
        machine::git().await,
        machine::bubblewrap(&kiln::driven_by(&config, DriverKind::Sandbox)).await,
        machine::podman(&kiln::driven_by(&config, DriverKind::Podman)).await,
        machine::qemu(&kiln, &kiln::driven_by(&config, DriverKind::Qemu)).await,
        machine::inotify(&kiln).await,
    ];
    checks.extend(settings);
    checks.push(kiln::agents(&config));
    checks.extend(kiln::daemon(&kiln).await);
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print(&checks, failed);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Each check on a line (`pass`, `warn` or `FAIL`, its name, what was found), its fix
/// indented below it, then whether anything blocks.
fn print(checks: &[Check], failed: usize) {
    let width = checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
    for c in checks {
        let mark = match c.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        outln!("{mark}  {:width$}  {}", c.check, c.found);
        if let Some(fix) = &c.fix {
            outln!("      {:width$}  fix: {fix}", "");
        }
    }
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    match (failed, warned) {
        (0, 0) => outln!("\nnothing blocks crucible here"),
        (0, 1) => outln!("\nnothing blocks crucible here (1 warning)"),
        (0, w) => outln!("\nnothing blocks crucible here ({w} warnings)"),
        (f, _) => outln!("\n{f} failed: crucible cannot work fully until they are fixed"),
    }
}
