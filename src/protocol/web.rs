//! The web view's methods on the socket: `web.pair` makes a pairing code for a browser,
//! `web.devices` lists the paired browsers, `web.revoke` lets one go.

use serde::{Deserialize, Serialize};

/// What a paired browser may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebAccess {
    /// Everything the page offers: prompts, answers, new sessions, merges.
    #[default]
    Full,
    /// Reading only: sessions, transcripts, the inbox and diffs.
    ReadOnly,
}

impl WebAccess {
    pub fn as_str(self) -> &'static str {
        match self {
            WebAccess::Full => "full",
            WebAccess::ReadOnly => "read_only",
        }
    }
}

/// `web.pair`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WebPairParams {
    /// Pair a browser that can only read.
    #[serde(default)]
    pub read_only: bool,
}

/// A pairing code, usable once until `expires_at`, and the link that carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebPairing {
    /// `<base>/pair#code=<code>`: opening it pairs the browser.
    pub url: String,
    /// The code alone, to type in the page.
    pub code: String,
    pub access: WebAccess,
    /// RFC 3339.
    pub expires_at: String,
}

/// A paired browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebDevice {
    pub id: String,
    /// What the browser said it is (`Chrome on Android`).
    pub label: String,
    pub access: WebAccess,
    /// RFC 3339.
    pub paired_at: String,
    /// The address it paired from.
    #[serde(default)]
    pub paired_from: Option<String>,
    /// RFC 3339: its last request since the daemon started.
    #[serde(default)]
    pub last_seen_at: Option<String>,
}

/// `web.devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebDevices {
    pub devices: Vec<WebDevice>,
    /// Where the web view is served; absent while it is off.
    #[serde(default)]
    pub url: Option<String>,
}

/// `web.revoke`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebRevokeParams {
    /// A device's id, or a prefix of it that names one device.
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebRevoked {
    /// The device let go.
    pub device: WebDevice,
}
