//! Reading the daemon's state: all of it after a reconnection or missed events, and at
//! start the first screenful of sessions before the rest, so that the sessions on screen
//! and the focused transcript are drawn before a long list is read and built.

use std::sync::Arc;

use super::Runtime;
use crate::client::Client;
use crate::protocol::methods as m;
use crate::protocol::{
    ConflictReport, InboxMessage, ListParams, Session, SessionListParams, StoreHealth,
};

/// How many messages the workbench reads when it (re)synchronises.
const INBOX_WINDOW: u32 = 500;
/// How many sessions the first read at start asks for: more than a screen shows (the
/// status bar's window, the sessions overlay), few enough to read and draw at once.
pub(super) const FIRST_PAGE: u32 = 64;

/// How much of the session list a read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    /// Every session.
    All,
    /// The first [`FIRST_PAGE`], the rest read once they are drawn.
    FirstPage,
}

/// What one read brought.
struct State {
    sessions: Vec<Session>,
    messages: Vec<InboxMessage>,
    conflicts: ConflictReport,
    store: Option<StoreHealth>,
}

impl Runtime {
    /// Reads the whole state again (after connecting, or when events were missed).
    /// True if the result asks to quit.
    pub(super) async fn resync(&mut self) -> bool {
        self.read_state(Reading::All).await
    }

    /// Reads the state, the first page of sessions only for [`Reading::FirstPage`] (the
    /// rest follows, see [`Runtime::read_rest`]). True if the result asks to quit.
    pub(super) async fn read_state(&mut self, reading: Reading) -> bool {
        let Some(client) = self.link.as_ref().map(|l| Arc::clone(&l.client)) else {
            return false;
        };
        match read(&client, reading).await {
            Ok(state) => {
                if let Some(store) = state.store {
                    self.model.set_store(store);
                }
                self.model.set_conflicts(state.conflicts);
                let partial =
                    reading == Reading::FirstPage && state.sessions.len() >= FIRST_PAGE as usize;
                let actions = if partial {
                    self.model.sync_first_page(state.sessions, state.messages)
                } else {
                    self.model.sync(state.sessions, state.messages)
                };
                self.perform(actions)
            }
            Err(e) => {
                self.lost_to(&e);
                false
            }
        }
    }

    /// Whether the rest of the sessions is to be read now: the model has the first page
    /// only, and its screen is drawn with the focused transcript read (or its read failed).
    pub(super) fn rest_due(&self) -> bool {
        self.link.is_some() && self.model.partial && self.loading.is_empty()
    }

    /// Reads every session, after the first page: the list is replaced, the focus and
    /// what else was read stay. True if the result asks to quit.
    pub(super) async fn read_rest(&mut self) -> bool {
        let Some(client) = self.link.as_ref().map(|l| Arc::clone(&l.client)) else {
            return false;
        };
        match client
            .call::<m::SessionList>(&SessionListParams::default())
            .await
        {
            Ok(listed) => {
                let actions = self.model.sync_sessions(listed.sessions);
                self.perform(actions)
            }
            Err(e) => {
                self.lost_to(&anyhow::Error::from(e));
                false
            }
        }
    }
}

/// The state as `reading` asks for it, its reads asked at once: through the hub each is
/// every kiln's, and they overlap.
async fn read(client: &Client, reading: Reading) -> anyhow::Result<State> {
    let window = ListParams {
        limit: Some(INBOX_WINDOW),
        ..ListParams::default()
    };
    let sessions = SessionListParams {
        limit: (reading == Reading::FirstPage).then_some(FIRST_PAGE),
        ..SessionListParams::default()
    };
    let (status, sessions, messages, conflicts) = tokio::join!(
        client.call::<m::DaemonStatusOf>(&m::NoParams {}),
        client.call::<m::SessionList>(&sessions),
        client.call::<m::InboxList>(&window),
        client.call::<m::SessionConflicts>(&m::NoParams {}),
    );
    // Team mode: a database server that is away is shown, not fatal.
    let mut store = status.ok().and_then(|status| status.store);
    let sessions = sessions?;
    let server_away = store.as_ref().is_some_and(|h| !h.connected);
    let messages = match messages {
        Ok(list) => list.messages,
        Err(_) if server_away => Vec::new(),
        // A damaged database is shown (with what to do), not a lost daemon.
        Err(e) if e.to_string().contains(crate::protocol::check::WHAT_TO_DO) => {
            let health = store.get_or_insert_with(Default::default);
            health.connected = true;
            if health.damaged.is_empty() {
                health.damaged.push("the inbox cannot be read".into());
            }
            Vec::new()
        }
        Err(e) => return Err(anyhow::Error::from(e)),
    };
    Ok(State {
        sessions: sessions.sessions,
        messages,
        conflicts: conflicts?,
        store,
    })
}
