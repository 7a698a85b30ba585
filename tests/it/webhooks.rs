//! Webhooks end to end: the daemon's HTTP listener on loopback, signed requests as GitHub
//! sends them, a command agent that prints the prompt it was given, and seed 001's
//! resolution of each message to a session.

use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{IdParams, SessionListParams};
use crucible::protocol::{MsgType, Session, SessionState};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use testkit::daemon::call;
use testkit::params::session_id;

use crate::common::*;

use crate::sessions::{
    agent_kiln, session, wait_message, wait_message_where, wait_said, wait_session,
};
use testkit::model_server::{ScriptedReply, ScriptedServer};

mod cron;
mod cron_kept;
mod failing;
mod github;

const SECRET: &str = "hook-secret-4c1f9d";
/// The conversation timeout the test kiln sets.
const TIMEOUT_SECS: u64 = 6;

struct Hook {
    url: String,
    http: reqwest::Client,
}

impl Hook {
    async fn post(&self, name: &str, body: &[u8], signature: Option<String>) -> (u16, Value) {
        let mut request = self
            .http
            .post(format!("{}/hooks/{name}", self.url))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("X-Hub-Signature-256", signature);
        }
        let reply = request.send().await.expect("the listener answers");
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A comment on issue `issue`, signed as GitHub signs it.
    async fn comment(&self, issue: u64, words: &str) -> Value {
        let body = serde_json::to_vec(&json!({
            "action": "created",
            "issue": {"number": issue, "title": "Crash on start"},
            "comment": {"body": words},
        }))
        .unwrap();
        let (status, reply) = self.post("issues", &body, Some(sign(SECRET, &body))).await;
        assert_eq!(status, 202, "{reply}");
        reply
    }
}

fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn sessions(client: &Client) -> Vec<Session> {
    of_channel(client, None).await
}

/// `session.list`, of one channel's sessions when `channel` says.
async fn of_channel(client: &Client, channel: Option<&str>) -> Vec<Session> {
    let params = SessionListParams {
        channel: channel.map(str::to_string),
        ..SessionListParams::default()
    };
    call::<m::SessionList>(client, params).await.sessions
}

async fn wait_done(client: &Client, id: &str, turns: u64) -> Session {
    wait_session(client, id, &format!("{turns} turns, resting"), |s| {
        s.turn_count >= turns && s.state == Some(SessionState::Complete)
    })
    .await
}

/// A kiln whose webhook `issues` runs a command agent that prints its prompt (and asks
/// for approval when the prompt says "deploy"), with `extra` settings.
fn hook_kiln(dir: &std::path::Path, port: u16, extra: &str) -> TestKiln {
    let script = dir.join("agent.sh");
    write_script(
        &script,
        &format!(
            r#"#!/bin/sh
printf 'got: %s\n' "$CRUCIBLE_PROMPT"
case "$CRUCIBLE_PROMPT" in
  *deploy*)
    if "{CRU}" approve "Deploy to staging?"; then echo "deploy approved"; else echo "deploy denied"; fi;;
esac
"#
        ),
    );
    agent_kiln(&format!(
        "[agents.hook]\ntype = \"command\"\ncommand = {script:?}\n\n\
         [channels.http]\nlisten = \"127.0.0.1:{port}\"\nmax_body_kb = 16\n\n\
         [[webhooks]]\nname = \"issues\"\nsecret_env = \"HOOK_SECRET\"\nagent = \"hook\"\n\
         prompt = \"Issue #{{{{/issue/number}}}} ({{{{/issue/title}}}}): {{{{/comment/body}}}}\"\n\
         ref = \"/issue/number\"\nmessage = \"/comment/body\"\n\n{extra}"
    ))
}

async fn listening(tk: &TestKiln, port: u16) -> (DaemonProcess, Hook) {
    let mut cru = cru_on_path();
    cru.env("HOOK_SECRET", SECRET);
    let daemon = tk.run_daemon(cru).await;
    let hook = Hook {
        url: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::new(),
    };
    (daemon, hook)
}

