//! Team mode: two daemons on two kilns (two clones of one repository) share one real
//! SurrealDB server, SurrealDB's own server code of the engine's version (test equipment:
//! tests/equipment/surreal_server.rs, an example built on first use).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods::{self as m, NoParams};
use crucible::protocol::params::{CreateSessionParams, ListParams, SessionListParams};
use crucible::protocol::{DaemonStatus, Event, InboxMessage, MsgType, Session, SessionState};
use serde_json::{Value, json};
use testkit::params::{query, send};

use crate::common::*;
use crate::sessions::{Events, LONG, git, session, wait_message_where, wait_said, wait_state};
use crate::team_server::Server;
use crate::tmux::Tmux;

const PASSWORD_ENV: &str = "CRU_TEAM_TEST_PASSWORD";
const PASSWORD: &str = "team-secret";

/// A server for one test, its root user's password [`PASSWORD`].
pub(crate) async fn start_server() -> Server {
    Server::start(Path::new(CRU), PASSWORD).await
}

/// The team's settings for a kiln: the server, its root user, a short lease.
pub(crate) fn team_settings(server: &Server, database: &str, extra: &str) -> String {
    format!(
        "[daemon]\ngrace_period_secs = 300\n\n\
         [store]\nurl = {:?}\nnamespace = \"team\"\ndatabase = {database:?}\n\
         username = \"root\"\npassword_env = {PASSWORD_ENV:?}\nlease_secs = 3\ntimeout_secs = 3\n\n{extra}",
        server.url()
    )
}

/// The agent of these tests: a script that asks the human when its prompt says `ask`,
/// sleeps when it says `sleep`, and otherwise repeats what it heard.
pub(crate) fn agent_profile() -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
read -r prompt
case "$prompt" in
  ask*)
    choice=$("{CRU}" ask "Which database?" --option Postgres --option SQLite)
    echo "answer: $choice";;
  sleep*)
    echo "sleeping"
    exec sleep 120;;
  *)
    echo "heard: $prompt";;
esac
"#
        ),
    )
    .unwrap();
    format!("[agents.asker]\ntype = \"command\"\ncommand = \"/bin/sh\"\nargs = [{script:?}]\n")
}

/// Two kilns, two clones of one repository, both pointed at `server`'s database.
pub(crate) fn two_kilns(server: &Server, database: &str) -> (TestKiln, TestKiln) {
    two_kilns_with(server, database, "")
}

/// [`two_kilns`], with more agent profiles (TOML).
pub(crate) fn two_kilns_with(
    server: &Server,
    database: &str,
    profiles: &str,
) -> (TestKiln, TestKiln) {
    let settings = team_settings(
        server,
        database,
        &format!("{}\n{profiles}", agent_profile()),
    );
    let a = TestKiln::with_settings(&settings);
    git(a.root(), &["init", "-q", "-b", "main"]);
    std::fs::write(a.root().join("README.md"), "project\n").unwrap();
    git(a.root(), &["add", "README.md"]);
    git(a.root(), &["commit", "-q", "-m", "start"]);
    let b = TestKiln::with_settings(&settings);
    std::fs::remove_file(b.root().join(".crucible.toml")).unwrap();
    let clone = Command::new("git")
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
    std::fs::write(b.root().join(".crucible.toml"), &settings).unwrap();
    (a, b)
}

/// Starts a kiln's daemon with the password in its environment.
pub(crate) async fn daemon(tk: &TestKiln) -> DaemonProcess {
    let mut cru = Command::new(CRU);
    cru.env(PASSWORD_ENV, PASSWORD).stderr(Stdio::null());
    tk.run_daemon(cru).await
}

pub(crate) async fn status(client: &Client) -> DaemonStatus {
    client
        .call::<m::DaemonStatusOf>(&NoParams {})
        .await
        .expect("daemon.status")
}

pub(crate) async fn create(client: &Client, task: &str) -> Session {
    let params = CreateSessionParams {
        agent: "asker".into(),
        task: Some(task.into()),
        ..Default::default()
    };
    client
        .call::<m::SessionCreate>(&params)
        .await
        .expect("session.create")
        .session
}

