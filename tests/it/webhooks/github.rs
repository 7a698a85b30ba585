//! Webhooks as GitHub really sends them: a `ping` when a hook is made, events and actions
//! the hook does not take (answered 2xx, or GitHub marks the hook failing), redeliveries
//! of one `X-GitHub-Delivery`, GitHub's default form-encoded body; and a flood of idle
//! connections that must not keep a signed hook or the daemon's socket out.

use std::io::Write;

use serde_json::{Value, json};

use super::{Hook, SECRET, hook_kiln, listening, sessions, sign, wait_done, wait_said};
use crate::common::*;

impl Hook {
    /// POSTs `body` to `/hooks/<name>` with `headers` (as JSON unless they say otherwise),
    /// signed unless `signed` is false.
    async fn send(
        &self,
        name: &str,
        body: &[u8],
        headers: &[(&str, &str)],
        signed: bool,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .post(format!("{}/hooks/{name}", self.url))
            .body(body.to_vec());
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            request = request.header("content-type", "application/json");
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if signed {
            request = request.header("X-Hub-Signature-256", sign(SECRET, body));
        }
        let reply = request.send().await.expect("the listener answers");
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

fn comment(issue: u64, action: &str, words: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "action": action,
        "issue": {"number": issue, "title": "Crash on start"},
        "comment": {"body": words},
    }))
    .unwrap()
}

async fn inbox_len(client: &crucible::client::Client) -> usize {
    testkit::daemon::call::<crucible::protocol::methods::InboxList>(client, Default::default())
        .await
        .messages
        .len()
}

