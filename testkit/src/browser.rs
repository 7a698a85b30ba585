//! A real browser for the web view's tests: Debian's `chromium`, headless, driven through
//! its `chromedriver` over WebDriver (the `fantoccini` client). Each browser has its own
//! chromedriver on a free loopback port and a fresh profile, so cookies never leak
//! between tests. `.ci/run` installs both programs.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long a page has to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(30);

/// How the browser presents itself.
pub enum Screen {
    /// A desktop window.
    Desktop { width: u32, height: u32 },
    /// A phone: its viewport in CSS pixels, touch, a phone's user agent.
    Phone { width: u32, height: u32 },
}

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn program(name: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/lib/chromium"] {
        let path = format!("{dir}/{name}");
        if std::path::Path::new(&path).exists() {
            return path;
        }
    }
    panic!(
        "{name} is not installed (Debian: apt-get install chromium chromium-driver; .ci/run does)"
    );
}

impl Browser {
    /// Starts chromedriver and a headless chromium on `screen`.
    pub async fn start(screen: Screen) -> Browser {
        let port = free_port();
        let mut driver = Command::new(program("chromedriver"));
        driver
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own process group: chromium is killed with it if the test ends early.
        std::os::unix::process::CommandExt::process_group(&mut driver, 0);
        let driver = driver.spawn().expect("start chromedriver");
        let profile = tempfile::tempdir().expect("a browser profile folder");
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut options = json!({"binary": program("chromium")});
        match screen {
            Screen::Desktop { width, height } => {
                args.push(format!("--window-size={width},{height}"))
            }
            Screen::Phone { width, height } => {
                options["mobileEmulation"] = json!({
                    "deviceMetrics": {"width": width, "height": height, "pixelRatio": 3.0, "touch": true, "mobile": true},
                    "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0 Mobile Safari/537.36",
                });
            }
        }
        options["args"] = json!(args);
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), options);
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let deadline = Instant::now() + WAIT;
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => break client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("chromedriver on port {port} did not start a browser: {e}"),
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("open the page");
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Waits until `script` (a function body) returns something truthy; returns it.
    pub async fn wait_for(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.run(script, vec![]).await;
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() >= deadline {
                let body = self
                    .run(
                        "return document.body ? document.body.innerText : ''",
                        vec![],
                    )
                    .await;
                panic!("the page did not show {what} within {WAIT:?}; it shows:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the element `css` finds. The page re-renders as events arrive, so an
    /// element found may be replaced before the click lands: then it is found again.
    pub async fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let clicked = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.click().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if Instant::now() >= deadline => panic!("cannot click {css}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The HTTP status and body of a `fetch` the page makes (with its cookie).
    pub async fn fetch(&self, method: &str, path: &str) -> (u16, String) {
        let value = self
            .client
            .execute_async(
                "const [method, path, done] = arguments;
                 fetch(path, {method}).then(async r => done([r.status, await r.text()]))
                   .catch(e => done([0, String(e)]));",
                vec![json!(method), json!(path)],
            )
            .await
            .expect("fetch in the page");
        (
            value[0].as_u64().unwrap_or(0) as u16,
            value[1].as_str().unwrap_or("").to_string(),
        )
    }

    /// A PNG of what the page shows, written to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let png = self.client.screenshot().await.expect("a screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot's folder");
        }
        std::fs::write(path, png).expect("write the screenshot");
    }

    /// Ends the browser and its driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        self.kill();
    }

    fn kill(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the driver's process group only.
        unsafe {
            libc::kill(-(self.driver.id() as i32), libc::SIGKILL);
        }
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if matches!(self.driver.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}
