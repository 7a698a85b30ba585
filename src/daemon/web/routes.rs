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
use axum::extract::{ConnectInfo, Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use super::assets;
use super::calls::{call, call_error};
use super::events;
use super::guard::{self, Guard};
use super::pairing::{logout, pair};
use super::server::{Paired, Refused, Server, Web, file, json_reply};
use super::state::WebState;
use crate::daemon::door::Door;
use crate::daemon::http::{error, listen, quiet::Quiet};
use crate::protocol::DriverKind;

/// At most one log line about refused requests this often.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);
/// An open event stream says it is alive this often, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(25);

/// Only this page's own files run, connect and style; nothing frames it.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Serves the web view on `listener` until the task is dropped.
pub(super) async fn serve(listener: tokio::net::TcpListener, door: Door, state: Arc<WebState>) {
    let quiet = Arc::new(Quiet::new("web view", REFUSALS_LOGGED_EVERY));
    let fd_limit = door.fd_limit();
    let server = Arc::new(Server {
        door,
        state,
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

async fn me(State(web): Web, Paired(device): Paired) -> Response {
    let config = web.config();
    let agents = config.startable();
    let default_agent = config.default_agent();
    // Through the person's hub the page shows every kiln, and a new session names its
    // kiln; a kiln's own page is that kiln's.
    let kilns = web.door.kilns();
    let kiln = match &kilns {
        Some(_) => None,
        None => web
            .door
            .kiln()
            .root()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
    };
    json_reply(
        StatusCode::OK,
        &json!({
            "device": {"id": device.id, "label": device.label, "kind": device.access.as_str()},
            "csrf": guard::csrf_token(&device),
            "kiln": kiln,
            "kilns": kilns,
            "kiln_states": web.door.kiln_states(),
            "agents": agents,
            "default_agent": default_agent,
            "drivers": DriverKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        }),
    )
}

async fn events(
    State(web): Web,
    Paired(device): Paired,
    Extension(connection): Extension<listen::Connection>,
) -> Response {
    match events::open(&web.door, &web.state, device.id, &connection).await {
        Ok(events) => Sse::new(events)
            .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
            .into_response(),
        Err(e) => call_error(e.code, &e.message),
    }
}
