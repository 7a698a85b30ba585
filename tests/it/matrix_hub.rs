//! The person's one Matrix bot for every kiln, on a real Synapse: the bot is in the
//! person's own settings (HOME and the XDG folders in a temp folder) and their hub runs
//! it, started by the first kiln's daemon; two kilns with the scripted agent. A room the
//! settings map to the second kiln gets one reply per message and its session is made
//! there, none in the first; another room's lands in the default kiln; `!kiln NAME`
//! moves a room (the settings win over it), and the choice outlives the hub; a cron
//! job's approval in the second kiln reaches the person's `approval_target`, names its
//! kiln, and a reaction there answers it in that kiln; a job with a target of its own
//! (in the kiln's settings) is posted there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::{ComponentState, MsgType, Session};
use matrix_sdk::ruma::api::client::room::create_room;
use matrix_sdk::ruma::events::InitialStateEvent;
use matrix_sdk::ruma::events::room::encryption::RoomEncryptionEventContent;
use matrix_sdk::ruma::{OwnedRoomId, RoomId, UserId};
use serde_json::Value;

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

    /// The hub's bot folder.
    fn bot_folder(&self) -> PathBuf {
        self.state().join("crucible/.crucible/matrix")
    }

    fn hub_pid(&self) -> Option<String> {
        std::fs::read_to_string(self.state().join("crucible/hub.pid"))
            .ok()
            .map(|pid| pid.trim().to_string())
    }
}

/// Stops the test's hub (its pid in the state folder) when the test ends, however it
/// ends.
struct HubGuard(PathBuf);

