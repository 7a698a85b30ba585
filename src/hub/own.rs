//! What the hub serves of its own: the web view and the Matrix bot of the person's
//! settings (`~/.config/crucible/config.toml`), for every kiln at once, and the `web.*`
//! and `matrix.verify` calls that pair browsers with that page and verify that bot. The
//! settings are followed: a `[web]` or `[channels.matrix]` saved later is served at once.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Hub;
use super::door::Through;
use crate::client::HubPlace;
use crate::config::Config;
use crate::daemon::{Door, LiveSettings, PersonParts, SettingsWatch};
use crate::kiln::Kiln;
use crate::protocol::methods::Request;
use crate::protocol::{ErrorObject, code};

/// Starts the person's web view and bot from their settings, and follows the settings
/// for as long as the returned watch is held.
pub(super) fn start(hub: &Arc<Hub>, place: &HubPlace) -> Option<SettingsWatch> {
    let config = match Config::load_person() {
        Ok(config) => config,
        Err(e) => {
            tracing::error!(
                "the person's settings do not load: no web view or bot until they do: {}",
                e.summary()
            );
            Config::default()
        }
    };
    // The hub's own folder, where the page's paired browsers and the bot's device live.
    let home = Kiln::new(place.dir());
    if let Err(e) = home.ensure_state_dir() {
        tracing::error!("cannot make the hub's state folder: {e}");
        return None;
    }
    let live = LiveSettings::of_person(config.clone());
    let fd_limit = crate::sys::raise_fd_limit().ok();
    let door = Door::above(Through::new(hub), Arc::clone(&live), home.clone(), fd_limit);
    let parts = PersonParts::start(&door, &config);
    *hub.parts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(parts);
    let mut changes = live.subscribe();
    let following = Arc::downgrade(hub);
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let config = Arc::clone(&changes.borrow_and_update());
            let Some(hub) = following.upgrade() else {
                break;
            };
            for problem in hub
                .with_parts(|parts| parts.reconfigure(&config))
                .unwrap_or_default()
            {
                tracing::error!("{problem}");
            }
            // Whether the hub stays up with no client may have changed.
            hub.clients.send_modify(|_| {});
        }
    });
    Some(SettingsWatch::start(&home, live))
}

/// `web.*` and `matrix.verify`, answered by the hub for the page and bot it serves.
pub(super) async fn answer(hub: &Hub, request: Request) -> Result<Value, ErrorObject> {
    let config = || hub.with_parts(|parts| parts.settings()).unwrap_or_default();
    match request {
        Request::MatrixVerify(p) => {
            let share = hub.with_parts(|parts| parts.matrix()).flatten();
            let Some(share) = share else {
                return Err(ErrorObject::new(
                    code::NOT_FOUND,
                    "the hub runs no Matrix bot: a kiln's own bot is verified at its daemon (`cru -C KILN daemon verify`)",
                ));
            };
            Ok(json!(share.say(p.confirm).await?))
        }
        request => {
            let web = hub.with_parts(|parts| parts.web()).flatten();
            let Some(web) = web else {
                return Err(ErrorObject::new(
                    code::CONFLICT,
                    "the hub serves no web view: put [web] in your own settings (~/.config/crucible/config.toml); a kiln's own page pairs at its daemon (`cru -C KILN web`)",
                ));
            };
            match request {
                Request::WebPair(p) => Ok(json!(web.pair(&config(), &p)?)),
                Request::WebDevicesOf(_) => Ok(json!(web.devices_of(&config()))),
                Request::WebRevoke(p) => Ok(json!(web.revoke(&p)?)),
                other => Err(ErrorObject::internal(format!(
                    "{} is not the hub's own",
                    other.method()
                ))),
            }
        }
    }
}
