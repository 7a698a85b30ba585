//! A person on Matrix, for the Matrix tests: a real Matrix client (matrix-sdk, the SDK
//! crucible's Matrix channel is built on) with its own SQLite state and crypto store in a
//! temp folder, so end-to-end encryption works as in any other client. Once logged in it
//! syncs in the background, to the end, reconnecting when the homeserver goes away, and
//! keeps everything it receives: room messages (decrypted), reactions, edits and thread
//! replies, in the order they came. Messages it could not decrypt are kept apart, for a
//! failure's message. `Human::login_strict` makes the client Element makes since it
//! excludes insecure devices: it talks only to devices their owner cross-signed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use matrix_sdk::config::SyncSettings;
use matrix_sdk::deserialized_responses::EncryptionInfo;
use matrix_sdk::encryption::EncryptionSettings;
use matrix_sdk::ruma::api::client::room::create_room;
use matrix_sdk::ruma::api::client::room::get_room_event;
use matrix_sdk::ruma::events::InitialStateEvent;
use matrix_sdk::ruma::events::reaction::{OriginalSyncReactionEvent, ReactionEventContent};
use matrix_sdk::ruma::events::relation::Annotation;
use matrix_sdk::ruma::events::room::encrypted::OriginalSyncRoomEncryptedEvent;
use matrix_sdk::ruma::events::room::encryption::RoomEncryptionEventContent;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::{
    MessageType, OriginalSyncRoomMessageEvent, Relation as MessageRelation, RoomMessageEventContent,
};
use matrix_sdk::ruma::{EventId, OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use matrix_sdk::{Client, ClientBuilder, Room};
use matrix_sdk_crypto::{CollectStrategy, DecryptionSettings, TrustRequirement};

/// How long a sync request may wait on the homeserver for something new.
const SYNC_WAIT: Duration = Duration::from_secs(5);

/// What an event says about another event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relation {
    None,
    /// A reply (`m.in_reply_to`) outside a thread.
    Reply {
        to: OwnedEventId,
    },
    /// A message in the thread whose first message is `root`.
    InThread {
        root: OwnedEventId,
    },
    /// A reaction (`m.annotation`) with `key` to `target`.
    Reaction {
        key: String,
        target: OwnedEventId,
    },
    /// An edit (`m.replace`) of `original`.
    Replaces {
        original: OwnedEventId,
    },
}

/// One event as the person received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub room: OwnedRoomId,
    pub event_id: OwnedEventId,
    pub sender: OwnedUserId,
    /// `m.text`, `m.notice`, … for a message; `m.reaction` for a reaction.
    pub msgtype: String,
    /// The plain text: for an edit the new text, for a reaction its key.
    pub body: String,
    /// The HTML version, if the message has one.
    pub formatted: Option<String>,
    pub relation: Relation,
    /// Whether it came end-to-end encrypted (and was decrypted).
    pub encrypted: bool,
}

#[derive(Default)]
struct Seen {
    received: Vec<Received>,
    /// `room event` of each message that stayed encrypted.
    undecryptable: Vec<String>,
}

pub struct Human {
    client: Client,
    seen: Arc<Mutex<Seen>>,
    sync: tokio::task::JoinHandle<()>,
    _store: tempfile::TempDir,
}

impl Human {
    /// Logs `user` in on the homeserver at `homeserver_url` as a new device, syncs once
    /// (which publishes the device's keys) and goes on syncing in the background. The
    /// client trusts as the SDK does by default: it shares room keys with every device and
    /// decrypts from any.
    pub async fn login(homeserver_url: &str, user: &str, password: &str) -> Human {
        Self::login_with(homeserver_url, user, password, |b| b).await
    }

