//! Every project in one place, from the command line: each kiln's daemon records itself in
//! the person's registry (a temp `XDG_STATE_HOME` here, never the machine's), `cru kilns`
//! lists them with their daemons, sessions and waiting questions, `cru inbox
//! --all-kilns` lists every kiln's messages named with their kiln, and an answer given
//! from a folder that is no kiln reaches the agent in the kiln that asked.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crucible::protocol::{InboxMessage, MsgType, SessionState};
use serde_json::Value;

use crate::common::*;
use crate::sessions::{agent_kiln, create, session, wait_message_where, wait_state};

/// `cru args…` run in `dir` as the person whose state is in `state`.
pub(crate) fn cru_in(dir: &Path, state: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(CRU);
    command
        .current_dir(dir)
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("CRU_KILN")
        .env("CRU_DAEMON_EXE", CRU);
    run_bounded(command, &format!("cru {}", args.join(" ")))
}

pub(crate) fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}{}", stdout(out), stderr(out));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[tokio::test]
async fn three_kilns_are_listed_together_and_answered_from_outside_all_of_them() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let outside = home.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let mut kilns = Vec::new();
    let mut daemons = Vec::new();
    let mut asked = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let tk = agent_kiln(&format!("[kiln]\nname = \"{name}\"\n"));
        let mut daemon = Command::new(CRU);
        daemon.env("XDG_STATE_HOME", &state).stderr(Stdio::piped());
        daemons.push(tk.run_daemon(daemon).await);
        let client = tk.client().await;
        let s = create(
            &client,
            "scripted",
            Some(&format!(
                "permit p1 Deploy {name}\nwrite {name}.txt yes\nsay done"
            )),
        )
        .await;
        let m: InboxMessage = wait_message_where(&client, &s.id, "the approval", |m| {
            m.msg_type == MsgType::ApprovalRequired && !m.responded
        })
        .await;
        asked.push((s.id, m.id));
        kilns.push(tk);
    }

    // Every kiln, with its daemon and one question waiting in each.
    let listed = json_of(&cru_in(&outside, &state, &["kilns", "--json"]));
    let rows = listed.as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta", "gamma"], "{listed}");
    for (row, tk) in rows.iter().zip(&kilns) {
        assert_eq!(row["state"], "running", "{row}");
        assert_eq!(row["path"], tk.root().display().to_string());
        assert_eq!(row["pid"], tk.daemon_pid().unwrap());
        assert_eq!(
            (row["sessions"].as_u64(), row["waiting"].as_u64()),
            (Some(1), Some(1))
        );
    }

    // One inbox over all three, each message named with its kiln.
    let inbox = json_of(&cru_in(
        &outside,
        &state,
        &["inbox", "--all-kilns", "--json"],
    ));
    let mut seen: Vec<(String, String)> = inbox
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["msg_type"] == "approval_required")
        .map(|m| {
            (
                m["kiln"].as_str().unwrap().to_string(),
                m["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    let expected: Vec<(String, String)> = ["alpha", "beta", "gamma"]
        .iter()
        .zip(&asked)
        .map(|(k, (_, id))| (k.to_string(), id.clone()))
        .collect();
    assert_eq!(seen, expected, "{inbox}");

    // Answered from a folder that is no kiln: the second kiln's agent goes on.
    let (beta_session, beta_question) = &asked[1];
    let out = cru_in(
        &outside,
        &state,
        &["inbox", "respond", beta_question, "approve"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("in kiln beta"), "{}", stdout(&out));
    let beta = kilns[1].client().await;
    wait_state(&beta, beta_session, SessionState::Complete).await;
    let worktree = session(&beta, beta_session)
        .await
        .worktree
        .expect("a worktree");
    assert!(Path::new(&worktree).join("beta.txt").exists());
    // No daemon was started in the folder the answer was given from.
    assert!(!outside.join(".crucible").exists());

    // The others still wait, and an id no kiln has is said to be nowhere.
    let listed = json_of(&cru_in(&outside, &state, &["kilns", "--json"]));
    let waiting: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["waiting"].as_u64().unwrap())
        .collect();
    assert_eq!(waiting, [1, 0, 1], "{listed}");
    let out = cru_in(
        &outside,
        &state,
        &["inbox", "respond", "01NOSUCHMESSAGE", "approve"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no inbox message 01NOSUCHMESSAGE"),
        "{}",
        stderr(&out)
    );

    // A stopped daemon leaves its kiln resting; a forgotten kiln leaves the list.
    drop(daemons.remove(2)); // killed and reaped
    let listed = json_of(&cru_in(&outside, &state, &["kilns", "--json"]));
    assert_eq!(listed[2]["state"], "resting", "{listed}");
    assert!(listed[2].get("waiting").is_none(), "{listed}");
    let out = cru_in(&outside, &state, &["kilns", "forget", "gamma"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = json_of(&cru_in(&outside, &state, &["kilns", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let registry = std::fs::metadata(state.join("crucible/kilns.json")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(registry.permissions().mode() & 0o777, 0o600);
}
