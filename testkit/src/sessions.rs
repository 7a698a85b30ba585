//! Agent sessions as the tests drive them: kilns with the scripted agent, sessions
//! created and read through typed calls, the events the daemon pushes, and waits on a
//! session's state or inbox with deadlines.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{CreateSessionParams, ListParams, TranscriptParams};
use crucible::protocol::{
    EntryKind, Event, InboxMessage, MsgType, Session, SessionState, TranscriptEntry,
};

use crate::daemon::call;
use crate::kiln::TestKiln;
use crate::params::session_id;

/// The longest a test waits for an agent's session to get somewhere.
pub const LONG: Duration = Duration::from_secs(60);

/// Runs git in `dir` (as a test user) and returns its output, trimmed; panics if it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A kiln that is a git repository with one commit on `main`, and agent profiles for
/// the scripted agent: `scripted` (cannot resume), `loader` (can), plus `extra`.
pub fn agent_kiln(extra: &str) -> TestKiln {
    TestKiln::builder()
        .git()
        .scripted_agents()
        .settings(extra)
        .build()
}

/// Every event the daemon pushes, collected in the background.
pub struct Events(pub Arc<Mutex<Vec<Event>>>);

impl Events {
    pub async fn start(client: &Client) -> Events {
        let mut notes = client.subscribe(None).await.expect("subscribe");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Some(note) = notes.recv().await {
                if let Some(event) = Event::from_notification(&note.method, note.params) {
                    sink.lock().unwrap().push(event);
                }
            }
        });
        Events(seen)
    }

    /// The states session `id` went through, repeats collapsed.
    pub fn states(&self, id: &str) -> Vec<SessionState> {
        let mut states: Vec<SessionState> = Vec::new();
        for event in self.0.lock().unwrap().iter() {
            let session = match event {
                Event::SessionRegistered(s) | Event::SessionUpdated(s) if s.id == id => s,
                _ => continue,
            };
            if let Some(state) = session.state
                && states.last() != Some(&state)
            {
                states.push(state);
            }
        }
        states
    }
}

/// Creates a session of the `agent` profile, with its first prompt `task`.
pub async fn create(client: &Client, agent: &str, task: Option<&str>) -> Session {
    let params = CreateSessionParams {
        agent: agent.to_string(),
        task: task.map(str::to_string),
        ..Default::default()
    };
    call::<m::SessionCreate>(client, params).await.session
}

pub async fn session(client: &Client, id: &str) -> Session {
    call::<m::SessionGet>(client, session_id(id)).await.session
}

/// The session's inbox messages (up to a thousand).
pub async fn messages(client: &Client, id: &str) -> Vec<InboxMessage> {
    let params = ListParams {
        session_id: Some(id.to_string()),
        limit: Some(1000),
        ..Default::default()
    };
    call::<m::InboxList>(client, params).await.messages
}

pub async fn transcript(client: &Client, id: &str) -> Vec<TranscriptEntry> {
    let params = TranscriptParams {
        session_id: id.to_string(),
        after: None,
        limit: None,
    };
    call::<m::SessionTranscript>(client, params).await.entries
}

/// What the agent said in the session, all messages joined.
pub async fn said(client: &Client, id: &str) -> String {
    transcript(client, id)
        .await
        .into_iter()
        .filter(|e| e.kind == EntryKind::Message)
        .filter_map(|e| e.text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls until the agent of session `id` has said `text` (within [`LONG`]); all it said.
pub async fn wait_said(client: &Client, id: &str, text: &str) -> String {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let now = said(client, id).await;
        if now.contains(text) {
            return now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "session {id} never said {text:?} within {LONG:?}; it said: {now}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls (the daemon, over the socket) until `check` passes on the session.
pub async fn wait_session(
    client: &Client,
    id: &str,
    what: &str,
    check: impl Fn(&Session) -> bool,
) -> Session {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let s = session(client, id).await;
        if check(&s) {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; session is {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

pub async fn wait_state(client: &Client, id: &str, state: SessionState) -> Session {
    wait_session(client, id, state.as_str(), |s| s.state == Some(state)).await
}

pub async fn wait_message(client: &Client, id: &str, msg_type: MsgType) -> InboxMessage {
    wait_message_where(client, id, &format!("a {msg_type} message"), |m| {
        m.msg_type == msg_type
    })
    .await
}

/// Polls the session's inbox until a message passes `check`.
pub async fn wait_message_where(
    client: &Client,
    id: &str,
    what: &str,
    check: impl Fn(&InboxMessage) -> bool,
) -> InboxMessage {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        if let Some(m) = messages(client, id).await.into_iter().find(&check) {
            return m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; session is {:?}",
            session(client, id).await
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