pub(crate) async fn messages_of(client: &Client, id: &str) -> Vec<InboxMessage> {
    let params = ListParams {
        session_id: Some(id.into()),
        limit: Some(10_000),
        ..Default::default()
    };
    client
        .call::<m::InboxList>(&params)
        .await
        .expect("inbox.list")
        .messages
}

#[tokio::test]
async fn a_question_asked_on_one_daemon_is_answered_from_the_other() {
    let server = start_server().await;
    let (a, b) = two_kilns(&server, "ask");
    let _daemon_a = daemon(&a).await;
    let _daemon_b = daemon(&b).await;
    let client_a = a.client().await;
    let client_b = b.client().await;
    let events_b = Events::start(&client_b).await;
    let me_a = status(&client_a)
        .await
        .instance
        .expect("daemon A's instance");

    // A command agent on daemon A runs `cru ask`.
    let s = create(&client_a, "ask the human").await;
    assert_eq!(s.owner.as_deref(), Some(me_a.id.as_str()));

    // The question shows in `cru inbox` of kiln B…
    let question = wait_message_where(&client_b, &s.id, "the question, on B", |m| {
        m.msg_type == MsgType::DecisionNeeded && !m.responded
    })
    .await;
    let inbox = b.cru(&["inbox"]);
    assert!(inbox.status.success(), "cru inbox: {}", stderr(&inbox));
    assert!(
        stdout(&inbox).contains("Which database?"),
        "{}",
        stdout(&inbox)
    );
    // … `cru inbox respond` in kiln B answers it, and the agent on A gets the answer.
    let out = b.cru(&["inbox", "respond", &question.id, "SQLite"]);
    assert!(out.status.success(), "cru inbox respond: {}", stderr(&out));
    wait_said(&client_a, &s.id, "answer: SQLite").await;

    // B's session list shows A's session, where it runs and in which state, from events:
    // B's subscriber saw it wait for the answer and move on, as A's did.
    wait_state(&client_b, &s.id, SessionState::Complete).await;
    let states = events_b.states(&s.id);
    assert!(
        states.contains(&SessionState::Waiting) && states.last() == Some(&SessionState::Complete),
        "B saw A's session go {states:?}"
    );
    let list = b.cru(&["session", "list", "--json"]);
    let listed: Vec<Session> = serde_json::from_str(&stdout(&list)).expect("a session list");
    let seen = listed
        .iter()
        .find(|x| x.id == s.id)
        .expect("A's session on B");
    assert_eq!(seen.owner.as_deref(), Some(me_a.id.as_str()));
    assert_eq!(seen.host.as_deref(), Some(me_a.host.as_str()));
    assert_eq!(seen.state, Some(SessionState::Complete));

    // `cru session send` from kiln B reaches the agent on A.
    let out = b.cru(&["session", "send", &s.id, "hello from B"]);
    assert!(out.status.success(), "cru session send: {}", stderr(&out));
    wait_said(&client_a, &s.id, "heard: hello from B").await;

    // B's daemon status names the store and daemon A.
    let status_b = b.cru(&["daemon", "status"]);
    let text = stdout(&status_b);
    assert!(text.contains("(server)"), "{text}");
    assert!(text.contains(&me_a.id) && text.contains(": live"), "{text}");

    // And a workbench on B shows A's session, with what its agent said.
    let root = b.root().display().to_string();
    let term = Tmux::start(
        "team",
        (120, 30),
        b.root(),
        &[
            ("CRU_KILN", &root),
            ("TERM", "xterm-256color"),
            (PASSWORD_ENV, PASSWORD),
        ],
        CRU,
        &[],
    );
    term.wait_text(&format!("{} · done", seen.display_name));
    term.keys(&["M-1"]);
    term.wait_text("heard: hello from B");
    term.wait_text("Which database? → SQLite");
}

