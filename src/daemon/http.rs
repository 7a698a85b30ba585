//! The webhook listener (`[channels.http]`): `POST /hooks/<name>` for each `[[webhooks]]`
//! entry, verified with GitHub's convention (`X-Hub-Signature-256: sha256=<hex HMAC-SHA256
//! of the body>` under the hook's shared secret), its payload made into a prompt and
//! resolved to the session of its conversation. Webhooks are taken as GitHub sends them, since GitHub
//! marks a hook failing on any answer but 2xx: a `ping` is answered 200 and makes nothing;
//! the body may be JSON or GitHub's default form encoding (`payload=<JSON>`, signed as
//! sent); a delivery of an event or action the hook does not take, or whose payload has
//! no value at the hook's `ref` (a `push` to a hook keyed by issue), is answered 202
//! `ignored` with the reason; a redelivery (an `X-GitHub-Delivery` answered before) gets
//! the first answer again and prompts nothing ([`deliveries`]). Bad input gets its status
//! and creates nothing: unknown hook 404, bad or missing signature 401, body over the
//! limit 413, body not sent in time 408, malformed payload 400, each with a JSON error
//! of the API's shape ([`error`]). The hooks are looked up in
//! the daemon's live settings at every request, so edits apply without a restart (the
//! address and body limit: `webhooks.rs`). How slow and idle clients are kept from
//! starving the daemon: [`listen`].

pub(super) mod body;
mod deliveries;
pub(super) mod error;
mod failures;
pub(super) mod listen;
pub(super) mod quiet;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use body::BodyError;
use deliveries::{Deliveries, Seen};
use quiet::Quiet;

use super::caller::Caller;
use super::door::Door;
use crate::config::{ChannelError, Config, WebhookConfig};
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, ResolveParams, code};

/// At most one log line about refused requests and connections this often.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);

struct Hooks {
    settings: tokio::sync::watch::Receiver<Arc<Config>>,
    /// Each delivery goes in as `session.resolve`, from its hook.
    door: Door,
    max_body: usize,
    deliveries: Arc<Deliveries<Answer>>,
    quiet: Arc<Quiet>,
    /// Hooks whose deliveries fail, counted and said once a row.
    failures: failures::Failures,
}

/// Serves webhooks on `listener` until the task is dropped, holding open at most a share
/// of `fd_limit` (the daemon's descriptor limit) connections.
pub async fn serve(
    listener: tokio::net::TcpListener,
    settings: tokio::sync::watch::Receiver<Arc<Config>>,
    door: Door,
    max_body: usize,
    fd_limit: Option<u64>,
) {
    let cap = listen::connection_cap(fd_limit);
    tracing::info!(
        max_connections = cap,
        header_timeout_secs = listen::HEADER_TIMEOUT.as_secs(),
        body_timeout_secs = body::BODY_TIMEOUT.as_secs(),
        "the webhook listener's bounds"
    );
    let quiet = Arc::new(Quiet::new("webhooks", REFUSALS_LOGGED_EVERY));
    let failures = failures::Failures::kept_at(super::hooks_failing::path(door.kiln()));
    let hooks = Arc::new(Hooks {
        settings,
        door,
        max_body,
        deliveries: Deliveries::new(deliveries::REMEMBERED, deliveries::REMEMBER_FOR),
        quiet: Arc::clone(&quiet),
        failures,
    });
    let app = Router::new()
        .route("/hooks/{name}", post(hook))
        .layer(axum::middleware::map_response(error::json_errors))
        .with_state(hooks);
    listen::run(listener, app, cap, quiet).await;
}

fn reply(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

/// An answer to a request; an accepted delivery's is kept to answer its redelivery alike.
#[derive(Debug, Clone)]
struct Answer {
    status: StatusCode,
    body: Value,
}

impl Answer {
    fn refused(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            body: error::body(status, &why.into()),
        }
    }

    fn ignored(why: String) -> Self {
        Self {
            status: StatusCode::ACCEPTED,
            body: json!({ "status": "ignored", "reason": why }),
        }
    }
}

