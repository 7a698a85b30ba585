//! Team mode: several daemons share one SurrealDB server.
//!
//! - Every daemon is an instance (host, kiln, pid, start time) with a record in `daemons`
//!   and a lease it renews; the sessions it runs name it as their `owner`. A daemon
//!   drives only its own agents.
//! - Changes travel between daemons through the database: live queries on sessions,
//!   inbox messages, transcript entries, commands and daemons become this daemon's
//!   events (its own writes, marked with its `origin`, are skipped). When the live
//!   queries break they are started again, and clients are told to read the state again.
//! - A call for a session another daemon runs (a prompt, a stop…) is written to
//!   `commands` for that daemon, which runs it and writes the answer back.
//! - When a daemon's lease runs out, one other daemon claims its sessions (one claim
//!   wins, in one transaction) and marks their agents lost; a new daemon on the same kiln
//!   and host claims them at once and resumes them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;

use super::Ledger;
use super::error::Result;
use crate::config::StoreConfig;
use crate::kiln::Kiln;
use crate::protocol::{DaemonInfo, Event, InboxMessage, Session, TranscriptEntry};
use crate::store::{CommandRecord, LiveChange, LiveTable, Store, StoreError};
use crate::text::now_rfc3339;

mod forward;
mod live;
use live::listen;

/// How long a call forwarded to another daemon may take before the caller is told.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);
/// Slack after a lease runs out (by this daemon's clock) before the claim is tried; the
/// server's clock decides whether it succeeds.
const CLAIM_SLACK: Duration = Duration::from_secs(1);
/// Records of daemons whose sessions were taken over are dropped after this long.
const TAKEN_RECORD_TTL: &str = "1d";
/// Waits between attempts to start the live queries again: doubling up to the last.
const LIVE_BACKOFF: [u64; 5] = [250, 500, 1000, 2000, 5000];

/// This daemon, as the others see it: a new instance id at every start.
pub fn instance(kiln: &Kiln) -> DaemonInfo {
    DaemonInfo {
        id: ulid::Ulid::new().to_string(),
        host: crate::sys::host_name(),
        kiln: kiln.root().display().to_string(),
        pid: std::process::id(),
        started_at: now_rfc3339(),
        lease_until: String::new(),
        taken_by: None,
        live: true,
    }
}

/// Sessions this daemon took over from another.
pub struct Takeover {
    /// The daemon they belonged to.
    pub from: DaemonInfo,
    pub sessions: Vec<Session>,
}

struct Known {
    info: DaemonInfo,
    /// When this daemon last saw it renew (or first saw it).
    seen: Instant,
}

