//! The daemon's settings as sessions use them: once the daemon follows its files, the
//! settings in use (the last good ones when an edit breaks them); until then, the files
//! read at each use.

use std::sync::{Arc, OnceLock};

use tokio::sync::watch;

use crate::config::Config;
use crate::kiln::Kiln;
use crate::ledger::LedgerError;

pub(super) struct LiveSettings {
    kiln: Kiln,
    live: OnceLock<watch::Receiver<Arc<Config>>>,
}

impl LiveSettings {
    pub fn new(kiln: Kiln) -> Self {
        Self {
            kiln,
            live: OnceLock::new(),
        }
    }

    /// Follows the daemon's settings in use from now on.
    pub fn follow(&self, live: watch::Receiver<Arc<Config>>) {
        let _ = self.live.set(live);
    }

    /// The kiln's settings as they are now (they apply live).
    pub fn get(&self) -> Result<Config, LedgerError> {
        match self.live.get() {
            Some(live) => Ok(Config::clone(&live.borrow())),
            None => Config::load(&self.kiln.settings_path())
                .map_err(|e| LedgerError::Invalid(e.to_string())),
        }
    }
}