/// A signed delivery, to be made into a prompt.
struct Delivery {
    hook: WebhookConfig,
    event: Option<String>,
    id: Option<String>,
    form: bool,
    body: Vec<u8>,
}

async fn hook(
    State(hooks): State<Arc<Hooks>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let answer = answer(&hooks, &name, request).await;
    if !answer.status.is_success() {
        let why = answer.body["error"]["message"].as_str().unwrap_or_default();
        hooks.quiet.note(
            "requests refused",
            &format!("{} for the hook {name:?}: {why}", answer.status.as_u16()),
        );
    }
    reply(answer.status, &answer.body)
}

async fn answer(hooks: &Arc<Hooks>, name: &str, request: Request) -> Answer {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let body = match body::read(body, &headers, hooks.max_body).await {
        Ok(body) => body.to_vec(),
        Err(e @ BodyError::TooLarge(_)) => {
            return Answer::refused(e.status(), format!("{e} (channels.http.max_body_kb)"));
        }
        Err(e) => return Answer::refused(e.status(), e.to_string()),
    };
    let config = Arc::clone(&hooks.settings.borrow());
    let Some(hook) = config.webhook(name) else {
        return Answer::refused(StatusCode::NOT_FOUND, format!("no webhook named {name:?}"));
    };
    if let Err((status, why)) = verify(hook, &headers, &body) {
        return Answer::refused(status, why);
    }
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let event = text("x-github-event");
    if event.as_deref() == Some("ping") {
        tracing::info!(hook = %hook.name, "webhook ping");
        return Answer {
            status: StatusCode::OK,
            body: json!({ "status": "pong", "hook": hook.name }),
        };
    }
    let delivery = Delivery {
        hook: hook.clone(),
        event,
        id: text("x-github-delivery"),
        form: is_form(&headers),
        body,
    };
    let ticket = match &delivery.id {
        None => None,
        Some(id) => loop {
            match hooks.deliveries.seen(name, id, Instant::now()) {
                Seen::New(ticket) => break Some(ticket),
                Seen::Answered(first) => {
                    tracing::info!(hook = name, delivery = %id, "a redelivery, answered as the first time");
                    return first;
                }
                Seen::InFlight(mut first) => {
                    if let Ok(answer) = first.wait_for(Option::is_some).await
                        && let Some(answer) = answer.clone()
                    {
                        return answer;
                    }
                    // The first copy failed: this one is handled as new.
                }
            }
        },
    };
    // In a task of its own, so a client that goes away does not stop a delivery halfway.
    let hooks = Arc::clone(hooks);
    let delivered = tokio::spawn(async move {
        let answer = deliver(&hooks, delivery).await;
        if let Some(ticket) = ticket
            && answer.status.is_success()
        {
            ticket.answered(answer.clone(), Instant::now());
        }
        answer
    });
    delivered.await.unwrap_or_else(|e| {
        Answer::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the delivery failed: {e}"),
        )
    })
}

/// Whether the body is form-encoded (GitHub's default content type), not JSON.
fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// The delivery's JSON: the body, or a form body's `payload` field.
fn payload_of(body: &[u8], form: bool) -> Result<Value, ChannelError> {
    if !form {
        return serde_json::from_slice(body)
            .map_err(|e| ChannelError::Payload(format!("the body is not JSON: {e}")));
    }
    let Some((_, payload)) = form_urlencoded::parse(body).find(|(key, _)| key == "payload") else {
        return Err(ChannelError::Payload(
            "a form-encoded body carries its JSON in a payload field, and this one has none".into(),
        ));
    };
    serde_json::from_str(&payload)
        .map_err(|e| ChannelError::Payload(format!("the payload field is not JSON: {e}")))
}