#[tokio::test]
async fn pings_filters_redeliveries_and_form_bodies_are_taken_as_github_sends_them() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let tk = hook_kiln(
        dir.path(),
        port,
        "[[webhooks]]\nname = \"edits\"\nsecret_env = \"HOOK_SECRET\"\nagent = \"hook\"\n\
         prompt = \"edited: {{/comment/body}}\"\nref = \"/issue/number\"\n\
         events = [\"issue_comment\"]\nactions = [\"edited\"]\n",
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;
    let event = |name: &'static str| ("X-GitHub-Event", name);

    // A ping, as GitHub sends when the hook is made: 200 once signed, and nothing made.
    let ping = br#"{"zen":"Keep it logically awesome.","hook_id":1}"#;
    let (status, reply) = hook.send("issues", ping, &[event("ping")], false).await;
    assert_eq!(status, 401, "the signature is checked first: {reply}");
    let (status, reply) = hook.send("issues", ping, &[event("ping")], true).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["status"], "pong", "{reply}");

    // Deleted and edited comments are not prompts unless the hook asks for them; events
    // a hook does not take are ignored. Each answered 202 with the reason.
    for action in ["deleted", "edited"] {
        let body = comment(42, action, "never mind");
        let (status, reply) = hook
            .send("issues", &body, &[event("issue_comment")], true)
            .await;
        assert_eq!(status, 202, "{reply}");
        assert_eq!(reply["status"], "ignored", "{reply}");
        let why = reply["reason"].as_str().unwrap();
        assert!(why.contains(action) && why.contains("created"), "{why}");
    }
    let push = br#"{"ref":"refs/heads/main"}"#;
    let (status, reply) = hook.send("edits", push, &[event("push")], true).await;
    assert_eq!((status, reply["status"].as_str()), (202, Some("ignored")));
    assert!(
        reply["reason"].as_str().unwrap().contains("\"push\""),
        "{reply}"
    );
    let body = comment(42, "created", "a new comment");
    let (status, reply) = hook
        .send("edits", &body, &[event("issue_comment")], true)
        .await;
    assert_eq!((status, reply["status"].as_str()), (202, Some("ignored")));
    assert!(
        reply["reason"].as_str().unwrap().contains("edited"),
        "{reply}"
    );
    assert_eq!(sessions(&client).await.len(), 0, "nothing was made");
    assert_eq!(inbox_len(&client).await, 0, "nothing was said");

    // One delivery sent twice: the second answer is the first, and one prompt is made.
    let delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    let body = comment(42, "created", "fix the crash");
    let headers = [event("issue_comment"), ("X-GitHub-Delivery", delivery)];
    let (status, first) = hook.send("issues", &body, &headers, true).await;
    assert_eq!(status, 202, "{first}");
    assert_eq!(
        (first["status"].as_str(), first["reason"].as_str()),
        (Some("delivered"), Some("no_session")),
        "{first}"
    );
    let (status, again) = hook.send("issues", &body, &headers, true).await;
    assert_eq!((status, &again), (202, &first));
    let s1 = first["session_id"].as_str().unwrap().to_string();
    // A later comment on the issue is the second prompt: had the redelivery prompted,
    // it would stand between them.
    let (status, next) = hook
        .send(
            "issues",
            &comment(42, "created", "and add a test"),
            &[event("issue_comment"), ("X-GitHub-Delivery", "second")],
            true,
        )
        .await;
    assert_eq!(
        (status, next["session_id"].as_str()),
        (202, Some(s1.as_str()))
    );
    wait_said(
        &client,
        &s1,
        "got: Issue #42 (Crash on start): and add a test",
    )
    .await;
    let session = wait_done(&client, &s1, 2).await;
    assert_eq!(session.turn_count, 2);
    let said = crate::sessions::said(&client, &s1).await;
    assert_eq!(said.matches("fix the crash").count(), 1, "{said}");
    // An edit the hook asks for prompts.
    let (status, reply) = hook
        .send(
            "edits",
            &comment(42, "edited", "fix the crash, please"),
            &[event("issue_comment")],
            true,
        )
        .await;
    assert_eq!((status, reply["status"].as_str()), (202, Some("delivered")));

    // GitHub's default content type: `payload=<JSON>`, signed as sent.
    let json = String::from_utf8(comment(8, "created", "50% done & counting")).unwrap();
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &json)
        .finish();
    let headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        event("issue_comment"),
    ];
    let (status, reply) = hook.send("issues", form.as_bytes(), &headers, true).await;
    assert_eq!(
        (status, reply["status"].as_str()),
        (202, Some("delivered")),
        "{reply}"
    );
    let s8 = reply["session_id"].as_str().unwrap().to_string();
    wait_said(
        &client,
        &s8,
        "got: Issue #8 (Crash on start): 50% done & counting",
    )
    .await;
    let (status, reply) = hook.send("issues", b"zen=hi", &headers, true).await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("payload"),
        "{reply}"
    );
}

/// A push as GitHub sends it (trimmed of its many URLs).
fn push_payload() -> Vec<u8> {
    let commit = json!({
        "id": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "tree_id": "f9d2a07e9488b91af2641b26b9407fe22a451433",
        "distinct": true,
        "message": "Fix the crash on start",
        "timestamp": "2026-11-27T10:15:07+01:00",
        "url": "https://github.com/octo-org/crucible-demo/commit/6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "author": {"name": "Mona Lisa", "email": "mona@example.com", "username": "monalisa"},
        "committer": {"name": "GitHub", "email": "noreply@github.com", "username": "web-flow"},
        "added": [],
        "removed": [],
        "modified": ["src/main.rs"]
    });
    serde_json::to_vec(&json!({
        "ref": "refs/heads/main",
        "before": "a10867b14bb761a232cd80139fbd4c0d33264240",
        "after": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        "repository": {
            "id": 186853002,
            "node_id": "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=",
            "name": "crucible-demo",
            "full_name": "octo-org/crucible-demo",
            "private": false,
            "owner": {"login": "octo-org", "id": 6811672, "type": "Organization"},
            "html_url": "https://github.com/octo-org/crucible-demo",
            "default_branch": "main",
            "master_branch": "main"
        },
        "pusher": {"name": "monalisa", "email": "mona@example.com"},
        "organization": {"login": "octo-org", "id": 6811672},
        "sender": {"login": "monalisa", "id": 21031067, "type": "User"},
        "created": false,
        "deleted": false,
        "forced": false,
        "base_ref": null,
        "compare": "https://github.com/octo-org/crucible-demo/compare/a10867b14bb7...6dcb09b5b578",
        "commits": [commit.clone()],
        "head_commit": commit
    }))
    .unwrap()
}

