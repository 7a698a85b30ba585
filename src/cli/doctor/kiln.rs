//! The kiln's checks: its settings load, the agents they and the built-in profiles name
//! are on `PATH` (found, never run), and, when the kiln's daemon runs, its store and each
//! of its components. No daemon is started to look.

use super::Check;
use crate::client::{Client, ClientError};
use crate::config::{Config, KNOWN, ProfileSource};
use crate::kiln::Kiln;
use crate::protocol::{ComponentState, DaemonStatus, DriverKind, methods};

/// The settings files load as the daemon would load them; on failure the check names
/// the file and line, and the built-in defaults stand in for the checks after it.
pub(super) fn settings(kiln: &Kiln, checks: &mut Vec<Check>) -> Config {
    let files: Vec<String> = crate::config::settings_files(&kiln.settings_path())
        .into_iter()
        .filter(|f| f.exists())
        .map(|f| f.display().to_string())
        .collect();
    match Config::load(&kiln.settings_path()) {
        Ok(config) => {
            let found = match files.as_slice() {
                [] => "no settings file: the defaults are in use".to_string(),
                files => format!("{} load", files.join(", ")),
            };
            checks.push(Check::pass("settings", found));
            config
        }
        Err(e) => {
            checks.push(Check::fail(
                "settings",
                e.summary(),
                "mend the file where it says (a running daemon keeps its last good settings \
                 until then; none can start on these)",
            ));
            Config::default()
        }
    }
}

/// Which profiles' programs are on `PATH`: found by the same finder `cru agents` and
/// `/new` use, and none of them run.
pub(super) fn agents(config: &Config) -> Check {
    let entries = config.profiles();
    let found: Vec<String> = entries
        .iter()
        .filter_map(|e| {
            e.program
                .as_ref()
                .map(|p| format!("{} ({})", e.name, p.display()))
        })
        .collect();
    let missing: Vec<String> = entries
        .iter()
        .filter(|e| e.source == ProfileSource::Settings && !e.usable())
        .map(|e| format!("{} (`{}`)", e.name, e.profile.command))
        .collect();
    let startable = config.startable();
    if startable.is_empty() {
        let installs: Vec<String> = KNOWN
            .iter()
            .map(|k| format!("{} ({})", k.install, k.name))
            .collect();
        return Check::warn(
            "agents",
            "no agent is on PATH: sessions cannot start",
            format!("install one: {}", installs.join("; ")),
        );
    }
    let mut said = format!("found: {}", found.join(", "));
    if found.is_empty() {
        said = format!("can start: {}", startable.join(", "));
    }
    if missing.is_empty() {
        return Check::pass("agents", said);
    }
    Check::warn(
        "agents",
        format!("{said}; not found: {}", missing.join(", ")),
        "install those programs, or set `command` in their [agents.<name>] to where they are",
    )
}

/// The profiles whose sessions run in `driver` unless they ask otherwise.
pub(super) fn driven_by(config: &Config, driver: DriverKind) -> Vec<String> {
    config
        .profiles()
        .into_iter()
        .filter(|e| e.profile.driver == Some(driver))
        .map(|e| format!("[agents.{}]", e.name))
        .collect()
}

/// The kiln's daemon, when one runs: itself, its store, and each component it reports.
pub(super) async fn daemon(kiln: &Kiln) -> Vec<Check> {
    let client = match Client::connect(kiln).await {
        Ok(client) => client,
        Err(e @ ClientError::Suspended { .. }) => {
            return vec![Check::fail(
                "daemon",
                e.to_string(),
                "resume it (kill -CONT with its pid), or stop it with `cru daemon stop`",
            )];
        }
        Err(e) if kiln.socket_path().exists() && kiln.read_pid().is_some() => {
            return vec![Check::warn(
                "daemon",
                format!("the kiln's daemon does not answer: {e}"),
                "`cru daemon status` says more; `cru daemon stop` ends it",
            )];
        }
        Err(_) => {
            return vec![Check::pass(
                "daemon",
                "no daemon runs for this kiln (doctor starts none)",
            )];
        }
    };
    match client
        .call::<methods::DaemonStatusOf>(&methods::NoParams {})
        .await
    {
        Ok(status) => of_status(kiln, &status),
        Err(e) => vec![Check::fail(
            "daemon",
            format!("the daemon does not answer daemon.status: {e}"),
            "restart it: `cru daemon stop`, then start cru again",
        )],
    }
}

/// The checks a running daemon's `daemon.status` answers.
fn of_status(kiln: &Kiln, status: &DaemonStatus) -> Vec<Check> {
    let mut checks = vec![Check::pass(
        "daemon",
        format!(
            "pid {}, cru {}, up {}s, {} sessions",
            status.pid, status.daemon_version, status.uptime_secs, status.sessions
        ),
    )];
    checks.push(store(status));
    let log = kiln.log_dir().join("daemon.log");
    for c in &status.components {
        let name = format!("daemon: {}", c.name);
        let detail = if c.detail.is_empty() {
            c.state.as_str().to_string()
        } else {
            c.detail.clone()
        };
        checks.push(match c.state {
            ComponentState::On | ComponentState::Off => Check::pass(&name, detail),
            ComponentState::Starting => Check::warn(
                &name,
                format!("starting: {detail}"),
                format!(
                    "wait, then run cru doctor again; its log is {}",
                    log.display()
                ),
            ),
            ComponentState::Failing => Check::fail(
                &name,
                format!("{detail}: {}", c.error.as_deref().unwrap_or("failing")),
                format!(
                    "mend what the error names (its settings section, or the service it \
                     reaches); the daemon tries again; its log is {}",
                    log.display()
                ),
            ),
        });
    }
    if let Some(matrix) = &status.matrix
        && !matrix.logged_in
    {
        checks.push(Check::warn(
            "daemon: matrix login",
            format!(
                "{} is not logged in at {}",
                matrix.user_id, matrix.homeserver
            ),
            "check [channels.matrix]'s account and password, then restart the daemon",
        ));
    }
    checks
}

/// The daemon's store: it answers, nothing in it is known damaged, and it takes writes.
fn store(status: &DaemonStatus) -> Check {
    let found = format!("{} ({})", status.database, status.store_kind);
    if let Some(health) = &status.store {
        if !health.connected {
            let why = health.error.as_deref().unwrap_or("no answer");
            return Check::fail(
                "store",
                format!("{found}: unreachable: {why}"),
                "start the database server, or mend its address in [store]",
            );
        }
        if !health.damaged.is_empty() {
            return Check::fail(
                "store",
                format!("{found}: damaged: {}", health.damaged.join("; ")),
                crate::store::check::WHAT_TO_DO,
            );
        }
    }
    if let Some(why) = &status.writes_refused {
        return Check::fail(
            "store",
            format!("{found}: writes refused since a storage failure ({why})"),
            "fix the cause (a full disk?), then `cru daemon stop` and start again",
        );
    }
    Check::pass("store", found)
}
