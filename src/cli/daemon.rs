//! `cru daemon run|status|stop|check|repair|bridge|verify|service|logs`

use super::output::outln;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::output;
use crate::client::{Client, ClientError, stop_daemon};
use crate::kiln::Kiln;
use crate::protocol::methods;

#[derive(Debug, Args)]
pub struct DaemonArgs {
    #[command(subcommand)]
    action: DaemonAction,
}

#[derive(Debug, Subcommand)]
enum DaemonAction {
    /// Run the daemon in the foreground (clients start it on their own when needed).
    Run,
    /// Show whether a daemon runs for this kiln, and what it holds.
    Status {
        /// Print the daemon's state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop the kiln's daemon.
    Stop,
    /// Read every record of the database and name what cannot be read back (through
    /// the daemon when it runs).
    Check {
        /// Print what was checked and found as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild the embedded database from every record it can still read and the
    /// journal; the damaged one is kept beside it. Stop the daemon first.
    Repair,
    /// Relay the daemon's socket over standard input and output (for your hub on another
    /// machine: `ssh HOST cru --kiln PATH daemon bridge`); starts the daemon if needed.
    Bridge,
    /// Say whether the emoji of the Matrix bot's verification match the ones your
    /// Matrix client shows (without a flag: show them).
    Verify(super::verify::VerifyArgs),
    /// Print a systemd user unit that keeps this kiln's daemon running (for cron jobs
    /// and webhooks): save it under ~/.config/systemd/user/ and enable it.
    Service,
    /// Print the daemon's log (`--follow` to keep printing as it writes).
    Logs(super::logs::LogsArgs),
}

pub async fn run(kiln: Kiln, args: DaemonArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        DaemonAction::Run => {
            let config = super::load_config(&kiln)?;
            kiln.ensure_state_dir()?;
            let _guard = crate::logging::to_file_and_journal(&kiln.log_dir(), "daemon.log")?;
            crate::logging::log_panics();
            crate::daemon::run(kiln, config).await?;
            Ok(ExitCode::SUCCESS)
        }
        DaemonAction::Service => {
            crate::logging::to_stderr();
            let exe = std::env::current_exe()?;
            let path = std::env::var("PATH").ok();
            outln!("{}", service_unit(&exe, kiln.root(), path.as_deref()));
            Ok(ExitCode::SUCCESS)
        }
        DaemonAction::Status { json } => status(&kiln, json).await,
        DaemonAction::Logs(args) => {
            let log = kiln.log_dir().join("daemon.log");
            super::logs::run(&log, "the kiln's daemon", args).await
        }
        DaemonAction::Bridge => super::bridge::run(&kiln).await,
        DaemonAction::Verify(args) => super::verify::run(&kiln, args).await,
        DaemonAction::Check { json } => {
            crate::logging::to_stderr();
            let check = match Client::connect(&kiln).await {
                Ok(client) => {
                    super::progress::waiting(
                        "reading every record and block",
                        client.call::<methods::DbCheck>(&methods::NoParams {}),
                    )
                    .await?
                }
                // It runs, and holds the database.
                Err(e @ ClientError::Suspended { .. }) => return Err(e.into()),
                Err(_) => {
                    use crate::store::check;
                    let config = super::load_config(&kiln)?;
                    match crate::store::Store::open(&config.store, &kiln.db_path()).await {
                        Ok(store) => {
                            let check = super::progress::waiting(
                                "reading every record and block",
                                store.check(),
                            )
                            .await;
                            store.close().await;
                            check?
                        }
                        Err(e) if check::is_catalog_damage(&e) => {
                            check::check_unopened(&config.store, &kiln.db_path(), e).await?
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            if json {
                outln!("{}", serde_json::to_value(&check)?);
            } else {
                print_check(&check, true);
            }
            Ok(if check.damaged() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        DaemonAction::Repair => repair(&kiln).await,
        DaemonAction::Stop => {
            crate::logging::to_stderr();
            if stop_daemon(&kiln).await? {
                outln!("daemon stopped");
            } else {
                outln!("no daemon running for {}", kiln.root().display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `cru daemon status`: whether a daemon runs for the kiln, and what it reports.
async fn status(kiln: &Kiln, json: bool) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr();
    let client = match Client::connect(kiln).await {
        Ok(client) => client,
        // It runs: "no daemon running" would be wrong.
        Err(e @ ClientError::Suspended { .. }) => return Err(e.into()),
        Err(e) => {
            if json {
                outln!(
                    "{}",
                    serde_json::json!({"running": false, "kiln": kiln.root()})
                );
            } else {
                outln!("no daemon running for {} ({e})", kiln.root().display());
            }
            return Ok(ExitCode::from(3));
        }
    };
    let status = client
        .call::<methods::DaemonStatusOf>(&methods::NoParams {})
        .await?;
    if json {
        let mut value = serde_json::to_value(&status)?;
        value["running"] = true.into();
        outln!("{value}");
    } else {
        outln!("daemon running for {}", status.kiln);
        output::print_pairs(&[
            ("pid", status.pid.to_string()),
            (
                "version",
                format!(
                    "{} (protocol {})",
                    status.daemon_version, status.protocol_version
                ),
            ),
            ("database", store_line(&status)),
            ("uptime", output::duration(status.uptime_secs)),
            // This command is one of the clients.
            ("clients", status.clients.to_string()),
            ("sessions", status.sessions.to_string()),
            ("agents", status.agents.to_string()),
            ("unread", status.unread.to_string()),
        ]);
        print_team(&status);
        if let Some(matrix) = &status.matrix {
            outln!("matrix: {}", matrix_line(matrix));
            for line in super::verify::device_lines(matrix) {
                outln!("{line}");
            }
        }
        print_components(&status.components);
        if let Some(why) = &status.settings_error {
            outln!("settings: cannot be used ({why}); the last good ones are in use");
        }
        for note in &status.settings_pending {
            outln!("settings: {note}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What each component reports, one line each: its name, state, what it does, and what
/// went wrong.
fn print_components(components: &[crate::protocol::ComponentStatus]) {
    if components.is_empty() {
        return;
    }
    outln!("components:");
    let width = components.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in components {
        let mut line = format!("  {:width$}  {:8}  {}", c.name, c.state.as_str(), c.detail);
        if let Some(error) = &c.error {
            line.push_str(&format!(" ({error})"));
        }
        outln!("{}", line.trim_end());
    }
}

/// The Matrix channel in one line: who, where, and how it stands.
fn matrix_line(m: &crate::protocol::MatrixStatus) -> String {
    let mut line = if m.logged_in {
        format!(
            "logged in as {} (device {}) at {}, {} room{}",
            m.user_id,
            m.device_id.as_deref().unwrap_or("?"),
            m.homeserver,
            m.rooms,
            if m.rooms == 1 { "" } else { "s" }
        )
    } else {
        format!("not logged in as {} at {}", m.user_id, m.homeserver)
    };
    if let Some(at) = &m.last_sync {
        line.push_str(&format!(", last sync {at}"));
    }
    if let Some(error) = &m.error {
        line.push_str(&format!(" ({error})"));
    }
    line
}

/// `cru daemon repair`: rebuilds a damaged embedded database while no daemon runs.
async fn repair(kiln: &Kiln) -> anyhow::Result<ExitCode> {
    crate::logging::to_stderr();
    if matches!(
        Client::connect(kiln).await,
        Ok(_) | Err(ClientError::Suspended { .. })
    ) {
        anyhow::bail!(
            "the daemon is running for {}: stop it first (`cru daemon stop`), then repair",
            kiln.root().display()
        );
    }
    let config = super::load_config(kiln)?;
    let Some(path) = crate::store::check::embedded_path(&config.store, &kiln.db_path()) else {
        anyhow::bail!(
            "repair rebuilds the embedded database; {} is a server: use its own backups",
            config.store.url
        );
    };
    let repaired = super::progress::waiting(
        "rebuilding the database",
        crate::store::check::repair(&config.store, &path),
    )
    .await?;
    for line in &repaired.rebuilt {
        outln!("{line}");
    }
    print_check(&repaired.check, false);
    outln!(
        "rebuilt {}: {} records copied, {} journaled changes applied",
        path.display(),
        repaired.copied,
        repaired.journaled
    );
    for record in &repaired.restored {
        outln!("  brought back from the journal: {record}");
    }
    outln!(
        "the damaged database is kept at {}",
        repaired.kept_at.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a check found: each table's records, and each damaged stretch; `files`: whether
/// the check read the engine's files too (a repair reads records only).
fn print_check(check: &crate::protocol::check::Check, files: bool) {
    for table in &check.tables {
        let state = if table.damaged.is_empty() {
            "ok".to_string()
        } else {
            format!("DAMAGED ({} unreadable stretches)", table.damaged.len())
        };
        outln!("{:<18} {:>8} records  {state}", table.table, table.readable);
    }
    for line in check.describe() {
        outln!("  {line}");
    }
    if !check.damaged() {
        outln!(
            "{}",
            if files {
                "every record and every index entry reads back"
            } else {
                "every record reads back"
            }
        );
    }
}

/// A systemd user unit running `cru daemon run` for `kiln`, restarted when it fails. It
/// is ready when the daemon answers (`Type=notify`), logs to the journal as well as the
/// kiln's log file, and runs agents with the `PATH` of the shell that printed it (where
/// npm-installed agents are found; systemd's own has none of a person's folders).
fn service_unit(exe: &std::path::Path, kiln: &std::path::Path, path: Option<&str>) -> String {
    let path_line = match path.filter(|p| !p.is_empty()) {
        Some(path) => format!(
            "# The PATH agents are found on (npm's, ~/.local/bin…), as your shell had it:\n\
             Environment=\"PATH={}\"\n",
            path.replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('%', "%%")
        ),
        None => "# Environment=\"PATH=…\"   the folders your agents are installed in\n".into(),
    };
    let quote = |p: &std::path::Path| {
        let text = p.display().to_string();
        if text.contains([' ', '"', '\\']) {
            format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
        } else {
            text
        }
    };
    format!(
        "# Save as ~/.config/systemd/user/crucible-<name>.service, then:\n\
         #   systemctl --user daemon-reload && systemctl --user enable --now crucible-<name>\n\
         # Variables the hooks and agents need (secret_env, env) go in an EnvironmentFile\n\
         # only you can read, never in this unit.\n\
         [Unit]\n\
         Description=crucible daemon for {kiln_shown}\n\
         After=network.target\n\
         \n\
         [Service]\n\
         Type=notify\n\
         NotifyAccess=main\n\
         ExecStart={exe} --kiln {kiln} daemon run\n\
         WorkingDirectory={kiln}\n\
         {path_line}\
         # EnvironmentFile=%h/.config/crucible/daemon.env\n\
         # Its log: journalctl --user -u crucible-<name>, or `cru daemon logs -f`.\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         \n\
         [Install]\n\
         WantedBy=default.target",
        kiln_shown = kiln.display(),
        path_line = path_line,
        exe = quote(exe),
        kiln = quote(kiln),
    )
}

/// The store as `daemon status` names it: where it is, what kind, and whether it answers.
fn store_line(status: &crate::protocol::DaemonStatus) -> String {
    let mut line = status.database.clone();
    if !status.store_kind.is_empty() {
        line.push_str(&format!(" ({})", status.store_kind));
    }
    if let Some(health) = &status.store
        && !health.damaged.is_empty()
    {
        line.push_str(&format!(
            " — DAMAGED: {}. {}",
            health.damaged.join("; "),
            crate::store::check::WHAT_TO_DO
        ));
    }
    if let Some(health) = &status.store
        && !health.rebuilt.is_empty()
    {
        line.push_str(&format!(
            " — REBUILT as the daemon started: {}",
            health.rebuilt.join("; ")
        ));
    }
    if let Some(why) = &status.writes_refused {
        line.push_str(&format!(
            " — WRITES REFUSED since a storage failure ({why}); everything acknowledged \
             before it is kept. Fix the cause, then `cru daemon stop` and start again"
        ));
    }
    if let Some(health) = &status.store
        && !health.connected
    {
        line.push_str(&format!(
            " — UNREACHABLE: {}",
            health.error.as_deref().unwrap_or("no answer")
        ));
    }
    line
}

/// Team mode: this daemon's instance and the other daemons sharing the server.
fn print_team(status: &crate::protocol::DaemonStatus) {
    if status.store_kind != "server" {
        return;
    }
    if let Some(me) = &status.instance {
        outln!("instance {} on {}", me.id, me.host);
    }
    if status.daemons.is_empty() {
        outln!("no other daemons share this database");
        return;
    }
    outln!("other daemons sharing this database:");
    for d in &status.daemons {
        let state = match (&d.taken_by, d.live) {
            (Some(by), _) => format!("gone; its sessions were taken over by {by}"),
            (None, true) => "live".to_string(),
            (None, false) => format!("silent since its lease ran out at {}", d.lease_until),
        };
        outln!(
            "  {} on {} ({}, pid {}): {state}",
            d.id,
            d.host,
            d.kiln,
            d.pid
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_unit_runs_this_kilns_daemon() {
        let unit = service_unit(
            std::path::Path::new("/usr/bin/cru"),
            std::path::Path::new("/home/me/my project"),
            Some("/home/me/.npm-global/bin:/usr/bin:/100%"),
        );
        assert!(
            unit.contains("ExecStart=/usr/bin/cru --kiln \"/home/me/my project\" daemon run"),
            "{unit}"
        );
        assert!(unit.contains("Restart=on-failure"));
        assert!(unit.contains("WantedBy=default.target"));
        // Ready when it answers; agents found where the person's shell finds them (a `%`
        // is a specifier in a unit, so it is doubled).
        assert!(unit.contains("Type=notify\nNotifyAccess=main\n"), "{unit}");
        assert!(
            unit.contains("Environment=\"PATH=/home/me/.npm-global/bin:/usr/bin:/100%%\""),
            "{unit}"
        );
        let bare = service_unit(
            std::path::Path::new("/usr/bin/cru"),
            std::path::Path::new("/k"),
            None,
        );
        assert!(!bare.contains("\nEnvironment="), "{bare}");
    }
}