/// Makes a signed delivery into a prompt for its session, unless its hook does not take it.
async fn deliver(hooks: &Hooks, delivery: Delivery) -> Answer {
    let hook = &delivery.hook;
    let payload = match payload_of(&delivery.body, delivery.form) {
        Ok(payload) => payload,
        Err(why) => return Answer::refused(StatusCode::BAD_REQUEST, why.to_string()),
    };
    let action = payload.get("action").and_then(Value::as_str);
    if let Err(why) = hook.admits(delivery.event.as_deref(), action) {
        tracing::info!(hook = %hook.name, delivery = delivery.id.as_deref().unwrap_or(""), "webhook ignored: {why}");
        return Answer::ignored(why.to_string());
    }
    // A delivery without the hook's `ref` belongs to none of its conversations (a `push`
    // to a hook keyed by issue): not a delivery it takes, and not a failed one.
    let reference = match hook.reference_of(&payload) {
        Ok(reference) => reference,
        Err(why) => {
            let what = match delivery.event.as_deref() {
                Some(event) => format!("a {event:?} delivery"),
                None => "this delivery".to_string(),
            };
            let why = format!(
                "{why}: {what} belongs to no conversation of this hook (its events can name the ones it takes)"
            );
            tracing::info!(hook = %hook.name, delivery = delivery.id.as_deref().unwrap_or(""), "webhook ignored: {why}");
            return Answer::ignored(why);
        }
    };
    let inbound = ResolveParams {
        channel: ChannelKind::Webhook,
        source: hook.name.clone(),
        reference,
        text: hook.render(&payload),
        words: hook.words_of(&payload),
        agent: hook.agent.clone(),
        driver: hook.driver,
        persistent: false,
        kiln: None,
    };
    let caller = Caller::channel(ChannelKind::Webhook, format!("hook {}", hook.name));
    let resolved = hooks.door.call::<m::SessionResolve>(caller, &inbound).await;
    match resolved {
        Ok(result) => {
            hooks.failures.delivered(&hook.name);
            tracing::info!(
                hook = %hook.name,
                delivery = delivery.id.as_deref().unwrap_or(""),
                session = %result.session_id,
                reason = result.reason.as_str(),
                "webhook delivered"
            );
            let mut body = serde_json::to_value(&result).unwrap_or_else(|_| json!({}));
            if let Some(fields) = body.as_object_mut() {
                fields.insert("status".into(), json!("delivered"));
            }
            Answer {
                status: StatusCode::ACCEPTED,
                body,
            }
        }
        Err(e) if e.code == code::INVALID_PARAMS => {
            let why = hooks
                .failures
                .failed(&hooks.door, &hook.name, e.message)
                .await;
            Answer::refused(StatusCode::UNPROCESSABLE_ENTITY, why)
        }
        Err(e) => {
            let why = hooks
                .failures
                .failed(&hooks.door, &hook.name, e.message)
                .await;
            Answer::refused(StatusCode::INTERNAL_SERVER_ERROR, why)
        }
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
            events: Vec::new(),
            actions: Vec::new(),
            approval_target: None,
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
    fn a_form_body_carries_its_json_in_the_payload_field() {
        let mut headers = HeaderMap::new();
        assert!(!is_form(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=utf-8"
                .parse()
                .unwrap(),
        );
        assert!(is_form(&headers));
        let form = b"payload=%7B%22action%22%3A%22created%22%2C%22n%22%3A%221+%2B+1%22%7D";
        assert_eq!(
            payload_of(form, true),
            Ok(json!({"action": "created", "n": "1 + 1"}))
        );
        assert!(
            payload_of(b"zen=hi", true)
                .unwrap_err()
                .to_string()
                .contains("payload")
        );
        assert!(
            payload_of(b"payload=nope", true)
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
        // Taken as JSON, the same body is not.
        assert!(
            payload_of(form, false)
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
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
