//! The Matrix channel as a person on a client that keeps `/` for itself meets it: commands
//! with `!` (and `/` still, where a client passes it), `!diff` in a thread, approvals that
//! mention the allowed person, a room upgraded to a successor where the conversation goes
//! on, and a daemon log without the Matrix libraries' noise. A real Synapse, the bot with
//! end-to-end encryption, and a person on a real Matrix client in an encrypted room.

use std::time::{Duration, Instant};

use matrix_sdk::ruma::api::client::room::upgrade_room;
use matrix_sdk::ruma::{OwnedRoomId, RoomId, RoomVersionId, UserId};
use serde_json::Value;

use crate::common::*;
use crate::matrix_channel::{
    BOT_PASSWORD, WAIT, alice_with, bot_kiln, from_bot, matrix_sessions, matrix_settings,
};
use crate::matrix_human::{Human, Received, Relation};
use crate::sessions::said;
use crate::synapse::Homeserver;

/// Every message of the bot in `room` whose text holds `text`, once `count` came.
async fn all_from_bot(
    alice: &Human,
    bot: &str,
    room: &RoomId,
    text: &str,
    count: usize,
) -> Vec<Received> {
    let deadline = Instant::now() + WAIT;
    loop {
        let found: Vec<Received> = alice
            .all_received()
            .into_iter()
            .filter(|r| {
                r.room == room
                    && r.sender.as_str() == bot
                    && r.msgtype != "m.reaction"
                    && r.body.contains(text)
            })
            .collect();
        if found.len() >= count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{count} messages with {text:?} did not come: {found:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The event as the person's client reads it: decrypted, the content as sent.
async fn decrypted(alice: &Human, room: &RoomId, event: &Received) -> Value {
    let timeline = alice
        .room(room)
        .event(&event.event_id, None)
        .await
        .expect("the event from the homeserver");
    serde_json::from_str(timeline.raw().json().get()).expect("an event in JSON")
}

#[tokio::test]
async fn bang_commands_answer_and_approvals_mention_the_allowed_person() {
    let hs = Homeserver::start(std::path::Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    hs.register("bob", "bob-pass", false).await;
    let bot = hs.user_id("bot");
    let alice_id = hs.user_id("alice");
    let (tk, _daemon, client) = bot_kiln(&matrix_settings(&hs, "")).await;
    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let bob = Human::login(&hs.url(), "bob", "bob-pass").await;
    let room = alice
        .create_encrypted_room(&[bot.as_str(), bob.user_id().as_str()], false)
        .await;
    bob.join(&room).await;
    alice.wait_until_joined(&room, &bot, WAIT).await;
    alice
        .wait_until_joined(&room, bob.user_id().as_str(), WAIT)
        .await;

    // `!help` lists the commands with `!`; `/help` (from a client that passes it) too.
    alice.send_text(&room, "!help").await;
    let help = from_bot(&alice, &bot, &room, "Commands:").await;
    for command in [
        "`!approve`",
        "`!sessions`",
        "`!diff`: the session's changes, in a thread",
    ] {
        assert!(help.body.contains(command), "{command} in {help:?}");
    }
    assert!(
        !help.body.contains("`/"),
        "a command named with /: {help:?}"
    );
    alice.send_text(&room, "/help").await;
    all_from_bot(&alice, &bot, &room, "Commands:", 2).await;

    // A session, listed by `!sessions`.
    alice.send_text(&room, "say hello over bang").await;
    from_bot(&alice, &bot, &room, "hello over bang").await;
    let sessions = matrix_sessions(&client, room.as_str()).await;
    assert_eq!(sessions.len(), 1);
    let id = sessions[0].id.clone();
    alice.send_text(&room, "!sessions").await;
    let listed = from_bot(&alice, &bot, &room, "agent scripted").await;
    assert!(listed.body.contains(&id), "{listed:?}");

    // An approval mentions the allowed person (and nobody else in the room), as an
    // Element pill and in `m.mentions`; `!approve` answers it.
    alice.send_text(&room, "permit p1 deploy to staging").await;
    let asked = from_bot(&alice, &bot, &room, "Approval Required").await;
    assert!(asked.encrypted, "{asked:?}");
    assert!(asked.body.contains(alice_id.as_str()), "{asked:?}");
    let pill = format!(r#"<a href="https://matrix.to/#/{alice_id}">{alice_id}</a>"#);
    let html = asked.formatted.clone().unwrap_or_default();
    assert!(html.contains(&pill), "no mention of {alice_id}: {html}");
    let event = decrypted(&alice, &room, &asked).await;
    assert_eq!(
        event["content"]["m.mentions"]["user_ids"],
        serde_json::json!([alice_id.as_str()]),
        "{event:#}"
    );
    assert!(!asked.body.contains(bob.user_id().as_str()), "{asked:?}");
    alice.send_text(&room, "!approve").await;
    from_bot(&alice, &bot, &room, "granted: deploy to staging").await;

    // An unknown command says how to learn the others, with `!`.
    alice.send_text(&room, "!frobnicate").await;
    from_bot(
        &alice,
        &bot,
        &room,
        "Unknown command !frobnicate: say !help.",
    )
    .await;
    // Words that only start with `!` are no command: they go to the session (which runs
    // no such line, and says so).
    alice.send_text(&room, "!! say exclaimed").await;
    from_bot(&alice, &bot, &room, "unknown command: !! say exclaimed").await;

    // `!diff`: the files in the room, the diff in a thread under them.
    diff_in_a_thread(&alice, &bot, &room).await;

    // The daemon's log: the login said once, nothing from the Matrix libraries.
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    assert_quiet(&log);
}

/// `!diff` after the session wrote a file: the files in the room, the diff in a thread
/// under them.
async fn diff_in_a_thread(alice: &Human, bot: &str, room: &RoomId) {
    alice
        .send_text(room, "write notes.txt hello from the room")
        .await;
    from_bot(alice, bot, room, "wrote").await;
    alice.send_text(room, "!diff").await;
    let head = from_bot(alice, bot, room, "The session's changes").await;
    assert!(head.body.contains("`notes.txt` +1"), "{head:?}");
    assert_eq!(head.relation, Relation::None);
    let diff = from_bot(alice, bot, room, "+hello from the room").await;
    assert_eq!(
        diff.relation,
        Relation::InThread {
            root: head.event_id.clone()
        },
        "the diff is in the thread: {diff:?}"
    );
}

/// A daemon log that says the login once and has no line of the Matrix libraries.
fn assert_quiet(log: &str) {
    assert_eq!(
        log.matches("the bot is logged in").count(),
        1,
        "one login line:\n{log}"
    );
    let noisy: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" matrix_sdk") || l.contains(" ruma") || l.contains(" vodozemac"))
        .collect();
    assert!(
        noisy.is_empty(),
        "the Matrix libraries logged:\n{}",
        noisy.join("\n")
    );
}

/// The room the person's client knows as `room`'s successor, once it knows it.
async fn known_room(person: &Human, room: &RoomId) -> matrix_sdk::Room {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(known) = person.client().get_room(room) {
            return known;
        }
        assert!(Instant::now() < deadline, "{room} never came to the client");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_upgraded_room_goes_on_with_its_session_in_the_successor() {
    let hs = Homeserver::start(std::path::Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let bot = hs.user_id("bot");
    let (_tk, _daemon, client) = bot_kiln(&matrix_settings(&hs, "")).await;
    let (alice, room) = alice_with(&hs, &bot).await;
    alice.send_text(&room, "say before the upgrade").await;
    from_bot(&alice, &bot, &room, "before the upgrade").await;
    let sessions = matrix_sessions(&client, room.as_str()).await;
    assert_eq!(sessions.len(), 1);
    let id = sessions[0].id.clone();
    // A question left open in the room.
    alice
        .send_text(&room, "permit p0 keep the old question")
        .await;
    from_bot(&alice, &bot, &room, "keep the old question").await;

    // The room is upgraded (the old one gets a tombstone naming its successor), and the
    // bot is invited to the successor, as Element does for the old room's members.
    let upgraded = alice
        .client()
        .send(upgrade_room::v3::Request::new(
            room.clone(),
            RoomVersionId::V11,
        ))
        .await
        .expect("the room upgraded");
    let successor: OwnedRoomId = upgraded.replacement_room;
    let bot_id = UserId::parse(bot.as_str()).unwrap();
    let new_room = known_room(&alice, &successor).await;
    // Synapse may carry the invite over itself; then this one is refused, which is fine.
    let _ = new_room.invite_user_by_id(&bot_id).await;
    alice.wait_until_joined(&successor, &bot, WAIT).await;

    // The question asked before the upgrade is answered in the successor, and the
    // turn's reply comes there.
    alice.send_text(&successor, "!approve").await;
    from_bot(&alice, &bot, &successor, "granted: keep the old question").await;

    // The conversation goes on in the successor: the same session, no new one.
    alice.send_text(&successor, "say after the upgrade").await;
    let reply = from_bot(&alice, &bot, &successor, "after the upgrade").await;
    assert!(reply.encrypted, "{reply:?}");
    assert!(said(&client, &id).await.contains("after the upgrade"));
    assert!(
        matrix_sessions(&client, successor.as_str())
            .await
            .is_empty()
    );
    assert_eq!(matrix_sessions(&client, room.as_str()).await.len(), 1);
    alice.send_text(&successor, "!session").await;
    let about = from_bot(&alice, &bot, &successor, "agent scripted").await;
    assert!(about.body.contains(&id), "{about:?}");

    // Its questions are asked, and answered, in the successor.
    alice
        .send_text(&successor, "permit p1 ship the upgrade")
        .await;
    let asked = from_bot(&alice, &bot, &successor, "ship the upgrade").await;
    alice.react(&successor, &asked.event_id, "✅").await;
    from_bot(&alice, &bot, &successor, "granted: ship the upgrade").await;
    assert!(
        !alice
            .all_received()
            .iter()
            .any(|r| r.room == room && r.body.contains("after the upgrade")),
        "the reply went to the old room"
    );
}
