//! Whether the daemon answers. A call that has waited [`PATIENCE`] looks at the daemon's
//! process (the peer of the socket): a process stopped by a signal (`kill -STOP`, Ctrl-Z,
//! a debugger) answers nothing until it is continued, so the call ends saying so instead
//! of waiting forever, unless it is long by design (an `Apart` row of the methods table,
//! such as `inbox.wait`) or its caller chose to wait through it (the workbench). Whoever
//! watches the connection is told ([`Answering`]); any line from the daemon says it
//! answers again. Nothing is looked at while no call waits.

use std::time::Duration;

use tokio::sync::{oneshot, watch};

use super::{Client, ClientError, Result};
use crate::protocol::methods::{self, Method, Order};
use crate::sys;

/// How long a call waits for its answer before the daemon's process is looked at (and
/// again each time this passes).
pub const PATIENCE: Duration = Duration::from_secs(2);

/// How long a call waits on a daemon that runs before it counts as silent (a session
/// being made can take seconds).
pub const SILENT_AFTER: Duration = Duration::from_secs(10);

/// What the connection has seen of the daemon lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// It answers: nothing has waited past [`PATIENCE`] since it last said something.
    Yes,
    /// A call has waited past [`SILENT_AFTER`] while the daemon's process runs (busy, or
    /// hung).
    Slow,
    /// The daemon's process is stopped by a signal: nothing is answered until it is
    /// continued.
    Suspended { pid: u32 },
}

impl Answering {
    /// What a person should know, in one line; nothing while it answers.
    pub fn words(self) -> Option<String> {
        match self {
            Answering::Yes => None,
            Answering::Slow => Some(format!(
                "the daemon has not answered for more than {} s; waiting…",
                SILENT_AFTER.as_secs()
            )),
            Answering::Suspended { pid } => Some(format!(
                "the daemon (pid {pid}) is stopped (suspended); `kill -CONT {pid}` resumes it"
            )),
        }
    }
}

/// How a call waits for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// Ends with [`ClientError::Suspended`] when the daemon is stopped, unless the method
    /// is long by design.
    Bounded,
    /// Waits through a stopped daemon (the watchers are told).
    Through,
}

impl Client {
    /// What the connection has seen of the daemon, as it changes.
    pub fn answering(&self) -> watch::Receiver<Answering> {
        self.answering.subscribe()
    }

    /// Looks at the daemon's process now: true if it is stopped by a signal and was not
    /// known to be (the watchers are told). Costs one read of `/proc`.
    pub fn check_suspended(&self) -> bool {
        let Some(pid) = self.peer.filter(|&pid| sys::is_suspended(pid)) else {
            return false;
        };
        self.answering
            .send_if_modified(|now| std::mem::replace(now, Answering::Suspended { pid }) != *now)
    }

    /// Waits for the answer to a call of `name`, looking at the daemon's process each
    /// time [`PATIENCE`] passes.
    pub(super) async fn answer(
        &self,
        mut rx: oneshot::Receiver<super::Answer>,
        name: &str,
        wait: Wait,
    ) -> Result<super::Answer> {
        let long = methods::row(name).is_some_and(|row| row.order == Order::Apart);
        let mut waited = Duration::ZERO;
        loop {
            if let Ok(answer) = tokio::time::timeout(PATIENCE, &mut rx).await {
                return answer.map_err(|_| ClientError::Closed);
            }
            waited += PATIENCE;
            let suspended = self.peer.filter(|&pid| sys::is_suspended(pid));
            let seen = match suspended {
                Some(pid) => Answering::Suspended { pid },
                // A long call is not a silent daemon, nor a short wait.
                None if long || waited < SILENT_AFTER => continue,
                None => Answering::Slow,
            };
            self.answering
                .send_if_modified(|now| std::mem::replace(now, seen) != *now);
            if let Some(pid) = suspended
                && wait == Wait::Bounded
                && !long
            {
                // Its answer, if it comes once the daemon is continued, is dropped; it
                // still tells the watchers that the daemon answers again.
                return Err(ClientError::Suspended {
                    pid,
                    sent: name != methods::Handshake::NAME,
                });
            }
        }
    }
}

/// Tells the watchers that the daemon said something (it answers).
pub(super) fn heard(answering: &watch::Sender<Answering>) {
    answering.send_if_modified(|now| std::mem::replace(now, Answering::Yes) != Answering::Yes);
}
