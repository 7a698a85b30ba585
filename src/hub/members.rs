//! The kilns the hub reaches: one member per registered kiln, each with a connection to
//! its daemon (as an owner client named `hub`) that is subscribed to its events, and
//! connections named after the hub's own clients for their calls, so a kiln's audit says
//! who asked and that it came through the hub. A connection that drops is tried again
//! with backoff; a kiln whose daemon is not running rests until the registry changes
//! (its daemon started and recorded itself) or someone acts on it. The hub keeps no copy
//! of a kiln's state, only which kiln holds which session and message, to route calls.

mod index;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, broadcast, watch};

use super::road::Road;
use crate::client::{Client, ClientError, StartOptions, connect_or_start};
use crate::config::RemoteKilns;
use crate::kilns::{KilnEntry, Registry};
use crate::protocol::{Notification, Topic};
use index::Index;

/// The first wait before reaching a daemon again, doubled up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(250);
const MAX_DELAY: Duration = Duration::from_secs(5);
/// How many times a lost daemon is tried before its kiln rests.
const TRIES: u32 = 10;
/// The longest wait between two tries of a kiln on another machine, which never rests.
const MAX_REMOTE_DELAY: Duration = Duration::from_secs(30);
/// How long a call waits for a kiln's daemon it started to be reached.
const REACH_TIMEOUT: Duration = Duration::from_secs(30);

/// An event of some kiln, named with it, for the hub's subscribers.
#[derive(Debug, Clone)]
pub(super) struct Tagged {
    pub note: Arc<Notification>,
    /// Its topic; none for the hub's own notes, which every subscriber gets.
    pub topic: Option<Topic>,
}

/// How the hub reaches a kiln now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reach {
    Connected,
    /// Its daemon is not running; it is started when someone acts on the kiln.
    Resting,
    /// The connection dropped or failed, and is tried again.
    Lost(String),
}

impl Reach {
    pub(super) fn word(&self) -> &'static str {
        match self {
            Reach::Connected => "connected",
            Reach::Resting => "resting",
            Reach::Lost(_) => "lost",
        }
    }
}

/// One kiln the hub reaches.
pub(super) struct Member {
    road: Road,
    entry: Mutex<KilnEntry>,
    link: watch::Sender<Option<Arc<Client>>>,
    reach: Mutex<Reach>,
    wake: Notify,
    /// Connections for the hub's clients' calls, by the client's name.
    callers: tokio::sync::Mutex<HashMap<String, Arc<Client>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Member {
    pub(super) fn entry(&self) -> KilnEntry {
        lock(&self.entry).clone()
    }

    pub(super) fn name(&self) -> String {
        lock(&self.entry).name.clone()
    }

    pub(super) fn reach(&self) -> Reach {
        lock(&self.reach).clone()
    }

    /// The connection to its daemon, if it is reached now.
    pub(super) fn connected(&self) -> Option<Arc<Client>> {
        self.link.borrow().clone()
    }

    /// What tells this kiln apart from every other the hub reaches.
    pub(super) fn key(&self) -> String {
        self.road.key(&self.entry())
    }

    /// The machine it is on, when it is not this one.
    pub(super) fn host(&self) -> Option<&str> {
        self.road.host()
    }

    fn running(&self) -> bool {
        self.road.running(&self.entry())
    }

    /// A new connection to its daemon, named `name` there.
    async fn connect(&self, name: String) -> Result<Client, ClientError> {
        self.road.connect(&self.entry(), name).await
    }

    /// A connection for `caller`'s calls: named `{caller} via the hub` at the daemon.
    /// A resting kiln's daemon is started first.
    pub(super) async fn client_for(&self, caller: &str) -> Result<Arc<Client>, ClientError> {
        self.reached().await?;
        let mut callers = self.callers.lock().await;
        if let Some(client) = callers.get(caller) {
            return Ok(Arc::clone(client));
        }
        let client = Arc::new(self.connect(format!("{caller} via the hub")).await?);
        callers.insert(caller.to_string(), Arc::clone(&client));
        Ok(client)
    }

    /// Waits until the kiln's daemon is reached, starting it if it rests.
    async fn reached(&self) -> Result<(), ClientError> {
        if self.connected().is_some() {
            return Ok(());
        }
        if self.road.is_local() && !self.running() {
            connect_or_start(&self.entry().kiln(), &StartOptions::default()).await?;
        }
        self.wake.notify_one();
        let mut link = self.link.subscribe();
        match tokio::time::timeout(REACH_TIMEOUT, link.wait_for(Option::is_some)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(ClientError::Local(format!(
                "kiln {} was not reached: {}",
                self.name(),
                match self.reach() {
                    Reach::Lost(why) => why,
                    other => other.word().to_string(),
                }
            ))),
        }
    }

    fn set_reach(&self, reach: Reach, members: &Members) {
        let changed = {
            let mut now = lock(&self.reach);
            let changed = *now != reach;
            *now = reach;
            changed
        };
        if changed {
            members.kiln_changed(self);
        }
    }

    /// Keeps the kiln reached for as long as the hub runs.
    async fn keep(self: Arc<Self>, members: Arc<Members>) {
        let mut delay = FIRST_DELAY;
        let mut tries = 0;
        let remote = !self.road.is_local();
        loop {
            let running = self.running();
            if running {
                match self.subscribed().await {
                    Ok((client, notes)) => {
                        delay = FIRST_DELAY;
                        tries = 0;
                        self.follow(client, notes, &members).await;
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(kiln = %self.name(), "not reached: {e}");
                        if self.reach() != Reach::Resting || tries > 0 {
                            self.set_reach(Reach::Lost(e.to_string()), &members);
                        }
                    }
                }
            }
            if running && (remote || tries < TRIES) {
                tries += 1;
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = self.wake.notified() => {}
                }
                let most = if remote { MAX_REMOTE_DELAY } else { MAX_DELAY };
                delay = (delay * 2).min(most);
                continue;
            }
            self.set_reach(Reach::Resting, &members);
            self.wake.notified().await;
            delay = FIRST_DELAY;
            tries = 0;
        }
    }

