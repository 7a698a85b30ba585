//! Sessions' context stacks, kept in the store. Every change is written through (the
//! entries it adds, the stack's record and the change appended to the session's history,
//! committed by one transaction; see `store::context`) before it is acknowledged or
//! announced, so a stack survives any daemon end, `kill -9`
//! included; entries that leave the stack stay in that history.
//!
//! Operations are applied one at a time across the daemon, so the agent's feeding and a
//! human's `context.*` call never interleave. A refused operation changes nothing.

use crate::context::{Change, ContextOp, ContextStack};
use crate::protocol::{ContextUpdate, Event};
use crate::store::StoreError;

use super::Ledger;
use super::error::{LedgerError, Result};

/// A session's stack and what goes with it, as the store keeps it.
pub use crate::store::StoredContext as ContextState;

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
        let state = match self.store.contexts().load(session_id).await? {
            Some(stored) => stored,
            None => {
                let state = ContextState {
                    stack: ContextStack::new(system_prompt()),
                    fresh_start: false,
                    history_len: 0,
                };
                self.store.contexts().save(session_id, &state).await?;
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
        next.fresh_start |= fresh_on_shrink && !change.removed.is_empty();
        next.history_len = self
            .store
            .contexts()
            .save_change(session_id, &next, &change)
            .await
            .map_err(|e| match e {
                // One entry too large for the stack: refused alone, like bad input.
                e @ StoreError::TooLarge { .. } => LedgerError::Invalid(e.to_string()),
                e => LedgerError::Store(e),
            })?;
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
        // Under the lock the changes take, so the copy is of a stack as stored.
        let mut cache = self.contexts.lock().await;
        let stack = match cache.get(from) {
            Some(state) => state.stack.clone(),
            None => match self.store.contexts().load(from).await? {
                Some(stored) => stored.stack,
                None => return Ok(()),
            },
        };
        let copy = ContextState {
            stack,
            fresh_start: true,
            history_len: 0,
        };
        self.store.contexts().save(to, &copy).await?;
        cache.remove(to);
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
        self.store.contexts().mark_fresh(session_id, true).await?;
        if let Some(current) = cache.get_mut(session_id) {
            current.fresh_start = true;
        }
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
        self.store.contexts().mark_fresh(session_id, false).await?;
        if let Some(current) = cache.get_mut(session_id) {
            current.fresh_start = false;
        }
        Ok(())
    }

    /// Forgets a deleted session's stack (the store deletes it with the session).
    pub(super) async fn forget_context(&self, session_id: &str) {
        self.contexts.lock().await.remove(session_id);
    }
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;
