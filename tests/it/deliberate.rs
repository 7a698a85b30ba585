//! Only a deliberate act answers an approval, in the real workbench: a command agent waits
//! on `cru approve` while keys a person might type in passing reach the terminal; the
//! approval stays pending and the agent waits until it is answered on purpose.

use std::time::Duration;

use crucible::protocol::{InboxMessage, MsgType};

use crate::common::*;
use crate::sessions::{agent_kiln, messages, wait_message_where};
use crate::tmux::Tmux;

/// A kiln whose `asker` agent asks for approval, then proves it went on by writing a file.
fn asker_kiln() -> (TestKiln, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap().keep();
    let proceeded = dir.join("proceeded");
    let script = dir.join("asker.sh");
    std::fs::write(
        &script,
        format!(
            r#"#!/bin/sh
read -r prompt
if "{CRU}" approve "Upload .env to paste.example"; then
  echo approved > "{proceeded}"
else
  echo denied > "{proceeded}"
fi
echo "went on"
"#,
            proceeded = proceeded.display()
        ),
    )
    .unwrap();
    let tk = agent_kiln(&format!(
        "[agents.asker]\ntype = \"command\"\ncommand = \"/bin/sh\"\nargs = [{script:?}]\n"
    ));
    (tk, proceeded)
}

async fn the_approval(tk: &TestKiln) -> InboxMessage {
    let client = tk.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = tk.cru(&["session", "list", "--json"]);
        let sessions: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
        if let Some(id) = sessions
            .as_array()
            .and_then(|a| a.first())
            .and_then(|s| s["id"].as_str())
        {
            return wait_message_where(&client, id, "the approval", |m| {
                m.msg_type == MsgType::ApprovalRequired
            })
            .await;
        }
        assert!(std::time::Instant::now() < deadline, "no session was made");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn keys_typed_in_passing_leave_an_approval_pending_until_it_is_answered_on_purpose() {
    let (tk, proceeded) = asker_kiln();
    let _guard = KillOnDrop(tk.kiln.clone());
    let root = tk.root().display().to_string();
    let term = Tmux::start(
        "deliberate",
        (120, 30),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    );
    term.wait_text("no sessions — /new creates one");
    term.type_text("/new --agent asker tidy the config");
    term.keys(&["Enter"]);
    term.wait_text("Upload .env to paste.example");
    let approval = the_approval(&tk).await;

    // alt-a opens it, Esc leaves it; then what a person types in passing.
    term.keys(&["M-a"]);
    term.wait_text("keys here");
    term.keys(&["Escape"]);
    term.wait_for("the input has the keys again", |s| !s.contains("keys here"));
    term.type_text("/enable x");
    term.keys(&["Enter"]);
    term.type_text("/goto 1");
    term.keys(&["Enter"]);
    term.type_text("d");
    term.type_text("12");
    // The keys went to the input: what was typed is there.
    term.wait_text("d12");
    // Every key has been handled (the screen shows the last one), and nothing answered.
    let client = tk.client().await;
    let still = messages(&client, &approval.session_id)
        .await
        .into_iter()
        .find(|m| m.id == approval.id)
        .expect("the approval");
    assert!(
        !still.responded,
        "answered by keys typed in passing: {still:?}"
    );
    assert!(!proceeded.exists(), "the agent went on without an answer");

    // The deliberate path: clear the input, alt-a opens the approval, `a` approves it.
    term.keys(&["BSpace", "BSpace", "BSpace"]);
    term.keys(&["M-a"]);
    term.wait_text("keys here");
    term.keys(&["a"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !proceeded.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never went on; the screen is:\n{}",
            term.screen()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        std::fs::read_to_string(&proceeded).unwrap().trim(),
        "approved"
    );
    term.keys(&["C-c"]);
}
