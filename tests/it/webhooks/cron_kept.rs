//! A cron job whose runs cannot start keeps its count and last error across a daemon
//! restart, and the inbox says nothing new for the same row.

use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::CronJobView;
use crucible::protocol::{InboxMessage, MsgType};
use testkit::daemon::call;

use crate::common::*;
use crate::sessions::agent_kiln;

pub(super) async fn inbox_errors(client: &Client) -> Vec<InboxMessage> {
    let reply = testkit::daemon::call::<crucible::protocol::methods::InboxList>(
        client,
        crucible::protocol::ListParams {
            limit: Some(1000),
            ..Default::default()
        },
    )
    .await;
    reply
        .messages
        .into_iter()
        .filter(|m| m.msg_type == MsgType::Error)
        .collect()
}

/// The cron job `id` as `cron.list` shows it.
pub(super) async fn cron_job(client: &Client, id: &str) -> CronJobView {
    let list = call::<m::CronList>(client, m::NoParams {}).await;
    let found = list.jobs.iter().find(|j| j.id == id).cloned();
    found.unwrap_or_else(|| panic!("no job {id}: {:?}", list.jobs))
}

async fn wait_failures(client: &Client, id: &str, at_least: u64) -> CronJobView {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let job = cron_job(client, id).await;
        if job.failures >= at_least {
            return job;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {at_least} failures: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_failing_cron_job_keeps_its_count_across_a_restart_and_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let quick = dir.path().join("quick.sh");
    write_script(&quick, "#!/bin/sh\necho ran\n");
    // Its branch is the one checked out in the kiln: no run of it can start.
    let tk = agent_kiln(&format!(
        "[agents.quick]\ntype = \"command\"\ncommand = {quick:?}\n\n\
         [[cron]]\nid = \"stuck\"\nschedule = \"* * * * * *\"\nagent = \"quick\"\n\
         instructions = \"tidy up\"\nbranch = \"main\"\n"
    ));
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let before = wait_failures(&client, "stuck", 2).await;
    let error = before.last_error.clone().expect("an error");
    assert_eq!(inbox_errors(&client).await.len(), 1);
    drop(client);

    // Restarted: the count and the error are still there before any new run.
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    daemon.wait_exit(Duration::from_secs(30)).await;
    let _daemon = tk.spawn_daemon().await;
    let client = tk.client().await;
    let kept = cron_job(&client, "stuck").await;
    let counted = before.failures;
    assert!(kept.failures >= counted, "{kept:?}");
    assert_eq!(kept.last_error.as_deref(), Some(error.as_str()), "{kept:?}");
    let out = tk.cru(&["cron", "list"]);
    assert!(
        stdout(&out).contains("in a row could not start") && stdout(&out).contains(&error),
        "{}",
        stdout(&out)
    );

    // It goes on counting the same row, and the inbox says nothing new.
    let later = wait_failures(&client, "stuck", counted + 1).await;
    assert_eq!(
        later.last_error.as_deref(),
        Some(error.as_str()),
        "{later:?}"
    );
    let errors = inbox_errors(&client).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
}
