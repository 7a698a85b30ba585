//! A cron job whose runs cannot start: counted with the last error in `cru cron list`,
//! said once in the inbox and once in the log, retried with a growing wait; and said
//! again, as an `info`, when a run starts.

use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{CronJobView, CronRunParams, ListParams};
use crucible::protocol::{InboxMessage, MsgType, SessionState};
use serde_json::Value;
use testkit::daemon::{call, try_call};

use super::cron_kept::cron_job;
use super::sessions;
use crate::common::*;
use crate::sessions::agent_kiln;

async fn inbox(client: &Client) -> Vec<InboxMessage> {
    let window = ListParams {
        limit: Some(1000),
        ..Default::default()
    };
    call::<m::InboxList>(client, window).await.messages
}

/// Polls the job until `check` passes.
async fn wait_job(
    client: &Client,
    id: &str,
    what: &str,
    check: impl Fn(&CronJobView) -> bool,
) -> CronJobView {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = cron_job(client, id).await;
        if check(&now) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_cron_job_that_cannot_start_is_said_once_counted_and_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let quick = dir.path().join("quick.sh");
    write_script(&quick, "#!/bin/sh\necho ran\n");
    let agents = format!("[agents.quick]\ntype = \"command\"\ncommand = {quick:?}\n\n");
    // Its branch is the one checked out in the kiln: no run of it can start.
    let stuck = "[[cron]]\nid = \"stuck\"\nschedule = \"* * * * * *\"\nagent = \"quick\"\n\
                 instructions = \"tidy up\"\n";
    let tk = agent_kiln(&format!("{agents}{stuck}branch = \"main\"\n"));
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;

    let first = wait_job(&client, "stuck", "a failure", |j| j.failures == 1).await;
    let began = Instant::now();
    let error = first.last_error.clone().expect("the error is kept");
    assert!(error.contains("main"), "{first:?}");
    assert!(first.last_failed_at.is_some(), "{first:?}");
    let third = wait_job(&client, "stuck", "three failures", |j| j.failures >= 3).await;
    // Every second without a wait, but it waits 1 s, then 2 s more.
    assert!(
        began.elapsed() >= Duration::from_millis(2500),
        "no backing off: {third:?} after {:?}",
        began.elapsed()
    );
    assert_eq!(third.last_error.as_deref(), Some(error.as_str()));

    // One error in the inbox, under a record of the run that could not start.
    let errors: Vec<InboxMessage> = inbox(&client)
        .await
        .into_iter()
        .filter(|m| m.msg_type == MsgType::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].title.contains("stuck"), "{:?}", errors[0]);
    assert!(
        errors[0]
            .body
            .as_deref()
            .is_some_and(|b| b.contains(&error)),
        "{:?}",
        errors[0]
    );
    let record = sessions(&client)
        .await
        .into_iter()
        .find(|s| s.id == errors[0].session_id)
        .expect("the message's session is listed");
    assert_eq!(record.state, Some(SessionState::Error));
    assert!(record.worktree.is_none(), "{record:?}");
    assert!(
        record
            .channel
            .as_ref()
            .is_some_and(|t| t.kind == "cron" && t.source == "stuck"),
        "{record:?}"
    );
    assert_eq!(third.last_session_id.as_deref(), Some(record.id.as_str()));

    // `cru cron list` shows the count and the error, --json the fields.
    let out = tk.cru(&["cron", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.contains("FAILING"), "{table}");
    assert!(
        table.contains("in a row could not start") && table.contains(&error),
        "{table}"
    );
    let out = tk.cru(&["cron", "list", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let shown = &listed["jobs"][0];
    assert!(shown["failures"].as_u64() >= Some(3), "{listed}");
    assert_eq!(shown["last_error"], error.as_str());

    // The log said it once, not once a run.
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap_or_default();
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("cron run could not start"))
        .count();
    assert_eq!(warned, 1, "{log}");

    // Fixed: the next run starts, says so, and the count is gone.
    std::fs::write(
        tk.kiln.settings_path(),
        format!("[daemon]\ngrace_period_secs = 60\n\n{agents}{stuck}"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let stuck = || CronRunParams { id: "stuck".into() };
    while try_call::<m::CronRunNow>(&client, stuck()).await.is_err() {
        assert!(Instant::now() < deadline, "the job never ran again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let back = wait_job(&client, "stuck", "the count gone", |j| j.failures == 0).await;
    assert_eq!(back.last_error, None, "{back:?}");
    let messages = inbox(&client).await;
    let info = messages
        .iter()
        .find(|m| m.msg_type == MsgType::Info && m.title.contains("runs again"))
        .unwrap_or_else(|| panic!("no word that it runs again: {messages:?}"));
    assert!(
        info.body.as_deref().is_some_and(|b| b.contains(&error)),
        "{info:?}"
    );
    assert_eq!(
        messages
            .iter()
            .filter(|m| m.msg_type == MsgType::Error)
            .count(),
        1,
        "{messages:?}"
    );
}
