//! The cron schedule's pure parts: a row of failures said once and waited out longer each
//! time, and a new plan keeping the waits of unchanged jobs.

use super::failing::{Failing, RETRY_LONGEST_SECS, after_failure, retry_wait};
use super::*;

fn job(id: &str, schedule: &str) -> CronJob {
    CronJob {
        id: id.into(),
        schedule: schedule.into(),
        agent: "a".into(),
        instructions: "do it".into(),
        driver: None,
        branch: None,
        enabled: true,
        approval_target: None,
    }
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

#[test]
fn a_row_of_failures_is_said_once_per_error_and_waits_longer_each_time() {
    let mut record = JobRecord::default();
    let t = "2026-01-01T00:00:00Z";
    assert_eq!(record.failed("branch in use", t), Failing::Began);
    assert_eq!(record.failed("branch in use", t), Failing::Again);
    assert_eq!(record.failed("branch in use", t), Failing::Again);
    assert_eq!(record.failed("agent gone", t), Failing::Changed);
    assert_eq!(record.failures, 4);
    assert_eq!(record.last_error.as_deref(), Some("agent gone"));
    assert_eq!(record.started(), Some((4, "agent gone".to_string())));
    assert_eq!((record.failures, record.last_error.as_deref()), (0, None));
    assert_eq!(record.started(), None, "a run after a run says nothing");
    assert_eq!(record.failed("agent gone", t), Failing::Began);

    let secs = |n| retry_wait(n).num_seconds();
    assert_eq!([secs(1), secs(2), secs(3), secs(4)], [1, 2, 4, 8]);
    assert_eq!(secs(12), RETRY_LONGEST_SECS);
    assert_eq!(secs(u64::MAX), RETRY_LONGEST_SECS);

    // Every second: the wait skips scheduled times; hourly: the schedule is later
    // than any wait, and kept.
    let failed = at("2026-01-01T00:00:00.500Z");
    let every_second = Scheduled {
        job: job("s", "* * * * * *"),
        next: Some(at("2026-01-01T00:00:01Z")),
    };
    assert_eq!(
        after_failure(&every_second, failed, 4),
        Some(at("2026-01-01T00:00:09Z"))
    );
    let hourly = Scheduled {
        job: job("h", "0 * * * *"),
        next: Some(at("2026-01-01T01:00:00Z")),
    };
    assert_eq!(
        after_failure(&hourly, failed, 20),
        Some(at("2026-01-01T01:00:00Z"))
    );
}

#[test]
fn a_new_plan_keeps_the_waits_of_unchanged_jobs_and_drops_removed_ones() {
    let start = at("2026-01-01T00:00:00Z");
    let first = plan(
        &[],
        &[job("hourly", "0 * * * *"), job("gone", "* * * * *")],
        start,
    );
    assert_eq!(first[0].next, Some(at("2026-01-01T01:00:00Z")));
    assert_eq!(first[1].next, Some(at("2026-01-01T00:01:00Z")));

    // Later: "gone" was taken out, "hourly" kept, "daily" added, nothing else moved.
    let later = at("2026-01-01T00:30:00Z");
    let mut daily = job("daily", "0 3 * * *");
    let second = plan(&first, &[job("hourly", "0 * * * *"), daily.clone()], later);
    assert_eq!(second.len(), 2);
    assert_eq!(second[0].next, Some(at("2026-01-01T01:00:00Z")));
    assert_eq!(second[1].next, Some(at("2026-01-01T03:00:00Z")));
    assert_eq!(first_due(&second), Some((0, at("2026-01-01T01:00:00Z"))));

    // A changed schedule is planned afresh; a disabled job is not due at all.
    daily.schedule = "0 2 * * *".into();
    let mut hourly = job("hourly", "0 * * * *");
    hourly.enabled = false;
    let third = plan(&second, &[hourly, daily], later);
    assert_eq!(third[0].next, None);
    assert_eq!(third[1].next, Some(at("2026-01-01T02:00:00Z")));
    assert_eq!(first_due(&third), Some((1, at("2026-01-01T02:00:00Z"))));
    assert_eq!(first_due(&plan(&third, &[], later)), None);
}
