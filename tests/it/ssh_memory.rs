//! What an ssh session's agent costs the machine it runs on: read there, over the
//! session's connection, when asked; never the ssh client's own figures here.

use std::time::Duration;

use crucible::protocol::MsgType;

use crate::common::*;
use crate::sessions::wait_message;

#[tokio::test]
async fn an_ssh_sessions_memory_is_its_agents_over_there() {
    let Some(over) = crate::ssh::Remote::start() else {
        return;
    };
    let tk = &over.tk;
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.run_daemon(over.cru()).await;
    let client = tk.client().await;

    // The agent starts a program there that holds 300 MiB for a while.
    let task = "spawn python3 -c x=b'a'*(300<<20);__import__('time').sleep(8)\nsay held it";
    let s = over.session(task);

    // While it holds it, the session's figures are the agent's tree there: the agent
    // and its program, with the program's memory. (Its ssh client here is one process
    // of a few MiB.)
    let mut seen = None;
    for _ in 0..100 {
        let out = tk.cru(&["session", "status", &s.id, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let resources = &status["resources"];
        if resources["rss_bytes"].as_u64().unwrap_or(0) >= 300 << 20 {
            seen = Some(resources.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = seen.expect("the 300 MiB held there is in the session's figures");
    assert!(seen["processes"].as_u64().unwrap() >= 2, "{seen}");

    let done = wait_message(&client, &s.id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains("held it"),
        "{done:?}"
    );
    // At rest, the agent alone: the program's memory is gone with it.
    let out = tk.cru(&["session", "status", &s.id, "--json"]);
    let status: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rss = status["resources"]["rss_bytes"].as_u64().unwrap_or(0);
    assert!(rss > 0 && rss < 300 << 20, "{status}");
}
