//! The page's files, built into the binary: plain HTML, CSS and JavaScript, no build
//! step. Only the login page and what it loads are served without a paired browser's
//! cookie; the browser fetches the manifest and icon without cookies, so they are public
//! too (they say nothing of the kiln).

use std::sync::LazyLock;

/// One file of the page.
pub(super) struct Asset {
    /// Where it is served.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
    /// Served only to a paired browser.
    pub private: bool,
}

const HTML: &str = "text/html; charset=utf-8";
const SCRIPT: &str = "text/javascript; charset=utf-8";

/// Every file of the page.
const FILES: [Asset; 8] = [
    Asset {
        path: "/",
        content_type: HTML,
        body: include_str!("../../../assets/web/index.html"),
        private: true,
    },
    Asset {
        path: "/pair",
        content_type: HTML,
        body: include_str!("../../../assets/web/pair.html"),
        private: false,
    },
    Asset {
        path: "/manifest.webmanifest",
        content_type: "application/manifest+json",
        body: include_str!("../../../assets/web/manifest.webmanifest"),
        private: false,
    },
    Asset {
        path: "/assets/app.js",
        content_type: SCRIPT,
        body: include_str!("../../../assets/web/app.js"),
        private: true,
    },
    Asset {
        path: "/assets/markdown.js",
        content_type: SCRIPT,
        body: include_str!("../../../assets/web/markdown.js"),
        private: true,
    },
    Asset {
        path: "/assets/pair.js",
        content_type: SCRIPT,
        body: include_str!("../../../assets/web/pair.js"),
        private: false,
    },
    Asset {
        path: "/assets/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../../assets/web/app.css"),
        private: false,
    },
    Asset {
        path: "/assets/icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../../../assets/web/icon.svg"),
        private: false,
    },
];

/// The app, once paired.
pub(super) const INDEX: &Asset = &FILES[0];
/// The login page: where a browser pairs with a code.
pub(super) const PAIR: &Asset = &FILES[1];
pub(super) const MANIFEST: &Asset = &FILES[2];
/// What a browser without a valid cookie is shown while its address may not try more
/// pairing codes; `{try_again}` is replaced by when it may.
pub(super) const LOCKED: &str = include_str!("../../../assets/web/locked.html");

/// Each file's tag of its content (`ETag`), in [`FILES`]' order: made once.
static TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    use sha2::Digest;
    FILES
        .iter()
        .map(|f| {
            let digest = sha2::Sha256::digest(f.body.as_bytes());
            format!("\"{}\"", hex::encode(&digest[..12]))
        })
        .collect()
});

impl Asset {
    /// The tag of its content.
    pub fn tag(&self) -> &'static str {
        FILES
            .iter()
            .position(|f| f.path == self.path)
            .and_then(|i| TAGS.get(i))
            .map_or("", String::as_str)
    }
}

/// `/assets/<name>`.
pub(super) fn named(name: &str) -> Option<&'static Asset> {
    FILES
        .iter()
        .find(|f| f.path.strip_prefix("/assets/") == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGES: [&str; 3] = [INDEX.body, PAIR.body, LOCKED];

    /// The `src="…"` and `href="…"` values of a page.
    fn links(page: &str) -> Vec<&str> {
        ["src=\"", "href=\""]
            .iter()
            .flat_map(|attr| page.split(attr).skip(1))
            .filter_map(|rest| rest.split('"').next())
            .collect()
    }

    #[test]
    fn every_file_a_page_loads_is_served_from_here() {
        for page in PAGES {
            let found = links(page);
            assert!(found.contains(&"/assets/app.css"), "{found:?}");
            for link in found {
                let served = FILES.iter().any(|f| f.path == link);
                assert!(served, "{link} is not served");
            }
        }
        // The login page works without a cookie: all it loads is public.
        for link in links(PAIR.body).into_iter().chain(links(LOCKED)) {
            if let Some(name) = link.strip_prefix("/assets/") {
                assert!(!named(name).unwrap().private, "{name}");
            }
        }
        assert!(named("app.js").unwrap().private);
    }

    #[test]
    fn the_pages_hold_nothing_the_content_security_policy_refuses() {
        for page in PAGES {
            // Scripts only from files, no inline styles or handlers, nothing from elsewhere.
            for script in page.split("<script").skip(1) {
                let tag = script.split('>').next().unwrap();
                assert!(
                    tag.contains("src=\"/assets/"),
                    "inline script: <script{tag}>"
                );
                assert!(script.split('>').nth(1).unwrap().starts_with("</script"));
            }
            assert!(!page.contains(" style=") && !page.contains("<style"));
            assert!(!page.contains(" onclick=") && !page.contains(" onload="));
            assert!(!page.contains("http://") && !page.contains("https://"));
        }
        for name in ["app.js", "markdown.js"] {
            let script = named(name).unwrap().body;
            assert!(
                !script.contains("innerHTML") && !script.contains("insertAdjacentHTML"),
                "{name}: the page builds its DOM from text"
            );
            assert!(
                !script.contains("setInterval"),
                "{name}: the page does not poll"
            );
        }
    }
}
