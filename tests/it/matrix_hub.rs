//! The person's one Matrix bot for every kiln, on a real Synapse: the bot is in the
//! person's own settings (HOME and the XDG folders in a temp folder) and their hub runs
//! it, started by the first kiln's daemon; two kilns with the scripted agent. A room the
//! settings map to the second kiln gets one reply per message and its session is made
//! there, none in the first; another room's lands in the default kiln; `!kiln NAME`
//! moves a room (the settings win over it), and the choice outlives the hub; a cron
//! job's approval in the second kiln reaches the person's `approval_target`, names its
//! kiln, and a reaction there answers it in that kiln.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::{MsgType, Session};
use matrix_sdk::ruma::api::client::room::create_room;
use matrix_sdk::ruma::events::InitialStateEvent;
use matrix_sdk::ruma::events::room::encryption::RoomEncryptionEventContent;
use matrix_sdk::ruma::{OwnedRoomId, RoomId, UserId};
use serde_json::{Value, json};

use crate::common::*;
use crate::matrix_channel::{BOT_PASSWORD, WAIT, from_bot, matrix_settings, synced};
use crate::matrix_human::Human;
use crate::sessions::{agent_kiln, said, wait_message_where};
use crate::synapse::Homeserver;

/// The person's folders: HOME, and the XDG config and state folders in it.
struct Person {
    home: tempfile::TempDir,
}

impl Person {
    fn new() -> Self {
        Person {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn config(&self) -> PathBuf {
        self.home.path().join("config")
    }

    fn state(&self) -> PathBuf {
        self.home.path().join("state")
    }

    /// `command` as the person runs it: their folders, and the bot's password.
    fn env<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.config())
            .env("XDG_STATE_HOME", self.state())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .env("CRU_TEST_BOT_PASSWORD", BOT_PASSWORD)
            .env("CRU_DAEMON_EXE", CRU)
            .env_remove("CRU_KILN")
    }

    /// `cru args…` as the person, to completion.
    fn cru(&self, args: &[&str]) -> Output {
        let mut command = cru_on_path();
        self.env(&mut command).args(args);
        run_bounded(command, &format!("cru {}", args.join(" ")))
    }

    fn hub_pid(&self) -> Option<String> {
        std::fs::read_to_string(self.state().join("crucible/hub.pid"))
            .ok()
            .map(|pid| pid.trim().to_string())
    }
}

/// Stops the test's hub when the test ends, however it ends.
struct HubGuard<'a>(&'a Person);

impl Drop for HubGuard<'_> {
    fn drop(&mut self) {
        if let Some(pid) = self.0.hub_pid() {
            let _ = Command::new("kill").args(["-9", &pid]).status();
        }
    }
}