#[tokio::test]
async fn webhooks_start_continue_reset_and_time_out_conversations_and_refuse_bad_input() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let notified = dir.path().join("notified.log");
    let tk = hook_kiln(
        dir.path(),
        port,
        &format!(
            "[channels]\nsession_timeout_secs = {TIMEOUT_SECS}\n\n\
             [notify]\ncommand = 'printf \"%s|%s|%s|%s\\n\" \"$CRUCIBLE_SESSION_NAME\" \"$CRUCIBLE_MESSAGE_TYPE\" \"$CRUCIBLE_CHANNEL\" \"$HOOK_SECRET\" >> {}'\n",
            notified.display()
        ),
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;

    // The first message of issue 42 starts a session whose agent gets the filled prompt.
    let first = hook.comment(42, "fix the crash").await;
    assert_eq!(first["decision"], "new", "{first}");
    assert_eq!(first["reason"], "no_session", "{first}");
    let s1 = first["session_id"].as_str().unwrap().to_string();
    wait_said(
        &client,
        &s1,
        "got: Issue #42 (Crash on start): fix the crash",
    )
    .await;
    let s = wait_done(&client, &s1, 1).await;
    let tag = s.channel.clone().expect("a channel session is tagged");
    assert_eq!(
        (
            tag.kind.as_str(),
            tag.source.as_str(),
            tag.reference.as_str()
        ),
        ("webhook", "issues", "42")
    );
    let list = stdout(&tk.cru(&["session", "list"]));
    assert!(list.contains("[webhook issues/42]"), "{list}");

    // The same issue within the timeout continues that session.
    let again = hook.comment(42, "and add a test").await;
    assert_eq!(
        (again["decision"].as_str(), again["reason"].as_str()),
        (Some("continue"), Some("continue")),
        "{again}"
    );
    assert_eq!(again["session_id"], s1.as_str());
    wait_said(
        &client,
        &s1,
        "got: Issue #42 (Crash on start): and add a test",
    )
    .await;
    wait_done(&client, &s1, 2).await;

    // Another issue is another conversation.
    let other = hook.comment(7, "update the docs").await;
    assert_eq!(other["reason"], "no_session", "{other}");
    let s7 = other["session_id"].as_str().unwrap().to_string();
    assert_ne!(s7, s1);

    // A reset phrase closes issue 42's session and starts a fresh one with no prompt.
    let reset = hook.comment(42, "Start over!").await;
    assert_eq!(
        (reset["decision"].as_str(), reset["reason"].as_str()),
        (Some("new"), Some("explicit_reset")),
        "{reset}"
    );
    assert_eq!(reset["previous_session_id"], s1.as_str());
    let s2 = reset["session_id"].as_str().unwrap().to_string();
    assert_ne!(s2, s1);
    wait_session(&client, &s1, "the replaced session stopped", |s| {
        s.state == Some(SessionState::Stopped) && s.channel.as_ref().is_some_and(|t| t.closed)
    })
    .await;
    let fresh = wait_session(&client, &s2, "ready", |s| {
        s.state == Some(SessionState::Complete)
    })
    .await;
    assert_eq!(
        fresh.turn_count, 0,
        "a reset session waits for the next message"
    );
    let next = hook.comment(42, "look at the parser first").await;
    assert_eq!(
        (next["reason"].as_str(), next["session_id"].as_str()),
        (Some("continue"), Some(s2.as_str())),
        "{next}"
    );
    wait_done(&client, &s2, 1).await;

    // Quiet past the timeout: a new session whose first prompt carries the old summary.
    tokio::time::sleep(Duration::from_secs(TIMEOUT_SECS + 1)).await;
    let late = hook.comment(42, "any news?").await;
    assert_eq!(
        (late["decision"].as_str(), late["reason"].as_str()),
        (Some("new"), Some("timeout")),
        "{late}"
    );
    assert_eq!(late["previous_session_id"], s2.as_str());
    let s3 = late["session_id"].as_str().unwrap().to_string();
    let text = wait_said(&client, &s3, "any news?").await;
    assert!(
        text.contains(&format!(
            "Summary of the previous conversation (session {s2})"
        )) && text.contains("look at the parser first"),
        "the first prompt carries the previous summary: {text}"
    );

    // Closed by hand: the next message starts anew, saying so.
    let out = tk.cru(&["session", "status", &s7]);
    assert!(
        stdout(&out).contains("webhook issues/7"),
        "{}",
        stdout(&out)
    );
    let closed = call::<m::SessionClose>(&client, session_id(&s7)).await;
    assert!(closed.session.channel.is_some_and(|t| t.closed), "closed");
    let reopened = hook.comment(7, "one more thing").await;
    assert_eq!(reopened["reason"], "closed", "{reopened}");
    assert_ne!(reopened["session_id"], s7.as_str());

    // An approval from a webhook session lands in the one inbox; the answer reaches it.
    let deploy = hook.comment(99, "please deploy").await;
    let s99 = deploy["session_id"].as_str().unwrap().to_string();
    let approval = wait_message(&client, &s99, MsgType::ApprovalRequired).await;
    assert_eq!(approval.title, "Deploy to staging?");
    let listed = stdout(&tk.cru(&["inbox"]));
    assert!(listed.contains("Deploy to staging?"), "{listed}");
    let out = tk.cru(&["inbox", "respond", &approval.id, "approve"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client, &s99, "deploy approved").await;
    // The notify command ran once for it, named the session and its channel, and was
    // given none of the daemon's own variables (the hook's secret among them).
    let name = session(&client, &s99).await.display_name;
    let told = std::fs::read_to_string(&notified).expect("the notify command ran");
    assert_eq!(
        told.lines().collect::<Vec<_>>(),
        [format!("{name}|approval_required|webhook issues/99|")],
        "{told}"
    );
    wait_message_where(&client, &s99, "the turn's end", |m| {
        m.msg_type == MsgType::TaskComplete
    })
    .await;

    // session.list by channel.
    let hooked = of_channel(&client, Some("webhook")).await;
    assert!(hooked.len() >= 6, "{hooked:?}");
    assert!(
        hooked
            .iter()
            .all(|s| s.channel.as_ref().is_some_and(|t| t.kind == "webhook"))
    );
    assert!(of_channel(&client, Some("interactive")).await.is_empty());

    // Bad input: each refused with its status, and nothing made.
    let before = sessions(&client).await.len();
    let body =
        serde_json::to_vec(&json!({"issue": {"number": 5}, "comment": {"body": "x"}})).unwrap();
    let (status, reply) = hook.post("nope", &body, Some(sign(SECRET, &body))).await;
    assert_eq!(status, 404, "{reply}");
    let (status, reply) = hook
        .post("issues", &body, Some(sign("wrong secret", &body)))
        .await;
    assert_eq!(status, 401, "{reply}");
    let (status, reply) = hook.post("issues", &body, None).await;
    assert_eq!(status, 401, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("X-Hub-Signature-256"),
        "{reply}"
    );
    let big = serde_json::to_vec(
        &json!({"issue": {"number": 5}, "comment": {"body": "x".repeat(20_000)}}),
    )
    .unwrap();
    let (status, reply) = hook.post("issues", &big, Some(sign(SECRET, &big))).await;
    assert_eq!(status, 413);
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let malformed = b"{\"issue\": {\"number\": 5,";
    let (status, reply) = hook
        .post("issues", malformed, Some(sign(SECRET, malformed)))
        .await;
    assert_eq!(status, 400, "{reply}");
    // A payload without the hook's ref belongs to no conversation: ignored, with a 2xx.
    let no_ref = serde_json::to_vec(&json!({"comment": {"body": "x"}})).unwrap();
    let (status, reply) = hook
        .post("issues", &no_ref, Some(sign(SECRET, &no_ref)))
        .await;
    assert_eq!((status, reply["status"].as_str()), (202, Some("ignored")));
    assert!(
        reply["reason"].as_str().unwrap().contains("/issue/number"),
        "{reply}"
    );
    assert_eq!(
        sessions(&client).await.len(),
        before,
        "a refused request makes nothing"
    );

    // The secret is never written down.
    assert_in_no_file(&tk.root().join(".crucible"), SECRET);
}

#[tokio::test]
async fn cron_jobs_run_on_their_schedule_and_on_demand_and_overlaps_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let quick = dir.path().join("quick.sh");
    write_script(
        &quick,
        "#!/bin/sh\nprintf 'cron says: %s\\n' \"$CRUCIBLE_PROMPT\"\n",
    );
    let slow = dir.path().join("slow.sh");
    write_script(&slow, "#!/bin/sh\necho started\nsleep 60\n");
    let tk = agent_kiln(&format!(
        "[agents.quick]\ntype = \"command\"\ncommand = {quick:?}\n\n\
         [agents.slow]\ntype = \"command\"\ncommand = {slow:?}\n\n\
         [[cron]]\nid = \"tick\"\nschedule = \"*/2 * * * * *\"\nagent = \"quick\"\n\
         instructions = \"check the build\"\n\n\
         [[cron]]\nid = \"yearly\"\nschedule = \"0 0 0 1 1 *\"\nagent = \"slow\"\n\
         instructions = \"the long one\"\n"
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;

    // The two-second job runs by itself, in a session tagged with it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let ticked = loop {
        let found = sessions(&client).await.into_iter().find(|s| {
            s.channel
                .as_ref()
                .is_some_and(|t| t.kind == "cron" && t.source == "tick")
        });
        if let Some(s) = found {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cron job never ran"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        ticked.channel.as_ref().unwrap().reason.as_str(),
        "scheduled"
    );
    wait_said(&client, &ticked.id, "cron says: check the build").await;

    // Run on demand; a second run while the first still works is skipped and counted.
    let out = tk.cru(&["cron", "run", "yearly", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(first["skipped"], false, "{first}");
    let running = first["session_id"].as_str().unwrap().to_string();
    wait_session(&client, &running, "working", |s| {
        s.state == Some(SessionState::Working)
    })
    .await;
    let out = tk.cru(&["cron", "run", "yearly"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said_skip = stdout(&out);
    assert!(
        said_skip.contains("skipped") && said_skip.contains(&running),
        "{said_skip}"
    );
    let out = tk.cru(&["cron", "list", "--json"]);
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let yearly = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == "yearly")
        .unwrap()
        .clone();
    assert_eq!(yearly["skipped"], 1, "{yearly}");
    assert_eq!(yearly["last_session_id"], running.as_str());
    assert!(
        yearly["next_run"]
            .as_str()
            .unwrap()
            .contains("-01-01T00:00:00"),
        "{yearly}"
    );
    let table = stdout(&tk.cru(&["cron", "list"]));
    assert!(
        table.contains("tick") && table.contains("*/2 * * * * *"),
        "{table}"
    );
    let out = tk.cru(&["cron", "run", "no-such-job"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no cron job"), "{}", stderr(&out));
    let out = tk.cru(&["session", "cancel", &running]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn an_unanswered_approval_of_a_background_session_cancels_its_turn() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let tk = hook_kiln(dir.path(), port, "[channels]\napproval_timeout_secs = 2\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;
    let reply = hook.comment(5, "deploy it").await;
    let id = reply["session_id"].as_str().unwrap().to_string();
    let approval = wait_message(&client, &id, MsgType::ApprovalRequired).await;
    let error = wait_message_where(&client, &id, "the timeout's error", |m| {
        m.msg_type == MsgType::Error
    })
    .await;
    assert_eq!(
        error.title,
        "Nobody answered in time; the turn is cancelled"
    );
    assert!(
        error
            .body
            .as_deref()
            .unwrap_or("")
            .contains("Deploy to staging?"),
        "{error:?}"
    );
    wait_session(&client, &id, "cancelled", |s| {
        s.state == Some(SessionState::Cancelled)
    })
    .await;
    let after = call::<m::InboxGet>(&client, IdParams { id: approval.id }).await;
    assert!(after.message.withdrawn, "{:?}", after.message);
}

#[tokio::test]
async fn a_message_the_model_judges_off_topic_starts_a_new_session_with_the_summary() {
    let server = ScriptedServer::start([
        ScriptedReply::text("{\"drift\": false, \"confidence\": 0.9}"),
        ScriptedReply::text("{\"drift\": true, \"confidence\": 0.6}"),
        ScriptedReply::text("```json\n{\"drift\": true, \"confidence\": 0.95}\n```"),
    ])
    .await
    .unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let tk = hook_kiln(
        dir.path(),
        port,
        &format!(
            "[agents.judge]\ntype = \"internal\"\nbase_url = \"{}\"\nmodel = \"judge\"\n\n\
             [channels]\ndrift_agent = \"judge\"\n",
            server.base_url()
        ),
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;

    let first = hook.comment(3, "fix the login form").await;
    assert_eq!(first["reason"], "no_session", "{first}");
    let s1 = first["session_id"].as_str().unwrap().to_string();
    wait_done(&client, &s1, 1).await;
    // Not drift, and drift below the threshold: both continue.
    let same = hook.comment(3, "and validate the email").await;
    assert_eq!(
        (same["reason"].as_str(), same["session_id"].as_str()),
        (Some("continue"), Some(s1.as_str())),
        "{same}"
    );
    wait_done(&client, &s1, 2).await;
    let unsure = hook.comment(3, "what about the footer").await;
    assert_eq!(unsure["reason"], "continue", "{unsure}");
    wait_done(&client, &s1, 3).await;
    // Drift at 0.95: a new session, carrying the old summary.
    let off = hook.comment(3, "rename the repository").await;
    assert_eq!(
        (off["decision"].as_str(), off["reason"].as_str()),
        (Some("new"), Some("drift")),
        "{off}"
    );
    assert_eq!(off["previous_session_id"], s1.as_str());
    let s2 = off["session_id"].as_str().unwrap().to_string();
    let text = wait_said(&client, &s2, "rename the repository").await;
    assert!(
        text.contains(&format!(
            "Summary of the previous conversation (session {s1})"
        )) && text.contains("fix the login form"),
        "{text}"
    );
    // The model was asked once per follow-up, with the conversation and the message.
    let asked = server.requests();
    assert_eq!(asked.len(), 3);
    let last = asked[2].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last.contains("fix the login form") && last.contains("rename the repository"),
        "{last}"
    );
}

/// A hook session's tag says where its questions go: the hook's own `approval_target`,
/// and that the kiln runs a Matrix bot of its own (the person's bot, through the hub,
/// then leaves them to it); without a bot of its own the tag says neither.
#[tokio::test]
async fn a_hook_sessions_tag_names_its_approval_target_and_the_kilns_own_bot() {
    let dir = tempfile::tempdir().unwrap();
    for own_bot in [true, false] {
        let port = free_port();
        // A homeserver nothing answers at: the bot is configured, not reached.
        let bot = if own_bot {
            "[channels.matrix]\nhomeserver = \"http://127.0.0.1:9\"\nuser_id = \"@bot:example.org\"\n\
             password_env = \"HOOK_SECRET\"\nallowed_users = [\"@me:example.org\"]\nagent = \"hook\"\n"
        } else {
            ""
        };
        let tk = hook_kiln(dir.path(), port, bot);
        if own_bot {
            let settings = tk.root().join(".crucible.toml");
            let text = std::fs::read_to_string(&settings).unwrap().replace(
                "ref = \"/issue/number\"",
                "ref = \"/issue/number\"\napproval_target = \"#ops:example.org\"",
            );
            std::fs::write(&settings, text).unwrap();
        }
        let _guard = KillOnDrop(tk.kiln.clone());
        let (_daemon, hook) = listening(&tk, port).await;
        let client = tk.client().await;
        let first = hook.comment(5, "look").await;
        let id = first["session_id"].as_str().expect("a session").to_string();
        let tag = wait_done(&client, &id, 1).await.channel.expect("tagged");
        if own_bot {
            assert!(tag.own_bot, "{tag:?}");
            assert_eq!(tag.approval_target.as_deref(), Some("#ops:example.org"));
        } else {
            assert!(!tag.own_bot, "{tag:?}");
            assert_eq!(tag.approval_target, None);
        }
    }
}