    /// Forwards the daemon's events, named with the kiln, until the connection drops.
    async fn follow(
        &self,
        client: Arc<Client>,
        mut notes: tokio::sync::mpsc::UnboundedReceiver<Notification>,
        members: &Members,
    ) {
        self.link.send_replace(Some(client));
        self.set_reach(Reach::Connected, members);
        members.resync();
        while let Some(note) = notes.recv().await {
            members.forward(self, note);
        }
        self.link.send_replace(None);
        self.callers.lock().await.clear();
        let name = self.name();
        tracing::warn!(kiln = %name, "lost the kiln's daemon");
        self.set_reach(
            Reach::Lost("the daemon closed the connection".into()),
            members,
        );
        members.resync();
    }
}

type Subscribed = (
    Arc<Client>,
    tokio::sync::mpsc::UnboundedReceiver<Notification>,
);

impl Member {
    /// A connection named `hub`, subscribed to every event.
    async fn subscribed(&self) -> Result<Subscribed, ClientError> {
        let client = self.connect("hub".into()).await?;
        let notes = client.subscribe(None).await?;
        Ok((Arc::new(client), notes))
    }
}

/// Every kiln the hub reaches, and the events they send.
pub(super) struct Members {
    registry: Registry,
    members: Mutex<Vec<(Arc<Member>, tokio::task::JoinHandle<()>)>>,
    index: Mutex<Index>,
    events: broadcast::Sender<Tagged>,
}

impl Members {
    pub(super) fn new(registry: Registry) -> Arc<Self> {
        Arc::new(Self {
            registry,
            members: Mutex::default(),
            index: Mutex::default(),
            events: broadcast::channel(4096).0,
        })
    }