/// A child process killed and reaped when the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The hub's socket, once it answers.
async fn hub_client(person: &Person) -> Client {
    let socket = person.state().join("crucible/hub.sock");
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(client) = Client::connect_at(&socket, None).await {
            return client;
        }
        assert!(Instant::now() < deadline, "the hub did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the hub reaches every kiln of `names`.
async fn reaches(hub: &Client, names: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = hub.call_value("daemon.status", json!({})).await.unwrap();
        let on = |name: &str| {
            status["components"].as_array().is_some_and(|all| {
                all.iter()
                    .any(|c| c["name"] == format!("kiln {name}") && c["state"] == "on")
            })
        };
        if names.iter().all(|n| on(n)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the hub does not reach {names:?}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sessions of `room` in the kiln, as `cru --kiln KILN session list --json` lists them.
fn room_sessions(person: &Person, kiln: &Path, room: &RoomId) -> Vec<Session> {
    let out = person.cru(&[
        "--kiln",
        &kiln.display().to_string(),
        "session",
        "list",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let all: Vec<Session> = serde_json::from_str(&stdout(&out)).unwrap();
    all.into_iter()
        .filter(|s| {
            s.channel
                .as_ref()
                .is_some_and(|t| t.kind == "matrix" && t.reference == room.as_str())
        })
        .collect()
}

/// The room's open session in the kiln, if any.
fn open_in(person: &Person, kiln: &Path, room: &RoomId) -> Option<Session> {
    room_sessions(person, kiln, room)
        .into_iter()
        .find(|s| s.channel.as_ref().is_some_and(|t| !t.closed))
}

/// An encrypted room with the alias `#name:server`, the bot invited.
async fn room_named(alice: &Human, bot: &str, name: &str) -> OwnedRoomId {
    let mut request = create_room::v3::Request::new();
    request.invite = vec![UserId::parse(bot).unwrap()];
    request.preset = Some(create_room::v3::RoomPreset::PrivateChat);
    request.room_alias_name = Some(name.into());
    request.initial_state = vec![
        InitialStateEvent::with_empty_state_key(
            RoomEncryptionEventContent::with_recommended_defaults(),
        )
        .to_raw_any(),
    ];
    let room = alice.client().create_room(request).await.unwrap();
    let room = room.room_id().to_owned();
    alice.wait_until_joined(&room, bot, WAIT).await;
    room
}

/// Says `words` (`say …`) in `room` and waits for the bot's reply; the count of its
/// replies holding them.
async fn say(alice: &Human, bot: &str, room: &RoomId, words: &str) -> usize {
    alice.send_text(room, &format!("say {words}")).await;
    from_bot(alice, bot, room, words).await;
    alice
        .all_received()
        .iter()
        .filter(|r| r.sender.as_str() == bot && r.msgtype != "m.notice" && r.body.contains(words))
        .count()
}

/// The bot's answer to the command `line` in `room`, holding `text`.
async fn command(alice: &Human, bot: &str, room: &RoomId, line: &str, text: &str) -> String {
    alice.send_text(room, line).await;
    from_bot(alice, bot, room, text).await.body
}

#[tokio::test]
async fn one_bot_in_the_persons_settings_serves_two_kilns_room_by_room() {
    let hs = Homeserver::start(Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let bot = hs.user_id("bot");
    let server = bot.split_once(':').unwrap().1.to_string();
    let person = Person::new();
    let _hub_guard = HubGuard(&person);
    std::fs::create_dir_all(person.config().join("crucible")).unwrap();
    std::fs::write(
        person.config().join("crucible/config.toml"),
        matrix_settings(
            &hs,
            &format!(
                "kiln = \"alpha\"\napproval_target = \"#approvals:{server}\"\n\
                 kilns = {{ \"#beta-room:{server}\" = \"beta\" }}\n"
            ),
        ),
    )
    .unwrap();
    let alpha = agent_kiln("[kiln]\nname = \"alpha\"\n");
    let beta = agent_kiln(
        "[kiln]\nname = \"beta\"\n\n[[cron]]\nid = \"nightly\"\nschedule = \"0 0 3 1 1 *\"\n\
         agent = \"scripted\"\ninstructions = \"permit c1 deploy the nightly build\"\n",
    );
    // The kilns' daemons, with the person's folders: the first starts the hub.
    let mut daemons = Vec::new();
    for tk in [&alpha, &beta] {
        let mut command = cru_on_path();
        person.env(&mut command);
        daemons.push(tk.run_daemon(command).await);
    }
    let hub = hub_client(&person).await;
    reaches(&hub, &["alpha", "beta"]).await;
    let status = synced(&hub).await;
    assert_eq!(status["user_id"], bot.as_str(), "{status}");
    let kilns = [alpha.root(), beta.root()];
    let matrix_folder = person.state().join("crucible/.crucible/matrix");
    assert!(matrix_folder.is_dir(), "the bot's folder is the hub's");

    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let approvals = room_named(&alice, &bot, "approvals").await;
    let mapped = room_named(&alice, &bot, "beta-room").await;
    let other = alice.create_encrypted_room(&[bot.as_str()], false).await;
    alice.wait_until_joined(&other, &bot, WAIT).await;

    // The room the settings map to beta: one reply per message, its session in beta.
    assert_eq!(say(&alice, &bot, &mapped, "hello from beta").await, 1);
    let started = from_bot(&alice, &bot, &mapped, "New session").await;
    assert!(started.body.contains("in kiln beta"), "{started:?}");
    assert_eq!(say(&alice, &bot, &mapped, "and a second thing").await, 1);
    let copies = alice
        .all_received()
        .iter()
        .filter(|r| r.sender.as_str() == bot && r.body.contains("hello from beta"))
        .count();
    assert_eq!(copies, 1, "a message was answered more than once");
    assert_eq!(room_sessions(&person, kilns[1], &mapped).len(), 1);
    assert!(room_sessions(&person, kilns[0], &mapped).is_empty());

    // Another room lands in the default kiln.
    assert_eq!(say(&alice, &bot, &other, "hello from alpha").await, 1);
    let in_alpha = open_in(&person, kilns[0], &other).expect("the room's session in alpha");
    assert!(room_sessions(&person, kilns[1], &other).is_empty());

    // `!kiln` says where the room is, and the kilns.
    let told = command(&alice, &bot, &other, "!kiln", "This room's kiln").await;
    assert!(told.contains("alpha (the default kiln"), "{told}");
    assert!(told.contains("alpha, beta"), "{told}");
    // The settings win over a command.
    let refused = command(&alice, &bot, &mapped, "!kiln alpha", "which win").await;
    assert!(refused.contains("mapped to kiln beta"), "{refused}");
    let unknown = command(&alice, &bot, &other, "!kiln gamma", "No kiln gamma").await;
    assert!(unknown.contains("alpha, beta"), "{unknown}");

    // `!kiln beta` moves the other room: its session in alpha is closed, its next
    // message starts one in beta; `!kiln alpha` brings it back.
    let moved = command(&alice, &bot, &other, "!kiln beta", "run in kiln beta").await;
    assert!(moved.contains(&in_alpha.id), "{moved}");
    assert!(open_in(&person, kilns[0], &other).is_none());
    say(&alice, &bot, &other, "now in beta").await;
    let in_beta = open_in(&person, kilns[1], &other).expect("the room's session in beta");
    command(&alice, &bot, &other, "!kiln alpha", "run in kiln alpha").await;
    say(&alice, &bot, &other, "back in alpha").await;
    let back = open_in(&person, kilns[0], &other).expect("a new session in alpha");
    assert_ne!(back.id, in_alpha.id);
    assert!(open_in(&person, kilns[1], &other).is_none());
    assert!(said_in(&alpha, &back.id).await.contains("back in alpha"));
    assert!(said_in(&beta, &in_beta.id).await.contains("now in beta"));

    // A cron job's approval in beta goes to the person's approval_target, naming its
    // kiln; a reaction there answers it in beta.
    let out = person.cru(&[
        "--kiln",
        &kilns[1].display().to_string(),
        "cron",
        "run",
        "nightly",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let asked = from_bot(&alice, &bot, &approvals, "deploy the nightly build").await;
    assert!(asked.body.contains("Approval Required"), "{asked:?}");
    assert!(asked.body.contains("kiln beta"), "{asked:?}");
    alice.react(&approvals, &asked.event_id, "👍").await;
    let beta_client = Client::connect(&beta.kiln).await.unwrap();
    let cron: Vec<Session> = serde_json::from_value(
        beta_client
            .call_value("session.list", json!({}))
            .await
            .unwrap()["sessions"]
            .clone(),
    )
    .unwrap();
    let cron = cron
        .into_iter()
        .find(|s| s.channel.as_ref().is_some_and(|t| t.kind == "cron"))
        .expect("the cron session in beta");
    assert!(asked.body.contains(&cron.id), "{asked:?}");
    let answered = wait_message_where(&beta_client, &cron.id, "the answered approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.responded
    })
    .await;
    let by = answered.answered_by.clone().unwrap_or_default();
    assert!(by.contains(&hs.user_id("alice")), "answered by {by:?}");
    let deadline = Instant::now() + WAIT;
    while !said(&beta_client, &cron.id)
        .await
        .contains("granted: deploy the nightly build")
    {
        assert!(
            Instant::now() < deadline,
            "the cron session in beta did not go on"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    from_bot(&alice, &bot, &approvals, "Answered by").await;

    // The room's choice is kept owner-only in the hub's bot folder, and outlives the hub.
    let closed = format!("`{}` in kiln alpha is closed", back.id);
    let moved = command(&alice, &bot, &other, "!kiln beta", &closed).await;
    assert!(moved.contains("run in kiln beta"), "{moved}");
    let kept = matrix_folder.join("rooms.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let rooms: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(rooms[other.as_str()], "beta", "{rooms}");
    drop(hub);
    let out = person.cru(&["hub", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = Instant::now() + WAIT;
    while person.hub_pid().is_some() {
        assert!(Instant::now() < deadline, "the hub did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut again = cru_on_path();
    person
        .env(&mut again)
        .args(["hub", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let _again = Reaped(again.spawn().unwrap());
    let hub = hub_client(&person).await;
    reaches(&hub, &["alpha", "beta"]).await;
    synced(&hub).await;
    say(&alice, &bot, &other, "after the hub came back").await;
    let after = open_in(&person, kilns[1], &other).expect("the room's session in beta");
    assert!(
        said_in(&beta, &after.id)
            .await
            .contains("after the hub came back")
    );
    assert!(open_in(&person, kilns[0], &other).is_none());
    drop(daemons);
}

/// What the session said, read at its kiln.
async fn said_in(tk: &TestKiln, session: &str) -> String {
    let client = Client::connect(&tk.kiln).await.unwrap();
    said(&client, session).await
}
