//! Settings applied live: a running daemon follows edits of `.crucible.toml`. Cron jobs
//! taken out stop, jobs added start, a broken file leaves the last good jobs running and
//! says why, and `cru cron list` shows what the daemon runs (or, with no daemon, the
//! settings' jobs, saying so). The webhook listener follows its address.

use std::time::Duration;

use crucible::client::Client;
use crucible::protocol::CronJobs;
use crucible::protocol::methods::{self as m, NoParams};
use serde_json::Value;

use crate::common::*;
use crate::sessions::agent_kiln;

/// Where the jobs start in a test kiln's settings.
const JOBS: &str = "# jobs\n";

fn job(id: &str) -> String {
    format!(
        "[[cron]]\nid = \"{id}\"\nschedule = \"*/1 * * * * *\"\nagent = \"quick\"\n\
         instructions = \"run {id}\"\n\n"
    )
}

/// A kiln with a quick command agent and `jobs` at the end of its settings.
fn cron_kiln(dir: &std::path::Path, jobs: &str) -> TestKiln {
    let quick = dir.join("quick.sh");
    write_script(
        &quick,
        "#!/bin/sh\nprintf 'ran: %s\\n' \"$CRUCIBLE_PROMPT\"\n",
    );
    agent_kiln(&format!(
        "[agents.quick]\ntype = \"command\"\ncommand = {quick:?}\n\n{JOBS}{jobs}"
    ))
}

/// Replaces the jobs of the settings, as an editor saves: a new file renamed over it.
fn set_jobs(tk: &TestKiln, jobs: &str) {
    let path = tk.kiln.settings_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let head = &text[..text.find(JOBS).expect("the jobs marker") + JOBS.len()];
    let new = path.with_extension("toml.new");
    std::fs::write(&new, format!("{head}{jobs}")).unwrap();
    std::fs::rename(&new, &path).unwrap();
}

async fn cron_list(client: &Client) -> CronJobs {
    client
        .call::<m::CronList>(&NoParams {})
        .await
        .expect("cron.list")
}

async fn runs_of(client: &Client, id: &str) -> usize {
    let reply = testkit::daemon::call::<m::SessionList>(
        client,
        crucible::protocol::SessionListParams {
            channel: Some("cron".into()),
            ..crucible::protocol::SessionListParams::default()
        },
    )
    .await;
    reply
        .sessions
        .iter()
        .filter(|s| s.channel.as_ref().is_some_and(|t| t.source == id))
        .count()
}

