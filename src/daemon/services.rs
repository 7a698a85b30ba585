//! What the daemon runs on. [`Services`] holds the ledger, the sessions, landing, the guard,
//! the conversations of channels and cron jobs, the settings in
//! use and the components, which report their state and share what the socket's
//! methods answer from; [`Shared`] is the connections' bookkeeping (how many clients,
//! the shutdown request, the activity that memory trimming follows). Connections hold
//! both; a component holds neither, only the daemon's door.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::{Notify, watch};

use super::components::Components;
use super::settings::LiveSettings;
use crate::ledger::Ledger;
use crate::sessions::guard::Guard;
use crate::sessions::landing::Landing;
use crate::sessions::{Conversations, Sessions};

/// The daemon's services, and its components.
pub(crate) struct Services {
    pub ledger: Arc<Ledger>,
    pub sessions: Arc<Sessions>,
    /// Reviewing and landing sessions' work, and the conflict radar.
    pub landing: Arc<Landing>,
    /// The rules, the sessions' security states, and the credentials agents ask for.
    pub guard: Arc<Guard>,
    /// The sessions channels' messages and cron jobs start and continue.
    pub conversations: Arc<Conversations>,
    /// The settings in use, followed live.
    pub settings: Arc<LiveSettings>,
    pub started: Instant,
    /// The daemon's descriptor limit, when it could be read.
    pub fd_limit: Option<u64>,
    components: Mutex<Components>,
}

impl Services {
    pub fn new(
        ledger: Arc<Ledger>,
        sessions: Arc<Sessions>,
        settings: Arc<LiveSettings>,
        fd_limit: Option<u64>,
    ) -> Self {
        Self {
            ledger,
            landing: Arc::clone(sessions.landing()),
            guard: Arc::clone(sessions.guard()),
            conversations: Conversations::new(Arc::clone(&sessions)),
            sessions,
            settings,
            started: Instant::now(),
            fd_limit,
            components: Mutex::default(),
        }
    }

    /// The components, for a moment: never held across an `await`.
    pub fn components(&self) -> MutexGuard<'_, Components> {
        self.components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What every connection shares: the client count, the shutdown request, the activity.
pub(crate) struct Shared {
    pub clients: watch::Sender<usize>,
    pub shutdown: Notify,
    /// Poked after every request; memory is trimmed once these pause.
    pub activity: Notify,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            clients: watch::channel(0).0,
            shutdown: Notify::new(),
            activity: Notify::new(),
        }
    }
}
