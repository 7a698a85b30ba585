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

/// Reads a request's body of at most `limit` bytes within [`BODY_TIMEOUT`]. A declared
/// length over the limit is refused before anything is read.
pub(in crate::daemon) async fn read(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > u64::try_from(limit).unwrap_or(u64::MAX)) {
        return Err(BodyError::TooLarge(limit));
    }
    let read = async {
        let mut chunks = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| BodyError::Broken(e.to_string()))?;
            if bytes.len().saturating_add(chunk.len()) > limit {
                return Err(BodyError::TooLarge(limit));
            }
            bytes.extend_from_slice(&chunk);
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
    }
}