#[tokio::test]
async fn a_killed_daemons_sessions_are_taken_over_once() {
    let server = start_server().await;
    let (a, b) = two_kilns(&server, "takeover");
    let mut daemon_a = daemon(&a).await;
    let _daemon_b = daemon(&b).await;
    let client_a = a.client().await;
    let client_b = b.client().await;
    let me_b = status(&client_b).await.instance.expect("B's instance");

    let s = create(&client_a, "sleep").await;
    let running = crate::sessions::wait_session(&client_a, &s.id, "a running agent", |x| {
        x.agent_pid.is_some() && x.state == Some(SessionState::Working)
    })
    .await;
    let agent = running.agent_pid.expect("the agent's pid");
    drop(client_a);
    daemon_a.kill9();

    // After A's lease runs out, B takes the session over: its agent is lost with A.
    let lost = crate::sessions::wait_session(&client_b, &s.id, "the session taken over", |x| {
        x.state == Some(SessionState::Stopped)
    })
    .await;
    assert_eq!(lost.owner.as_deref(), Some(me_b.id.as_str()));
    let reason = lost.state_reason.clone().unwrap_or_default();
    assert!(reason.contains("lost with its daemon"), "{reason}");
    // The agent A left running on this host is ended.
    wait_until("the orphaned agent to end", LONG, || {
        !Path::new(&format!("/proc/{agent}")).exists()
            || std::fs::read_to_string(format!("/proc/{agent}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    })
    .await;

    // A new daemon on kiln A finds the session taken: it neither resumes it nor reports
    // it lost a second time.
    let _daemon_a = daemon(&a).await;
    let client_a = a.client().await;
    let again = session(&client_a, &s.id).await;
    assert_eq!(again.state, Some(SessionState::Stopped));
    assert_eq!(again.owner.as_deref(), Some(me_b.id.as_str()));
    let status_a = status(&client_a).await;
    assert!(
        status_a
            .daemons
            .iter()
            .any(|d| d.taken_by.as_deref() == Some(me_b.id.as_str())),
        "{:?}",
        status_a.daemons
    );
    let reports = messages_of(&client_a, &s.id)
        .await
        .into_iter()
        .filter(|m| m.msg_type == MsgType::Error && m.title.contains("lost"))
        .count();
    assert_eq!(reports, 1, "one report of the lost agent");
}

#[tokio::test]
async fn a_daemon_restarted_within_its_lease_resumes_its_own_sessions() {
    let server = start_server().await;
    let (a, b) = two_kilns(&server, "restart");
    let mut daemon_a = daemon(&a).await;
    let _daemon_b = daemon(&b).await;
    let client_b = b.client().await;
    let client_a = a.client().await;
    let s = create(&client_a, "say hello").await;
    wait_state(&client_a, &s.id, SessionState::Complete).await;
    drop(client_a);
    daemon_a.kill9();

    // At once, before the lease runs out: the new daemon holds the kiln's lock, so the
    // old one is gone, and it takes its own sessions back.
    let _daemon_a = daemon(&a).await;
    let client_a = a.client().await;
    let me_a = status(&client_a).await.instance.expect("A's instance");
    let back = crate::sessions::wait_session(&client_a, &s.id, "the session resumed", |x| {
        x.owner.as_deref() == Some(me_a.id.as_str()) && x.state == Some(SessionState::Complete)
    })
    .await;
    assert!(back.state_reason.is_none_or(|r| !r.contains("lost")));
    // B never claims it: after two more leases it is still A's, and nobody reported it
    // lost.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let seen_b = session(&client_b, &s.id).await;
    assert_eq!(seen_b.owner.as_deref(), Some(me_a.id.as_str()));
    assert!(
        messages_of(&client_b, &s.id)
            .await
            .iter()
            .all(|m| m.msg_type != MsgType::Error),
        "no lost report"
    );
    // And it still works: a prompt through B reaches the resumed agent on A.
    let out = b.cru(&["session", "send", &s.id, "still there"]);
    assert!(out.status.success(), "cru session send: {}", stderr(&out));
    wait_said(&client_a, &s.id, "heard: still there").await;
}

#[tokio::test]
async fn sends_fail_clearly_while_the_server_is_down_and_none_acknowledged_is_lost() {
    let mut server = start_server().await;
    let tk = TestKiln::with_settings(&team_settings(&server, "outage", ""));
    let _daemon = daemon(&tk).await;
    let client = tk.client().await;
    let events = Events::start(&client).await;
    let session_id = register(&client, "writer").await;
    // A workbench on the kiln, to see what its user sees.
    let root = tk.root().display().to_string();
    let term = Tmux::start(
        "outage",
        (120, 30),
        tk.root(),
        &[
            ("CRU_KILN", &root),
            ("TERM", "xterm-256color"),
            (PASSWORD_ENV, PASSWORD),
        ],
        CRU,
        &[],
    );
    term.wait_text("writer");

    // Eight writers send one after another until a send fails.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let failure = Arc::new(Mutex::new(None::<Value>));
    let mut writers = Vec::new();
    for w in 0..8 {
        let client = tk.client().await;
        let acknowledged = Arc::clone(&acknowledged);
        let failure = Arc::clone(&failure);
        let session_id = session_id.clone();
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let title = format!("note {w}/{i}");
                let sent = client
                    .call::<m::InboxSend>(&send(&session_id, MsgType::Info, &title, &[]))
                    .await;
                match sent {
                    Ok(reply) => acknowledged.lock().unwrap().push(reply.id),
                    Err(e) => {
                        failure.lock().unwrap().get_or_insert(json!(e.to_string()));
                        return;
                    }
                }
            }
        }));
    }
    wait_until("some acknowledged sends", LONG, || {
        acknowledged.lock().unwrap().len() >= 1000
    })
    .await;
    server.kill();
    for writer in writers {
        tokio::time::timeout(LONG, writer)
            .await
            .expect("a send fails once the server is gone")
            .unwrap();
    }
    let error = failure.lock().unwrap().clone().unwrap().to_string();
    assert!(error.contains("unreachable"), "{error}");

    // The daemon keeps serving: its status says the server is away, and a send now is
    // refused at once, saying nothing was stored.
    let down = status(&client).await;
    assert!(!down.store.as_ref().unwrap().connected, "{:?}", down.store);
    let refused = client
        .call::<m::InboxSend>(&send(&session_id, MsgType::Info, "while away", &[]))
        .await
        .expect_err("refused while the server is away")
        .to_string();
    assert!(refused.contains("nothing was stored"), "{refused}");
    // The workbench says so in a banner.
    term.wait_text("database server unreachable");

    // Once the server is back, the daemon reconnects by itself, and every acknowledged
    // message is there.
    server.restart().await;
    let deadline = std::time::Instant::now() + LONG;
    while !status(&client).await.store.unwrap().connected {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not reconnect"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Clients were told both ways, and to read the state again once the live queries
    // were back; the banner is gone.
    wait_until("the store events and a resync", LONG, || {
        let seen = events.0.lock().unwrap();
        let down = seen
            .iter()
            .position(|e| matches!(e, Event::Store(h) if !h.connected));
        let up = seen
            .iter()
            .rposition(|e| matches!(e, Event::Store(h) if h.connected));
        let resync = seen.iter().rposition(|e| matches!(e, Event::Resync { .. }));
        matches!((down, up, resync), (Some(d), Some(u), Some(_)) if d < u)
    })
    .await;
    term.wait_for("the banner to go", |screen| {
        !screen.contains("database server unreachable")
    });
    let stored: Vec<String> = messages_of(&client, &session_id)
        .await
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert!(stored.len() < 10_000, "the list is not cut short");
    let acknowledged = acknowledged.lock().unwrap().clone();
    let missing: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged sends are missing",
        missing.len(),
        acknowledged.len()
    );
    println!(
        "{} acknowledged sends before the server went away, all stored",
        acknowledged.len()
    );
    let sent = client
        .call::<m::InboxSend>(&send(&session_id, MsgType::Info, "after", &[]))
        .await;
    assert!(sent.is_ok(), "{sent:?}");
}

