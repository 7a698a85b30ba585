//! One Matrix bot account in two kilns' settings answers from one kiln: the second kiln's
//! daemon refuses it and names the first (in `daemon.status`, once in its inbox and its
//! log), a message in a room gets one reply, and once the first kiln's daemon is gone
//! the second takes the bot when it starts again. A real Synapse, the real binary, the
//! person's registry in a temp state folder both daemons share.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::ListParams;
use crucible::protocol::{ComponentState, ComponentStatus, InboxMessage, MsgType};
use serde_json::{Value, json};
use testkit::daemon::call;

use crate::common::*;
use crate::matrix_channel::{all_sessions, daemon_status, synced};
use crate::matrix_human::Human;
use crate::synapse::Homeserver;

const BOT_PASSWORD: &str = "bot-pass-3f9a21";
const WAIT: Duration = Duration::from_secs(60);

/// A kiln named `name` with the bot in its settings.
fn bot_kiln(hs: &Homeserver, name: &str) -> TestKiln {
    crate::sessions::agent_kiln(&format!(
        "[kiln]\nname = {name:?}\n\n[channels.matrix]\nhomeserver = {:?}\nuser_id = {:?}\n\
         password_env = \"CRU_TEST_BOT_PASSWORD\"\nallowed_users = [{:?}]\nagent = \"scripted\"\n",
        hs.url(),
        hs.user_id("bot"),
        hs.user_id("alice"),
    ))
}

/// The kiln's daemon, with the person's registry in `state`.
async fn bot_daemon(tk: &TestKiln, state: &Path) -> DaemonProcess {
    let mut cru = cru_on_path();
    cru.env("CRU_TEST_BOT_PASSWORD", BOT_PASSWORD)
        .env("XDG_STATE_HOME", state)
        .stderr(Stdio::null());
    tk.run_daemon(cru).await
}

/// The daemon's component `name` in `daemon.status`.
async fn component(client: &Client, name: &str) -> ComponentStatus {
    let status = daemon_status(client).await;
    let found = status.components.iter().find(|c| c.name == name).cloned();
    found.unwrap_or_else(|| panic!("no {name} component: {status:?}"))
}

/// The error messages in the kiln's inbox.
async fn inbox_errors(client: &Client) -> Vec<InboxMessage> {
    let window = ListParams {
        limit: Some(100),
        ..Default::default()
    };
    let listed = call::<m::InboxList>(client, window).await;
    listed
        .messages
        .into_iter()
        .filter(|m| m.msg_type == MsgType::Error)
        .collect()
}

/// The sessions a Matrix room started in the kiln.
async fn room_sessions(client: &Client) -> usize {
    all_sessions(client)
        .await
        .iter()
        .filter_map(|s| s.channel.as_ref())
        .filter(|t| t.kind == "matrix" && t.reference.starts_with('!'))
        .count()
}

