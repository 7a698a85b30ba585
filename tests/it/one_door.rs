//! One door for every caller, and answers bound to what they answer: an answer given after
//! a kill -9 of the daemon is refused with why (never "answered" with nothing delivered),
//! each answer names who gave it and through which channel (the command line, a paired
//! browser), and in team mode a Matrix room's message for a session another daemon runs
//! reaches that session.

use std::path::Path;
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::ChannelKind;
use crucible::protocol::audit::AuditEvent;
use crucible::protocol::methods as m;
use crucible::protocol::params::{IdParams, ResolveParams, SessionListParams};
use crucible::protocol::web::WebPairing;
use crucible::protocol::{InboxMessage, MsgType, Session, SessionState};
use serde_json::{Value, json};
use testkit::daemon::call;
use testkit::params::session_id;

use crate::common::*;
use crate::sessions::{
    agent_kiln, create, said, session, wait_message_where, wait_said, wait_state,
};

/// The open approval of session `id`, once its agent asked.
async fn approval(client: &Client, id: &str, what: &str) -> InboxMessage {
    wait_message_where(client, id, "the approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded && m.title.contains(what)
    })
    .await
}

async fn message(client: &Client, id: &str) -> InboxMessage {
    let id = IdParams { id: id.to_string() };
    call::<m::InboxGet>(client, id).await.message
}

