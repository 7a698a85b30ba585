//! The page's files, built into the binary: plain HTML, CSS and JavaScript, no build
//! step. Only the login page and what it loads are served without a paired browser's
//! cookie; the browser fetches the manifest and icon without cookies, so they are public
//! too (they say nothing of the kiln).

/// One file of the page.
pub(super) struct Asset {
    pub content_type: &'static str,
    pub body: &'static str,
    /// Served only to a paired browser.
    pub private: bool,
}

/// The app, once paired.
pub(super) const INDEX: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../../assets/web/index.html"),
    private: true,
};

/// The login page: where a browser pairs with a code.
pub(super) const PAIR: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../../assets/web/pair.html"),
    private: false,
};

pub(super) const MANIFEST: Asset = Asset {
    content_type: "application/manifest+json",
    body: include_str!("../../../assets/web/manifest.webmanifest"),
    private: false,
};

/// `/assets/<name>`.
pub(super) fn named(name: &str) -> Option<Asset> {
    let (content_type, body, private) = match name {
        "app.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../../assets/web/app.js"),
            true,
        ),
        "pair.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../../assets/web/pair.js"),
            false,
        ),
        "app.css" => (
            "text/css; charset=utf-8",
            include_str!("../../../assets/web/app.css"),
            false,
        ),
        "icon.svg" => (
            "image/svg+xml",
            include_str!("../../../assets/web/icon.svg"),
            false,
        ),
        _ => return None,
    };
    Some(Asset {
        content_type,
        body,
        private,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGES: [&str; 2] = [INDEX.body, PAIR.body];

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
                let served = ["/manifest.webmanifest", "/pair", "/"].contains(&link)
                    || link
                        .strip_prefix("/assets/")
                        .is_some_and(|name| named(name).is_some());
                assert!(served, "{link} is not served");
            }
        }
        // The login page works without a cookie: all it loads is public.
        for link in links(PAIR.body) {
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
        let script = named("app.js").unwrap().body;
        assert!(
            !script.contains("innerHTML"),
            "the page builds its DOM from text"
        );
        assert!(!script.contains("setInterval"), "the page does not poll");
    }
}