impl Drop for HubGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0.join("crucible/hub.pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
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
        let status = crate::matrix_channel::daemon_status(hub).await;
        let on = |name: &str| {
            status
                .components
                .iter()
                .any(|c| c.name == format!("kiln {name}") && c.state == ComponentState::On)
        };
        if names.iter().all(|n| on(n)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the hub does not reach {names:?}: {status:?}"
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

/// Two kilns, their daemons and the person's hub with the bot, and alice in three
/// rooms with it: the approvals room, the room the settings map to beta, another.
struct Scene {
    /// First, so the hub is stopped before the person's folders go.
    _hub: HubGuard,
    hs: Homeserver,
    person: Person,
    alpha: TestKiln,
    beta: TestKiln,
    bot: String,
    alice: Human,
    approvals: OwnedRoomId,
    mapped: OwnedRoomId,
    other: OwnedRoomId,
    _daemons: Vec<DaemonProcess>,
}

impl Scene {
    /// Everything started for `person`, and the hub's connection once it runs the bot.
    async fn start(person: Person) -> (Scene, Client) {
        let hub_guard = HubGuard(person.state());
        let hs = Homeserver::start(Path::new(CRU)).await;
        hs.register("bot", BOT_PASSWORD, false).await;
        hs.register("alice", "alice-pass", false).await;
        let bot = hs.user_id("bot");
        let server = bot.split_once(':').unwrap().1.to_string();
        std::fs::create_dir_all(person.config().join("crucible")).unwrap();
        let bot_settings = format!(
            "kiln = \"alpha\"\napproval_target = \"#approvals:{server}\"\n\
             kilns = {{ \"#beta-room:{server}\" = \"beta\" }}\n"
        );
        std::fs::write(
            person.config().join("crucible/config.toml"),
            matrix_settings(&hs, &bot_settings),
        )
        .unwrap();
        let alpha = agent_kiln("[kiln]\nname = \"alpha\"\n");
        // Two jobs: one whose questions go to the person's target, one with its own
        // (in beta's settings, which the hub's bot does not read).
        let beta = agent_kiln(&format!(
            "[kiln]\nname = \"beta\"\n\n[[cron]]\nid = \"nightly\"\nschedule = \"0 0 3 1 1 *\"\n\
             agent = \"scripted\"\ninstructions = \"permit c1 deploy the nightly build\"\n\n\
             [[cron]]\nid = \"keys\"\nschedule = \"0 0 3 1 1 *\"\nagent = \"scripted\"\n\
             instructions = \"permit c2 rotate the keys\"\napproval_target = \"#beta-ops:{server}\"\n",
        ));
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
        assert_eq!(status.user_id, bot.as_str(), "{status:?}");
        assert!(
            person.bot_folder().is_dir(),
            "the bot's folder is the hub's"
        );
        let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
        let approvals = room_named(&alice, &bot, "approvals").await;
        let mapped = room_named(&alice, &bot, "beta-room").await;
        let other = alice.create_encrypted_room(&[bot.as_str()], false).await;
        alice.wait_until_joined(&other, &bot, WAIT).await;
        let scene = Scene {
            _hub: hub_guard,
            hs,
            person,
            alpha,
            beta,
            bot,
            alice,
            approvals,
            mapped,
            other,
            _daemons: daemons,
        };
        (scene, hub)
    }

    /// The room's open session in `tk`, if any.
    fn open_in(&self, tk: &TestKiln, room: &RoomId) -> Option<Session> {
        open_in(&self.person, tk.root(), room)
    }

    async fn say(&self, room: &RoomId, words: &str) -> usize {
        say(&self.alice, &self.bot, room, words).await
    }

    async fn command(&self, room: &RoomId, line: &str, text: &str) -> String {
        command(&self.alice, &self.bot, room, line, text).await
    }
}

#[tokio::test]
async fn one_bot_in_the_persons_settings_serves_two_kilns_room_by_room() {
    let (scene, hub) = Scene::start(Person::new()).await;
    rooms_land_in_their_kilns(&scene).await;
    let back = kiln_moves_a_room(&scene).await;
    approvals_of_a_kiln_reach_the_persons_target(&scene).await;
    the_choice_outlives_the_hub(&scene, hub, &back).await;
}

/// The room the settings map to beta: one reply per message, its session in beta; the
/// other room lands in the default kiln, alpha.
async fn rooms_land_in_their_kilns(s: &Scene) {
    let (bot, mapped, other) = (&s.bot, &s.mapped, &s.other);
    assert_eq!(s.say(mapped, "hello from beta").await, 1);
    let started = from_bot(&s.alice, bot, mapped, "New session").await;
    assert!(started.body.contains("in kiln beta"), "{started:?}");
    assert_eq!(s.say(mapped, "and a second thing").await, 1);
    let copies = s
        .alice
        .all_received()
        .iter()
        .filter(|r| r.sender.as_str() == bot && r.body.contains("hello from beta"))
        .count();
    assert_eq!(copies, 1, "a message was answered more than once");
    assert_eq!(room_sessions(&s.person, s.beta.root(), mapped).len(), 1);
    assert!(room_sessions(&s.person, s.alpha.root(), mapped).is_empty());

    assert_eq!(s.say(other, "hello from alpha").await, 1);
    assert!(s.open_in(&s.alpha, other).is_some());
    assert!(room_sessions(&s.person, s.beta.root(), other).is_empty());
}

/// `!kiln` says where a room is; the settings win over `!kiln NAME`; `!kiln beta` moves
/// the other room (its session in alpha closed, its next message starting one in beta)
/// and `!kiln alpha` brings it back. The room's session in alpha at the end.
async fn kiln_moves_a_room(s: &Scene) -> Session {
    let (mapped, other) = (&s.mapped, &s.other);
    let in_alpha = s
        .open_in(&s.alpha, other)
        .expect("the room's session in alpha");
    let told = s.command(other, "!kiln", "This room's kiln").await;
    assert!(told.contains("alpha (the default kiln"), "{told}");
    assert!(told.contains("alpha, beta"), "{told}");
    let refused = s.command(mapped, "!kiln alpha", "which win").await;
    assert!(refused.contains("mapped to kiln beta"), "{refused}");
    let unknown = s.command(other, "!kiln gamma", "No kiln gamma").await;
    assert!(unknown.contains("alpha, beta"), "{unknown}");

    let moved = s.command(other, "!kiln beta", "run in kiln beta").await;
    assert!(moved.contains(&in_alpha.id), "{moved}");
    assert!(s.open_in(&s.alpha, other).is_none());
    s.say(other, "now in beta").await;
    let in_beta = s
        .open_in(&s.beta, other)
        .expect("the room's session in beta");
    s.command(other, "!kiln alpha", "run in kiln alpha").await;
    s.say(other, "back in alpha").await;
    let back = s.open_in(&s.alpha, other).expect("a new session in alpha");
    assert_ne!(back.id, in_alpha.id);
    assert!(s.open_in(&s.beta, other).is_none());
    assert!(said_in(&s.alpha, &back.id).await.contains("back in alpha"));
    assert!(said_in(&s.beta, &in_beta.id).await.contains("now in beta"));
    back
}

/// A cron job's approval in beta goes to the person's approval_target, naming its kiln
/// and session; a reaction there answers it in beta, and the job goes on.
async fn approvals_of_a_kiln_reach_the_persons_target(s: &Scene) {
    let beta = s.beta.root().display().to_string();
    let out = s.person.cru(&["--kiln", &beta, "cron", "run", "nightly"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let asked = from_bot(&s.alice, &s.bot, &s.approvals, "deploy the nightly build").await;
    assert!(asked.body.contains("Approval Required"), "{asked:?}");
    assert!(asked.body.contains("kiln beta"), "{asked:?}");
    s.alice.react(&s.approvals, &asked.event_id, "👍").await;
    let client = Client::connect(&s.beta.kiln).await.unwrap();
    let sessions = crate::matrix_channel::all_sessions(&client).await;
    let cron = sessions
        .into_iter()
        .find(|s| s.channel.as_ref().is_some_and(|t| t.kind == "cron"))
        .expect("the cron session in beta");
    assert!(asked.body.contains(&cron.id), "{asked:?}");
    let answered = wait_message_where(&client, &cron.id, "the answered approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.responded
    })
    .await;
    let by = answered.answered_by.clone().unwrap_or_default();
    assert!(by.contains(&s.hs.user_id("alice")), "answered by {by:?}");
    let deadline = Instant::now() + WAIT;
    while !said(&client, &cron.id)
        .await
        .contains("granted: deploy the nightly build")
    {
        assert!(
            Instant::now() < deadline,
            "the cron session in beta did not go on"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    from_bot(&s.alice, &s.bot, &s.approvals, "Answered by").await;

    // A job with an approval_target of its own: its question is posted there, not in the
    // person's target.
    let ops = room_named(&s.alice, &s.bot, "beta-ops").await;
    let out = s.person.cru(&["--kiln", &beta, "cron", "run", "keys"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let asked = from_bot(&s.alice, &s.bot, &ops, "rotate the keys").await;
    assert!(asked.body.contains("kiln beta"), "{asked:?}");
    let elsewhere = s
        .alice
        .all_received()
        .iter()
        .filter(|r| r.room == s.approvals && r.body.contains("rotate the keys"))
        .count();
    assert_eq!(elsewhere, 0, "posted in the person's target too");
}

/// A room's choice is kept owner-only in the hub's bot folder, and holds for the hub
/// started again.
async fn the_choice_outlives_the_hub(s: &Scene, hub: Client, back: &Session) {
    let other = &s.other;
    let closed = format!("`{}` in kiln alpha is closed", back.id);
    let moved = s.command(other, "!kiln beta", &closed).await;
    assert!(moved.contains("run in kiln beta"), "{moved}");
    let kept = s.person.bot_folder().join("rooms.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let rooms: Value = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(rooms[other.as_str()], "beta", "{rooms}");
    drop(hub);
    let out = s.person.cru(&["hub", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = Instant::now() + WAIT;
    while s.person.hub_pid().is_some() {
        assert!(Instant::now() < deadline, "the hub did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut again = cru_on_path();
    s.person
        .env(&mut again)
        .args(["hub", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let _again = Reaped(again.spawn().unwrap());
    let hub = hub_client(&s.person).await;
    reaches(&hub, &["alpha", "beta"]).await;
    synced(&hub).await;
    s.say(other, "after the hub came back").await;
    let after = s
        .open_in(&s.beta, other)
        .expect("the room's session in beta");
    let said = said_in(&s.beta, &after.id).await;
    assert!(said.contains("after the hub came back"), "{said}");
    assert!(s.open_in(&s.alpha, other).is_none());
}

/// What the session said, read at its kiln.
async fn said_in(tk: &TestKiln, session: &str) -> String {
    let client = Client::connect(&tk.kiln).await.unwrap();
    said(&client, session).await
}