/// Who the session's audit says answered its approvals, in order.
async fn answered_by(client: &Client, id: &str) -> Vec<String> {
    let log = call::<m::SessionAudit>(client, session_id(id)).await;
    log.records
        .into_iter()
        .filter_map(|r| match r.event {
            AuditEvent::PermissionAnswered { by, .. } => Some(by),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_answer_after_a_kill_9_is_refused_with_why_and_never_reported_answered() {
    let tk = agent_kiln("");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let s = create(
        &client,
        "scripted",
        Some("permit p1 Deploy to staging\nwrite deployed.txt yes\nsay deployed"),
    )
    .await;
    let asked = approval(&client, &s.id, "Deploy to staging").await;
    drop(client);
    daemon.kill9();
    let _guard = KillOnDrop(tk.kiln.clone());

    // The command line starts a new daemon and answers: refused, saying why.
    let out = tk.cru(&["inbox", "respond", &asked.id, "approve"]);
    assert!(!out.status.success(), "reported answered: {}", stdout(&out));
    let why = stderr(&out);
    assert!(
        why.contains("withdrawn") && !why.contains("answered by"),
        "{why}"
    );
    // Nothing received it: the question is withdrawn, not answered, and the agent did
    // not go on.
    let client = tk.client().await;
    let after = message(&client, &asked.id).await;
    assert!(after.withdrawn, "{after:?}");
    assert_ne!(after.response.as_deref(), Some("Yes, proceed"), "{after:?}");
    let worktree = session(&client, &s.id).await.worktree.expect("a worktree");
    assert!(!Path::new(&worktree).join("deployed.txt").exists());

    // Asked again through another channel: the same precise refusal.
    let web = Web::pair(&tk, "phone").await;
    let (code, text) = web
        .call(
            "inbox.respond",
            json!({"id": asked.id, "response": "approve"}),
        )
        .await
        .expect_err("refused");
    assert_eq!(code, -32003, "{text}");
    assert!(text.contains("withdrawn"), "{text}");
}

#[tokio::test]
async fn each_answer_names_who_gave_it_and_through_which_channel() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(
        &client,
        "scripted",
        Some("permit p1 Deploy to staging\nsay one"),
    )
    .await;
    let first = approval(&client, &s.id, "Deploy to staging").await;
    let out = tk.cru(&["inbox", "respond", &first.id, "approve"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_state(&client, &s.id, SessionState::Complete).await;
    assert!(said(&client, &s.id).await.contains("one"));

    let web = Web::pair(&tk, "phone").await;
    let prompt = json!({"session_id": s.id, "text": "permit p2 Tag the release\nsay two"});
    web.call("session.prompt", prompt).await.expect("prompted");
    let second = approval(&client, &s.id, "Tag the release").await;
    web.call(
        "inbox.respond",
        json!({"id": second.id, "response": "approve"}),
    )
    .await
    .expect("answered");
    wait_state(&client, &s.id, SessionState::Complete).await;

    let by = |m: &InboxMessage| m.answered_by.clone().unwrap_or_default();
    assert_eq!(by(&message(&client, &first.id).await), "cru inbox respond");
    assert_eq!(by(&message(&client, &second.id).await), "web: phone");
    assert_eq!(
        answered_by(&client, &s.id).await,
        ["cru inbox respond", "web: phone"]
    );
    // A second answer is told who gave the first.
    let out = tk.cru(&["inbox", "respond", &second.id, "deny"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("already answered by web: phone"),
        "{}",
        stderr(&out)
    );
}

/// A browser paired over HTTP as the pairing page pairs: its cookie and request token.
struct Web {
    base: String,
    cookie: String,
    csrf: String,
    http: reqwest::Client,
}

impl Web {
    async fn pair(tk: &TestKiln, label: &str) -> Web {
        let out = tk.cru(&["web", "--json", "--no-wait"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let pairing: WebPairing = serde_json::from_str(&stdout(&out)).expect("cru web --json");
        let base = pairing.url.split("/pair").next().unwrap().to_string();
        let http = reqwest::Client::new();
        let paired = http
            .post(format!("{base}/api/pair"))
            .header("origin", &base)
            .header("sec-fetch-site", "same-origin")
            .header("content-type", "application/json")
            .body(json!({"code": pairing.code, "label": label}).to_string())
            .send()
            .await
            .expect("the web view answers");
        assert_eq!(paired.status().as_u16(), 200);
        let set = paired.headers()["set-cookie"].to_str().unwrap();
        let cookie = set.split(';').next().unwrap().to_string();
        let me = http
            .get(format!("{base}/api/me"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let me: Value = serde_json::from_str(&me).expect("JSON");
        let csrf = me["csrf"].as_str().unwrap().to_string();
        Web {
            base,
            cookie,
            csrf,
            http,
        }
    }

    /// Calls a method as the page does: its result, or the error's code and message.
    async fn call(&self, method: &str, params: Value) -> Result<Value, (i64, String)> {
        let answer = self
            .http
            .post(format!("{}/api/call/{method}", self.base))
            .header("origin", &self.base)
            .header("sec-fetch-site", "same-origin")
            .header("cookie", &self.cookie)
            .header("x-crucible-csrf", &self.csrf)
            .header("content-type", "application/json")
            .body(params.to_string())
            .send()
            .await
            .expect("the web view answers");
        let ok = answer.status().is_success();
        let body = answer.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&body).expect("JSON");
        if ok {
            return Ok(body);
        }
        let code = body["error"]["code"].as_i64().unwrap_or(0);
        let message = body["error"]["message"].as_str().unwrap_or("").to_string();
        Err((code, message))
    }
}

#[cfg(feature = "matrix")]
mod team_matrix {
    use std::process::Command;

    use super::*;
    use crate::matrix_human::Human;
    use crate::synapse::Homeserver;
    use crate::team_server::Server;

    const PASSWORD_ENV: &str = "CRU_TEAM_TEST_PASSWORD";
    const PASSWORD: &str = "team-secret";
    const BOT_PASSWORD: &str = "bot-pass-51a9";
    const WAIT: Duration = Duration::from_secs(60);

    fn team_settings(server: &Server) -> String {
        format!(
            "[daemon]\ngrace_period_secs = 300\n\n\
             [store]\nurl = {:?}\nnamespace = \"team\"\ndatabase = \"door\"\n\
             username = \"root\"\npassword_env = {PASSWORD_ENV:?}\nlease_secs = 3\ntimeout_secs = 3\n",
            server.url()
        )
    }

    fn matrix_settings(hs: &Homeserver) -> String {
        format!(
            "[channels.matrix]\nhomeserver = {:?}\nuser_id = {:?}\npassword_env = \"CRU_TEST_BOT_PASSWORD\"\n\
             allowed_users = [{:?}]\nagent = \"scripted\"\n",
            hs.url(),
            hs.user_id("bot"),
            hs.user_id("alice"),
        )
    }

    async fn daemon(tk: &TestKiln) -> DaemonProcess {
        let mut cru: Command = cru_on_path();
        cru.env(PASSWORD_ENV, PASSWORD)
            .env("CRU_TEST_BOT_PASSWORD", BOT_PASSWORD);
        tk.run_daemon(cru).await
    }

    /// Kiln B: a clone of A's repository, with `settings`.
    fn clone_of(a: &TestKiln, settings: &str) -> TestKiln {
        let b = TestKiln::with_settings(settings);
        std::fs::remove_file(b.root().join(".crucible.toml")).unwrap();
        let clone = std::process::Command::new("git")
            .args(["clone", "-q"])
            .arg(a.root())
            .arg(b.root())
            .output()
            .expect("git clone");
        assert!(
            clone.status.success(),
            "{}",
            String::from_utf8_lossy(&clone.stderr)
        );
        std::fs::write(b.root().join(".crucible.toml"), settings).unwrap();
        b
    }

    async fn room_sessions(client: &Client, room: &str) -> Vec<Session> {
        let all = call::<m::SessionList>(client, SessionListParams::default()).await;
        all.sessions
            .into_iter()
            .filter(|s| s.channel.as_ref().is_some_and(|t| t.reference == room))
            .collect()
    }

    #[tokio::test]
    async fn a_room_message_for_a_session_another_daemon_runs_reaches_that_session() {
        let server = Server::start(Path::new(CRU), PASSWORD).await;
        let hs = Homeserver::start(Path::new(CRU)).await;
        hs.register("bot", BOT_PASSWORD, false).await;
        hs.register("alice", "alice-pass", false).await;
        let bot = hs.user_id("bot");
        let team = team_settings(&server);
        let a = TestKiln::builder()
            .grace_period(None)
            .git()
            .scripted_agents()
            .settings(&team)
            .build();
        // Only B runs the bot.
        let b_settings = TestKiln::builder()
            .grace_period(None)
            .scripted_agents()
            .settings(&format!("{team}\n{}", matrix_settings(&hs)))
            .settings_text();
        let b = clone_of(&a, &b_settings);
        let _a_guard = KillOnDrop(a.kiln.clone());
        let _b_guard = KillOnDrop(b.kiln.clone());
        let _da = daemon(&a).await;
        let _db = daemon(&b).await;
        let on_a = Client::connect(&a.kiln).await.unwrap();
        let on_b = Client::connect(&b.kiln).await.unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let status = call::<m::DaemonStatusOf>(&on_b, m::NoParams {}).await;
            if status
                .matrix
                .as_ref()
                .is_some_and(|m| m.last_sync.is_some())
            {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{status:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let alice = Human::login(&hs.url(), "alice", "alice-pass").await;
        let room = alice.create_encrypted_room(&[bot.as_str()], false).await;
        alice.wait_until_joined(&room, &bot, WAIT).await;

        // The room's conversation runs on A.
        let resolve = ResolveParams {
            channel: ChannelKind::Matrix,
            source: "room".into(),
            reference: room.as_str().into(),
            text: "say started on a".into(),
            words: None,
            agent: "scripted".into(),
            driver: None,
            persistent: true,
            kiln: None,
        };
        let id = call::<m::SessionResolve>(&on_a, resolve).await.session_id;
        wait_said(&on_a, &id, "started on a").await;
        let owner = session(&on_a, &id).await.owner;
        assert!(owner.is_some());

        // Alice writes in the room; B's bot takes the message through the door, which
        // forwards the prompt to A, whose agent answers it.
        alice
            .send_text(&room, "say routed to the daemon that runs it")
            .await;
        wait_said(&on_a, &id, "routed to the daemon that runs it").await;
        let sessions = room_sessions(&on_b, room.as_str()).await;
        assert_eq!(sessions.len(), 1, "no second session: {sessions:#?}");
        assert_eq!(sessions[0].owner, owner, "still A's");
    }
}
