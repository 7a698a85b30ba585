//! Fallback chains. At a usage limit, a session whose profile names a `fallback` chain
//! hands its task to the first profile of the chain that is neither at a limit itself
//! nor tried already since the first limit (so a chain never loops); at a limit there,
//! to the next, and so on; when none is left the session is parked until its reset.
//! With `fallback_return`, at the first profile's reset the task comes back to it from
//! whichever session has it then, once that one's turn has ended. Every switch goes
//! through the hand-off and its brief ([`super::handoff`]), is said in the inbox and is
//! kept on the session it left (`switched`, which `cru usage` lists).
//!
//! The book ([`Chains`]) is the daemon's memory: when each profile's last limit resets,
//! and the chains under way. A daemon restart forgets it: a chain then ends where it is.

pub(super) mod wording;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use crate::config::AgentProfile;
use crate::protocol::Session;

/// The daemon's memory of usage limits and of the chains under way.
#[derive(Default)]
pub(super) struct Chains {
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    /// Profile → when its last usage limit resets: it is limited until then.
    limited: HashMap<String, DateTime<Utc>>,
    /// The chains under way.
    chains: Vec<Chain>,
}

/// A task on its way along a fallback chain.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Chain {
    /// The profile whose limit began the chain, and its session.
    pub first_agent: String,
    pub first_session: String,
    /// The task as that session had it (what every brief of the chain names).
    pub task: Option<String>,
    /// The first profile's `fallback` list.
    pub list: Vec<String>,
    /// The profiles tried since the first limit, the first one's included.
    pub tried: Vec<String>,
    /// The sessions that took the task over, in order.
    pub taken: Vec<String>,
    /// The session that has the task now (a new session it was handed to names it as
    /// `handed_from` until the book knows it).
    pub holder: String,
    /// With `fallback_return`: when the task comes back to the first profile.
    pub back_at: Option<DateTime<Utc>>,
}

/// Why a profile of the chain was passed over.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Passed {
    /// Tried already since the first limit.
    Tried(String),
    /// At a usage limit that resets then.
    Limited(String, DateTime<Utc>),
}

impl Chain {
    /// The chain a limit on `session` begins, when its profile has a `fallback`.
    pub fn begin(
        session: &Session,
        profile: &AgentProfile,
        resets_at: DateTime<Utc>,
    ) -> Option<Chain> {
        if profile.fallback.is_empty() {
            return None;
        }
        Some(Chain {
            first_agent: session.agent_name.clone(),
            first_session: session.id.clone(),
            task: session.task.clone(),
            list: profile.fallback.clone(),
            tried: vec![session.agent_name.clone()],
            taken: Vec::new(),
            holder: session.id.clone(),
            back_at: profile.fallback_return.then_some(resets_at),
        })
    }

    /// Whether `session` has the chain's task: it is the holder, or was handed it by the
    /// holder.
    fn holds(&self, session: &Session) -> bool {
        self.holder == session.id || session.handed_from.as_deref() == Some(&self.holder)
    }

    /// The next profile of the chain, or, when none is left, why each was passed over.
    pub fn next(
        &self,
        limited: &HashMap<String, DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<String, Vec<Passed>> {
        let mut passed = Vec::new();
        for name in &self.list {
            if self.tried.contains(name) {
                passed.push(Passed::Tried(name.clone()));
                continue;
            }
            match limited.get(name) {
                Some(until) if *until > now => passed.push(Passed::Limited(name.clone(), *until)),
                _ => return Ok(name.clone()),
            }
        }
        Err(passed)
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Chains {
    /// `agent` is at a usage limit until `until` (a later limit wins).
    pub fn mark_limited(&self, agent: &str, until: DateTime<Utc>) {
        let mut book = locked(&self.book);
        let at = book.limited.entry(agent.to_string()).or_insert(until);
        *at = (*at).max(until);
    }

    /// Until when `agent` is at a usage limit, if it is at `now`.
    pub fn limited_until(&self, agent: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let book = locked(&self.book);
        book.limited
            .get(agent)
            .copied()
            .filter(|until| *until > now)
    }

    /// The chain `session` has the task of, taken out of the book.
    pub fn take(&self, session: &Session) -> Option<Chain> {
        let mut book = locked(&self.book);
        let i = book.chains.iter().position(|c| c.holds(session))?;
        Some(book.chains.remove(i))
    }

    /// The chain begun by the session `first`, as it is now.
    pub fn get(&self, first: &str) -> Option<Chain> {
        let book = locked(&self.book);
        book.chains
            .iter()
            .find(|c| c.first_session == first)
            .cloned()
    }

    /// Takes the chain begun by `first` out of the book.
    pub fn remove(&self, first: &str) -> Option<Chain> {
        let mut book = locked(&self.book);
        let i = book.chains.iter().position(|c| c.first_session == first)?;
        Some(book.chains.remove(i))
    }

    /// Keeps `chain` (replacing the one begun by the same session).
    pub fn put(&self, chain: Chain) {
        let mut book = locked(&self.book);
        book.chains
            .retain(|c| c.first_session != chain.first_session);
        book.chains.push(chain);
    }

    /// The next profile of `chain` now.
    pub fn next(&self, chain: &Chain, now: DateTime<Utc>) -> Result<String, Vec<Passed>> {
        let book = locked(&self.book);
        chain.next(&book.limited, now)
    }

    /// Forgets the limits that have reset.
    pub fn prune(&self, now: DateTime<Utc>) {
        locked(&self.book).limited.retain(|_, until| *until > now);
    }
}
