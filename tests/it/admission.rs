//! Admission by memory: with `[fleet]` asking to keep more memory available than the host
//! has, a new session waits `queued`, saying why, with its task kept and its agent not
//! started; it waits on across a daemon restart, and starts on its task once the bar is
//! lowered in the settings.

use crucible::protocol::SessionState;

use crate::common::*;
use crate::sessions::{agent_kiln, create, session, transcript, wait_state};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_waits_for_memory_and_starts_when_the_bar_is_lowered() {
    // A bar no host reaches (about 95 TiB).
    let tk = agent_kiln("[fleet]\nmin_free_mb = 100000000\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let task = "say started after waiting";
    let s = create(&client, "scripted", Some(task)).await;
    let queued = session(&client, &s.id).await;
    assert_eq!(queued.state, Some(SessionState::Queued), "{queued:?}");
    let reason = queued.state_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("queued for memory") && reason.contains("MiB was available"),
        "{reason}"
    );
    assert_eq!(queued.queued, vec![task.to_string()], "the task is kept");
    assert_eq!(queued.agent_pid, None, "no agent started");
    assert!(transcript(&client, &s.id).await.is_empty());
    let listed = stdout(&tk.cru(&["session", "list"]));
    assert!(listed.contains("queued"), "{listed}");

    // A restart keeps it waiting, its task with it.
    drop(client);
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let client = tk.client().await;
    let again = session(&client, &s.id).await;
    assert_eq!(again.state, Some(SessionState::Queued), "{again:?}");
    assert_eq!(again.queued, vec![task.to_string()]);

    // The bar lowered in the settings: it starts, on its task.
    set_bar(&tk, "min_free_mb = 100000000", "min_free_mb = 0");
    wait_state(&client, &s.id, SessionState::Complete).await;
    crate::sessions::wait_said(&client, &s.id, "started after waiting").await;
    let done = session(&client, &s.id).await;
    assert!(done.queued.is_empty(), "{done:?}");
}

/// With `park_idle`, a session waiting for memory makes room: a contained session that
/// rests is parked (the next prompt brings it back); one running locally is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_session_parks_the_idle_contained_ones_when_allowed() {
    if !crate::sandbox::bwrap_works() {
        return;
    }
    let tk = agent_kiln("[fleet]\nmin_free_mb = 0\npark_idle = true\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--driver",
        "sandbox",
        "--task",
        "say boxed",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let boxed: crucible::protocol::Session = serde_json::from_str(&stdout(&out)).unwrap();
    let local = create(&client, "scripted", Some("say local")).await;
    wait_state(&client, &boxed.id, SessionState::Complete).await;
    wait_state(&client, &local.id, SessionState::Complete).await;

    // The bar raised past the host: the next session waits, and makes room.
    set_bar(&tk, "min_free_mb = 0", "min_free_mb = 100000000");
    let queued = create(&client, "scripted", Some("say after the room was made")).await;
    let queued = session(&client, &queued.id).await;
    assert_eq!(queued.state, Some(SessionState::Queued), "{queued:?}");
    wait_state(&client, &boxed.id, SessionState::Parked).await;
    let local_now = session(&client, &local.id).await;
    assert_eq!(
        local_now.state,
        Some(SessionState::Complete),
        "{local_now:?}"
    );

    // The bar lowered: the waiting session starts; the parked one answers its next
    // prompt.
    set_bar(&tk, "min_free_mb = 100000000", "min_free_mb = 0");
    wait_state(&client, &queued.id, SessionState::Complete).await;
    crate::budget::prompt(&client, &boxed.id, "say back").await;
    crate::sessions::wait_said(&client, &boxed.id, "back").await;
}

/// Saves the kiln's settings with `from` replaced by `to` (a `[fleet]` bar).
fn set_bar(tk: &TestKiln, from: &str, to: &str) {
    let path = tk.kiln.settings_path();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}
