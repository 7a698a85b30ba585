//! The Matrix channel end to end: a real Synapse, the daemon's bot logged in with end-to-end
//! encryption, and a person on a real Matrix client (the SDK's own) in an encrypted room.
//! The scripted agent runs each message as its script (`say …`, `permit …`).

use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::SessionListParams;
use crucible::protocol::{DaemonStatus, MatrixStatus, MsgType, Session};
use matrix_sdk::ruma::OwnedRoomId;
use matrix_sdk::ruma::events::room::message::{ReplacementMetadata, RoomMessageEventContent};
use testkit::daemon::call;

use crate::common::*;
use crate::matrix_human::{Human, Received, Relation};
use crate::sessions::{agent_kiln, said, wait_message_where};
use crate::synapse::Homeserver;

pub(crate) const BOT_PASSWORD: &str = "bot-pass-7d1e0c";
pub(crate) const WAIT: Duration = Duration::from_secs(60);

pub(crate) fn matrix_settings(hs: &Homeserver, extra: &str) -> String {
    format!(
        "[channels.matrix]\nhomeserver = {:?}\nuser_id = {:?}\npassword_env = \"CRU_TEST_BOT_PASSWORD\"\n\
         allowed_users = [{:?}]\nagent = \"scripted\"\nthread_after_chars = 400\n\n{extra}",
        hs.url(),
        hs.user_id("bot"),
        hs.user_id("alice"),
    )
}

pub(crate) async fn bot_daemon(tk: &TestKiln) -> DaemonProcess {
    let mut cru = cru_on_path();
    cru.env("CRU_TEST_BOT_PASSWORD", BOT_PASSWORD);
    tk.run_daemon(cru).await
}