#[tokio::test]
async fn a_user_the_server_refuses_is_a_clear_error_and_database_users_work() {
    let server = start_server().await;
    // A wrong password: the daemon does not start, and says who was refused.
    let tk = TestKiln::with_settings(&team_settings(&server, "auth", ""));
    let out = Command::new(CRU)
        .arg("--kiln")
        .arg(tk.root())
        .args(["daemon", "run"])
        .env(PASSWORD_ENV, "wrong")
        .output()
        .expect("run the daemon");
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(text.contains("refused root user \"root\""), "{text}");

    // A database user (made by root): the boundary a team gives crucible.
    let root = TestKiln::with_settings(&team_settings(&server, "auth", ""));
    let _root_daemon = daemon(&root).await;
    let client = root.client().await;
    client
        .call::<m::DbQuery>(&query(
            "DEFINE USER crew ON DATABASE PASSWORD 'crew-secret' ROLES EDITOR",
            Value::Null,
        ))
        .await
        .expect("define a database user");
    let crew = TestKiln::with_settings(&format!(
        "[daemon]\ngrace_period_secs = 300\n\n[store]\nurl = {:?}\nnamespace = \"team\"\n\
         database = \"auth\"\nusername = \"crew\"\nauth = \"database\"\npassword_env = \"CRU_CREW\"\n",
        server.url()
    ));
    let mut cru = Command::new(CRU);
    cru.env("CRU_CREW", "crew-secret").stderr(Stdio::null());
    let _crew_daemon = crew.run_daemon(cru).await;
    let crew_client = crew.client().await;
    let id = register(&crew_client, "crew-agent").await;
    let sent = crew_client
        .call::<m::InboxSend>(&send(&id, MsgType::Info, "from the crew", &[]))
        .await
        .expect("a database user can send");
    // The root daemon sees it: one database.
    let mid = sent.id;
    wait_message_where(&client, &id, "the crew's message", |m| m.id == mid).await;
}

