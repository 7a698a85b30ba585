//! Session handles: `H-{uuid v4}`, random, carrying no data. A handle is a
//! bearer token for session-scoped access to the daemon, so it is never printed: `Debug`
//! and `Display` redact it, and the daemon stores only its SHA-256.

use sha2::{Digest, Sha256};

#[derive(Clone, PartialEq, Eq)]
pub struct Handle(String);

impl Handle {
    pub fn generate() -> Self {
        Handle(format!("H-{}", uuid::Uuid::new_v4()))
    }

    /// Accepts only the `H-{uuid}` shape.
    pub fn parse(text: &str) -> Option<Self> {
        let uuid = text.strip_prefix("H-")?;
        uuid::Uuid::parse_str(uuid).ok()?;
        Some(Handle(text.to_string()))
    }

    /// The secret itself, for the agent's environment and the handshake only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the daemon keeps: a leaked database reveals no live handle.
    pub fn digest(&self) -> String {
        Sha256::digest(self.0.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handle(H-[redacted])")
    }
}

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("H-[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_random_uuids_and_never_printed() {
        let a = Handle::generate();
        let b = Handle::generate();
        assert_ne!(a, b);
        assert!(a.expose().starts_with("H-"));
        assert_eq!(Handle::parse(a.expose()), Some(a.clone()));
        assert_eq!(Handle::parse("H-not-a-uuid"), None);
        assert_eq!(Handle::parse("01234"), None);
        let uuid = &a.expose()[2..];
        for shown in [format!("{a}"), format!("{a:?}"), format!("{:?}", Some(&a))] {
            assert!(!shown.contains(uuid), "{shown}");
        }
        assert_eq!(a.digest().len(), 64);
        assert_ne!(a.digest(), b.digest());
        assert!(!a.digest().contains(uuid));
    }
}
