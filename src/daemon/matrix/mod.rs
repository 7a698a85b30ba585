//! The Matrix channel (`[channels.matrix]`) as a component of the daemon. The daemon logs
//! in as a bot account with end-to-end encryption; its device, keys and room state live
//! under `.crucible/matrix/` (owner-only), so a restarted daemon keeps its device and
//! goes on decrypting. A message from an allowed user in a room it joined continues the
//! room's session, or starts one (the same resolution as webhooks: reset phrases,
//! timeout, closed, drift); the agent's reply comes back to the room, long output in a
//! thread. Approvals and questions are posted where they can be answered: in the
//! session's room, or for cron and webhook sessions in their `approval_target`. Only
//! allowed users' messages, reactions and invites count. A homeserver that goes away is
//! tried again with backoff while the rest of the daemon works. A bot account another
//! kiln's running daemon answers is not run here ([`claim`]): each message is answered
//! once. The bot cross-signs its own device at login ([`account`]), so clients that talk
//! only to devices their owner signed (Element) talk to it, and an allowed user can verify
//! it by emoji, confirmed by the person's word only ([`verify`]). Commands begin with `!`
//! (or `/` where a client passes it); questions mention the allowed users; an upgraded
//! room's conversation goes on in its successor ([`upgrade`]). Run by the person's hub
//! for every kiln, it keeps each room's conversation in the kiln the room is mapped to
//! ([`mapping`]) and names the kiln of each question it posts.

mod account;
mod approvals;
mod claim;
mod commands;
mod inbound;
mod mapping;
mod mentions;
mod outage;
mod outbound;
mod upgrade;
mod verify;
mod wording;

use std::any::Any;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use matrix_sdk::Client;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId};
use tokio::task::JoinHandle;

use super::caller::Caller;
use super::components::Component;
use super::door::{Door, Starts};
use super::error::DaemonError;
use super::matrix_share::MatrixShare;
use crate::config::{Config, MatrixConfig};
use crate::protocol::methods::{self as m, Method};
use crate::protocol::{
    ChannelKind, ComponentState, ComponentStatus, ErrorObject, MatrixStatus, Session,
    SessionIdParams,
};

/// The conversation key's source: a room's session is keyed by (`matrix`, `room`, the
/// room's id).
const SOURCE: &str = "room";

/// How long one sync waits for news at the homeserver.
const SYNC_WAIT: Duration = Duration::from_secs(30);
/// The longest pause between attempts to reach a homeserver that is away.
const MOST_BACKOFF: Duration = Duration::from_secs(60);

/// What `daemon.status` shows of the channel, kept up to date by the running bot, and
/// the verification waiting for the person's word; the component shares it.
type StatusCell = Arc<MatrixShare>;

pub(super) struct Matrix {
    door: Door,
    folder: PathBuf,
    config: Option<MatrixConfig>,
    task: Option<JoinHandle<()>>,
    status: StatusCell,
    /// The bot account's claim while this daemon runs the bot (given back when dropped).
    claim: Option<claim::Held>,
    /// Why this daemon does not run the bot: another kiln's daemon answers it.
    refused: Option<String>,
}

impl Starts for Matrix {
    fn start(door: &Door, config: &Config) -> Result<Self, DaemonError> {
        let mut matrix = Self {
            door: door.clone(),
            folder: door.kiln().state_dir().join("matrix"),
            config: None,
            task: None,
            status: StatusCell::default(),
            claim: None,
            refused: None,
        };
        matrix.follow(config.channels.matrix.clone());
        Ok(matrix)
    }
}

impl Matrix {
    /// Runs the bot `config` describes, in place of the one there was.
    fn follow(&mut self, config: Option<MatrixConfig>) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        // The bot it replaces gives its account back.
        self.claim = None;
        self.refused = None;
        *self.status.status_mut() = config.as_ref().map(|c| MatrixStatus {
            user_id: c.user_id.clone(),
            homeserver: c.homeserver.clone(),
            ..Default::default()
        });
        if let Some(config) = &config {
            match claim::take(&self.door, &self.folder, config) {
                claim::Claim::Serve(held) => self.claim = held,
                claim::Claim::Refused { holder, refusal } => {
                    tracing::warn!("matrix channel not started: {refusal}");
                    if let Some(status) = self.status.status_mut().as_mut() {
                        status.error = Some(refusal.clone());
                    }
                    self.refused = Some(refusal.clone());
                    let said = claim::say(self.door.clone(), self.folder.clone(), holder, refusal);
                    self.task = Some(tokio::spawn(said));
                    self.config = Some(config.clone());
                    return;
                }
            }
            tracing::info!(user = %config.user_id, homeserver = %config.homeserver, "matrix channel starting");
            let setup = Setup {
                config: config.clone(),
                folder: self.folder.clone(),
                door: self.door.clone(),
                status: Arc::clone(&self.status),
            };
            self.task = Some(tokio::spawn(run(setup)));
        }
        self.config = config;
    }
}

