//! Who a web request comes from and whether it may act: the device its cookie names, the
//! cross-site checks a change must pass (its `Origin` is this page's, and it carries the
//! device's request token in a header, which another site cannot read), and the count of
//! wrong guesses, past which more guesses are refused for a while.
//!
//! Failures are counted by what was guessed (a pairing code, a device token) and from
//! which address, each different guess once: a browser that sends its revoked cookie
//! again and again, or a link with a used code reloaded, makes one failure, not one a
//! request. A lock-out refuses only more guesses of its kind; a request with a valid
//! device cookie is never refused by it, and nothing another site makes a browser send
//! (a pairing or a change from another origin, refused at once) counts. Behind a proxy
//! every client has the proxy's address, so a lock-out there is everyone's, and that is
//! why it may never reach a paired device.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use super::devices::Device;
use crate::daemon::http::quiet::Quiet;

/// The header a change carries its request token in.
pub(super) const CSRF_HEADER: &str = "x-crucible-csrf";
/// Different wrong guesses of one kind an address may make within [`WINDOW`].
const MAX_FAILURES: usize = 20;
/// How long failures are counted, and guesses refused once past them.
const WINDOW: Duration = Duration::from_secs(5 * 60);
/// The most (kind, address) pairs whose failures are remembered.
const REMEMBERED: usize = 4096;

/// What a failed attempt guessed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Guess {
    /// A pairing code (`POST /api/pair`).
    Code,
    /// A device token (the cookie).
    Token,
}

impl Guess {
    /// How its failures are named in the log.
    fn what(self) -> &'static str {
        match self {
            Self::Code => "wrong pairing codes",
            Self::Token => "requests with an unknown or revoked token",
        }
    }
}

/// The wrong guesses of one kind from one address since the first.
struct Failures {
    since: Instant,
    /// Each different guess once (hashed), at most [`MAX_FAILURES`].
    guesses: Vec<u64>,
}

/// Wrong guesses by kind and address.
pub(super) struct Guard {
    failures: Mutex<HashMap<(Guess, IpAddr), Failures>>,
    hasher: RandomState,
    quiet: Arc<Quiet>,
}

impl Guard {
    pub fn new(quiet: Arc<Quiet>) -> Self {
        Self {
            failures: Mutex::default(),
            hasher: RandomState::new(),
            quiet,
        }
    }

    /// How much longer `ip` is refused guesses of `guess`, when it made too many lately.
    pub fn locked(&self, guess: Guess, ip: IpAddr) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let failed = failures.get(&(guess, ip))?;
        let left = WINDOW.checked_sub(failed.since.elapsed())?;
        (failed.guesses.len() >= MAX_FAILURES && !left.is_zero()).then_some(left)
    }

    /// Counts `value`, a wrong guess of `ip`, unless it was counted already; logged (a
    /// line now and then, not one each).
    pub fn failed(&self, guess: Guess, ip: IpAddr, value: &str) {
        let now = Instant::now();
        let hashed = self.hasher.hash_one(value);
        {
            let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
            if failures.len() >= REMEMBERED {
                failures.retain(|_, f| now.duration_since(f.since) < WINDOW);
            }
            if failures.len() >= REMEMBERED {
                failures.clear();
            }
            let entry = failures.entry((guess, ip)).or_insert(Failures {
                since: now,
                guesses: Vec::new(),
            });
            if now.duration_since(entry.since) >= WINDOW {
                *entry = Failures {
                    since: now,
                    guesses: Vec::new(),
                };
            }
            if entry.guesses.len() < MAX_FAILURES && !entry.guesses.contains(&hashed) {
                entry.guesses.push(hashed);
            }
        }
        self.quiet.note(guess.what(), &format!("from {ip}"));
    }
}

/// Whole minutes, rounded up: what "try again in N minutes" says.
pub(super) fn minutes(left: Duration) -> u64 {
    left.as_secs().div_ceil(60).max(1)
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
/// `Origin` (browsers send one with every `POST`) is not, nor one a browser says it
/// sent for another site's page (`Sec-Fetch-Site`).
pub(super) fn same_origin(headers: &HeaderMap, public_url: Option<&str>) -> bool {
    let from_elsewhere = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"));
    if from_elsewhere {
        return false;
    }
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
    fn a_page_of_another_site_is_not_this_origin_whatever_its_origin_says() {
        let mut from = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "http://127.0.0.1:7433"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(same_origin(&from, None));
        from.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        assert!(!same_origin(&from, None));
        from.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&from, None));
        let other_port = headers(&[
            ("host", "127.0.0.1:7433"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(!same_origin(&other_port, None));
    }

    #[test]
    fn different_wrong_guesses_lock_their_kind_from_their_address_only() {
        let guard = Guard::new(Arc::new(Quiet::new("web view", Duration::from_secs(10))));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        // The same wrong guess again and again is one failure.
        for _ in 0..100 {
            guard.failed(Guess::Token, ip, "a revoked token");
        }
        assert_eq!(guard.locked(Guess::Token, ip), None);
        for i in 0..MAX_FAILURES - 1 {
            guard.failed(Guess::Code, ip, &format!("CODE{i}"));
        }
        assert_eq!(guard.locked(Guess::Code, ip), None);
        guard.failed(Guess::Code, ip, "CODE0");
        assert_eq!(
            guard.locked(Guess::Code, ip),
            None,
            "a repeat does not count"
        );
        guard.failed(Guess::Code, ip, "ONE MORE");
        let left = guard.locked(Guess::Code, ip).unwrap();
        assert!(left <= WINDOW && left > WINDOW - Duration::from_secs(60));
        assert_eq!(minutes(left), 5);
        assert_eq!(
            guard.locked(Guess::Token, ip),
            None,
            "codes lock codes only"
        );
        assert_eq!(
            guard.locked(Guess::Code, "192.0.2.8".parse().unwrap()),
            None
        );
    }

    #[test]
    fn minutes_are_rounded_up() {
        assert_eq!(minutes(Duration::from_secs(1)), 1);
        assert_eq!(minutes(Duration::from_secs(60)), 1);
        assert_eq!(minutes(Duration::from_secs(61)), 2);
        assert_eq!(minutes(Duration::ZERO), 1);
    }
}
