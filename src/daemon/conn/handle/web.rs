//! `web.*`: pairing browsers with the web view, listing and revoking them.

use std::sync::Arc;

use super::super::call::Call;
use crate::daemon::web::devices::DeviceError;
use crate::daemon::web::state::WebState;
use crate::protocol::methods::{self as m, Answer, NoParams};
use crate::protocol::*;

fn device_error(e: DeviceError) -> ErrorObject {
    let code = match &e {
        DeviceError::NoDevice(_) => code::NOT_FOUND,
        DeviceError::Ambiguous(_) | DeviceError::BadCode => code::INVALID_PARAMS,
        DeviceError::Save { .. } => code::IO_ERROR,
    };
    ErrorObject::new(code, e.to_string())
}

impl Call<'_> {
    /// The web view's paired browsers and address, as its component shares them.
    fn web(&self) -> Result<Arc<WebState>, ErrorObject> {
        let shared = self.conn.services.components().part::<WebState>();
        shared.ok_or_else(|| ErrorObject::new(code::CONFLICT, "the web view is not running"))
    }
}

impl Answer<m::WebPair> for Call<'_> {
    async fn answer(&self, p: WebPairParams) -> Result<WebPairing, ErrorObject> {
        let web = self.web()?;
        let config = self.conn.services.settings.current();
        let Some(base) = web.base_url(&config) else {
            return Err(ErrorObject::new(
                code::CONFLICT,
                if config.web.enabled {
                    "the web view could not listen (the daemon's log says why): free its address or change [web] listen"
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
        let (code, expires_at) = web
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
}

impl Answer<m::WebDevicesOf> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<WebDevices, ErrorObject> {
        let web = self.web()?;
        let config = self.conn.services.settings.current();
        Ok(WebDevices {
            devices: web.devices.list(),
            url: web.base_url(&config),
        })
    }
}

impl Answer<m::WebRevoke> for Call<'_> {
    async fn answer(&self, p: WebRevokeParams) -> Result<WebRevoked, ErrorObject> {
        let device = self.web()?.devices.revoke(&p.id).map_err(device_error)?;
        tracing::info!(device = %device.id, label = %device.label, "a browser's pairing was revoked");
        Ok(WebRevoked { device })
    }
}
