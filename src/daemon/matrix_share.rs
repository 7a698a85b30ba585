//! What the Matrix channel shares with the daemon's calls: how the bot stands (for
//! `daemon.status`), and the emoji verification that waits for the person to say whether
//! the emoji match (`matrix.verify`). Only a deliberate word from the owner confirms a
//! verification: the bot never confirms by itself.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::protocol::jsonrpc::code;
use crate::protocol::{ErrorObject, MatrixStatus, MatrixVerification};

/// The person's word on a verification's emoji, and where the bot says how it went (read
/// by the Matrix channel; without it, no verification waits for a word).
#[cfg_attr(not(feature = "matrix"), allow(dead_code))]
pub(crate) struct Word {
    pub confirm: bool,
    pub done: oneshot::Sender<MatrixVerification>,
}

/// A verification whose emoji are shown, waiting for the person's word.
#[cfg_attr(not(feature = "matrix"), allow(dead_code))]
struct Waiting {
    flow_id: String,
    word: oneshot::Sender<Word>,
}

/// Shared by the Matrix component and the daemon's calls.
#[derive(Default)]
pub(crate) struct MatrixShare {
    /// `None` while no `[channels.matrix]` is set.
    status: Mutex<Option<MatrixStatus>>,
    waiting: Mutex<Option<Waiting>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MatrixShare {
    /// The channel's status as it is now.
    pub fn status(&self) -> Option<MatrixStatus> {
        lock(&self.status).clone()
    }

    /// The status, to change (`None` while no bot is set).
    #[cfg(feature = "matrix")]
    pub fn status_mut(&self) -> MutexGuard<'_, Option<MatrixStatus>> {
        lock(&self.status)
    }

    /// Waits for the person's word on verification `flow_id` (its emoji are shown). A
    /// verification waiting before is let go (its receiver sees the sender dropped).
    #[cfg(feature = "matrix")]
    pub fn wait_for_word(&self, flow_id: &str) -> oneshot::Receiver<Word> {
        let (word, heard) = oneshot::channel();
        *lock(&self.waiting) = Some(Waiting {
            flow_id: flow_id.to_string(),
            word,
        });
        heard
    }

    /// The verification `flow_id` no longer waits (it ended on the other side).
    #[cfg(feature = "matrix")]
    pub fn stop_waiting(&self, flow_id: &str) {
        let mut waiting = lock(&self.waiting);
        if waiting.as_ref().is_some_and(|w| w.flow_id == flow_id) {
            *waiting = None;
        }
    }

    /// Gives the waiting verification the person's word, and says how it went.
    pub async fn say(&self, confirm: bool) -> Result<MatrixVerification, ErrorObject> {
        let nothing = || {
            ErrorObject::new(
                code::NOT_FOUND,
                "no emoji verification of the Matrix bot waits for an answer: start one from your Matrix client (verify the bot's device or the bot)",
            )
        };
        let waiting = lock(&self.waiting).take().ok_or_else(nothing)?;
        let (done, result) = oneshot::channel();
        waiting
            .word
            .send(Word { confirm, done })
            .map_err(|_| nothing())?;
        result.await.map_err(|_| {
            ErrorObject::new(
                code::INTERNAL_ERROR,
                "the Matrix bot stopped before it could say how the verification went",
            )
        })
    }
}
