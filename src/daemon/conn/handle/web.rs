//! `web.*`: pairing browsers with the web view, listing and revoking them.

use std::sync::Arc;

use super::super::call::Call;
use crate::daemon::web::state::WebState;
use crate::protocol::methods::{self as m, Answer, NoParams};
use crate::protocol::*;

impl Call<'_> {
    /// The web view's paired browsers and address, as its component shares them.
    fn web(&self) -> Result<Arc<WebState>, ErrorObject> {
        let shared = self.conn.services.components().part::<WebState>();
        shared.ok_or_else(|| ErrorObject::new(code::CONFLICT, "the web view is not running"))
    }
}

impl Answer<m::WebPair> for Call<'_> {
    async fn answer(&self, p: WebPairParams) -> Result<WebPairing, ErrorObject> {
        self.web()?.pair(&self.conn.services.settings.current(), &p)
    }
}

impl Answer<m::WebDevicesOf> for Call<'_> {
    async fn answer(&self, _: NoParams) -> Result<WebDevices, ErrorObject> {
        Ok(self
            .web()?
            .devices_of(&self.conn.services.settings.current()))
    }
}

impl Answer<m::WebRevoke> for Call<'_> {
    async fn answer(&self, p: WebRevokeParams) -> Result<WebRevoked, ErrorObject> {
        self.web()?.revoke(&p)
    }
}