impl Component for Matrix {
    fn name(&self) -> &'static str {
        "matrix"
    }

    fn reconfigure(&mut self, config: &Config) -> Option<String> {
        if config.channels.matrix != self.config {
            self.follow(config.channels.matrix.clone());
        }
        None
    }

    /// Messages may arrive at any time (unless another kiln answers them).
    fn keeps_daemon_up(&self) -> bool {
        self.config.is_some() && self.refused.is_none()
    }

    fn status(&self) -> Option<ComponentStatus> {
        let status = self.status.status();
        Some(match status {
            None => ComponentStatus {
                name: self.name().into(),
                state: ComponentState::Off,
                detail: "no [channels.matrix] in the settings".into(),
                error: None,
            },
            Some(status) => {
                let mut shown = status_of(self.name(), status);
                if self.refused.is_some() {
                    shown
                        .detail
                        .push_str(": another kiln's daemon answers the bot");
                }
                shown
            }
        })
    }

    fn shares(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(Arc::clone(&self.status) as Arc<dyn Any + Send + Sync>)
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.claim = None;
    }
}

/// The channel's state as a component's: logged in as whom, its device and rooms, the
/// last error.
fn status_of(name: &str, status: MatrixStatus) -> ComponentStatus {
    let state = match (status.logged_in, &status.error) {
        (_, Some(_)) => ComponentState::Failing,
        (true, None) => ComponentState::On,
        (false, None) => ComponentState::Starting,
    };
    let who = format!("{} on {}", status.user_id, status.homeserver);
    let detail = match (status.logged_in, &status.device_id) {
        (true, Some(device)) => format!(
            "logged in as {who}, device {device}, {} rooms",
            status.rooms
        ),
        (true, None) => format!("logged in as {who}, {} rooms", status.rooms),
        (false, _) => format!("not logged in as {who}"),
    };
    ComponentStatus {
        name: name.into(),
        state,
        detail,
        error: status.error,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the running bot is made with.
struct Setup {
    config: MatrixConfig,
    folder: PathBuf,
    door: Door,
    status: StatusCell,
}

/// The logged-in bot, shared by its event handlers and its posting.
pub(super) struct Bot {
    client: Client,
    config: MatrixConfig,
    own: OwnedUserId,
    /// The daemon's methods, called for the room's users (the bot's own reads as itself).
    door: Door,
    status: StatusCell,
    /// Questions posted in rooms, and whether they are answered.
    posted: approvals::Posted,
    /// The rooms mapped to kilns by `!kiln NAME` (through the hub).
    chosen: mapping::Chosen,
    /// Who was ignored (logged once each), and the rooms told once that a message could
    /// not be decrypted.
    told: Mutex<HashSet<String>>,
}

impl Bot {
    /// Whether `key` is new to the set of things said once.
    fn first_time(&self, key: String) -> bool {
        lock(&self.told).insert(key)
    }

    fn set_status(&self, change: impl FnOnce(&mut MatrixStatus)) {
        if let Some(status) = self.status.status_mut().as_mut() {
            change(status);
        }
    }

    /// The rooms the bot is in, for the status.
    fn note_rooms(&self) {
        let rooms = self.client.joined_rooms().len();
        self.set_status(|s| s.rooms = rooms);
    }

    /// Calls method `M` as `who` (a Matrix user id) in the channel.
    async fn call_as<M: Method>(
        &self,
        who: &str,
        params: &M::Params,
    ) -> Result<M::Result, ErrorObject> {
        self.door
            .call::<M>(Caller::channel(ChannelKind::Matrix, who), params)
            .await
    }

    /// Calls method `M` as the bot itself (what it reads to post).
    async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, ErrorObject> {
        self.call_as::<M>(self.own.as_str(), params).await
    }

    /// A session as the daemon has it now.
    async fn session(&self, session_id: &str) -> Option<Session> {
        let asked = SessionIdParams {
            session_id: session_id.to_string(),
        };
        Some(self.call::<m::SessionGet>(&asked).await.ok()?.session)
    }

    /// The room a session talks in, if a room started it.
    async fn room_of_session(&self, session_id: &str) -> Option<OwnedRoomId> {
        room_of_tag(&self.session(session_id).await?)
    }
}

/// The room a session talks in, if a room started it.
fn room_of_tag(session: &Session) -> Option<OwnedRoomId> {
    let tag = session.channel.as_ref()?;
    (tag.kind == ChannelKind::Matrix)
        .then(|| OwnedRoomId::try_from(tag.reference.as_str()).ok())
        .flatten()
}

/// Logs in (or restores the stored device) and serves, again after each failure, with
/// a growing pause.
async fn run(setup: Setup) {
    let mut pause = Duration::from_secs(1);
    let mut login = outage::Outage::new("login");
    loop {
        match account::connect(&setup.config, &setup.folder).await {
            Ok(connected) => {
                pause = Duration::from_secs(1);
                login.worked();
                serve(connected, &setup).await;
            }
            Err(e) => {
                login.failed(&e);
                if let Some(status) = setup.status.status_mut().as_mut() {
                    status.error = Some(e.to_string());
                    status.logged_in = false;
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MOST_BACKOFF);
    }
}

/// Syncs until the stored login stops working; answers rooms through the event
/// handlers and posts what sessions say.
async fn serve(connected: account::Connected, setup: &Setup) {
    let client = connected.client;
    let Some(own) = client.user_id().map(ToOwned::to_owned) else {
        return;
    };
    // A new device skips what was said before the bot was there.
    if connected.fresh {
        let mut pause = Duration::from_secs(1);
        let mut first = outage::Outage::new("first sync");
        while let Err(e) = client.sync_once(SyncSettings::default()).await {
            if account::is_logged_out(&e) {
                account::forget(&setup.folder);
                return;
            }
            first.failed(&e);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MOST_BACKOFF);
        }
        first.worked();
    }
    let bot = Arc::new(Bot {
        client: client.clone(),
        config: setup.config.clone(),
        own,
        door: setup.door.clone(),
        status: Arc::clone(&setup.status),
        posted: approvals::Posted::load(&setup.folder),
        chosen: mapping::Chosen::load(&setup.folder),
        told: Mutex::new(HashSet::new()),
    });
    let signing = account::cross_sign(&client, &setup.config).await;
    if let Err(e) = &signing {
        tracing::warn!(
            "matrix: {e}; clients that exclude unsigned devices (Element) will not talk to the bot"
        );
    }
    let cross_signed = account::own_device_signed(&client).await;
    let fingerprint = client.encryption().ed25519_key().await;
    bot.set_status(|s| {
        s.logged_in = true;
        s.device_id = client.device_id().map(|d| d.to_string());
        s.error = None;
        s.cross_signed = cross_signed;
        s.fingerprint = fingerprint.clone();
    });
    tracing::info!(
        user = %bot.own,
        device = client.device_id().map(|d| d.to_string()).unwrap_or_default(),
        cross_signed,
        "matrix: the bot is logged in"
    );
    inbound::listen(&bot);
    verify::listen(&bot);
    // Stopped with this task (a new `[channels.matrix]`, the daemon stopping).
    let _posting = AbortOnDrop(tokio::spawn(outbound::follow(Arc::clone(&bot))));
    let mut pause = Duration::from_secs(1);
    let mut syncing = outage::Outage::new("sync");
    loop {
        match client
            .sync_once(SyncSettings::default().timeout(SYNC_WAIT))
            .await
        {
            Ok(_) => {
                pause = Duration::from_secs(1);
                syncing.worked();
                bot.note_rooms();
                bot.set_status(|s| {
                    s.last_sync = Some(crate::text::now_rfc3339());
                    s.error = None;
                });
            }
            Err(e) => {
                if account::is_logged_out(&e) {
                    tracing::warn!("matrix: the homeserver ended the login: {e}");
                    account::forget(&setup.folder);
                    return;
                }
                let wait = account::retry_after(&e).unwrap_or(pause);
                syncing.failed(&e);
                bot.set_status(|s| s.error = Some(e.to_string()));
                tokio::time::sleep(wait).await;
                pause = (pause * 2).min(MOST_BACKOFF);
            }
        }
    }
}

/// A task that ends when its owner is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
