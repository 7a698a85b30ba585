//! `[web]`: the web view, a page that shows every session, the inbox and the transcripts
//! in a browser or on a phone. On by default on loopback; a browser is let in only once
//! it has been paired with a code `cru web` shows.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Where the web view listens when `[web] listen` is not set: this port on loopback,
/// or any free loopback port when another kiln's daemon has it.
pub const DEFAULT_PORT: u16 = 7433;

/// What is wrong with `[web]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("web: {0}")]
pub struct WebSettingsError(String);

/// `[web]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// Serve the web view at all.
    pub enabled: bool,
    /// `HOST:PORT`. Unset: `127.0.0.1:7433`, or another loopback port when that one is
    /// taken. Set, the daemon also stays up with no client connected, so a phone can
    /// reach it at any time.
    pub listen: Option<String>,
    /// The address people open, when it is not the listen address: a reverse proxy or
    /// tunnel in front (`https://cru.example.org`). `cru web` builds its link from it.
    pub public_url: Option<String>,
    /// How long a pairing code `cru web` shows can be used (once).
    #[schemars(range(min = 1, max = 1440))]
    pub pairing_minutes: u64,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: None,
            public_url: None,
            pairing_minutes: 10,
        }
    }
}

/// Where the web view is asked to listen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebAddress {
    /// The default: loopback, [`DEFAULT_PORT`] if free, else any free port.
    Loopback,
    /// An address the settings name; only it will do.
    Given(SocketAddr),
}

impl WebConfig {
    /// Where to listen, if the web view is on.
    pub fn address(&self) -> Result<Option<WebAddress>, WebSettingsError> {
        if !self.enabled {
            return Ok(None);
        }
        match self.listen.as_deref() {
            None => Ok(Some(WebAddress::Loopback)),
            Some(text) => text.parse().map(|a| Some(WebAddress::Given(a))).map_err(|_| {
                WebSettingsError(format!(
                    "listen {text:?} is not HOST:PORT (e.g. \"127.0.0.1:7433\" or \"0.0.0.0:7433\")"
                ))
            }),
        }
    }

    /// The settings' own checks.
    pub fn validate(&self) -> Result<(), WebSettingsError> {
        self.address()?;
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(WebSettingsError(format!(
                "public_url {url:?} must start with http:// or https://"
            )));
        }
        if self.pairing_minutes == 0 || self.pairing_minutes > 24 * 60 {
            return Err(WebSettingsError(
                "pairing_minutes must be between 1 and 1440".into(),
            ));
        }
        Ok(())
    }

    /// The address a browser opens: `public_url` (without a trailing `/`), else the
    /// listen address, with the host's name for an address of every interface.
    pub fn base_url(&self, bound: SocketAddr) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_string();
        }
        let host = if bound.ip().is_unspecified() {
            crate::sys::host_name()
        } else if bound.is_ipv6() {
            format!("[{}]", bound.ip())
        } else {
            bound.ip().to_string()
        };
        format!("http://{host}:{}", bound.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_loopback_and_listen_must_be_an_address() {
        let web = WebConfig::default();
        assert_eq!(web.address(), Ok(Some(WebAddress::Loopback)));
        let off = WebConfig {
            enabled: false,
            ..WebConfig::default()
        };
        assert_eq!(off.address(), Ok(None));
        let bad = WebConfig {
            listen: Some("localhost".into()),
            ..WebConfig::default()
        };
        assert!(bad.validate().is_err());
        let proxied = WebConfig {
            public_url: Some("cru.example.org".into()),
            ..WebConfig::default()
        };
        assert!(proxied.validate().is_err());
    }

    #[test]
    fn the_link_names_the_public_url_or_the_bound_address() {
        let at: SocketAddr = "127.0.0.1:7433".parse().unwrap();
        assert_eq!(WebConfig::default().base_url(at), "http://127.0.0.1:7433");
        let proxied = WebConfig {
            public_url: Some("https://cru.example.org/".into()),
            ..WebConfig::default()
        };
        assert_eq!(proxied.base_url(at), "https://cru.example.org");
        let v6: SocketAddr = "[::1]:9000".parse().unwrap();
        assert_eq!(WebConfig::default().base_url(v6), "http://[::1]:9000");
    }
}