    /// Logs `user` in as Element (Web, Desktop, X) does since it excludes insecure devices
    /// (MSC4153): room keys go only to devices their owner has cross-signed (the
    /// identity-based recipient strategy), messages decrypt only when the sender's device
    /// is cross-signed (`TrustRequirement::CrossSigned`), and the person's own
    /// cross-signing identity is made at login (with the password) and signs this device.
    /// Panics unless this device ends up cross-signed.
    pub async fn login_strict(homeserver_url: &str, user: &str, password: &str) -> Human {
        let human = Self::login_with(homeserver_url, user, password, |builder| {
            builder
                .with_room_key_recipient_strategy(CollectStrategy::IdentityBasedStrategy)
                .with_decryption_settings(DecryptionSettings {
                    sender_device_trust_requirement: TrustRequirement::CrossSigned,
                })
                .with_encryption_settings(EncryptionSettings {
                    auto_enable_cross_signing: true,
                    ..EncryptionSettings::default()
                })
        })
        .await;
        let encryption = human.client.encryption();
        encryption.wait_for_e2ee_initialization_tasks().await;
        let status = encryption.cross_signing_status().await;
        assert!(
            status.as_ref().is_some_and(|s| s.is_complete()),
            "{user}'s cross-signing identity was not made at login: {status:?}"
        );
        // The device's copy with the new signature comes back from the homeserver.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let own = encryption
                .get_own_device()
                .await
                .expect("the crypto store")
                .expect("the own device");
            if own.is_cross_signed_by_owner() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{user}'s identity did not sign its device {}",
                own.device_id()
            );
            let _ = encryption.request_user_identity(&human.user_id()).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        human
    }

    async fn login_with(
        homeserver_url: &str,
        user: &str,
        password: &str,
        configure: impl FnOnce(ClientBuilder) -> ClientBuilder,
    ) -> Human {
        let store = tempfile::tempdir().expect("temp dir");
        let builder = Client::builder()
            .homeserver_url(homeserver_url)
            .sqlite_store(store.path(), None);
        let client = configure(builder).build().await.expect("a Matrix client");
        client
            .matrix_auth()
            .login_username(user, password)
            .initial_device_display_name("a person's client")
            .await
            .unwrap_or_else(|e| panic!("{user} logs in: {e}"));
        let seen = Arc::new(Mutex::new(Seen::default()));
        keep_what_arrives(&client, &seen);
        client
            .sync_once(SyncSettings::default())
            .await
            .unwrap_or_else(|e| panic!("{user}'s first sync: {e}"));
        let sync = tokio::spawn(sync_forever(client.clone()));
        Human {
            client,
            seen,
            sync,
            _store: store,
        }
    }

    /// How this person's client sees another device: whether its owner cross-signed it
    /// and whether it is verified (for a failure's message).
    pub async fn device_trust(&self, user: &str, device: &str) -> String {
        let user = UserId::parse(user).expect("a user id");
        let device_id = matrix_sdk::ruma::OwnedDeviceId::from(device);
        match self.client.encryption().get_device(&user, &device_id).await {
            Ok(Some(d)) => format!(
                "{user}'s device {device}: cross-signed by its owner: {}, verified: {}",
                d.is_cross_signed_by_owner(),
                d.is_verified()
            ),
            Ok(None) => format!("{user}'s device {device} is unknown to {}", self.user_id()),
            Err(e) => format!("{user}'s device {device}: {e}"),
        }
    }

    pub fn user_id(&self) -> OwnedUserId {
        self.client.user_id().expect("logged in").to_owned()
    }

    /// The SDK's client, for what this type does not do.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates a private room with end-to-end encryption from its first event
    /// (`m.room.encryption` in its initial state) and invites `invite`; `direct` makes it a
    /// direct chat (`is_direct`, and recorded in the creator's `m.direct`).
    pub async fn create_encrypted_room(&self, invite: &[&str], direct: bool) -> OwnedRoomId {
        let mut request = create_room::v3::Request::new();
        request.invite = invite
            .iter()
            .map(|u| UserId::parse(*u).expect("a user id"))
            .collect();
        request.is_direct = direct;
        request.preset = Some(create_room::v3::RoomPreset::PrivateChat);
        request.initial_state = vec![
            InitialStateEvent::with_empty_state_key(
                RoomEncryptionEventContent::with_recommended_defaults(),
            )
            .to_raw_any(),
        ];
        let room = self
            .client
            .create_room(request)
            .await
            .expect("create a room");
        room.room_id().to_owned()
    }

    /// Joins `room` (one it was invited to).
    pub async fn join(&self, room: &RoomId) {
        self.client
            .join_room_by_id(room)
            .await
            .unwrap_or_else(|e| panic!("{} joins {room}: {e}", self.user_id()));
    }

    /// Waits until this person's client has seen `user` join `room`.
    pub async fn wait_until_joined(&self, room: &RoomId, user: &str, timeout: Duration) {
        let user = UserId::parse(user).expect("a user id");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(room) = self.client.get_room(room)
                && let Ok(Some(member)) = room.get_member_no_sync(&user).await
                && *member.membership() == MembershipState::Join
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not see {user} join {room} within {timeout:?}",
                self.user_id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The room as this person's client knows it (it is in it, or was invited).
    pub fn room(&self, room: &RoomId) -> Room {
        self.client
            .get_room(room)
            .unwrap_or_else(|| panic!("{} does not know room {room}", self.user_id()))
    }

    /// Sends a message; in an encrypted room it is encrypted for every device of every
    /// member (the SDK fetches the member list and their devices first).
    pub async fn send(&self, room: &RoomId, content: RoomMessageEventContent) -> OwnedEventId {
        self.room(room)
            .send(content)
            .await
            .unwrap_or_else(|e| panic!("{} sends to {room}: {e}", self.user_id()))
            .response
            .event_id
    }

    /// Sends a plain text message.
    pub async fn send_text(&self, room: &RoomId, text: &str) -> OwnedEventId {
        self.send(room, RoomMessageEventContent::text_plain(text))
            .await
    }

    /// Reacts to `event` with `key` (an emoji). The SDK sends reactions unencrypted, even
    /// in an encrypted room.
    pub async fn react(&self, room: &RoomId, event: &EventId, key: &str) -> OwnedEventId {
        let content = ReactionEventContent::new(Annotation::new(event.to_owned(), key.into()));
        self.room(room)
            .send(content)
            .await
            .unwrap_or_else(|e| panic!("{} reacts in {room}: {e}", self.user_id()))
            .response
            .event_id
    }

    /// The event as the homeserver keeps it (what went over the wire: still encrypted
    /// when it was sent encrypted).
    pub async fn server_copy(&self, room: &RoomId, event: &EventId) -> serde_json::Value {
        let response = self
            .client
            .send(get_room_event::v3::Request::new(
                room.to_owned(),
                event.to_owned(),
            ))
            .await
            .unwrap_or_else(|e| panic!("fetch {event} from the homeserver: {e}"));
        serde_json::from_str(response.event.json().get()).expect("an event in JSON")
    }

    /// Everything received so far, oldest first (this person's own messages included).
    pub fn all_received(&self) -> Vec<Received> {
        self.seen.lock().unwrap().received.clone()
    }

    /// Waits for an event in `room` that `wanted` accepts (the first one, if it came
    /// already); panics with everything received so far when none comes within `timeout`.
    pub async fn wait_for_message(
        &self,
        room: &RoomId,
        wanted: impl Fn(&Received) -> bool,
        timeout: Duration,
    ) -> Received {
        self.try_wait_for_message(room, wanted, timeout)
            .await
            .unwrap_or_else(|why| panic!("{why}"))
    }

    /// As `wait_for_message`, but when none comes, says so (with everything received so
    /// far and what stayed encrypted) instead of panicking.
    pub async fn try_wait_for_message(
        &self,
        room: &RoomId,
        wanted: impl Fn(&Received) -> bool,
        timeout: Duration,
    ) -> Result<Received, String> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let seen = self.seen.lock().unwrap();
                if let Some(found) = seen.received.iter().find(|r| r.room == room && wanted(r)) {
                    return Ok(found.clone());
                }
                if Instant::now() >= deadline {
                    let mut all = String::new();
                    for r in &seen.received {
                        all.push_str(&format!("\n  {r:?}"));
                    }
                    return Err(format!(
                        "{} did not receive the awaited event in {room} within {timeout:?}; \
                         received:{all}\nundecryptable: {:?}",
                        self.user_id(),
                        seen.undecryptable
                    ));
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Human {
    fn drop(&mut self) {
        self.sync.abort();
    }
}

/// Event handlers that keep messages, reactions and messages that stayed encrypted.
fn keep_what_arrives(client: &Client, seen: &Arc<Mutex<Seen>>) {
    let kept = seen.clone();
    client.add_event_handler(
        move |event: OriginalSyncRoomMessageEvent, room: Room, info: Option<EncryptionInfo>| {
            let kept = kept.clone();
            async move {
                let received = message(event, room.room_id(), info.is_some());
                kept.lock().unwrap().received.push(received);
            }
        },
    );
    let kept = seen.clone();
    client.add_event_handler(
        move |event: OriginalSyncReactionEvent, room: Room, info: Option<EncryptionInfo>| {
            let kept = kept.clone();
            async move {
                let annotation = event.content.relates_to;
                kept.lock().unwrap().received.push(Received {
                    room: room.room_id().to_owned(),
                    event_id: event.event_id,
                    sender: event.sender,
                    msgtype: "m.reaction".into(),
                    body: annotation.key.clone(),
                    formatted: None,
                    relation: Relation::Reaction {
                        key: annotation.key,
                        target: annotation.event_id,
                    },
                    encrypted: info.is_some(),
                });
            }
        },
    );
    let kept = seen.clone();
    client.add_event_handler(move |event: OriginalSyncRoomEncryptedEvent, room: Room| {
        let kept = kept.clone();
        async move {
            let id = format!("{} {}", room.room_id(), event.event_id);
            kept.lock().unwrap().undecryptable.push(id);
        }
    });
}

fn message(event: OriginalSyncRoomMessageEvent, room: &RoomId, encrypted: bool) -> Received {
    let content = event.content;
    let (msgtype, relation) = match content.relates_to {
        Some(MessageRelation::Replacement(replacement)) => (
            replacement.new_content.msgtype,
            Relation::Replaces {
                original: replacement.event_id,
            },
        ),
        Some(MessageRelation::Thread(thread)) => (
            content.msgtype,
            Relation::InThread {
                root: thread.event_id,
            },
        ),
        Some(MessageRelation::Reply(reply)) => (
            content.msgtype,
            Relation::Reply {
                to: reply.in_reply_to.event_id,
            },
        ),
        _ => (content.msgtype, Relation::None),
    };
    let formatted = match &msgtype {
        MessageType::Text(m) => m.formatted.as_ref(),
        MessageType::Notice(m) => m.formatted.as_ref(),
        MessageType::Emote(m) => m.formatted.as_ref(),
        _ => None,
    }
    .map(|f| f.body.clone());
    Received {
        room: room.to_owned(),
        event_id: event.event_id,
        sender: event.sender,
        msgtype: msgtype.msgtype().to_string(),
        body: msgtype.body().to_string(),
        formatted,
        relation,
        encrypted,
    }
}

/// Syncs until the task is aborted; while the homeserver is away, tries again every
/// tenth of a second.
async fn sync_forever(client: Client) {
    loop {
        if client
            .sync_once(SyncSettings::default().timeout(SYNC_WAIT))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