/// `daemon.status`'s Matrix part, once the bot has synced.
pub(crate) async fn synced(client: &Client) -> MatrixStatus {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let status = daemon_status(client).await;
        if let Some(matrix) = status.matrix.clone()
            && matrix.logged_in
            && matrix.last_sync.is_some()
        {
            return matrix;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bot did not log in and sync: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A kiln of the scripted agents with `settings` (the Matrix channel among them), its
/// daemon running the bot, and a client once the bot has synced.
pub(crate) async fn bot_kiln(settings: &str) -> (TestKiln, DaemonProcess, Client) {
    let tk = agent_kiln(settings);
    let daemon = bot_daemon(&tk).await;
    let client = Client::connect(&tk.kiln).await.unwrap();
    synced(&client).await;
    (tk, daemon, client)
}

/// alice (password `alice-pass`) logged in, in a new encrypted room the bot has joined.
pub(crate) async fn alice_with(hs: &Homeserver, bot: &str) -> (Human, OwnedRoomId) {
    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let room = alice.create_encrypted_room(&[bot], false).await;
    alice.wait_until_joined(&room, bot, WAIT).await;
    (alice, room)
}

/// `daemon.status`, typed.
pub(crate) async fn daemon_status(client: &Client) -> DaemonStatus {
    call::<m::DaemonStatusOf>(client, m::NoParams {}).await
}

/// Every session of the kiln.
pub(crate) async fn all_sessions(client: &Client) -> Vec<Session> {
    call::<m::SessionList>(client, SessionListParams::default())
        .await
        .sessions
}

pub(crate) async fn matrix_sessions(client: &Client, room: &str) -> Vec<Session> {
    all_sessions(client)
        .await
        .into_iter()
        .filter(|s| {
            s.channel
                .as_ref()
                .is_some_and(|t| t.kind == "matrix" && t.reference == room)
        })
        .collect()
}

/// The bot's message in `room` whose text holds `text`.
pub(crate) async fn from_bot(
    alice: &Human,
    bot: &str,
    room: &matrix_sdk::ruma::RoomId,
    text: &str,
) -> Received {
    alice
        .wait_for_message(
            room,
            |r| r.sender.as_str() == bot && r.msgtype != "m.reaction" && r.body.contains(text),
            WAIT,
        )
        .await
}

#[tokio::test]
async fn a_room_talks_to_its_session_and_answers_approvals_end_to_end_encrypted() {
    let mut hs = Homeserver::start(std::path::Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    hs.register("mallory", "mallory-pass", false).await;
    let bot = hs.user_id("bot");
    let tk = agent_kiln(&matrix_settings(&hs, ""));
    let mut daemon = bot_daemon(&tk).await;
    let client = Client::connect(&tk.kiln).await.unwrap();
    let status = synced(&client).await;
    assert_eq!(status.user_id, bot.as_str());
    let device = status.device_id.clone().expect("a device");

    // An allowed user's first message in an encrypted room starts a session; the reply
    // comes back encrypted, and decrypts.
    let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
    let room = alice.create_encrypted_room(&[bot.as_str()], false).await;
    alice.wait_until_joined(&room, &bot, WAIT).await;
    alice.send_text(&room, "say hello from the phone").await;
    let reply = from_bot(&alice, &bot, &room, "hello from the phone").await;
    assert!(
        reply.encrypted,
        "the reply was not end-to-end encrypted: {reply:?}"
    );
    let first = matrix_sessions(&client, room.as_str()).await;
    assert_eq!(first.len(), 1, "one session for the room");
    let first_id = first[0].id.clone();

    // A second message continues the same session; editing it prompts nothing more.
    let second = alice.send_text(&room, "say and a second thing").await;
    from_bot(&alice, &bot, &room, "and a second thing").await;
    alice
        .send(
            &room,
            RoomMessageEventContent::text_plain("say an edit of it")
                .make_replacement(ReplacementMetadata::new(second, None)),
        )
        .await;
    let sessions = matrix_sessions(&client, room.as_str()).await;
    assert_eq!(sessions.len(), 1);
    assert!(
        said(&client, &first_id)
            .await
            .contains("and a second thing")
    );

    // A reset phrase starts a new one and closes the old.
    alice.send_text(&room, "start over").await;
    let notice = from_bot(&alice, &bot, &room, "explicit_reset").await;
    assert!(
        notice.body.contains(&format!("`{first_id}` is closed")),
        "{notice:?}"
    );
    let all = matrix_sessions(&client, room.as_str()).await;
    let second_id = all
        .iter()
        .map(|s| s.id.clone())
        .find(|id| *id != first_id)
        .unwrap_or_else(|| panic!("a new session: {all:#?}"));

    // An approval in the room, answered by a ✅ reaction: the agent proceeds.
    alice.send_text(&room, "permit p1 deploy to staging").await;
    let asked = from_bot(&alice, &bot, &room, "Approval Required").await;
    assert!(asked.body.contains("deploy to staging"), "{asked:?}");
    alice.react(&room, &asked.event_id, "✅").await;
    from_bot(&alice, &bot, &room, "granted: deploy to staging").await;
    let confirmed = from_bot(&alice, &bot, &room, "Answered by").await;
    assert_eq!(
        confirmed.relation,
        Relation::InThread {
            root: asked.event_id.clone()
        },
        "the answer is confirmed in the question's thread"
    );

    // The answer names who gave it, and where.
    let deployed = wait_message_where(&client, &second_id, "the answered approval", |m| {
        m.responded && m.title.contains("deploy to staging")
    })
    .await;
    let alice_via_matrix = format!("{} via Matrix", hs.user_id("alice"));
    assert_eq!(
        deployed.answered_by.as_deref(),
        Some(alice_via_matrix.as_str())
    );

    // Another, answered by ❌: it does not.
    alice.send_text(&room, "permit p2 drop the database").await;
    let asked = from_bot(&alice, &bot, &room, "drop the database").await;
    alice.react(&room, &asked.event_id, "❌").await;
    from_bot(&alice, &bot, &room, "denied: drop the database").await;

    // Commands act on the room's session; /approve answers the open question.
    alice.send_text(&room, "/session").await;
    let about = from_bot(&alice, &bot, &room, "agent scripted").await;
    assert!(about.body.contains(&second_id), "{about:?}");
    alice.send_text(&room, "permit p4 tag the release").await;
    from_bot(&alice, &bot, &room, "tag the release").await;
    alice.send_text(&room, "/approve").await;
    from_bot(&alice, &bot, &room, "granted: tag the release").await;
    alice.send_text(&room, "/frobnicate").await;
    from_bot(
        &alice,
        &bot,
        &room,
        "Unknown command /frobnicate: say !help",
    )
    .await;

    // One answered elsewhere: the post says so, and a reaction after it counts for nothing.
    alice.send_text(&room, "permit p3 rotate the keys").await;
    let asked = from_bot(&alice, &bot, &room, "rotate the keys").await;
    let message = wait_message_where(&client, &second_id, "the third approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded && m.title.contains("rotate")
    })
    .await;
    let out = tk.cru(&["inbox", "respond", &message.id, "approve"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let edit = from_bot(&alice, &bot, &room, "answered by cru inbox respond").await;
    assert_eq!(
        edit.relation,
        Relation::Replaces {
            original: asked.event_id.clone()
        }
    );
    alice.react(&room, &asked.event_id, "❌").await;
    from_bot(&alice, &bot, &room, "granted: rotate the keys").await;

    // A stranger: their invite is not taken, and in a room the bot serves their messages
    // start nothing.
    let mallory = Human::login(&hs.url(), "mallory", "mallory-pass").await;
    let lair = mallory.create_encrypted_room(&[bot.as_str()], true).await;
    let mallory_id = mallory.user_id();
    alice
        .room(&room)
        .invite_user_by_id(&mallory_id)
        .await
        .expect("alice invites mallory");
    mallory.join(&room).await;
    alice
        .wait_until_joined(&room, mallory_id.as_str(), WAIT)
        .await;
    mallory.send_text(&room, "say mallory was here").await;
    alice.send_text(&room, "say after the stranger").await;
    from_bot(&alice, &bot, &room, "after the stranger").await;
    assert!(
        !alice
            .all_received()
            .iter()
            .any(|r| r.sender.as_str() == bot && r.body.contains("mallory was here")),
        "a stranger's message reached the session"
    );
    assert!(!said(&client, &second_id).await.contains("mallory was here"));
    assert!(
        !said(&client, &first_id).await.contains("an edit of it"),
        "an edit was passed on as a new message"
    );
    let membership = mallory
        .room(&lair)
        .get_member_no_sync(&matrix_sdk::ruma::UserId::parse(bot.as_str()).unwrap())
        .await
        .unwrap()
        .map(|m| m.membership().clone());
    assert_ne!(
        membership,
        Some(matrix_sdk::ruma::events::room::member::MembershipState::Join),
        "the bot joined a stranger's room"
    );

    // A cron job's approval goes to its approval_target (a direct chat), tagged with the
    // session, and is answered there; the chat gets no session of its own.
    let dm = alice.create_encrypted_room(&[bot.as_str()], true).await;
    alice.wait_until_joined(&dm, &bot, WAIT).await;
    let settings = std::fs::read_to_string(tk.root().join(".crucible.toml")).unwrap();
    std::fs::write(
        tk.root().join(".crucible.toml"),
        format!(
            "{settings}\n[[cron]]\nid = \"nightly\"\nschedule = \"0 0 3 1 1 *\"\nagent = \"scripted\"\n\
             instructions = \"permit c1 deploy the nightly build\"\napproval_target = {:?}\n",
            dm.as_str()
        ),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let out = tk.cru(&["cron", "run", "nightly"]);
        if out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon never took the cron job: {}",
            stderr(&out)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let asked = from_bot(&alice, &bot, &dm, "deploy the nightly build").await;
    assert!(asked.body.contains("Approval Required"), "{asked:?}");
    let cron_session = wait_session_where(&client, |s| {
        s.channel.as_ref().is_some_and(|t| t.kind == "cron")
    })
    .await;
    assert!(
        asked.body.contains(&cron_session.id),
        "tagged with the session: {asked:?}"
    );
    alice.react(&dm, &asked.event_id, "👍").await;
    let deadline = std::time::Instant::now() + WAIT;
    while !said(&client, &cron_session.id)
        .await
        .contains("granted: deploy the nightly build")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the cron session did not proceed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(matrix_sessions(&client, dm.as_str()).await.is_empty());
    // Plain words in the chat the approvals go to start no session and answer nothing:
    // the sender is told how to answer.
    alice.send_text(&dm, "looks fine to me").await;
    let told = from_bot(&alice, &bot, &dm, "not passed on to any session").await;
    assert!(told.body.contains("!approve"), "{told:?}");
    assert!(matrix_sessions(&client, dm.as_str()).await.is_empty());

    // New Matrix settings restart the bot in the running daemon: the same device, and
    // one reply per message (the bot it replaces posts nothing more).
    let settings = std::fs::read_to_string(tk.root().join(".crucible.toml")).unwrap();
    std::fs::write(
        tk.root().join(".crucible.toml"),
        settings.replace("thread_after_chars = 400", "thread_after_chars = 500"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let status = daemon_status(&client).await;
        // The new bot starts from a fresh status: not yet synced.
        if status.matrix.as_ref().is_none_or(|m| m.last_sync.is_none()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bot was not restarted: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(synced(&client).await.device_id, Some(device.clone()));
    alice.send_text(&room, "say once after new settings").await;
    from_bot(&alice, &bot, &room, "once after new settings").await;
    alice.send_text(&room, "say and then this").await;
    from_bot(&alice, &bot, &room, "and then this").await;
    let copies = alice
        .all_received()
        .iter()
        .filter(|r| r.sender.as_str() == bot && r.body.contains("once after new settings"))
        .count();
    assert_eq!(copies, 1, "the replaced bot posted too");

    // The daemon restarted: the same device, still decrypting.
    drop(client);
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    daemon.wait_exit(WAIT).await;
    let _daemon = bot_daemon(&tk).await;
    let client = Client::connect(&tk.kiln).await.unwrap();
    let status = synced(&client).await;
    assert_eq!(status.device_id, Some(device), "the device is kept");
    alice.send_text(&room, "say after the restart").await;
    let reply = from_bot(&alice, &bot, &room, "after the restart").await;
    assert!(reply.encrypted);

    // The homeserver killed and back: the bot comes back with it.
    hs.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    hs.start_again().await;
    alice.send_text(&room, "say the homeserver is back").await;
    from_bot(&alice, &bot, &room, "the homeserver is back").await;
    // Its absence is said once in the log, however many syncs failed, and its return once.
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    assert_eq!(log.matches("matrix: sync failed").count(), 1, "{log}");
    assert_eq!(log.matches("matrix: sync works again").count(), 1, "{log}");
    assert!(
        !std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log"))
            .unwrap_or_default()
            .contains(BOT_PASSWORD)
    );
    assert_in_no_file(tk.root(), BOT_PASSWORD);
}

/// Polls the session list until a session passes `check`.
async fn wait_session_where(client: &Client, check: impl Fn(&Session) -> bool) -> Session {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(found) = all_sessions(client).await.into_iter().find(&check) {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "no such session");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// With the homeserver's own message rate limit (it answers 429 past a burst), a burst of
/// messages still reaches the session and every reply reaches the room: the bot waits as
/// long as the homeserver asks, and loses nothing.
#[tokio::test]
async fn a_rate_limited_bot_waits_and_loses_nothing() {
    let hs = Homeserver::start_with_default_message_rate_limit(std::path::Path::new(CRU)).await;
    hs.register("bot", BOT_PASSWORD, false).await;
    hs.register("alice", "alice-pass", false).await;
    let bot = hs.user_id("bot");
    let (tk, _daemon, _client) = bot_kiln(&matrix_settings(&hs, "")).await;
    let (alice, room) = alice_with(&hs, &bot).await;
    const BURST: usize = 14;
    for n in 0..BURST {
        alice
            .send_text(&room, &format!("say burst line {n} done"))
            .await;
    }
    for n in 0..BURST {
        from_bot(&alice, &bot, &room, &format!("burst line {n} done")).await;
    }
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    assert!(
        !log.contains("cannot post"),
        "a post was given up on:\n{log}"
    );
    // The homeserver did refuse the bot's sends for a while.
    let refused = hs
        .log()
        .lines()
        .filter(|l| l.contains(" 429 ") && l.contains("@bot:") && l.contains("/send/"))
        .count();
    assert!(
        refused > 0,
        "the bot was never rate limited:\n{}",
        hs.log_tail()
    );
}