#[tokio::test]
async fn a_push_to_hooks_that_do_not_take_it_is_ignored_with_a_2xx() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    // `issues` takes any event but is keyed by /issue/number; `comments` takes only
    // issue comments.
    let tk = hook_kiln(
        dir.path(),
        port,
        "[[webhooks]]\nname = \"comments\"\nsecret_env = \"HOOK_SECRET\"\nagent = \"hook\"\n\
         prompt = \"{{/comment/body}}\"\nref = \"/issue/number\"\nevents = [\"issue_comment\"]\n",
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let (_daemon, hook) = listening(&tk, port).await;
    let client = tk.client().await;
    let body = push_payload();
    for (name, because) in [("issues", "/issue/number"), ("comments", "\"push\"")] {
        let headers = [
            ("X-GitHub-Event", "push"),
            ("X-GitHub-Delivery", "b2d3c0e0-cc78-11f0-8f4b-6e1a2f3b4c5d"),
            ("X-GitHub-Hook-ID", "498765432"),
            ("User-Agent", "GitHub-Hookshot/2f3e4d5"),
        ];
        let (status, reply) = hook.send(name, &body, &headers, true).await;
        assert!((200..300).contains(&status), "{name}: {status} {reply}");
        assert_eq!(reply["status"], "ignored", "{name}: {reply}");
        let why = reply["reason"].as_str().unwrap_or_default();
        assert!(why.contains(because), "{name}: {reply}");
    }
    assert_eq!(sessions(&client).await.len(), 0, "nothing was made");
    assert_eq!(inbox_len(&client).await, 0, "nothing was said");
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The daemon's descriptor limit in this test, as on a stock system.
const FD_LIMIT: u64 = 1024;
/// Idle connections opened, past the daemon's descriptor limit.
const FLOOD: usize = 2000;

#[tokio::test]
async fn a_flood_of_idle_connections_keeps_out_neither_a_signed_hook_nor_the_socket() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let tk = hook_kiln(dir.path(), port, "");
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut cru = cru_on_path();
    cru.env("HOOK_SECRET", SECRET);
    limit_descriptors(&mut cru, FD_LIMIT);
    let daemon = tk.run_daemon(cru).await;
    // A listener that never accepts must fail the test, not hang it.
    let hook = Hook {
        url: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap(),
    };
    let client = tk.client().await;

    // Half say nothing; half send half a request and stop.
    let mut flood = Vec::with_capacity(FLOOD);
    for i in 0..FLOOD {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        if i % 2 == 1 {
            let _ = stream.write_all(b"POST /hooks/issues HTTP/1.1\r\nHost: localhost\r\n");
        }
        flood.push(stream);
    }
    let held = open_fds(daemon.pid());
    println!("the daemon holds {held} descriptors with {FLOOD} idle connections open");
    assert!(
        held < FD_LIMIT as usize - 256,
        "the daemon holds {held} of its {FD_LIMIT} descriptors"
    );

    // A signed hook still gets through, and the socket still answers.
    let reply = hook.comment(11, "still here").await;
    assert_eq!(reply["reason"], "no_session", "{reply}");
    let id = reply["session_id"].as_str().unwrap().to_string();
    wait_said(&client, &id, "got: Issue #11 (Crash on start): still here").await;
    let out = tk.cru(&["inbox"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sessions(&client).await.len(), 1);
    assert!(open_fds(daemon.pid()) < FD_LIMIT as usize - 256);

    // The shedding was logged, in a few lines with counts, not a line per connection.
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("webhooks: ")).collect();
    assert!(
        lines.iter().any(|l| l.contains("idle connections shed")),
        "{log}"
    );
    assert!(lines.len() < 50, "{} lines about refusals", lines.len());
    drop(flood);
}