    pub(super) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Every kiln's events, from now on.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Tagged> {
        self.events.subscribe()
    }

    /// The members, ordered by name.
    pub(super) fn all(&self) -> Vec<Arc<Member>> {
        lock(&self.members)
            .iter()
            .map(|(m, _)| Arc::clone(m))
            .collect()
    }

    /// Reads the registry again: new kilns are reached, forgotten ones let go, and every
    /// resting one looked at again (its daemon may have just started).
    pub(super) fn refresh(self: &Arc<Self>) {
        let entries = match self.registry.entries() {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!("the kiln registry cannot be read: {e}");
                return;
            }
        };
        let mut members = lock(&self.members);
        members.retain(|(m, task)| {
            let kept = m.host().is_some() || entries.iter().any(|e| e.path == m.entry().path);
            if !kept {
                task.abort();
            }
            kept
        });
        for entry in entries {
            let same = |m: &Arc<Member>| m.host().is_none() && m.entry().path == entry.path;
            if let Some((member, _)) = members.iter().find(|(m, _)| same(m)) {
                *lock(&member.entry) = entry;
                member.wake.notify_one();
                continue;
            }
            members.push(self.start(Road::Local, entry));
        }
        members.sort_by_key(|(m, _)| m.name());
    }

    /// Reaches the kilns of other machines the person's settings name, named by their
    /// folder and host (`api@build`).
    pub(super) fn add_remotes(self: &Arc<Self>, remotes: &[RemoteKilns]) {
        let mut members = lock(&self.members);
        for remote in remotes {
            for (name, path) in remote.named_kilns() {
                let entry = KilnEntry {
                    name,
                    path,
                    socket: PathBuf::new(),
                    pid: 0,
                    started_at: String::new(),
                };
                members.push(self.start(Road::Ssh(remote.clone()), entry));
            }
        }
        members.sort_by_key(|(m, _)| m.name());
    }

    fn start(
        self: &Arc<Self>,
        road: Road,
        entry: KilnEntry,
    ) -> (Arc<Member>, tokio::task::JoinHandle<()>) {
        let member = Arc::new(Member {
            road,
            entry: Mutex::new(entry),
            link: watch::channel(None).0,
            reach: Mutex::new(Reach::Resting),
            wake: Notify::new(),
            callers: tokio::sync::Mutex::default(),
        });
        let task = tokio::spawn(Arc::clone(&member).keep(Arc::clone(self)));
        (member, task)
    }

    /// The member named `which` (its name, or its folder's path).
    pub(super) fn named(&self, which: &str) -> Option<Arc<Member>> {
        let all = self.all();
        let by_path = all
            .iter()
            .find(|m| m.entry().path == Path::new(which))
            .cloned();
        by_path.or_else(|| all.into_iter().find(|m| m.name() == which))
    }

    fn at(&self, key: &str) -> Option<Arc<Member>> {
        self.all().into_iter().find(|m| m.key() == key)
    }

    /// The kiln known to hold session `id`.
    pub(super) fn holding_session(&self, id: &str) -> Option<Arc<Member>> {
        let key = lock(&self.index).session(id)?;
        self.at(&key)
    }

    /// The kiln known to hold message `id`.
    pub(super) fn holding_message(&self, id: &str) -> Option<Arc<Member>> {
        let key = lock(&self.index).message(id)?;
        self.at(&key)
    }

    /// Remembers which kiln holds what an answer from `member` shows: its sessions and
    /// messages, wherever they are in it.
    pub(super) fn learn(&self, member: &Member, value: &Value) {
        let held_by = member.key();
        lock(&self.index).learn(&held_by, value);
    }

    fn forward(&self, member: &Member, note: Notification) {
        let mut note = note;
        let topic = topic_of(&note.method);
        if let Value::Object(params) = &mut note.params {
            lock(&self.index).note(&member.key(), &note.method, params);
            if note.method == "session.conflicts" {
                let pairs = match params.remove("pairs") {
                    Some(Value::Array(pairs)) => pairs,
                    _ => Vec::new(),
                };
                let all = lock(&self.index).radar_with(&member.key(), pairs);
                params.insert("pairs".into(), Value::Array(all));
            }
            params.insert("kiln".into(), member.name().into());
        }
        let _ = self.events.send(Tagged {
            note: Arc::new(note),
            topic,
        });
    }

    /// Tells every subscriber something of the hub's own (the Matrix bot's verification).
    #[cfg(feature = "matrix")]
    pub(super) fn tell(&self, note: Notification) {
        let _ = self.events.send(Tagged {
            note: Arc::new(note),
            topic: None,
        });
    }

    /// Tells subscribers to read everything again: a kiln came or went.
    fn resync(&self) {
        let note = Notification::new("events.lagged", serde_json::json!({"missed": 0}));
        let _ = self.events.send(Tagged {
            note: Arc::new(note),
            topic: None,
        });
    }

    /// Tells subscribers how a kiln is reached now (`hub.kiln`).
    fn kiln_changed(&self, member: &Member) {
        let entry = member.entry();
        let reach = member.reach();
        let mut params = serde_json::json!({
            "kiln": entry.name,
            "path": entry.path.display().to_string(),
            "host": member.host(),
            "state": reach.word(),
        });
        if let Reach::Lost(why) = &reach {
            params["error"] = why.clone().into();
            // A kiln that is away reports no conflicts until it is back.
            lock(&self.index).forget_radar(&member.key());
        }
        let _ = self.events.send(Tagged {
            note: Arc::new(Notification::new("hub.kiln", params)),
            topic: None,
        });
    }
}

/// The topic of a daemon's notification, by its method.
fn topic_of(method: &str) -> Option<Topic> {
    match method {
        "session.transcript" | "session.output" => Some(Topic::Transcript),
        m if m.starts_with("inbox.") => Some(Topic::Inbox),
        m if m.starts_with("session.") || m.starts_with("daemon.") => Some(Topic::Session),
        _ => None,
    }
}
