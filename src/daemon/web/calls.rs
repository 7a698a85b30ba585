//! The page's calls (`POST /api/call/<method>`): a method of the daemon's table among
//! those the table offers the web view, answered by the daemon's own dispatch for the
//! paired browser; a change needs a browser paired with full access.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::server::{MAX_BODY, Web, json_reply};
use crate::daemon::caller::Caller;
use crate::daemon::http::{body, error};
use crate::protocol::methods::{self as m, Method};
use crate::protocol::{WebAccess, code};

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

pub(super) fn call_error(rpc_code: i64, message: &str) -> Response {
    json_reply(
        status_of(rpc_code),
        &json!({"error": {"code": rpc_code, "message": message}}),
    )
}

/// `session.create` from the page: an agent, a branch, a driver by name, a task and,
/// through the person's hub, the kiln; the rest (mounts, variables, the read manifest) is
/// for the workbench and the settings.
fn creation(params: &Value) -> Value {
    let mut made = serde_json::Map::new();
    for key in ["agent", "worktree", "task", "kiln"] {
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

pub(super) async fn call(
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
    match web.door.call_value(caller, &method, params).await {
        Ok(result) => json_reply(StatusCode::OK, &result),
        Err(e) => call_error(e.code, &e.message),
    }
}
