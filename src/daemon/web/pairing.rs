//! Pairing a browser (`POST /api/pair`: a pairing code for a device cookie) and letting
//! it go (`POST /api/logout`).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::devices::{self, DeviceError};
use super::guard::{self, Guess};
use super::server::{Changer, MAX_BODY, Refused, Web, json_reply};
use crate::daemon::http::{body, error};

/// How long a paired browser keeps its cookie: a year (revoking ends it sooner).
const COOKIE_MAX_AGE: u64 = 365 * 24 * 60 * 60;

#[derive(serde::Deserialize)]
struct PairBody {
    code: String,
    #[serde(default)]
    label: String,
}

/// Pairs a browser with a code. From another origin it is refused at once and counts as
/// no failure (a page elsewhere could otherwise lock this address out); past too many
/// wrong codes from its address it is refused without a look at the code.
pub(super) async fn pair(
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
        .state
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
                web.state.cookie,
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

pub(super) async fn logout(State(web): Web, Changer(device): Changer) -> Response {
    if let Err(e) = web.state.devices.revoke(&device.id) {
        return error::reply(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    tracing::info!(device = %device.id, "a browser forgot its pairing");
    let mut answer = json_reply(StatusCode::OK, &json!({"revoked": device.id}));
    let gone = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        web.state.cookie
    );
    if let Ok(value) = HeaderValue::from_str(&gone) {
        answer.headers_mut().insert(header::SET_COOKIE, value);
    }
    answer
}