#[tokio::test]
async fn a_bot_in_two_kilns_answers_each_message_once() {
    let hs = Homeserver::start(Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let bot = hs.user_id("bot");
    let state = tempfile::tempdir().unwrap();
    let (alpha, beta) = (bot_kiln(&hs, "alpha"), bot_kiln(&hs, "beta"));

    let mut first = bot_daemon(&alpha, state.path()).await;
    let alpha_client = Client::connect(&alpha.kiln).await.unwrap();
    synced(&alpha_client).await;
    let mut second = bot_daemon(&beta, state.path()).await;
    let beta_client = Client::connect(&beta.kiln).await.unwrap();

    // The second kiln's daemon refuses the bot, naming the first kiln and its daemon, and
    // does not log in; the rest of it works.
    let named = format!(
        "the bot {bot} is already answered by kiln alpha ({}, pid {})",
        alpha.root().display(),
        first.pid()
    );
    refuses_naming(&beta_client, &named).await;
    let first_kiln = component(&alpha_client, "matrix").await;
    assert_eq!(first_kiln.state, ComponentState::On, "{first_kiln:?}");

    // A message in a room gets exactly one reply, from the first kiln.
    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let room = alice.create_encrypted_room(&[bot.as_str()], false).await;
    alice.wait_until_joined(&room, &bot, WAIT).await;
    answered_once(&alice, &bot, &room).await;
    assert_eq!(room_sessions(&alpha_client).await, 1);
    assert_eq!(
        room_sessions(&beta_client).await,
        0,
        "a session in both kilns"
    );
    let log = std::fs::read_to_string(beta.kiln.log_dir().join("daemon.log")).unwrap();
    assert_eq!(
        log.matches("matrix channel not started").count(),
        1,
        "said once in the log:\n{log}"
    );

    // Started again while the first kiln answers: refused again, not said again.
    drop(beta_client);
    stop(&beta, &mut second).await;
    let mut second = bot_daemon(&beta, state.path()).await;
    let beta_client = Client::connect(&beta.kiln).await.unwrap();
    assert_eq!(
        component(&beta_client, "matrix").await.state,
        ComponentState::Failing
    );
    assert_eq!(inbox_errors(&beta_client).await.len(), 1);

    // The first kiln's daemon killed: the second takes the bot when it starts again.
    first.kill9();
    drop(beta_client);
    stop(&beta, &mut second).await;
    let mut second = bot_daemon(&beta, state.path()).await;
    let beta_client = Client::connect(&beta.kiln).await.unwrap();
    synced(&beta_client).await;
    assert_eq!(
        component(&beta_client, "matrix").await.state,
        ComponentState::On
    );
    let held = claims(state.path());
    assert_eq!(held["bots"][0]["kiln"], "beta", "{held}");
    assert_eq!(inbox_errors(&beta_client).await.len(), 1);
    alice.send_text(&room, "say now from beta").await;
    from_bot(&alice, &bot, &room, "now from beta").await;
    assert_eq!(room_sessions(&beta_client).await, 1);

    // Stopped, its daemon gives the bot back.
    drop(beta_client);
    stop(&beta, &mut second).await;
    let held = claims(state.path());
    assert_eq!(held["bots"], json!([]), "{held}");
}

/// The person's bot claims.
fn claims(state: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(state.join("crucible/bots.json")).unwrap()).unwrap()
}

/// The kiln's daemon refuses the bot with `named` in its words (its component, and once
/// in its inbox), and is not logged in.
async fn refuses_naming(client: &Client, named: &str) {
    let matrix = component(client, "matrix").await;
    assert_eq!(matrix.state, ComponentState::Failing, "{matrix:?}");
    let refusal = matrix.error.clone().unwrap_or_default();
    assert!(refusal.starts_with(named), "{refusal}");
    let status = daemon_status(client).await;
    let bot = status.matrix.as_ref().expect("the Matrix part");
    assert!(!bot.logged_in, "{status:?}");
    assert!(bot.device_id.is_none(), "{status:?}");
    let told = wait_until_some(|| async {
        let errors = inbox_errors(client).await;
        (!errors.is_empty()).then_some(errors)
    })
    .await;
    assert_eq!(told.len(), 1, "said once in the inbox: {told:?}");
    assert!(
        told[0].body.as_deref().unwrap_or_default().contains(named),
        "{told:?}"
    );
}

/// A message in `room` gets one reply: a second message answered after it means the
/// first had its chance to be answered twice.
async fn answered_once(alice: &Human, bot: &str, room: &matrix_sdk::ruma::RoomId) {
    alice.send_text(room, "say hello just once").await;
    from_bot(alice, bot, room, "hello just once").await;
    alice.send_text(room, "say and a second thing").await;
    from_bot(alice, bot, room, "and a second thing").await;
    let copies = alice
        .all_received()
        .iter()
        .filter(|r| r.sender.as_str() == bot && r.body.contains("hello just once"))
        .count();
    assert_eq!(copies, 1, "the message was answered more than once");
}

/// Stops the kiln's daemon and waits until it has exited.
async fn stop(tk: &TestKiln, daemon: &mut DaemonProcess) {
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    daemon.wait_exit(WAIT).await;
}

/// The bot's message in `room` whose text holds `text`.
async fn from_bot(alice: &Human, bot: &str, room: &matrix_sdk::ruma::RoomId, text: &str) {
    alice
        .wait_for_message(
            room,
            |r| r.sender.as_str() == bot && r.msgtype != "m.reaction" && r.body.contains(text),
            WAIT,
        )
        .await;
}

/// Polls `check` until it gives something, within [`WAIT`].
async fn wait_until_some<T, F: std::future::Future<Output = Option<T>>>(
    check: impl Fn() -> F,
) -> T {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