pub(super) struct Team {
    lease: Duration,
    daemons: Mutex<HashMap<String, Known>>,
    /// Wakes the watchdog when the daemons change.
    changed: Notify,
    waiters: Mutex<HashMap<String, oneshot::Sender<CommandRecord>>>,
    /// Commands for this daemon already handed to it.
    started: Mutex<HashSet<String>>,
    commands: mpsc::UnboundedSender<CommandRecord>,
    commands_rx: Mutex<Option<mpsc::UnboundedReceiver<CommandRecord>>>,
    takeovers: mpsc::UnboundedSender<Takeover>,
    takeovers_rx: Mutex<Option<mpsc::UnboundedReceiver<Takeover>>>,
    /// Set when another daemon took this one's sessions over.
    fenced: watch::Sender<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Team {
    /// Records this daemon in the database and claims what is plainly its own: sessions
    /// of an earlier daemon on this kiln and host (we hold the kiln's lock, so it is
    /// gone), and sessions no daemon owns.
    pub(super) async fn join(
        store: &Store,
        me: &DaemonInfo,
        cfg: &StoreConfig,
    ) -> Result<Arc<Self>> {
        let lease = Duration::from_secs(cfg.lease_secs);
        store.team().register(me, lease).await?;
        if let Err(e) = store.team().forget_taken(TAKEN_RECORD_TTL).await {
            tracing::warn!("cannot drop old daemon records: {e}");
        }
        let mut daemons = HashMap::new();
        let now = Instant::now();
        for d in store.team().daemons().await? {
            if d.id == me.id || d.taken_by.is_some() {
                continue;
            }
            if d.host == me.host && d.kiln == me.kiln {
                // Resumed by the sessions manager's start, with the rest of its own.
                if let Some(sessions) = store.team().claim(&d.id, &me.id, true).await? {
                    tracing::info!(from = %d.id, count = sessions.len(), "took over the sessions of this kiln's previous daemon");
                }
                continue;
            }
            let seen = if d.live {
                now
            } else {
                now.checked_sub(lease).unwrap_or(now)
            };
            daemons.insert(d.id.clone(), Known { info: d, seen });
        }
        let unowned = store.team().claim_unowned(&me.id).await?;
        if !unowned.is_empty() {
            tracing::info!(count = unowned.len(), "took sessions no daemon owned");
        }
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (takeover_tx, takeovers_rx) = mpsc::unbounded_channel();
        let team = Arc::new(Self {
            lease,
            daemons: Mutex::new(daemons),
            changed: Notify::new(),
            waiters: Mutex::new(HashMap::new()),
            started: Mutex::new(HashSet::new()),
            commands,
            commands_rx: Mutex::new(Some(commands_rx)),
            takeovers: takeover_tx,
            takeovers_rx: Mutex::new(Some(takeovers_rx)),
            fenced: watch::channel(None).0,
        });
        Ok(team)
    }

    /// When the earliest lease of another live daemon runs out, by this daemon's clock.
    fn next_expiry(&self) -> Option<Instant> {
        lock(&self.daemons)
            .values()
            .filter(|k| k.info.taken_by.is_none())
            .map(|k| k.seen + self.lease + CLAIM_SLACK)
            .min()
    }

    fn expired(&self) -> Vec<DaemonInfo> {
        let now = Instant::now();
        lock(&self.daemons)
            .values()
            .filter(|k| k.info.taken_by.is_none() && k.seen + self.lease + CLAIM_SLACK <= now)
            .map(|k| k.info.clone())
            .collect()
    }

    fn saw(&self, info: DaemonInfo) {
        let mut daemons = lock(&self.daemons);
        let seen = Instant::now();
        daemons.insert(info.id.clone(), Known { info, seen });
        drop(daemons);
        self.changed.notify_one();
    }
}

impl Ledger {
    fn team(&self) -> Option<&Arc<Team>> {
        self.team.as_ref()
    }

    /// Whether this daemon shares its database with a team's other daemons.
    pub fn in_team(&self) -> bool {
        self.team.is_some()
    }

    /// This daemon's instance.
    pub fn instance(&self) -> &crate::protocol::DaemonInfo {
        &self.instance
    }

    /// Whether another daemon runs this session (team mode).
    pub fn is_foreign(&self, session: &Session) -> bool {
        self.team.is_some()
            && session
                .owner
                .as_deref()
                .is_some_and(|owner| owner != self.instance.id)
    }

    /// The other daemons sharing the database, as last seen (team mode).
    pub async fn daemons(&self) -> Vec<DaemonInfo> {
        if self.team.is_none() {
            return Vec::new();
        }
        match self.store.team().daemons().await {
            Ok(list) => list
                .into_iter()
                .filter(|d| d.id != self.instance.id)
                .collect(),
            Err(_) => match self.team() {
                Some(team) => lock(&team.daemons)
                    .values()
                    .map(|k| k.info.clone())
                    .collect(),
                None => Vec::new(),
            },
        }
    }

    /// Commands other daemons send this one; taken once, by the daemon that runs them.
    pub fn team_commands(&self) -> Option<mpsc::UnboundedReceiver<CommandRecord>> {
        self.team().and_then(|t| lock(&t.commands_rx).take())
    }

    /// Sessions taken over from daemons that went away; taken once, by the sessions
    /// manager, which resumes them or marks their agents lost.
    pub fn takeovers(&self) -> Option<mpsc::UnboundedReceiver<Takeover>> {
        self.team().and_then(|t| lock(&t.takeovers_rx).take())
    }

