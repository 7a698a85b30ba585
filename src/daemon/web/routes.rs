//! The web view's HTTP routes. The page and its files; `POST /api/pair` (a pairing code
//! for a device cookie); `GET /api/me` (the device, its request token, the agents and
//! drivers for a new session); `POST /api/call/<method>` (a method of the daemon's table
//! among those the page needs, answered by the daemon's own dispatch); `GET /api/events`
//! (the daemon's events as Server-Sent Events); `POST /api/logout`.
//!
//! Every response but the login page's files needs a paired browser's cookie: without
//! one, 401 and nothing else. A change also needs this page's `Origin` and the device's
//! request token ([`guard`]); a read-only device's change is 403. A body is read only once
//! the request may be answered, within the listener's time limit ([`body`]). Every error
//! is JSON in the API's shape ([`error`]), but for the pages: a browser that is not
//! paired is shown the login page, or, while its address may not try more pairing codes,
//! a page that says for how long. Every response carries a strict
//! Content-Security-Policy (only the page's own files run).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Extension, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::assets::{self, Asset};
use super::devices::{self, Device, DeviceError};
use super::events;
use super::guard::{self, Guard, Guess};
use crate::config::Config;
use crate::daemon::Shared;
use crate::daemon::caller::Caller;
use crate::daemon::conn::Local;
use crate::daemon::http::{body, error, listen, quiet::Quiet};
use crate::protocol::methods::{self as m, Method};
use crate::protocol::{DriverKind, WebAccess, code};

/// At most one log line about refused requests this often.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);
/// The largest request body (a prompt, an answer).
const MAX_BODY: usize = 256 * 1024;
/// An open event stream says it is alive this often, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(25);
/// How long a paired browser keeps its cookie: a year (revoking ends it sooner).
const COOKIE_MAX_AGE: u64 = 365 * 24 * 60 * 60;

/// Only this page's own files run, connect and style; nothing frames it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

struct Server {
    shared: Arc<Shared>,
    /// The connection the page's calls are answered on.
    calls: Local,
    guard: Guard,
    /// Refusals that are not guesses, logged now and then.
    quiet: Arc<Quiet>,
}

type Web = State<Arc<Server>>;

/// Serves the web view on `listener` until the task is dropped.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    fd_limit: Option<u64>,
) {
    let quiet = Arc::new(Quiet::new("web view", REFUSALS_LOGGED_EVERY));
    let (calls, _never_subscribed) = Local::new(Arc::clone(&shared));
    let server = Arc::new(Server {
        shared,
        calls,
        guard: Guard::new(Arc::clone(&quiet)),
        quiet: Arc::clone(&quiet),
    });
    let app = Router::new()
        .route("/", get(index))
        .route("/pair", get(pair_page))
        .route("/manifest.webmanifest", get(manifest))
        .route("/assets/{name}", get(asset))
        .route("/api/pair", post(pair))
        .route("/api/me", get(me))
        .route("/api/call/{method}", post(call))
        .route("/api/events", get(events))
        .route("/api/logout", post(logout))
        .fallback(not_found)
        .layer(axum::middleware::map_response(error::json_errors))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(server);
    listen::run(listener, app, listen::connection_cap(fd_limit), quiet).await;
}

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

