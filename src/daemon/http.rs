//! The webhook listener (`[channels.http]`): `POST /hooks/<name>` for each `[[webhooks]]`
//! entry, verified with GitHub's convention (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256
//! of the body>` under the hook's shared secret), its payload made into a prompt and
//! resolved to a session (seed 001). Bad input gets its status and creates nothing:
//! unknown hook 404, bad or missing signature 401, body over the limit 413, malformed
//! JSON 400. The hooks are looked up in the daemon's live settings at every request, so
//! edits apply without a restart (the address and body limit: `webhooks.rs`).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::config::{Config, WebhookConfig};
use crate::protocol::ResolveParams;
use crate::sessions::Sessions;
use crate::workbench::WorkbenchError;

/// The channel name webhook sessions carry.
pub const CHANNEL: &str = "webhook";

struct Hooks {
    settings: tokio::sync::watch::Receiver<Arc<Config>>,
    sessions: Arc<Sessions>,
}

/// Serves webhooks on `listener` until the task is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: tokio::sync::watch::Receiver<Arc<Config>>,
    sessions: Arc<Sessions>,
    max_body: usize,
) {
    let app = Router::new()
        .route("/hooks/{name}", post(hook))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(Arc::new(Hooks { settings, sessions }));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!("the webhook listener stopped: {e}");
    }
}

fn reply(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Response {
    let why = why.into();
    tracing::info!(status = status.as_u16(), "webhook refused: {why}");
    reply(status, &json!({ "error": why }))
}

async fn hook(
    State(hooks): State<Arc<Hooks>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let config = Arc::clone(&hooks.settings.borrow());
    let Some(hook) = config.webhook(&name) else {
        return refuse(StatusCode::NOT_FOUND, format!("no webhook named {name:?}"));
    };
    if let Err((status, why)) = verify(hook, &headers, &body) {
        return refuse(status, why);
    }
    let payload: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(payload) => payload,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            );
        }
    };
    let reference = match hook.reference_of(&payload) {
        Ok(reference) => reference,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    let text = hook.render(&payload);
    let resolved = hooks
        .sessions
        .resolve(ResolveParams {
            channel: CHANNEL.into(),
            source: hook.name.clone(),
            reference,
            text,
            words: hook.words_of(&payload),
            agent: hook.agent.clone(),
            driver: hook.driver,
        })
        .await;
    match resolved {
        Ok(result) => {
            tracing::info!(
                hook = %hook.name,
                session = %result.session_id,
                reason = result.reason.as_str(),
                "webhook delivered"
            );
            reply(StatusCode::ACCEPTED, &result)
        }
        Err(e @ WorkbenchError::Invalid(_)) => {
            refuse(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Checks `X-Hub-Signature-256` against the body under the hook's secret, in constant
/// time. The secret comes from the daemon's environment and goes nowhere else.
fn verify(
    hook: &WebhookConfig,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), (StatusCode, String)> {
    let secret = std::env::var(&hook.secret_env).ok().filter(|s| !s.is_empty()).ok_or_else(|| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the webhook {:?} cannot check signatures: the daemon has no {} in its environment",
                hook.name, hook.secret_env
            ),
        )
    })?;
    let unauthorized = |why: &str| (StatusCode::UNAUTHORIZED, why.to_string());
    let header = headers
        .get("x-hub-signature-256")
        .ok_or_else(|| unauthorized("no X-Hub-Signature-256 header"))?;
    let hex_digest = header
        .to_str()
        .ok()
        .and_then(|h| h.trim().strip_prefix("sha256="))
        .ok_or_else(|| unauthorized("X-Hub-Signature-256 is not sha256=<hex>"))?;
    let digest = hex::decode(hex_digest)
        .map_err(|_| unauthorized("X-Hub-Signature-256 is not sha256=<hex>"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .map_err(|_| unauthorized("the secret cannot key an HMAC"))?;
    mac.update(body);
    mac.verify_slice(&digest)
        .map_err(|_| unauthorized("the signature does not match the body"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(secret_env: &str) -> WebhookConfig {
        WebhookConfig {
            name: "h".into(),
            secret_env: secret_env.into(),
            agent: "a".into(),
            prompt: "p".into(),
            reference: None,
            message: None,
            driver: None,
        }
    }

    fn signed(secret: &str, body: &[u8]) -> HeaderMap {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-hub-signature-256",
            format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
                .parse()
                .unwrap(),
        );
        headers
    }

    #[test]
    fn signatures_are_checked_against_the_body_and_the_secret() {
        // SAFETY: this test alone sets this variable.
        unsafe { std::env::set_var("CRUCIBLE_TEST_HOOK_SECRET", "s3cret") };
        let h = hook("CRUCIBLE_TEST_HOOK_SECRET");
        let body = br#"{"a":1}"#;
        assert!(verify(&h, &signed("s3cret", body), body).is_ok());
        let (status, _) = verify(&h, &signed("other", body), body).unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _) = verify(&h, &signed("s3cret", body), br#"{"a":2}"#).unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, why) = verify(&h, &HeaderMap::new(), body).unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(why.contains("no X-Hub-Signature-256"));
        let (status, why) = verify(
            &hook("CRUCIBLE_TEST_NO_SUCH_SECRET"),
            &signed("s3cret", body),
            body,
        )
        .unwrap_err();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(why.contains("CRUCIBLE_TEST_NO_SUCH_SECRET") && !why.contains("s3cret"));
    }
}
