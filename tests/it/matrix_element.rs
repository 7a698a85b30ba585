//! The Matrix channel as Element users meet it, against a real Synapse and the daemon's bot:
//! a person whose client excludes insecure devices as Element's does (room keys only for
//! devices their owner cross-signed, messages decrypted only from such devices), and a
//! second client nobody here wrote, matrix-nio (`tests/equipment/nio_human.py`, in the
//! venv `.ci/run` makes for Synapse), which verifies the bot by emoji and sends with its
//! default settings, which refuse a room with a device nobody verified.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::{MatrixStatus, MatrixVerification, VerificationState};
use matrix_sdk::ruma::RoomId;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::*;
use crate::matrix_channel::{
    BOT_PASSWORD, WAIT, bot_daemon, daemon_status, matrix_settings, synced,
};
use crate::matrix_human::{Human, Received};
use crate::sessions::agent_kiln;
use crate::synapse::{Homeserver, synapse_python};

/// A homeserver with the bot and alice, and a kiln whose daemon runs the bot; returns
/// them with a client of the daemon and `daemon.status`'s Matrix part once it synced.
async fn bot_and_homeserver() -> (Homeserver, TestKiln, DaemonProcess, Client, MatrixStatus) {
    let hs = Homeserver::start(Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let tk = agent_kiln(&matrix_settings(&hs, ""));
    let daemon = bot_daemon(&tk).await;
    let client = Client::connect(&tk.kiln).await.unwrap();
    let status = synced(&client).await;
    (hs, tk, daemon, client, status)
}

/// Polls `daemon.status` until its Matrix part passes `check`.
async fn verification_where(
    client: &Client,
    what: &str,
    state: VerificationState,
) -> MatrixVerification {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = daemon_status(client).await;
        let verification = status.matrix.as_ref().and_then(|m| m.verification.clone());
        if let Some(found) = verification.filter(|v| v.state == state) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "not {what} within {WAIT:?}: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The end of the daemon's log, for a failure's message.
fn daemon_log_tail(tk: &TestKiln) -> String {
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// The bot's message in `room` holding `text` (and none of `not`), as alice received it;
/// when none comes, fails with how alice's client sees the bot's device and the end of the
/// daemon's log.
async fn from_bot(
    alice: &Human,
    tk: &TestKiln,
    status: &MatrixStatus,
    room: &RoomId,
    text: &str,
    not: &str,
) -> Received {
    let bot = status.user_id.as_str();
    let found = alice
        .try_wait_for_message(
            room,
            |r| {
                r.sender.as_str() == bot
                    && r.msgtype != "m.reaction"
                    && r.body.contains(text)
                    && (not.is_empty() || !r.body.contains(not))
            },
            WAIT,
        )
        .await;
    match found {
        Ok(received) => received,
        Err(why) => panic!(
            "no reply of the bot holding {text:?} reached the Element-strict person: {why}\n\
             {}\nthe bot's status: {status:?}\n--- daemon.log:\n{}",
            alice
                .device_trust(bot, status.device_id.as_deref().unwrap_or_default())
                .await,
            daemon_log_tail(tk)
        ),
    }
}

/// A person on a client that excludes insecure devices: in an encrypted room the bot gets
/// their message and they decrypt its reply, a ✅ reaction approves, and a direct chat
/// works the same.
#[tokio::test]
async fn an_element_strict_person_talks_with_the_bot_in_encrypted_rooms() {
    let (hs, tk, _daemon, _client, status) = bot_and_homeserver().await;
    let bot = hs.user_id("bot");
    let alice = Human::login_strict(&hs.url(), "alice", "alice-pass").await;

    let room = alice.create_encrypted_room(&[bot.as_str()], false).await;
    alice.wait_until_joined(&room, &bot, WAIT).await;
    alice.send_text(&room, "say hello from element").await;
    let reply = from_bot(&alice, &tk, &status, &room, "hello from element", "").await;
    assert!(reply.encrypted, "the reply was not encrypted: {reply:?}");

    // An approval, answered by a ✅ reaction: the agent proceeds.
    alice.send_text(&room, "permit p1 deploy to staging").await;
    let asked = from_bot(&alice, &tk, &status, &room, "deploy to staging", "granted").await;
    assert!(asked.encrypted, "{asked:?}");
    alice.react(&room, &asked.event_id, "✅").await;
    from_bot(
        &alice,
        &tk,
        &status,
        &room,
        "granted: deploy to staging",
        "",
    )
    .await;

    // A direct chat, as Element starts one (is_direct, encrypted from its first event).
    let dm = alice.create_encrypted_room(&[bot.as_str()], true).await;
    alice.wait_until_joined(&dm, &bot, WAIT).await;
    alice.send_text(&dm, "say hello in private").await;
    let reply = from_bot(&alice, &tk, &status, &dm, "hello in private", "").await;
    assert!(
        reply.encrypted,
        "the direct reply was not encrypted: {reply:?}"
    );
}

/// A person on matrix-nio (`tests/equipment/nio_human.py`): its JSON lines, and the
/// commands it is sent.
struct Nio {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::sync::mpsc::UnboundedReceiver<Value>,
    /// Events read while waiting for something else, oldest first.
    seen: Vec<Value>,
    stderr: PathBuf,
    _store: tempfile::TempDir,
}

impl Nio {
    /// Logs `user` in as a new nio device with end-to-end encryption.
    async fn login(hs: &Homeserver, user: &str, password: &str) -> Nio {
        let store = tempfile::tempdir().unwrap();
        let stderr = store.path().join("stderr.log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/equipment/nio_human.py");
        let mut child = tokio::process::Command::new(synapse_python(Path::new(CRU)))
            .arg(script)
            .args([&hs.url(), &hs.user_id(user), password])
            .arg(store.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("run nio_human.py");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| json!({ "event": "unreadable", "line": line }));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let mut nio = Nio {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
            _store: store,
        };
        nio.event("logged in", |e| e["event"] == "logged_in").await;
        nio
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The next line from nio within `WAIT`; fails with what came and nio's errors.
    async fn next(&mut self, what: &str) -> Value {
        match tokio::time::timeout(WAIT, self.lines.recv()).await {
            Ok(Some(line)) => line,
            outcome => {
                let exited = self.child.try_wait().ok().flatten();
                panic!(
                    "nio: no {what} ({}; exited: {exited:?}); it said: {:#?}\n--- its stderr:\n{}",
                    if outcome.is_ok() {
                        "its output ended"
                    } else {
                        "timed out"
                    },
                    self.seen,
                    self.stderr_tail()
                )
            }
        }
    }

    /// Sends a command; returns its reply (other lines are kept as events).
    async fn call(&mut self, command: Value) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        let what = format!("reply to {command}");
        loop {
            let line = self.next(&what).await;
            if line["reply"] == command["do"] {
                return line;
            }
            self.seen.push(line);
        }
    }

    /// As `call`, and the reply must say it went well.
    async fn ok(&mut self, command: Value) -> Value {
        let reply = self.call(command.clone()).await;
        assert_eq!(reply["ok"], true, "nio: {command} failed: {reply}");
        reply
    }

    /// The first event `wanted` accepts, one that came already or the next.
    async fn event(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|e| wanted(e)) {
            return found.clone();
        }
        loop {
            let line = self.next(what).await;
            self.seen.push(line.clone());
            if wanted(&line) {
                return line;
            }
        }
    }

    /// How nio sees `user`'s device `device`: `{device_id, ed25519, verified}`.
    async fn device(&mut self, user: &str, device: &str) -> Value {
        let reply = self.ok(json!({ "do": "devices", "user": user })).await;
        reply["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["device_id"] == device)
            .cloned()
            .unwrap_or_else(|| panic!("nio does not know {user}'s device {device}: {reply}"))
    }

    /// Sends `text` to `room` with nio's default settings.
    async fn send(&mut self, room: &str, text: &str) -> Value {
        self.call(json!({ "do": "send", "room": room, "text": text }))
            .await
    }
}

/// An emoji's symbol without variation selectors (clients differ in writing them).
fn plain(symbol: &str) -> String {
    symbol.replace('\u{fe0f}', "")
}

/// The seven emoji's symbols, comparable across clients. What a person compares are the
/// pictures: their names differ between clients and the spec's versions (nio's "Spanner"
/// and "Aeroplane" are the SDK's "Wrench" and "Airplane").
fn emoji_list(emoji: &Value) -> Vec<String> {
    emoji
        .as_array()
        .unwrap_or_else(|| panic!("no emoji: {emoji}"))
        .iter()
        .map(|e| plain(e["symbol"].as_str().unwrap_or_default()))
        .collect()
}

/// nio and the bot in an encrypted room, nio's emoji verification of the bot's device
/// started, and both showing the emoji: returns nio, the room, the transaction and the
/// bot's device id. Before it, nio's default settings refuse to send to the unverified bot.
async fn emoji_shown_on_both_sides(
    hs: &Homeserver,
    client: &Client,
    status: &MatrixStatus,
) -> (Nio, String, String, String) {
    let bot = hs.user_id("bot");
    let device = status.device_id.clone().unwrap();
    let mut nio = Nio::login(hs, "alice", "alice-pass").await;
    let created = nio
        .ok(json!({ "do": "create_room", "invite": [bot], "direct": false }))
        .await;
    let room = created["room_id"].as_str().unwrap().to_string();
    nio.ok(json!({ "do": "wait_joined", "room": room, "user": bot }))
        .await;
    let seen = nio.device(&bot, &device).await;
    assert_eq!(seen["verified"], false, "{seen}");
    assert_eq!(
        seen["ed25519"].as_str(),
        status.fingerprint.as_deref(),
        "the fingerprint daemon.status shows is the device's key nio got"
    );
    let refused = nio.send(&room, "say before verifying").await;
    assert_eq!(
        refused["error_type"], "OlmUnverifiedDeviceError",
        "nio's default settings refuse a room with an unverified device: {refused}"
    );

    let started = nio
        .ok(json!({ "do": "verify", "user": bot, "device": device }))
        .await;
    let tx = started["transaction_id"].as_str().unwrap().to_string();
    let shown = nio
        .event("the emoji", |e| {
            e["event"] == "verification" && e["transaction_id"] == tx.as_str()
        })
        .await;
    assert_eq!(shown["state"], "emoji", "{shown}");
    let nio_emoji = emoji_list(&shown["emoji"]);
    assert_eq!(nio_emoji.len(), 7, "{shown}");

    let alice = hs.user_id("alice");
    let verification = verification_where(
        client,
        "the emoji in daemon.status",
        VerificationState::Emoji,
    )
    .await;
    assert_eq!(verification.user_id, alice.as_str(), "{verification:?}");
    assert_eq!(verification.flow_id, tx.as_str(), "{verification:?}");
    let nio_device =
        nio.seen.iter().find(|e| e["event"] == "logged_in").unwrap()["device_id"].clone();
    assert_eq!(
        Some(verification.device_id.as_str()),
        nio_device.as_str(),
        "{verification:?}"
    );
    let bot_emoji: Vec<String> = verification
        .emoji
        .iter()
        .map(|e| plain(&e.symbol))
        .collect();
    assert_eq!(bot_emoji, nio_emoji, "the bot shows the emoji nio shows");
    let named = verification.emoji.iter().all(|e| !e.description.is_empty());
    assert!(named, "each emoji has its name: {verification:?}");
    (nio, room, tx, device)
}

/// matrix-nio verifies the bot by emoji: the person compares the emoji `daemon.status`
/// (and `cru daemon status`) shows with nio's, confirms on both sides, and nio, with its
/// default settings, then sends to the bot and decrypts its reply.
#[tokio::test]
async fn nio_verifies_the_bot_by_emoji_and_talks_with_its_default_settings() {
    let (hs, tk, _daemon, client, status) = bot_and_homeserver().await;
    let (mut nio, room, tx, device) = emoji_shown_on_both_sides(&hs, &client, &status).await;
    let bot = hs.user_id("bot");

    // Where the person compares them: cru daemon status shows the emoji and the key.
    let out = tk.cru(&["daemon", "status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let now = daemon_status(&client).await;
    let verification = now
        .matrix
        .and_then(|m| m.verification)
        .expect("a verification");
    for emoji in &verification.emoji {
        let symbol = emoji.symbol.as_str();
        assert!(
            shown.contains(symbol),
            "cru daemon status lacks {symbol}:\n{shown}"
        );
    }
    // The key may be shown in groups, as Matrix clients show a session key.
    let fingerprint = status.fingerprint.as_deref().unwrap();
    let unspaced: String = shown.chars().filter(|c| *c != ' ').collect();
    assert!(
        unspaced.contains(fingerprint),
        "cru daemon status lacks the fingerprint {fingerprint}:\n{shown}"
    );

    // The person says they match, in nio and to the bot.
    nio.ok(json!({ "do": "confirm", "transaction_id": tx }))
        .await;
    let out = tk.cru(&["daemon", "verify", "--confirm"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ended = nio
        .event("the verification's end", |e| {
            e["event"] == "verification"
                && e["transaction_id"] == tx.as_str()
                && (e["state"] == "done" || e["state"] == "cancelled")
        })
        .await;
    assert_eq!(ended["state"], "done", "{ended}\n{}", daemon_log_tail(&tk));
    verification_where(&client, "the verification done", VerificationState::Done).await;
    assert_eq!(nio.device(&bot, &device).await["verified"], true);

    // nio's default settings now let it send; the bot's reply decrypts.
    let sent = nio.send(&room, "say hello from nio").await;
    assert_eq!(sent["ok"], true, "{sent}");
    let reply = nio
        .event("the bot's reply", |e| {
            e["event"] == "message"
                && e["sender"] == bot.as_str()
                && e["body"]
                    .as_str()
                    .is_some_and(|b| b.contains("hello from nio"))
        })
        .await;
    assert_eq!(reply["decrypted"], true, "{reply}");
    assert!(
        !nio.seen
            .iter()
            .any(|e| e["event"] == "undecryptable" && e["sender"] == bot.as_str()),
        "a message of the bot stayed encrypted: {:#?}",
        nio.seen
    );
}

/// The person cancels an emoji verification at the bot (the emoji differ): it ends
/// cancelled on both sides, and nio still refuses to send to the unverified bot.
#[tokio::test]
async fn an_emoji_verification_the_person_cancels_ends_cancelled_on_both_sides() {
    let (hs, tk, _daemon, client, status) = bot_and_homeserver().await;
    let (mut nio, room, tx, device) = emoji_shown_on_both_sides(&hs, &client, &status).await;
    let bot = hs.user_id("bot");

    let out = tk.cru(&["daemon", "verify", "--cancel"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ended = nio
        .event("the verification's end", |e| {
            e["event"] == "verification"
                && e["transaction_id"] == tx.as_str()
                && (e["state"] == "done" || e["state"] == "cancelled")
        })
        .await;
    assert_eq!(ended["state"], "cancelled", "{ended}");
    let cancelled = verification_where(
        &client,
        "the verification cancelled",
        VerificationState::Cancelled,
    )
    .await;
    assert_eq!(cancelled.flow_id, tx.as_str());
    assert_eq!(nio.device(&bot, &device).await["verified"], false);
    let refused = nio.send(&room, "say after cancelling").await;
    assert_eq!(
        refused["error_type"], "OlmUnverifiedDeviceError",
        "{refused}"
    );
}
