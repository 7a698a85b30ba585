//! `[[cron]]`: a job that starts a session on a schedule, and when it runs next.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::channels::ChannelError;
use super::validate::is_name;
use crate::protocol::DriverKind;

/// `[[cron]]`: a job that starts a session on a schedule (the cron channel).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronJob {
    /// Letters, digits, `-` and `_`.
    pub id: String,
    /// Cron syntax, five fields or six with seconds first (`*/10 * * * * *`), in UTC.
    pub schedule: String,
    /// The agent profile its sessions run.
    pub agent: String,
    /// The first prompt of each run.
    pub instructions: String,
    /// Where its sessions run, over the profile's driver.
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// Run on this branch (made from HEAD the first time) instead of a new worktree and
    /// branch per run.
    #[serde(default)]
    pub branch: Option<String>,
    /// `false` keeps the job in the settings without running it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Where its sessions' approvals and questions are posted and answered: a Matrix room
    /// (`!id`, `#alias`) or user (`@name:server`); absent: `[channels.matrix]`'s.
    #[serde(default)]
    pub approval_target: Option<String>,
}

fn yes() -> bool {
    true
}

impl CronJob {
    /// The parsed schedule, or why it is not one.
    pub fn parsed(&self) -> Result<croner::Cron, ChannelError> {
        croner::Cron::new(&self.schedule)
            .with_seconds_optional()
            .parse()
            .map_err(|e| ChannelError::Schedule {
                id: self.id.clone(),
                schedule: self.schedule.clone(),
                source: Arc::new(e),
            })
    }

    /// When it runs next after `after`.
    pub fn next_after(
        &self,
        after: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.parsed().ok()?.find_next_occurrence(&after, false).ok()
    }

    pub fn validate(&self) -> Result<(), ChannelError> {
        let id = &self.id;
        if !is_name(id) {
            return Err(ChannelError::Invalid(format!(
                "cron: the id {id:?} may use only letters, digits, '-' and '_'"
            )));
        }
        if self.instructions.trim().is_empty() {
            return Err(ChannelError::Invalid(format!(
                "cron.{id}.instructions must not be empty"
            )));
        }
        self.parsed().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_take_an_optional_seconds_field_and_bad_ones_are_named() {
        let mut job = CronJob {
            id: "nightly".into(),
            schedule: "*/10 * * * * *".into(),
            agent: "a".into(),
            instructions: "check".into(),
            driver: None,
            branch: None,
            enabled: true,
            approval_target: None,
        };
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:03Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            job.next_after(t).unwrap().to_rfc3339(),
            "2026-01-01T00:00:10+00:00"
        );
        job.schedule = "0 9 * * *".into();
        assert_eq!(
            job.next_after(t).unwrap().to_rfc3339(),
            "2026-01-01T09:00:00+00:00"
        );
        job.schedule = "61 * * * *".into();
        let why = job.validate().unwrap_err().to_string();
        assert!(
            why.contains("cron.nightly") && why.contains("61 * * * *"),
            "{why}"
        );
    }
}