    /// Resolves when another daemon has taken this one's sessions over: this daemon must
    /// stop driving them. Never, outside team mode.
    pub async fn fenced(&self) -> String {
        let Some(team) = self.team() else {
            return std::future::pending().await;
        };
        let mut rx = team.fenced.subscribe();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

/// Starts the team's background work: the live queries, the lease, the watchdog that
/// takes over the sessions of daemons that went away, and the store's health reports.
pub(super) fn start(ledger: &Arc<Ledger>, team: &Arc<Team>) {
    tokio::spawn(listen(Arc::downgrade(ledger), Arc::clone(team)));
    tokio::spawn(keep_lease(Arc::downgrade(ledger), Arc::clone(team)));
    tokio::spawn(watchdog(Arc::downgrade(ledger), Arc::clone(team)));
    if let Some(health) = ledger.store.health() {
        tokio::spawn(report_health(Arc::downgrade(ledger), health));
    }
}

async fn keep_lease(ledger: Weak<Ledger>, team: Arc<Team>) {
    let every = team.lease / 3;
    loop {
        tokio::time::sleep(every).await;
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        match ledger
            .store
            .team()
            .renew_lease(&ledger.instance.id, team.lease)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                let why = "another daemon took this daemon's sessions over (its lease ran out)";
                tracing::error!("{why}");
                team.fenced.send_replace(Some(why.into()));
                return;
            }
            Err(e) => tracing::warn!("cannot renew this daemon's lease: {e}"),
        }
    }
}

async fn watchdog(ledger: Weak<Ledger>, team: Arc<Team>) {
    loop {
        if !super::registry::deadline_or_change(team.next_expiry(), &team.changed).await {
            continue;
        }
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        for gone in team.expired() {
            match ledger
                .store
                .team()
                .claim(&gone.id, &ledger.instance.id, false)
                .await
            {
                Ok(Some(sessions)) => {
                    tracing::info!(from = %gone.id, host = %gone.host, count = sessions.len(), "took over the sessions of a daemon whose lease ran out");
                    let mut taken = gone.clone();
                    taken.taken_by = Some(ledger.instance.id.clone());
                    taken.live = false;
                    team.saw(taken);
                    ledger.adopt(Takeover {
                        from: gone,
                        sessions,
                    });
                }
                Ok(None) => refresh(&ledger, &team, &gone).await,
                Err(e) => {
                    tracing::warn!(daemon = %gone.id, "cannot take over a silent daemon's sessions yet: {e}");
                    retry_soon(&team, &gone.id);
                }
            }
        }
    }
}

/// A claim that did not happen: the daemon renewed after all, or another took it.
async fn refresh(ledger: &Ledger, team: &Team, gone: &DaemonInfo) {
    match ledger.store.team().daemons().await {
        Ok(list) => match list.into_iter().find(|d| d.id == gone.id) {
            Some(d) if d.live || d.taken_by.is_some() => team.saw(d),
            Some(_) => retry_soon(team, &gone.id),
            None => {
                lock(&team.daemons).remove(&gone.id);
            }
        },
        Err(_) => retry_soon(team, &gone.id),
    }
}

fn retry_soon(team: &Team, id: &str) {
    if let Some(k) = lock(&team.daemons).get_mut(id) {
        let back = team.lease + CLAIM_SLACK - Duration::from_secs(1);
        k.seen = Instant::now()
            .checked_sub(back)
            .unwrap_or_else(Instant::now);
    }
    team.changed.notify_one();
}

async fn report_health(
    ledger: Weak<Ledger>,
    mut health: watch::Receiver<crate::protocol::StoreHealth>,
) {
    while health.changed().await.is_ok() {
        let status = health.borrow_and_update().clone();
        let Some(ledger) = ledger.upgrade() else {
            return;
        };
        ledger.publish(Event::Store(status));
    }
}

impl Ledger {
    /// Sessions claimed from a daemon that went away: shown as this daemon's, and handed
    /// to the sessions manager.
    fn adopt(&self, takeover: Takeover) {
        for session in &takeover.sessions {
            if !self.registry.update(session.clone()) {
                self.registry.insert(session.clone());
            }
            if let Some(view) = self.registry.get(&session.id) {
                self.publish(Event::SessionUpdated(view));
            }
        }
        if let Some(team) = self.team() {
            let _ = team.takeovers.send(takeover);
        }
    }
}