fn json_reply(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Why a request is not served: its status, the words said and, for a lock-out, when to
/// try again.
struct Refused {
    status: StatusCode,
    message: String,
    retry_after: Option<Duration>,
}

impl Refused {
    fn new(status: StatusCode, message: &str) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 429: too many wrong guesses (`what`) from this address, for `left` more.
    fn locked(what: &str, left: Duration) -> Self {
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
fn file(asset: &'static Asset, headers: &HeaderMap) -> Response {
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
fn peer(parts: &Parts) -> SocketAddr {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0)
}

/// The paired browser a request comes from ([`Server::device`]); refused otherwise.
struct Paired(Device);

impl FromRequestParts<Arc<Server>> for Paired {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, web: &Arc<Server>) -> Result<Self, Refused> {
        web.device(&parts.headers, peer(parts)).map(Paired)
    }
}

/// A paired browser's change, from its own page ([`Server::changer`]); refused otherwise.
struct Changer(Device);

impl FromRequestParts<Arc<Server>> for Changer {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, web: &Arc<Server>) -> Result<Self, Refused> {
        web.changer(&parts.headers, peer(parts)).map(Changer)
    }
}

impl Server {
    fn config(&self) -> Arc<Config> {
        self.shared.settings.current()
    }

    /// The paired device a request comes from, whatever failures came from its address;
    /// otherwise the refusal: 401 without a cookie or with one no device holds, 429 for
    /// one no device holds from an address past its wrong tokens.
    fn device(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
        let web = &self.shared.web;
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
    fn changer(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
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
    fn login(&self, headers: &HeaderMap, peer: SocketAddr, status: StatusCode) -> Response {
        match self.guard.locked(Guess::Code, peer.ip()) {
            Some(left) => locked_page(left),
            None => (status, file(assets::PAIR, headers)).into_response(),
        }
    }
}

async fn index(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match web.device(&headers, peer) {
        Ok(_) => file(assets::INDEX, &headers),
        Err(_) => web.login(&headers, peer, StatusCode::UNAUTHORIZED),
    }
}

async fn pair_page(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if web.device(&headers, peer).is_ok() {
        return file(assets::PAIR, &headers);
    }
    web.login(&headers, peer, StatusCode::OK)
}

async fn manifest(headers: HeaderMap) -> Response {
    file(assets::MANIFEST, &headers)
}

async fn asset(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let Some(asset) = assets::named(&name) else {
        return not_found(web.device(&headers, peer).map(Paired)).await;
    };
    if asset.private
        && let Err(refused) = web.device(&headers, peer)
    {
        return refused.into_response();
    }
    file(asset, &headers)
}

/// Unknown paths: 404 to a paired browser, 401 to anyone else.
async fn not_found(paired: Result<Paired, Refused>) -> Response {
    match paired {
        Ok(_) => error::reply(StatusCode::NOT_FOUND, "no such page"),
        Err(refused) => refused.into_response(),
    }
}

#[derive(serde::Deserialize)]
struct PairBody {
    code: String,
    #[serde(default)]
    label: String,
}

/// Pairs a browser with a code. From another origin it is refused at once and counts as
/// no failure (a page elsewhere could otherwise lock this address out); past too many
/// wrong codes from its address it is refused without a look at the code.
async fn pair(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let config = web.config();
    if !guard::same_origin(&headers, config.web.public_url.as_deref()) {
        web.quiet.note(
            "pairings from another origin",
            &format!("from {}", peer.ip()),
        );
        return error::reply(StatusCode::FORBIDDEN, "pair from the page itself");
    }
    if let Some(left) = web.guard.locked(Guess::Code, peer.ip()) {
        return Refused::locked("wrong pairing codes", left).into_response();
    }
    let body = match body::read(body, &headers, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => return error::reply(e.status(), &e.to_string()),
    };
    let Ok(asked) = serde_json::from_slice::<PairBody>(&body) else {
        return error::reply(StatusCode::BAD_REQUEST, "expected {\"code\": \"…\"}");
    };
    match web
        .shared
        .web
        .devices
        .pair(&asked.code, &asked.label, Some(peer.ip().to_string()))
    {
        Ok((device, token)) => {
            tracing::info!(device = %device.id, label = %device.label, access = device.access.as_str(), from = %peer.ip(), "a browser paired with the web view");
            let secure = config
                .web
                .public_url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://"))
                || headers
                    .get("x-forwarded-proto")
                    .is_some_and(|v| v.as_bytes() == b"https");
            let cookie = format!(
                "{}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={COOKIE_MAX_AGE}{}",
                web.shared.web.cookie,
                if secure { "; Secure" } else { "" }
            );
            let mut answer = json_reply(
                StatusCode::OK,
                &json!({ "kind": device.access.as_str(), "device": device.id }),
            );
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                answer.headers_mut().insert(header::SET_COOKIE, value);
            }
            answer
        }
        Err(DeviceError::BadCode) => {
            web.guard
                .failed(Guess::Code, peer.ip(), &devices::normal_code(&asked.code));
            error::reply(StatusCode::UNAUTHORIZED, &DeviceError::BadCode.to_string())
        }
        Err(e) => {
            tracing::error!("{e}");
            error::reply(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())
        }
    }
}

async fn me(State(web): Web, Paired(device): Paired) -> Response {
    let config = web.config();
    let agents = config.startable();
    let default_agent = Some(config.tui.default_agent.clone())
        .filter(|a| !a.is_empty())
        .or_else(|| (agents.len() == 1).then(|| agents[0].clone()));
    let kiln = web
        .shared
        .ledger
        .kiln()
        .root()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    json_reply(
        StatusCode::OK,
        &json!({
            "device": {"id": device.id, "label": device.label, "kind": device.access.as_str()},
            "csrf": guard::csrf_token(&device),
            "kiln": kiln,
            "agents": agents,
            "default_agent": default_agent,
            "drivers": DriverKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        }),
    )
}

/// A JSON-RPC error as an HTTP status.
fn status_of(rpc_code: i64) -> StatusCode {
    match rpc_code {
        code::INVALID_PARAMS | code::PARSE_ERROR | code::INVALID_REQUEST => StatusCode::BAD_REQUEST,
        code::NOT_FOUND | code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        code::FORBIDDEN => StatusCode::FORBIDDEN,
        code::CONFLICT => StatusCode::CONFLICT,
        code::TIMED_OUT => StatusCode::GATEWAY_TIMEOUT,
        code::BUSY | code::SHUTTING_DOWN | code::STORE_ERROR => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn call_error(rpc_code: i64, message: &str) -> Response {
    json_reply(
        status_of(rpc_code),
        &json!({"error": {"code": rpc_code, "message": message}}),
    )
}

/// `session.create` from the page: an agent, a branch, a driver by name and a task; the
/// rest (mounts, variables, the read manifest) is for the workbench and the settings.
fn creation(params: &Value) -> Value {
    let mut made = serde_json::Map::new();
    for key in ["agent", "worktree", "task"] {
        if let Some(value) = params.get(key).filter(|v| v.is_string()) {
            made.insert(key.into(), value.clone());
        }
    }
    if let Some(kind) = params
        .get("driver")
        .and_then(|d| d.get("driver"))
        .filter(|v| v.is_string())
    {
        made.insert("driver".into(), json!({ "driver": kind }));
    }
    Value::Object(made)
}

async fn call(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(method): Path<String>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let offered = m::row(&method).map_or(m::Web::No, |row| row.web);
    let changes = offered == m::Web::Change;
    if offered == m::Web::No {
        // Said only to a paired browser.
        if let Err(refused) = web.device(&headers, peer) {
            return refused.into_response();
        }
        return call_error(
            code::METHOD_NOT_FOUND,
            &format!("the web view does not offer {method}"),
        );
    }
    // Every call is a POST: even a read must come from the page itself.
    let device = match web.changer(&headers, peer) {
        Ok(device) => device,
        Err(refused) => return refused.into_response(),
    };
    if changes && device.access == WebAccess::ReadOnly {
        return call_error(
            code::FORBIDDEN,
            "this browser was paired read-only: it may look, not change",
        );
    }
    let body = match body::read(body, &headers, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => return error::reply(e.status(), &e.to_string()),
    };
    let params: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                return call_error(
                    code::INVALID_PARAMS,
                    "the body must be a JSON object of the method's params",
                );
            }
        }
    };
    let params = if method == m::SessionCreate::NAME {
        creation(&params)
    } else {
        params
    };
    if changes {
        tracing::info!(device = %device.id, method = %method, "a change from the web view");
    }
    let caller = Caller::Web {
        device: device.label.clone(),
    };
    match web.calls.call_as(caller, &method, params).await {
        Ok(result) => json_reply(StatusCode::OK, &result),
        Err(e) => call_error(e.code, &e.message),
    }
}

async fn events(
    State(web): Web,
    Paired(device): Paired,
    Extension(connection): Extension<listen::Connection>,
) -> Response {
    match events::open(&web.shared, device.id, &connection).await {
        Ok(events) => Sse::new(events)
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
            .into_response(),
        Err(e) => call_error(e.code, &e.message),
    }
}

async fn logout(State(web): Web, Changer(device): Changer) -> Response {
    if let Err(e) = web.shared.web.devices.revoke(&device.id) {
        return error::reply(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    tracing::info!(device = %device.id, "a browser forgot its pairing");
    let mut answer = json_reply(StatusCode::OK, &json!({"revoked": device.id}));
    let gone = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        web.shared.web.cookie
    );
    if let Ok(value) = HeaderValue::from_str(&gone) {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
    answer
}
