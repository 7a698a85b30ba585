//! The web view's HTTP routes. The page and its files; `POST /api/pair` (a pairing code
//! for a device cookie); `GET /api/me` (the device, its request token, the agents and
//! drivers for a new session); `POST /api/call/<method>` (a method of the daemon's table
//! among those the page needs, answered by the daemon's own dispatch); `GET /api/events`
//! (the daemon's events as Server-Sent Events); `POST /api/logout`.
//!
//! Every response but the login page's files needs a paired browser's cookie: without
//! one, 401 and nothing else. A change also needs this page's `Origin` and the device's
//! request token ([`guard`]); a read-only device's change is 403. Every response carries
//! a strict Content-Security-Policy (only the page's own files run).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::assets::{self, Asset};
use super::devices::{Device, DeviceError};
use super::guard::{self, Guard};
use crate::config::Config;
use crate::daemon::Shared;
use crate::daemon::conn::Local;
use crate::daemon::http::{listen, quiet::Quiet};
use crate::protocol::methods::{self as m, Method};
use crate::protocol::{DriverKind, Notification, WebAccess, code};

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

/// The methods a paired browser may call that only read.
const READS: &[&str] = &[
    m::SessionList::NAME,
    m::SessionGet::NAME,
    m::SessionTranscript::NAME,
    m::InboxList::NAME,
    m::InboxGet::NAME,
    m::SessionDiff::NAME,
];

/// The methods a paired browser with full access may call that change something.
const CHANGES: &[&str] = &[
    m::SessionCreate::NAME,
    m::SessionPrompt::NAME,
    m::SessionCancel::NAME,
    m::SessionStop::NAME,
    m::SessionMerge::NAME,
    m::InboxRespond::NAME,
    m::InboxMarkRead::NAME,
];

struct Server {
    shared: Arc<Shared>,
    /// The connection the page's calls are answered on.
    calls: Local,
    guard: Guard,
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
        .layer(DefaultBodyLimit::max(MAX_BODY))
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

fn refusal(status: StatusCode, message: &str) -> Response {
    json_reply(status, &json!({ "error": message }))
}

/// Why a request is not served: its status and the words said.
struct Refused(StatusCode, &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        refusal(self.0, self.1)
    }
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

    /// The paired device a request comes from; otherwise the refusal: 429 for an address
    /// past its failed attempts, 401 without a cookie or with one no device holds.
    fn device(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
        if self.guard.blocked(peer.ip()) {
            return Err(Refused(
                StatusCode::TOO_MANY_REQUESTS,
                "too many failed attempts from this address; try again in a few minutes",
            ));
        }
        let web = &self.shared.web;
        let Some(token) = guard::cookie(headers, &web.cookie) else {
            return Err(Refused(
                StatusCode::UNAUTHORIZED,
                "this browser is not paired: run `cru web` and open its link",
            ));
        };
        web.devices.device(token).ok_or_else(|| {
            self.guard
                .failed(peer.ip(), "requests with an unknown or revoked token");
            Refused(
                StatusCode::UNAUTHORIZED,
                "this browser's pairing was revoked or is unknown: run `cru web` and pair again",
            )
        })
    }

    /// A device that may make a change: paired, this page's origin and request token.
    fn changer(&self, headers: &HeaderMap, peer: SocketAddr) -> Result<Device, Refused> {
        let device = self.device(headers, peer)?;
        let config = self.config();
        if !guard::may_change(headers, &device, config.web.public_url.as_deref()) {
            self.guard.failed(
                peer.ip(),
                "changes without this page's origin or request token",
            );
            return Err(Refused(
                StatusCode::FORBIDDEN,
                "a change must come from the page itself (its origin and request token)",
            ));
        }
        Ok(device)
    }
}

async fn index(paired: Result<Paired, Refused>, headers: HeaderMap) -> Response {
    match paired {
        Ok(_) => file(assets::INDEX, &headers),
        // The login page, with the refusal's status.
        Err(Refused(status, _)) => (status, file(assets::PAIR, &headers)).into_response(),
    }
}

async fn pair_page(headers: HeaderMap) -> Response {
    file(assets::PAIR, &headers)
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
        Ok(_) => refusal(StatusCode::NOT_FOUND, "no such page"),
        Err(refused) => refused.into_response(),
    }
}

#[derive(serde::Deserialize)]
struct PairBody {
    code: String,
    #[serde(default)]
    label: String,
}

async fn pair(
    State(web): Web,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if web.guard.blocked(peer.ip()) {
        return refusal(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed attempts from this address; try again in a few minutes",
        );
    }
    let config = web.config();
    if !guard::same_origin(&headers, config.web.public_url.as_deref()) {
        web.guard.failed(peer.ip(), "pairings from another origin");
        return refusal(StatusCode::FORBIDDEN, "pair from the page itself");
    }
    let Ok(asked) = serde_json::from_slice::<PairBody>(&body) else {
        return refusal(StatusCode::BAD_REQUEST, "expected {\"code\": \"…\"}");
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
            web.guard.failed(peer.ip(), "wrong pairing codes");
            refusal(StatusCode::UNAUTHORIZED, &DeviceError::BadCode.to_string())
        }
        Err(e) => {
            tracing::error!("{e}");
            refusal(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())
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
    headers: HeaderMap,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    let changes = CHANGES.contains(&method.as_str());
    if !changes && !READS.contains(&method.as_str()) {
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
    match web.calls.call(&method, params).await {
        Ok(result) => json_reply(StatusCode::OK, &result),
        Err(e) => call_error(e.code, &e.message),
    }
}

/// Counts an open event stream as a client of the daemon while it is open.
struct Watching(Arc<Shared>);

impl Watching {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.clients.send_modify(|n| *n += 1);
        Self(Arc::clone(shared))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.clients.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// An open event stream: the daemon's events for one page, until its device is revoked.
struct Stream {
    shared: Arc<Shared>,
    device: String,
    _local: Local,
    lines: tokio::sync::mpsc::Receiver<String>,
    revocations: tokio::sync::watch::Receiver<u64>,
    _watching: Watching,
    ready: bool,
}

/// A notification line of the daemon as an SSE event named after it.
fn sse_event(line: &str) -> Option<SseEvent> {
    let note: Notification = serde_json::from_str(line).ok()?;
    Some(
        SseEvent::default()
            .event(note.method)
            .data(note.params.to_string()),
    )
}

impl Stream {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        if !self.ready {
            self.ready = true;
            return Some((Ok(SseEvent::default().event("ready").data("{}")), self));
        }
        loop {
            tokio::select! {
                line = self.lines.recv() => {
                    if let Some(event) = sse_event(&line?) {
                        return Some((Ok(event), self));
                    }
                }
                Ok(()) = self.revocations.changed() => {
                    if !self.shared.web.devices.is_paired(&self.device) {
                        return None;
                    }
                }
            }
        }
    }
}

async fn events(State(web): Web, Paired(device): Paired) -> Response {
    let (local, lines) = Local::new(Arc::clone(&web.shared));
    if let Err(e) = local.call(m::Subscribe::NAME, json!({})).await {
        return call_error(e.code, &e.message);
    }
    let stream = Stream {
        shared: Arc::clone(&web.shared),
        device: device.id,
        _local: local,
        lines,
        revocations: web.shared.web.devices.revocations(),
        _watching: Watching::new(&web.shared),
        ready: false,
    };
    let events = futures::stream::unfold(stream, Stream::next);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

async fn logout(State(web): Web, Changer(device): Changer) -> Response {
    if let Err(e) = web.shared.web.devices.revoke(&device.id) {
        return refusal(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
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
