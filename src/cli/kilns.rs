//! `cru kilns`: every kiln the person has (each one whose daemon has started on this
//! machine, and those on other machines their hub reaches, `[[hub.remotes]]`), with its
//! daemon's state, sessions and waiting questions; and the reach across kilns that
//! `--all-kilns` and answering from anywhere use.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output::{self, outln};
use crate::client::Client;
use crate::kilns::{KilnEntry, KilnState, Registry};
use crate::protocol::methods as m;
use crate::protocol::{ComponentState, InboxMessage, ListParams, SessionListParams};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct KilnsArgs {
    #[command(subcommand)]
    action: Option<KilnsAction>,
    /// Print JSON for scripts: one object per kiln.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum KilnsAction {
    /// Remove a kiln from the list (its folder and state are left as they are; its
    /// daemon records it again when it next starts).
    Forget {
        /// The kiln's name, or its folder's path.
        #[arg(value_name = "KILN")]
        which: String,
    },
}

/// One kiln as `cru kilns` shows it.
#[derive(Debug, Serialize)]
struct KilnRow {
    name: String,
    path: String,
    /// The machine, for a kiln on another one (reached through the hub over ssh).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// `running`, `resting` or `missing`; on another machine `connected`, `lost`, or
    /// `remote` while no hub runs to reach it.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    /// Sessions, when the daemon runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    sessions: Option<usize>,
    /// Questions waiting for an answer, when the daemon runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<usize>,
    /// Why a running daemon could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub async fn run(args: KilnsArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::for_user()?;
    if let Some(KilnsAction::Forget { which }) = args.action {
        let gone = registry.forget(&which)?;
        outln!("forgot {} ({})", gone.name, gone.path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = Vec::new();
    for entry in registry.entries()? {
        rows.push(row(entry).await);
    }
    rows.extend(remote_rows().await);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        outln!("no kilns yet: a kiln is listed once its daemon has started (`cru` in a project)");
    } else {
        let table: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let count = |n: Option<usize>| n.map_or("-".into(), |n| n.to_string());
                let state = match (r.pid, &r.error) {
                    (_, Some(e)) => format!("{} ({e})", r.state),
                    (Some(pid), None) => format!("{} (pid {pid})", r.state),
                    (None, None) => r.state.into(),
                };
                let path = match &r.host {
                    Some(host) => format!("{host}:{}", r.path),
                    None => r.path.clone(),
                };
                vec![
                    r.name.clone(),
                    state,
                    count(r.sessions),
                    count(r.waiting),
                    path,
                ]
            })
            .collect();
        output::print_table(&["KILN", "DAEMON", "SESSIONS", "WAITING", "PATH"], &table);
    }
    Ok(ExitCode::SUCCESS)
}

async fn row(entry: KilnEntry) -> KilnRow {
    let state = entry.state();
    let mut row = KilnRow {
        name: entry.name.clone(),
        path: entry.path.display().to_string(),
        host: None,
        state: state.word(),
        pid: None,
        sessions: None,
        waiting: None,
        error: None,
    };
    if let KilnState::Running { pid } = state {
        row.pid = Some(pid);
        match counts(&entry).await {
            Ok((sessions, waiting)) => {
                row.sessions = Some(sessions);
                row.waiting = Some(waiting);
            }
            Err(e) => row.error = Some(format!("{e:#}")),
        }
    }
    row
}