#[tokio::test]
async fn wss_with_the_teams_own_certificate_authority() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = crate::team_server::make_certificates(certs.path());
    let server = Server::start_tls(Path::new(CRU), PASSWORD, &cert, &key).await;
    assert!(server.url().starts_with("wss://"));

    // Without the team's CA the server's certificate is not trusted: a clear refusal.
    let untrusting = TestKiln::with_settings(&team_settings(&server, "tls", ""));
    let out = Command::new(CRU)
        .arg("--kiln")
        .arg(untrusting.root())
        .args(["daemon", "run"])
        .env(PASSWORD_ENV, PASSWORD)
        .output()
        .expect("run the daemon");
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("cannot open the database at wss://") && text.contains("certificate"),
        "{text}"
    );

    // With it (`store.ca_file`), everything works over TLS.
    let extra = format!("[store]\nca_file = {:?}\n", ca.display().to_string());
    let settings = team_settings(&server, "tls", "").replace("[store]\n", &extra);
    let tk = TestKiln::with_settings(&settings);
    let _daemon = daemon(&tk).await;
    let client = tk.client().await;
    let id = register(&client, "over-tls").await;
    let sent = client
        .call::<m::InboxSend>(&send(&id, MsgType::Info, "encrypted", &[]))
        .await
        .expect("a send over wss");
    let listed = messages_of(&client, &id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, sent.id);
    assert_eq!(status(&client).await.database, server.url());
}

/// Daemons of a team opening a new database at once: their schema migrations race, the
/// losers run them again and find the work done, and every daemon serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_starting_at_once_on_a_new_database_all_serve() {
    let server = start_server().await;
    let kilns: Vec<TestKiln> = (0..8)
        .map(|_| TestKiln::with_settings(&team_settings(&server, "race", "")))
        .collect();
    let _guards: Vec<KillOnDrop> = kilns.iter().map(|tk| KillOnDrop(tk.kiln.clone())).collect();
    // Each waits until its daemon answers, and fails (with what it said) if it exits
    // first.
    let _daemons = futures::future::join_all(kilns.iter().map(|tk| {
        let mut cru = Command::new(CRU);
        cru.env(PASSWORD_ENV, PASSWORD).stderr(Stdio::piped());
        tk.run_daemon(cru)
    }))
    .await;
    for tk in &kilns {
        let client = tk.client().await;
        client
            .call::<m::SessionList>(&SessionListParams::default())
            .await
            .expect("the daemon serves");
        let out = tk.cru(&["inbox", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
}
