//! What the web view's component shares with the socket's `web.*` methods: the paired
//! browsers, the address listened on, and the name of the kiln's cookie.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::devices::Devices;
use crate::config::Config;
use crate::kiln::Kiln;

/// What the socket's `web.*` methods and the page's server share: the paired browsers
/// and where the page is served.
pub(crate) struct WebState {
    pub devices: Devices,
    /// The address listened on, while the web view is on.
    bound: Mutex<Option<SocketAddr>>,
    /// The name of the cookie a paired browser holds: one per kiln, so that browsers
    /// paired with two kilns' daemons on one host keep both.
    pub cookie: String,
}

impl WebState {
    pub fn new(kiln: &Kiln) -> Arc<Self> {
        use sha2::Digest;
        let path = kiln.state_dir().join("web").join("devices.json");
        let kiln_hash = sha2::Sha256::digest(kiln.root().as_os_str().as_encoded_bytes());
        Arc::new(Self {
            devices: Devices::open(&path),
            bound: Mutex::new(None),
            cookie: format!("cru_{}", hex::encode(&kiln_hash[..4])),
        })
    }

    /// The address listened on, while the web view is on.
    pub fn bound(&self) -> Option<SocketAddr> {
        *self.bound.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn set_bound(&self, at: Option<SocketAddr>) {
        *self.bound.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// The address a browser opens, while the web view is on.
    pub fn base_url(&self, config: &Config) -> Option<String> {
        self.bound().map(|at| config.web.base_url(at))
    }
}
