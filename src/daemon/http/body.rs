//! Request bodies, read under a limit of size and of time: a body over its limit is
//! refused (413) as soon as that is known, and one not all sent within [`BODY_TIMEOUT`]
//! of its start is given up (408), so a client that sends slowly, or too much, holds
//! nothing for long. Every route that takes a body reads it here.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use futures::StreamExt;

/// How long a client has to send a request's body once its headers are in.
pub(in crate::daemon) const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a body was not taken.
#[derive(Debug, thiserror::Error)]
pub(in crate::daemon) enum BodyError {
    #[error("the body is over {0} bytes")]
    TooLarge(usize),
    #[error("the body did not arrive within {} s", BODY_TIMEOUT.as_secs())]
    Late,
    #[error("the body could not be read: {0}")]
    Broken(String),
}

impl BodyError {
    /// The status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Late => StatusCode::REQUEST_TIMEOUT,
            Self::Broken(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// How much of a body over its limit is still read, and thrown away, before the 413 is
/// sent: a client still sending when the connection closes under it may lose the answer
/// (its send fails with a reset), so a body up to this size is taken in first.
const DRAIN_BYTES: u64 = 1024 * 1024;

/// Reads a request's body of at most `limit` bytes within [`BODY_TIMEOUT`]. A body over
/// the limit is refused; when it is not much over (declared or sent), the rest is read
/// and thrown away first, within the same time, so its client gets the answer.
pub(in crate::daemon) async fn read(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let cap = u64::try_from(limit).unwrap_or(u64::MAX);
    if declared.is_some_and(|length| length > cap.saturating_add(DRAIN_BYTES)) {
        return Err(BodyError::TooLarge(limit));
    }
    let read = async {
        let mut chunks = body.into_data_stream();
        let mut bytes = Vec::new();
        let mut over = declared.is_some_and(|length| length > cap);
        let mut seen: u64 = 0;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
            seen = seen.saturating_add(chunk.len() as u64);
            if over || seen > cap {
                over = true;
                if seen > cap.saturating_add(DRAIN_BYTES) {
                    break;
                }
                continue;
            }
            bytes.extend_from_slice(&chunk);
        }
        if over {
            return Err(BodyError::TooLarge(limit));
        }
        Ok(Bytes::from(bytes))
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .unwrap_or(Err(BodyError::Late))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_declared_or_sent() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            read(Body::from("12345"), &headers, 5).await.unwrap(),
            "12345"
        );
        let sent = read(Body::from("123456"), &headers, 5).await.unwrap_err();
        assert_eq!(sent.status(), StatusCode::PAYLOAD_TOO_LARGE);
        headers.insert(header::CONTENT_LENGTH, "6".parse().unwrap());
        let declared = read(Body::empty(), &headers, 5).await.unwrap_err();
        assert!(matches!(declared, BodyError::TooLarge(5)));
        // Far over: refused before a byte is read (this body would never end).
        headers.insert(header::CONTENT_LENGTH, "100000000".parse().unwrap());
        let endless =
            Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let far = read(endless, &headers, 5).await.unwrap_err();
        assert!(matches!(far, BodyError::TooLarge(5)));
    }

    #[tokio::test]
    async fn a_body_a_little_over_the_limit_is_read_to_its_end_before_it_is_refused() {
        let headers = HeaderMap::new();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&sent);
        let chunks = futures::stream::iter((0..10).map(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1000]))
        }));
        let refused = read(Body::from_stream(chunks), &headers, 2500)
            .await
            .unwrap_err();
        assert!(matches!(refused, BodyError::TooLarge(2500)));
        assert_eq!(
            sent.load(std::sync::atomic::Ordering::SeqCst),
            10,
            "all of it was taken in"
        );
    }
}