/// The kilns on other machines the person's settings name: as their hub reaches them
/// while it runs (it is not started for this), else `remote`.
async fn remote_rows() -> Vec<KilnRow> {
    let Ok(config) = crate::config::Config::load_person() else {
        return Vec::new();
    };
    if config.hub.remotes.is_empty() {
        return Vec::new();
    }
    let hub = match crate::client::HubPlace::for_user() {
        Ok(place) => crate::client::connect_hub(&place).await.ok(),
        Err(_) => None,
    };
    let status = match &hub {
        Some(hub) => hub.call::<m::DaemonStatusOf>(&m::NoParams {}).await.ok(),
        None => None,
    };
    let (sessions, inbox) = match &hub {
        Some(hub) => (
            hub.call::<m::SessionList>(&SessionListParams::default())
                .await
                .map(|l| l.sessions)
                .unwrap_or_default(),
            hub.call::<m::InboxList>(&everything())
                .await
                .map(|l| l.messages)
                .unwrap_or_default(),
        ),
        None => Default::default(),
    };
    let mut rows = Vec::new();
    for remote in &config.hub.remotes {
        for (name, path) in remote.named_kilns() {
            let seen = status.as_ref().and_then(|s| {
                s.components
                    .iter()
                    .find(|c| c.name == format!("kiln {name}"))
            });
            let (state, error) = match seen.map(|c| c.state) {
                Some(ComponentState::On) => ("connected", None),
                Some(_) => ("lost", seen.and_then(|c| c.error.clone())),
                None => ("remote", None),
            };
            let connected = state == "connected";
            let here = |kiln: &Option<String>| kiln.as_deref() == Some(name.as_str());
            rows.push(KilnRow {
                sessions: connected.then(|| sessions.iter().filter(|s| here(&s.kiln)).count()),
                waiting: connected
                    .then(|| inbox.iter().filter(|m| here(&m.kiln) && waiting(m)).count()),
                name,
                path: path.display().to_string(),
                host: Some(remote.host().to_string()),
                state,
                pid: None,
                error,
            });
        }
    }
    rows
}

/// A running kiln's sessions and waiting questions.
async fn counts(entry: &KilnEntry) -> anyhow::Result<(usize, usize)> {
    let client = Client::connect(&entry.kiln()).await?;
    let sessions = client
        .call::<m::SessionList>(&SessionListParams::default())
        .await?;
    let inbox = client.call::<m::InboxList>(&everything()).await?;
    let waiting = inbox.messages.iter().filter(|m| waiting(m)).count();
    Ok((sessions.sessions.len(), waiting))
}

/// Every message of a kiln's inbox, read ones too.
fn everything() -> ListParams {
    ListParams {
        unread_only: false,
        limit: Some(crate::config::MAX_LIST_LIMIT),
        session_id: None,
    }
}

/// Whether a message still waits for someone's answer.
pub(crate) fn waiting(m: &InboxMessage) -> bool {
    m.msg_type.blocks() && !m.responded && !m.withdrawn
}

/// A registered kiln reached (its daemon started if it rests), or why not.
pub(crate) struct Reached {
    pub entry: KilnEntry,
    pub client: anyhow::Result<Client>,
}

/// Every registered kiln whose folder is there, each connected to; a resting kiln's
/// daemon is started when `start` says so, as any command acting on a kiln does.
pub(crate) async fn reach_all(start: bool) -> anyhow::Result<Vec<Reached>> {
    Ok(reach(Registry::for_user()?.entries()?, start).await)
}

/// [`reach_all`], for the registered kilns `entries`.
pub(crate) async fn reach(entries: Vec<KilnEntry>, start: bool) -> Vec<Reached> {
    let reaching = entries
        .into_iter()
        .map(|entry| (entry.state(), entry))
        .filter(|(state, _)| *state != KilnState::Missing)
        .map(|(state, entry)| async move {
            let kiln = entry.kiln();
            let client = match state {
                KilnState::Running { .. } => Client::connect(&kiln).await.map_err(Into::into),
                _ if start => super::connect(&kiln).await,
                _ => Err(anyhow::anyhow!("its daemon is not running")),
            };
            Reached { entry, client }
        });
    futures::future::join_all(reaching).await
}

/// Says on standard error which kilns could not be reached.
pub(crate) fn warn_unreached(reached: &[Reached]) {
    for r in reached {
        if let Err(e) = &r.client {
            eprintln!(
                "warning: kiln {} ({}) left out: {e:#}",
                r.entry.name,
                r.entry.path.display()
            );
        }
    }
}
