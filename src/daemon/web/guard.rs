//! Who a web request comes from and whether it may act: the device its cookie names, the
//! cross-site checks a change must pass (its `Origin` is this page's, and it carries the
//! device's request token in a header, which another site cannot read), and the count of
//! failed attempts by address, past which an address is refused for a while.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use super::devices::Device;
use crate::daemon::http::quiet::Quiet;

/// The header a change carries its request token in.
pub(super) const CSRF_HEADER: &str = "x-crucible-csrf";
/// Failed attempts (a wrong code or token) an address may make within [`WINDOW`].
const MAX_FAILURES: u32 = 20;
/// How long failures are counted, and an address refused once past them.
const WINDOW: Duration = Duration::from_secs(5 * 60);
/// The most addresses whose failures are remembered.
const REMEMBERED: usize = 4096;

/// The failures of one address.
struct Failures {
    count: u32,
    since: Instant,
}

/// Failed attempts by address.
pub(super) struct Guard {
    failures: Mutex<HashMap<IpAddr, Failures>>,
    quiet: Arc<Quiet>,
}

impl Guard {
    pub fn new(quiet: Arc<Quiet>) -> Self {
        Self {
            failures: Mutex::default(),
            quiet,
        }
    }

    /// Whether `ip` made too many failed attempts lately.
    pub fn blocked(&self, ip: IpAddr) -> bool {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures
            .get(&ip)
            .is_some_and(|f| f.count >= MAX_FAILURES && f.since.elapsed() < WINDOW)
    }

    /// Counts a failed attempt of `ip`, logged (a line now and then, not one each).
    pub fn failed(&self, ip: IpAddr, what: &'static str) {
        let now = Instant::now();
        {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            if failures.len() >= REMEMBERED {
                failures.retain(|_, f| now.duration_since(f.since) < WINDOW);
            }
            if failures.len() >= REMEMBERED {
                failures.clear();
            }
            let entry = failures.entry(ip).or_insert(Failures {
                count: 0,
                since: now,
            });
            if now.duration_since(entry.since) >= WINDOW {
                *entry = Failures {
                    count: 0,
                    since: now,
                };
            }
            entry.count += 1;
        }
        self.quiet.note(what, &format!("from {ip}"));
    }
}

/// The value of the cookie `name` in a request, if it has one.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
}

/// The request token of a device's changes: derived from its token, so it needs no
/// storing, and readable only by a page of this origin (through `/api/me`).
pub(super) fn csrf_token(device: &Device) -> String {
    let digest = Sha256::digest(format!("csrf:{}", device.token_hash).as_bytes());
    hex::encode(&digest[..16])
}

/// Whether a change comes from this page: it carries the device's request token, and its
/// `Origin` is the address it was sent to (the `Host`) or the public address.
pub(super) fn may_change(headers: &HeaderMap, device: &Device, public_url: Option<&str>) -> bool {
    let token = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    token == Some(csrf_token(device).as_str()) && same_origin(headers, public_url)
}

/// Whether the request's `Origin` is this server's: its host and port are the `Host`
/// the request was sent to, or those of the public address. A request without an
/// `Origin` (browsers send one with every `POST`) is not.
pub(super) fn same_origin(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(origin_host) = authority(origin) else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    host.is_some_and(|h| h.eq_ignore_ascii_case(origin_host))
        || public_url
            .and_then(authority)
            .is_some_and(|p| p.eq_ignore_ascii_case(origin_host))
}

/// `host[:port]` of an `http(s)://host[:port][/…]` address.
fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let end = rest.find('/').unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn device() -> Device {
        Device {
            id: "d1".into(),
            label: "phone".into(),
            access: crate::protocol::WebAccess::Full,
            token_hash: "ab".repeat(32),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn a_change_needs_the_token_and_this_origin() {
        let token = csrf_token(&device());
        let good = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "http://127.0.0.1:7433"),
            (CSRF_HEADER, &token),
        ]);
        assert!(may_change(&good, &device(), None));
        let other_site = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "https://evil.example"),
            (CSRF_HEADER, &token),
        ]);
        assert!(!may_change(&other_site, &device(), None));
        let no_token = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "http://127.0.0.1:7433"),
        ]);
        assert!(!may_change(&no_token, &device(), None));
        let no_origin = headers(&[("host", "127.0.0.1:7433"), (CSRF_HEADER, &token)]);
        assert!(!may_change(&no_origin, &device(), None));
        // Behind a proxy that rewrites the Host: the public address is this origin too.
        let proxied = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "https://cru.example.org"),
            (CSRF_HEADER, &token),
        ]);
        assert!(may_change(
            &proxied,
            &device(),
            Some("https://cru.example.org/")
        ));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; cru_abcd=tok; b=2")]);
        assert_eq!(cookie(&h, "cru_abcd"), Some("tok"));
        assert_eq!(cookie(&h, "cru_ab"), None);
    }

    #[test]
    fn an_address_is_refused_after_too_many_failures() {
        let guard = Guard::new(Arc::new(Quiet::new("web view", Duration::from_secs(10))));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        for _ in 0..MAX_FAILURES - 1 {
            guard.failed(ip, "wrong tokens");
        }
        assert!(!guard.blocked(ip));
        guard.failed(ip, "wrong tokens");
        assert!(guard.blocked(ip));
        assert!(!guard.blocked("192.0.2.8".parse().unwrap()));
    }
}
