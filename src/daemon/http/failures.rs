//! Hooks whose deliveries keep failing (their session cannot be made or reached: the
//! agent profile is gone, the worktree's branch is checked out elsewhere). Each hook's
//! failures in a row are counted with the last error; the answer to each failed delivery
//! says the count (GitHub shows it under the hook's recent deliveries); the first of a row
//! is said once in the inbox, as an `error` under a record that stands for the hook; the
//! log says each new error once, and that the hook delivers again once one does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::super::caller::Caller;
use super::super::door::Door;
use super::super::hooks_failing::{self, Failing as Row};
use crate::protocol::methods::{self as m};
use crate::protocol::{ChannelKind, DeregisterParams, MsgType, RegisterParams, SendParams};
use crate::text::now_rfc3339;

/// What a failed delivery changes in what is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failing {
    /// The first of a row: said in the inbox and the log.
    Began,
    /// Another error than the last one: logged.
    Changed,
    /// The same error again: said nowhere again.
    Again,
}

/// The failing hooks, by name, kept in the kiln's state folder each time they change: a
/// restart goes on counting a row, and does not say it again.
#[derive(Debug, Default)]
pub(super) struct Failures {
    rows: Mutex<HashMap<String, Row>>,
    /// Where they are kept (none: only in memory).
    kept: Option<PathBuf>,
}

impl Failures {
    /// The failing hooks kept at `path`, read back.
    pub(super) fn kept_at(path: PathBuf) -> Self {
        Failures {
            rows: Mutex::new(hooks_failing::load(&path)),
            kept: Some(path),
        }
    }

    fn rows(&self) -> MutexGuard<'_, HashMap<String, Row>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn keep(&self, rows: &HashMap<String, Row>) {
        if let Some(path) = &self.kept {
            hooks_failing::save(path, rows);
        }
    }

    /// Counts a failed delivery of `hook`.
    fn count(&self, hook: &str, error: &str, at: &str) -> (Failing, Row) {
        let mut rows = self.rows();
        let row = rows.entry(hook.to_string()).or_insert_with(|| Row {
            failures: 0,
            last_error: String::new(),
            since: at.to_string(),
        });
        row.failures += 1;
        let before = std::mem::replace(&mut row.last_error, error.to_string());
        let failing = match () {
            () if row.failures == 1 => Failing::Began,
            () if before == error => Failing::Again,
            () => Failing::Changed,
        };
        let row = row.clone();
        self.keep(&rows);
        (failing, row)
    }

    /// A delivery of `hook` failed with `error`: counted, said as the row asks, and the
    /// answer's words with the count.
    pub(super) async fn failed(&self, door: &Door, hook: &str, error: String) -> String {
        let (failing, row) = self.count(hook, &error, &now_rfc3339());
        match failing {
            Failing::Began => {
                tracing::warn!(
                    hook,
                    "webhook delivery failed: {error} (said again only when the error changes)"
                );
                say(door, hook, &error).await;
            }
            Failing::Changed => {
                tracing::warn!(
                    hook,
                    failures = row.failures,
                    "webhook delivery failed, now: {error}"
                );
            }
            Failing::Again => {
                tracing::debug!(
                    hook,
                    failures = row.failures,
                    "webhook delivery failed: {error}"
                );
            }
        }
        match row.failures {
            1 => error,
            n => format!(
                "{error} ({n} deliveries of this hook in a row failed, since {})",
                row.since
            ),
        }
    }

    /// A delivery of `hook` went through: a row of failures before it ends, and is logged.
    pub(super) fn delivered(&self, hook: &str) {
        let mut rows = self.rows();
        if let Some(row) = rows.remove(hook) {
            self.keep(&rows);
            tracing::info!(
                hook,
                failures = row.failures,
                "webhook delivers again; the last failure: {}",
                row.last_error
            );
        }
    }
}

/// Says in the inbox that `hook`'s deliveries fail, under a record standing for the hook
/// (an inbox message belongs to a session), ended at once with the error as its reason.
async fn say(door: &Door, hook: &str, error: &str) {
    let caller = || Caller::channel(ChannelKind::Webhook, format!("hook {hook}"));
    let record = RegisterParams {
        worktree: None,
        agent_type: "webhook".into(),
        agent_name: hook.to_string(),
    };
    let registered = match door.call::<m::SessionRegister>(caller(), &record).await {
        Ok(registered) => registered,
        Err(e) => {
            tracing::error!(hook, "cannot say that the webhook fails: {}", e.message);
            return;
        }
    };
    let message = SendParams {
        session_id: registered.session_id.clone(),
        msg_type: MsgType::Error,
        title: format!("Webhook {hook} cannot deliver"),
        body: Some(format!(
            "{error}\n\nEach delivery of this hook fails the same way; this is not said again \
             while it keeps failing. The answer to each delivery (the hook's recent deliveries \
             on GitHub) counts them, and the daemon's log says each new error."
        )),
        options: None,
        option_kinds: None,
        flagged: None,
    };
    if let Err(e) = door.call::<m::InboxSend>(caller(), &message).await {
        tracing::error!(hook, "cannot say that the webhook fails: {}", e.message);
    }
    let ended = DeregisterParams {
        session_id: registered.session_id,
        reason: Some(format!("the webhook's deliveries fail: {error}")),
        exit_code: None,
    };
    if let Err(e) = door.call::<m::SessionDeregister>(caller(), &ended).await {
        tracing::warn!(
            hook,
            "cannot end the record of the failing webhook: {}",
            e.message
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_of_failures_is_said_once_per_error_and_ends_with_a_delivery() {
        let failures = Failures::default();
        let t = "2026-01-01T00:00:00Z";
        assert_eq!(failures.count("h", "branch in use", t).0, Failing::Began);
        assert_eq!(failures.count("h", "branch in use", t).0, Failing::Again);
        assert_eq!(failures.count("other", "agent gone", t).0, Failing::Began);
        let (failing, row) = failures.count("h", "agent gone", "2026-01-01T00:01:00Z");
        assert_eq!(failing, Failing::Changed);
        assert_eq!((row.failures, row.since.as_str()), (3, t));
        failures.delivered("h");
        assert_eq!(failures.count("h", "agent gone", t).0, Failing::Began);
        assert_eq!(failures.count("other", "agent gone", t).0, Failing::Again);
    }

    #[test]
    fn a_row_outlives_the_daemon_and_is_not_said_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("webhook-failures.json");
        let t = "2026-01-01T00:00:00Z";
        let before = Failures::kept_at(path.clone());
        assert_eq!(before.count("h", "agent gone", t).0, Failing::Began);
        before.count("h", "agent gone", t);
        drop(before);
        let after = Failures::kept_at(path.clone());
        let (failing, row) = after.count("h", "agent gone", "2026-01-01T00:05:00Z");
        assert_eq!(failing, Failing::Again, "said again after a restart");
        assert_eq!((row.failures, row.since.as_str()), (3, t));
        after.delivered("h");
        assert!(
            !path.exists(),
            "a hook that delivers again is no longer kept"
        );
    }
}
