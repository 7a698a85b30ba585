//! What the web view's component shares with the socket's `web.*` methods: the paired
//! browsers, the address listened on, and the name of the kiln's cookie; and those
//! methods' answers, the same from a kiln's daemon and from the person's hub.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::devices::{DeviceError, Devices};
use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::{
    ErrorObject, WebAccess, WebDevices, WebPairParams, WebPairing, WebRevokeParams, WebRevoked,
    code,
};

fn device_error(e: DeviceError) -> ErrorObject {
    let code = match &e {
        DeviceError::NoDevice(_) => code::NOT_FOUND,
        DeviceError::Ambiguous(_) | DeviceError::BadCode => code::INVALID_PARAMS,
        DeviceError::Save { .. } => code::IO_ERROR,
    };
    ErrorObject::new(code, e.to_string())
}

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

/// `web.*`, answered from what the web view shares and the settings in use.
impl WebState {
    /// `web.pair`: a one-time code and the link that carries it.
    pub fn pair(&self, config: &Config, p: &WebPairParams) -> Result<WebPairing, ErrorObject> {
        let Some(base) = self.base_url(config) else {
            return Err(ErrorObject::new(
                code::CONFLICT,
                if config.web.enabled {
                    "the web view could not listen (the log says why): free its address or change [web] listen"
                } else {
                    "the web view is off: [web] enabled = false in the settings"
                },
            ));
        };
        let access = if p.read_only {
            WebAccess::ReadOnly
        } else {
            WebAccess::Full
        };
        let (code, expires_at) = self
            .devices
            .new_pairing(access, config.web.pairing_minutes)
            .map_err(device_error)?;
        let expires_at = chrono::DateTime::from_timestamp(expires_at, 0)
            .map(|t| t.to_rfc3339())
            .unwrap_or_default();
        Ok(WebPairing {
            url: format!("{base}/pair#code={code}"),
            code,
            access,
            expires_at,
        })
    }

    /// `web.devices`: the paired browsers and the page's address.
    pub fn devices_of(&self, config: &Config) -> WebDevices {
        WebDevices {
            devices: self.devices.list(),
            url: self.base_url(config),
        }
    }

    /// `web.revoke`: lets a paired browser go.
    pub fn revoke(&self, p: &WebRevokeParams) -> Result<WebRevoked, ErrorObject> {
        let device = self.devices.revoke(&p.id).map_err(device_error)?;
        tracing::info!(device = %device.id, label = %device.label, "a browser's pairing was revoked");
        Ok(WebRevoked { device })
    }
}
