//! Error answers of the webhook listener and the web view, in the shape the API's own
//! errors have: `{"error": {"code": <JSON-RPC code>, "message": "…"}}`, with the HTTP
//! status that says the same. Answers the HTTP stack makes itself (a method not allowed,
//! a path that does not parse, a refused body) are put in that shape too
//! ([`json_errors`]), so a client reads every error one way.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::protocol::code;

/// The most of a plain-text error the stack made that is kept as its message.
const KEPT: usize = 4096;

/// The JSON-RPC code that says what an HTTP refusal says.
pub(in crate::daemon) fn code_of(status: StatusCode) -> i64 {
    match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => code::INVALID_PARAMS,
        StatusCode::PAYLOAD_TOO_LARGE
        | StatusCode::METHOD_NOT_ALLOWED
        | StatusCode::LENGTH_REQUIRED
        | StatusCode::UNSUPPORTED_MEDIA_TYPE => code::INVALID_REQUEST,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => code::FORBIDDEN,
        StatusCode::NOT_FOUND => code::NOT_FOUND,
        StatusCode::CONFLICT => code::CONFLICT,
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => code::TIMED_OUT,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => code::BUSY,
        _ => code::INTERNAL_ERROR,
    }
}

/// The body of an error answer.
pub(in crate::daemon) fn body(status: StatusCode, message: &str) -> Value {
    json!({ "error": { "code": code_of(status), "message": message } })
}

/// An error answer.
pub(in crate::daemon) fn reply(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body(status, message).to_string(),
    )
        .into_response()
}

/// Puts an error answer that is neither JSON nor a page (HTML) in the shape of
/// [`body`], its text (or the status's name) as the message; its other headers stay.
pub(in crate::daemon) async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !status.is_client_error() && !status.is_server_error() {
        return response;
    }
    let media = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if media.starts_with("application/json") || media.starts_with("text/html") {
        return response;
    }
    let (mut parts, text) = response.into_parts();
    let text = axum::body::to_bytes(text, KEPT).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status
            .canonical_reason()
            .unwrap_or("refused")
            .to_lowercase(),
        said => said.to_string(),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body(status, &message).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_plain_text_refusal_becomes_json_and_a_page_stays_a_page() {
        let plain = (StatusCode::PAYLOAD_TOO_LARGE, "length limit exceeded").into_response();
        let answer = json_errors(plain).await;
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.headers()[header::CONTENT_TYPE], "application/json");
        let bytes = axum::body::to_bytes(answer.into_body(), KEPT)
            .await
            .unwrap();
        let said: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            said,
            json!({"error": {"code": code::INVALID_REQUEST, "message": "length limit exceeded"}})
        );
        // No text at all: the status says it.
        let empty = json_errors(StatusCode::METHOD_NOT_ALLOWED.into_response()).await;
        let bytes = axum::body::to_bytes(empty.into_body(), KEPT).await.unwrap();
        let said: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(said["error"]["message"], "method not allowed");
        let page = (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            "<p>pair</p>",
        )
            .into_response();
        let answer = json_errors(page).await;
        assert_eq!(
            answer.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert!(
            json_errors(StatusCode::OK.into_response())
                .await
                .status()
                .is_success()
        );
    }
}
