//! What every route of the web view shares: the server's state (the door the page's
//! calls are answered through, the paired browsers, the guard against guessing), who a request comes from (a paired browser, [`Paired`]; one that may
//! change something, [`Changer`]) and the refusals and files it is answered with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::assets::{self, Asset};
use super::devices::Device;
use super::guard::{self, Guard, Guess};
use super::state::WebState;
use crate::config::Config;
use crate::daemon::door::Door;
use crate::daemon::http::{error, quiet::Quiet};

/// The largest request body (a prompt, an answer).
pub(super) const MAX_BODY: usize = 256 * 1024;

/// The web view's server, shared by its routes.
pub(super) struct Server {
    pub door: Door,
    /// The paired browsers, the cookie's name.
    pub state: Arc<WebState>,
    pub guard: Guard,
    /// Refusals that are not guesses, logged now and then.
    pub quiet: Arc<Quiet>,
}

pub(super) type Web = State<Arc<Server>>;

pub(super) fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Why a request is not served: its status, the words said and, for a lock-out, when to
/// try again.
pub(super) struct Refused {
    status: StatusCode,
    message: String,
    retry_after: Option<Duration>,
}

impl Refused {
    pub(super) fn new(status: StatusCode, message: &str) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 429: too many wrong guesses (`what`) from this address, for `left` more.
    pub(super) fn locked(what: &str, left: Duration) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: format!("too many {what} from this address; {}", try_again(left)),
            retry_after: Some(left),
        }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let mut answer = error::reply(self.status, &self.message);
        if let Some(left) = self.retry_after {
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, left.as_secs().max(1).into());
        }
        answer
    }
}

/// "try again in N minutes", for a lock-out with `left` to run.
fn try_again(left: Duration) -> String {
    match guard::minutes(left) {
        1 => "try again in 1 minute".into(),
        n => format!("try again in {n} minutes"),
    }
}

/// The page a browser without a valid cookie is shown while its address may not try
/// more pairing codes.
fn locked_page(left: Duration) -> Response {
    let page = assets::LOCKED.replace("{try_again}", &try_again(left));
    let retry = left.as_secs().max(1).to_string();
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::RETRY_AFTER, retry.as_str()),
        ],
        page,
    )
        .into_response()
}

/// A file of the page, with the tag of its content: a browser that has it already (its
/// `If-None-Match`) is answered 304 without the body.
pub(super) fn file(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let tag = asset.tag();
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let meta = [
        (header::CONTENT_TYPE, asset.content_type),
        (header::CACHE_CONTROL, "no-cache"),
        (header::ETAG, tag),
    ];
    if cached {
        return (StatusCode::NOT_MODIFIED, meta).into_response();
    }
    (meta, asset.body).into_response()
}

/// Who sent a request (the listener notes it on every request).
pub(super) fn peer(parts: &Parts) -> SocketAddr {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0)
}

/// The paired browser a request comes from ([`Server::device`]); refused otherwise.
pub(super) struct Paired(pub Device);

impl FromRequestParts<Arc<Server>> for Paired {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, web: &Arc<Server>) -> Result<Self, Refused> {
        web.device(&parts.headers, peer(parts)).map(Paired)
    }
}

/// A paired browser's change, from its own page ([`Server::changer`]); refused otherwise.
pub(super) struct Changer(pub Device);

impl FromRequestParts<Arc<Server>> for Changer {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, web: &Arc<Server>) -> Result<Self, Refused> {
        web.changer(&parts.headers, peer(parts)).map(Changer)
    }
}

impl Server {
    pub(super) fn config(&self) -> Arc<Config> {
        self.door.settings()
    }

    /// The paired device a request comes from, whatever failures came from its address;
    /// otherwise the refusal: 401 without a cookie or with one no device holds, 429 for
    /// one no device holds from an address past its wrong tokens.
    pub(super) fn device(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
        let web = &self.state;
        let Some(token) = guard::cookie(headers, &web.cookie) else {
            return Err(Refused::new(
                StatusCode::UNAUTHORIZED,
                "this browser is not paired: run `cru web` and open its link",
            ));
        };
        if let Some(device) = web.devices.device(token) {
            return Ok(device);
        }
        if let Some(left) = self.guard.locked(Guess::Token, peer.ip()) {
            return Err(Refused::locked("unknown tokens", left));
        }
        self.guard.failed(Guess::Token, peer.ip(), token);
        Err(Refused::new(
            StatusCode::UNAUTHORIZED,
            "this browser's pairing was revoked or is unknown: run `cru web` and pair again",
        ))
    }

    /// A device that may make a change: paired, this page's origin and request token.
    /// A change that fails these guesses nothing (it came with a valid cookie), so it is
    /// not counted toward a lock-out.
    pub(super) fn changer(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
        let device = self.device(headers, peer)?;
        let config = self.config();
        if !guard::may_change(headers, &device, config.web.public_url.as_deref()) {
            self.quiet.note(
                "changes without this page's origin or request token",
                &format!("from {}", peer.ip()),
            );
            return Err(Refused::new(
                StatusCode::FORBIDDEN,
                "a change must come from the page itself (its origin and request token)",
            ));
        }
        Ok(device)
    }

    /// What a browser without a valid cookie is shown: the login page with `status`, or,
    /// while its address may not try more pairing codes, a page that says how long.
    pub(super) fn login(
        &self,
        headers: &HeaderMap,
        peer: SocketAddr,
        status: StatusCode,
    ) -> Response {
        match self.guard.locked(Guess::Code, peer.ip()) {
            Some(left) => locked_page(left),
            None => (status, file(assets::PAIR, headers)).into_response(),
        }
    }
}