/// Waits until `check` holds for the daemon's `cron.list`, and returns that answer.
async fn wait_cron(client: &Client, what: &str, check: impl Fn(&CronJobs) -> bool) -> CronJobs {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = cron_list(client).await;
        if check(&list) {
            return list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; cron.list: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_runs(client: &Client, id: &str, more_than: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while runs_of(client, id).await <= more_than {
        assert!(
            std::time::Instant::now() < deadline,
            "the cron job {id} never ran"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn has(list: &CronJobs, id: &str) -> bool {
    list.jobs.iter().any(|j| j.id == id)
}

#[tokio::test]
async fn cron_jobs_follow_the_settings_of_a_running_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let tk = cron_kiln(dir.path(), &job("tick"));
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    wait_runs(&client, "tick", 0).await;

    // Taken out: once the daemon's list shows it gone, no run of it starts.
    set_jobs(&tk, "");
    wait_cron(&client, "tick to be gone", |l| !has(l, "tick")).await;
    let runs = runs_of(&client, "tick").await;
    // Long enough for three more runs of an every-second job.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        runs_of(&client, "tick").await,
        runs,
        "a job taken out of the settings started another run"
    );

    // Added: it shows with its next run, and runs.
    set_jobs(&tk, &job("tock"));
    let list = wait_cron(&client, "tock to be scheduled", |l| has(l, "tock")).await;
    assert!(list.jobs[0].next_run.is_some(), "{list:?}");
    wait_runs(&client, "tock", 0).await;

    // `cru cron list` shows the daemon's jobs: here the settings file cannot even be read,
    // and the daemon keeps the last good jobs, saying why.
    set_jobs(&tk, &format!("{}bogus = 1\n", job("tock")));
    let list = wait_cron(&client, "the settings error", |l| {
        l.settings_error.is_some()
    })
    .await;
    let why = list.settings_error.clone().unwrap();
    assert!(
        why.contains(".crucible.toml") && why.contains("bogus"),
        "{why}"
    );
    assert!(has(&list, "tock") && !has(&list, "tick"), "{list:?}");
    let runs = runs_of(&client, "tock").await;
    wait_runs(&client, "tock", runs).await;
    let log_path = tk.kiln.log_dir().join("daemon.log");
    wait_until("the daemon to log why", Duration::from_secs(10), || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        log.contains("bogus") && log.contains("the last good settings stay in use")
    })
    .await;

    let out = tk.cru(&["cron", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("tock") && !table.contains("tick") && table.contains("bogus"),
        "{table}"
    );
    let out = tk.cru(&["cron", "list", "--json"]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["daemon_running"], true, "{json}");
    assert_eq!(json["jobs"][0]["id"], "tock", "{json}");
    assert!(json["settings_error"].as_str().unwrap().contains("bogus"));

    // Mended: the error clears and the jobs follow the file again.
    set_jobs(&tk, "");
    wait_cron(&client, "the mended settings", |l| {
        l.settings_error.is_none() && l.jobs.is_empty()
    })
    .await;
}

#[tokio::test]
async fn cron_list_without_a_daemon_shows_the_settings_jobs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let tk = cron_kiln(dir.path(), &job("tick"));
    let _guard = KillOnDrop(tk.kiln.clone());
    let out = tk.cru(&["cron", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("no daemon runs") && text.contains("tick"),
        "{text}"
    );
    let out = tk.cru(&["cron", "list", "--json"]);
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["daemon_running"], false, "{json}");
    assert_eq!(json["jobs"][0]["id"], "tick", "{json}");
    assert!(tk.daemon_pid().is_none(), "listing started a daemon");
}

/// The status of `POST /hooks/none` on `port`, or none when nothing listens there.
async fn hook_status(port: u16) -> Option<u16> {
    reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/hooks/none"))
        .body("{}")
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

async fn wait_hook(port: u16, want: Option<u16>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while hook_status(port).await != want {
        assert!(
            std::time::Instant::now() < deadline,
            "port {port} never answered {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn set_listen(tk: &TestKiln, listen: Option<u16>) {
    let mut text = "[daemon]\ngrace_period_secs = 60\n".to_string();
    if let Some(port) = listen {
        text.push_str(&format!("[channels.http]\nlisten = \"127.0.0.1:{port}\"\n"));
    }
    let path = tk.kiln.settings_path();
    let new = path.with_extension("toml.new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, &path).unwrap();
}

async fn pending(client: &Client) -> Vec<String> {
    client
        .call::<m::DaemonStatusOf>(&NoParams {})
        .await
        .expect("daemon.status")
        .settings_pending
}

#[tokio::test]
async fn the_webhook_listener_follows_its_address_and_says_when_it_cannot() {
    let (first, second) = (free_port(), free_port());
    let tk = TestKiln::new();
    set_listen(&tk, Some(first));
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    assert_eq!(hook_status(first).await, Some(404));

    // Moved: the new address answers, the old one is let go.
    set_listen(&tk, Some(second));
    wait_hook(second, Some(404)).await;
    wait_hook(first, None).await;

    // An address taken by someone else: the listener stays where it was, and says so.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let third = taken.local_addr().unwrap().port();
    set_listen(&tk, Some(third));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let notes = loop {
        let notes = pending(&client).await;
        if !notes.is_empty() {
            break notes;
        }
        assert!(std::time::Instant::now() < deadline, "nothing was said");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let note = &notes[0];
    assert!(
        note.contains(&format!("127.0.0.1:{third}"))
            && note.contains(&format!("still listening on 127.0.0.1:{second}"))
            && note.contains("cru daemon stop"),
        "{note}"
    );
    assert_eq!(hook_status(second).await, Some(404));
    let out = tk.cru(&["daemon", "status"]);
    assert!(stdout(&out).contains("still listening"), "{}", stdout(&out));

    // Taken out: the listener closes and nothing is left to say.
    set_listen(&tk, None);
    wait_hook(second, None).await;
    assert!(pending(&client).await.is_empty());
}

/// The kiln's settings with `text` added at the end, saved in place.
fn append_settings(tk: &TestKiln, text: &str) {
    let path = tk.kiln.settings_path();
    let mut settings = std::fs::read_to_string(&path).unwrap();
    settings.push_str(text);
    std::fs::write(&path, settings).unwrap();
}

/// A command's standard error names the settings file, the key and its line, and says the
/// last good settings are in use.
fn warns_of_the_typo(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    assert!(
        err.contains("warning: ")
            && err.contains(".crucible.toml, line 4, column 1: unknown field `comand`")
            && err.contains("using the last good settings"),
        "{what}: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
}

/// A typo in the settings while a question waits: every command keeps working on the
/// daemon's last good settings and names the error on stderr; only starting a new daemon,
/// which would run on the broken file, is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_settings_file_locks_no_one_out() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let session = register(&client, "claude").await;
    let out = tk.cru(&[
        "inbox",
        "send",
        "--session",
        &session,
        "--type",
        "decision_needed",
        "Which way?",
        "--option",
        "left",
        "--option",
        "right",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let question = stdout(&out).trim().to_string();

    append_settings(&tk, "[agents.typo]\ncomand = \"sh\"\n");

    let out = tk.cru(&["inbox"]);
    assert!(out.status.success(), "cru inbox: {}", stderr(&out));
    assert!(stdout(&out).contains("Which way?"), "{}", stdout(&out));
    warns_of_the_typo(&out, "cru inbox");

    let out = tk.cru(&["session", "list"]);
    assert!(out.status.success(), "cru session list: {}", stderr(&out));
    assert!(stdout(&out).contains("claude"), "{}", stdout(&out));
    warns_of_the_typo(&out, "cru session list");

    let out = tk.cru(&["inbox", "respond", &question, "left"]);
    assert!(out.status.success(), "cru inbox respond: {}", stderr(&out));
    assert!(stdout(&out).contains("answered"), "{}", stdout(&out));
    warns_of_the_typo(&out, "cru inbox respond");
    let answered = testkit::daemon::call::<m::InboxGet>(
        &client,
        crucible::protocol::IdParams {
            id: question.to_string(),
        },
    )
    .await;
    assert_eq!(
        answered.message.response.as_deref(),
        Some("left"),
        "{answered:?}"
    );

    // The daemon says the same, and keeps the last good settings.
    let status = client
        .call::<m::DaemonStatusOf>(&NoParams {})
        .await
        .expect("daemon.status");
    let why = status.settings_error.expect("the daemon names the error");
    assert!(why.contains("comand") && why.contains("line 4"), "{why}");

    // With no daemon running, none can start on the broken file: that is the error.
    drop(client);
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = tk.cru(&["inbox"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("no daemon runs for this kiln") && err.contains("unknown field `comand`"),
        "{err}"
    );
    assert!(
        tk.daemon_pid().is_none(),
        "a daemon started on the broken file"
    );
}

/// A profile saved and used at once (no wait for the daemon's watcher) is found, every
/// time: the daemon reads the files again when they changed before it answers.
#[tokio::test(flavor = "multi_thread")]
async fn a_profile_saved_is_used_by_the_very_next_request() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let agent = scripted_agent();
    for n in 0..5 {
        let name = format!("fresh{n}");
        append_settings(&tk, &format!("\n[agents.{name}]\ncommand = {agent:?}\n"));
        let saved = std::time::Instant::now();
        let created = testkit::daemon::try_call::<m::SessionCreate>(
            &client,
            crucible::protocol::CreateSessionParams {
                agent: name.clone(),
                in_place: true,
                task: Some("say hi".into()),
                ..Default::default()
            },
        )
        .await;
        let created = created
            .unwrap_or_else(|e| panic!("{name}, asked {:?} after saving: {e}", saved.elapsed()));
        assert_eq!(created.session.agent_name, name, "{created:?}");
    }
    // And from the command line.
    append_settings(&tk, &format!("\n[agents.cli]\ncommand = {agent:?}\n"));
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "cli",
        "--task",
        "say hi",
        "--in-place",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}
