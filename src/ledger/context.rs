//! Sessions' context stacks, kept in the store. Every change is written through (the
//! stack and the change appended to the session's history, in one transaction) before
//! it is acknowledged or announced, so a stack survives any daemon end, `kill -9`
//! included; entries that leave the stack stay in that history.
//!
//! Operations are applied one at a time across the daemon, so the agent's feeding and a
//! human's `context.*` call never interleave. A refused operation changes nothing.

use crate::context::{Change, ContextOp, ContextStack};
use crate::protocol::{ContextUpdate, Event};
use crate::store::StoredContext;

use super::{Ledger, LedgerError, Result};

/// A session's stack and what goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextState {
    pub stack: ContextStack,
    /// The stack lost entries an ACP agent still holds in its own session: its next
    /// prompt must open a fresh one.
    pub fresh_start: bool,
    /// How many changes the session's history holds.
    pub history_len: u64,
}

impl Ledger {
    /// The session's stack; one holding only `system_prompt()` is made (and stored) if the
    /// session has none yet.
    pub async fn context(
        &self,
        session_id: &str,
        system_prompt: impl FnOnce() -> String,
    ) -> Result<ContextState> {
        let mut cache = self.contexts.lock().await;
        if let Some(state) = cache.get(session_id) {
            return Ok(state.clone());
        }
        let state = match self.store.load_context(session_id).await? {
            Some(stored) => ContextState {
                stack: serde_json::from_str(&stored.stack).map_err(|e| {
                    LedgerError::Store(crate::store::StoreError::Db(format!(
                        "the context stack of session {session_id}: {e}"
                    )))
                })?,
                fresh_start: stored.fresh_start,
                history_len: stored.history_len,
            },
            None => {
                let state = ContextState {
                    stack: ContextStack::new(system_prompt()),
                    fresh_start: false,
                    history_len: 0,
                };
                self.store
                    .save_context(session_id, &stored(&state)?, None)
                    .await?;
                state
            }
        };
        cache.insert(session_id.to_string(), state.clone());
        Ok(state)
    }

    /// Applies `op` to the session's stack (made as [`Ledger::context`] makes it),
    /// stores the result and the change, then announces it. A refused operation is
    /// [`LedgerError::Invalid`] with the stack's reason, and changes nothing.
    /// `fresh_on_shrink`: an agent keeps its own copy of the conversation (ACP), so a
    /// change that removes entries marks the stack for a fresh agent session.
    pub async fn apply_context(
        &self,
        session_id: &str,
        system_prompt: impl FnOnce() -> String,
        op: ContextOp,
        fresh_on_shrink: bool,
    ) -> Result<(ContextState, Change)> {
        // Loads (or makes) the stack first; the lock below then finds it cached.
        self.context(session_id, system_prompt).await?;
        let mut cache = self.contexts.lock().await;
        let Some(current) = cache.get(session_id) else {
            return Err(LedgerError::NotFound(format!(
                "session {session_id} has no context stack"
            )));
        };
        let mut next = current.clone();
        let change = next
            .stack
            .apply(op)
            .map_err(|e| LedgerError::Invalid(e.to_string()))?;
        next.history_len += 1;
        next.fresh_start |= fresh_on_shrink && !change.removed.is_empty();
        let change_json = serde_json::to_string(&change).map_err(unencodable)?;
        self.store
            .save_context(
                session_id,
                &stored(&next)?,
                Some((&change.operation.to_string(), &change_json)),
            )
            .await?;
        cache.insert(session_id.to_string(), next.clone());
        drop(cache);
        self.publish(Event::Context(ContextUpdate {
            session_id: session_id.to_string(),
            change: change.clone(),
            entries: next.stack.entries().len(),
            checkpoints: next.stack.checkpoints().to_vec(),
            fresh_start: next.fresh_start,
        }));
        Ok((next, change))
    }

    /// Gives session `to` a copy of `from`'s stack (a fork), marked so that `to`'s first
    /// prompt opens its agent session seeded with it. `to`'s history starts empty.
    pub async fn copy_context(&self, from: &str, to: &str) -> Result<()> {
        let Some(source) = self.store.load_context(from).await? else {
            return Ok(());
        };
        let copy = StoredContext {
            stack: source.stack,
            fresh_start: true,
            history_len: 0,
        };
        self.store.save_context(to, &copy, None).await?;
        self.contexts.lock().await.remove(to);
        Ok(())
    }

    /// Records that the agent lost its copy of the conversation: its next prompt opens a
    /// fresh agent session seeded with the stack.
    pub async fn mark_fresh_start(
        &self,
        session_id: &str,
        system_prompt: impl FnOnce() -> String,
    ) -> Result<()> {
        self.context(session_id, system_prompt).await?;
        let mut cache = self.contexts.lock().await;
        let Some(current) = cache.get(session_id) else {
            return Ok(());
        };
        if current.fresh_start {
            return Ok(());
        }
        let mut next = current.clone();
        next.fresh_start = true;
        self.store
            .save_context(session_id, &stored(&next)?, None)
            .await?;
        cache.insert(session_id.to_string(), next);
        Ok(())
    }

    /// Records that the agent now holds exactly the stack (a fresh session was opened).
    pub async fn clear_fresh_start(&self, session_id: &str) -> Result<()> {
        let mut cache = self.contexts.lock().await;
        let Some(current) = cache.get(session_id) else {
            return Ok(());
        };
        if !current.fresh_start {
            return Ok(());
        }
        let mut next = current.clone();
        next.fresh_start = false;
        self.store
            .save_context(session_id, &stored(&next)?, None)
            .await?;
        cache.insert(session_id.to_string(), next);
        Ok(())
    }

    /// Forgets a deleted session's stack (the store deletes it with the session).
    pub(super) async fn forget_context(&self, session_id: &str) {
        self.contexts.lock().await.remove(session_id);
    }
}

fn stored(state: &ContextState) -> Result<StoredContext> {
    Ok(StoredContext {
        stack: serde_json::to_string(&state.stack).map_err(unencodable)?,
        fresh_start: state.fresh_start,
        history_len: state.history_len,
    })
}

/// A context stack or change that cannot be written as JSON for the store: the store
/// cannot keep it, so nothing is saved.
fn unencodable(e: serde_json::Error) -> LedgerError {
    LedgerError::Store(crate::store::StoreError::Db(format!(
        "cannot encode the context stack: {e}"
    )))
}
