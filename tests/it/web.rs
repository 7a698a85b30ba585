//! The web view end to end, in a real browser (headless chromium through chromedriver):
//! pairing with the code `cru web` prints, sessions appearing as the CLI makes them, a
//! transcript updating live, an approval answered by a click (the agent proceeds) and one
//! answered from the CLI vanishing from the page, refused tokens, a phone's screen, and an
//! agent's Markdown drawn as elements with the HTML in it shown as text.

use crucible::protocol::{MsgType, WebPairing};
use serde_json::{Value, json};

use crate::browser::{Browser, Screen};
use crate::common::*;
use crate::sessions::{agent_kiln, said, wait_message, wait_message_where};

/// Pairs through `cru web`, as a person would: the link it prints.
pub(crate) fn pairing(tk: &TestKiln, extra: &[&str]) -> WebPairing {
    let mut args = vec!["web", "--json", "--no-wait"];
    args.extend_from_slice(extra);
    let out = tk.cru(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("cru web --json")
}

/// The page's base address, from a pairing link.
fn base(pairing: &WebPairing) -> String {
    pairing.url.split("/pair").next().unwrap().to_string()
}

/// Opens the pairing link and waits until the app has loaded.
pub(crate) async fn paired(browser: &Browser, pairing: &WebPairing) {
    browser.goto(&pairing.url).await;
    browser
        .wait_for(
            "the app, paired",
            "return location.pathname === '/' && document.body.dataset.ready === '1'",
        )
        .await;
}

/// A desktop-sized browser paired through `cru web` with `extra` flags (`--read-only`).
pub(crate) async fn desktop_paired(tk: &TestKiln, extra: &[&str]) -> Browser {
    let pairing = pairing(tk, extra);
    let browser = Browser::start(Screen::Desktop {
        width: 1280,
        height: 900,
    })
    .await;
    paired(&browser, &pairing).await;
    browser
}

/// A session of the scripted agent with `task`, made with `cru session new`: its id.
pub(crate) fn session_new(tk: &TestKiln, task: &str) -> String {
    let out = tk.cru(&[
        "session", "new", "--agent", "scripted", "--task", task, "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let created: Value = serde_json::from_str(&stdout(&out)).unwrap();
    created["id"].as_str().unwrap().to_string()
}

/// A plain HTTP request to the page, without a browser: status and body.
async fn http(method: &str, url: &str, cookie: Option<&str>) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut request = client.request(method.parse().unwrap(), url);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let answer = request.send().await.expect("the web view answers");
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_browser_pairs_watches_a_session_and_answers_its_approval() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let pairing = pairing(&tk, &[]);
    let base = base(&pairing);
    assert!(base.starts_with("http://127.0.0.1:"), "{}", pairing.url);

    // Nothing but the login page without pairing.
    let (status, body) = http("GET", &format!("{base}/"), None).await;
    assert_eq!(status, 401);
    assert!(body.contains("pair"), "{body}");
    let (status, _) = http("GET", &format!("{base}/assets/app.js"), None).await;
    assert_eq!(status, 401);

    let browser = Browser::start(Screen::Desktop {
        width: 1280,
        height: 900,
    })
    .await;
    paired(&browser, &pairing).await;
    // The code is gone from the address, and it cannot pair a second browser.
    let href = browser.run("return location.href", vec![]).await;
    assert!(!href.as_str().unwrap().contains(&pairing.code), "{href}");

    // A session the CLI creates appears; opened, its transcript grows as the agent works
    // and stops at an approval.
    let id = session_new(
        &tk,
        "say looking around\npermit p1 Write notes.txt\nsay after the approval",
    );
    let row = format!("li.session[data-session-id='{id}']");
    browser
        .wait_for(
            "the new session",
            &format!("return document.querySelector(\"{row}\")"),
        )
        .await;
    browser.click(&format!("{row} button")).await;
    browser
        .wait_for(
            "the agent's first words, live",
            "return document.getElementById('transcript').innerText.includes('looking around')",
        )
        .await;
    let approval = wait_message(&client, &id, MsgType::ApprovalRequired).await;
    let message = format!(".message[data-message-id='{}']", approval.id);
    browser
        .wait_for(
            "the approval with its choices",
            &format!("return document.querySelector(\"{message} button.option\")"),
        )
        .await;
    let choices = browser
        .run(
            &format!(
                "return [...document.querySelectorAll(\"#inbox {message} button.option\")].map(b => b.dataset.option)"
            ),
            vec![],
        )
        .await;
    assert_eq!(choices, json!(["Allow", "Reject"]));
    // What is approved is named on the page.
    let shown = browser
        .run(
            &format!("return document.querySelector(\"{message}\").innerText"),
            vec![],
        )
        .await;
    assert!(
        shown.as_str().unwrap().contains("Write notes.txt"),
        "{shown}"
    );

    // The open session's page shows its question with the same choices, and a click
    // there answers it: the agent proceeds, and the page shows it.
    let asked = format!("#session-asks {message}");
    let here = browser
        .run(
            &format!(
                "return [...document.querySelectorAll(\"{asked} button.option\")].map(b => b.dataset.option)"
            ),
            vec![],
        )
        .await;
    assert_eq!(here, json!(["Allow", "Reject"]));
    browser
        .click(&format!("{asked} button.option[data-option='Allow']"))
        .await;
    browser
        .wait_for(
            "the answered question gone from the session's page",
            "return document.getElementById('session-asks').hidden",
        )
        .await;
    browser
        .wait_for(
            "the agent going on after the approval",
            "return document.getElementById('transcript').innerText.includes('after the approval')",
        )
        .await;
    // The page shows the agent's words as they stream; the transcript stores each
    // message whole, a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut text = said(&client, &id).await;
    while !text.contains("granted: Write notes.txt") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        text = said(&client, &id).await;
    }
    assert!(text.contains("granted: Write notes.txt"), "{text}");
    let answered = wait_message_where(&client, &id, "the answered approval", |m| {
        m.id == approval.id && m.responded
    })
    .await;
    assert_eq!(answered.response.as_deref(), Some("Allow"));

    // An approval answered from the CLI disappears from the page at once.
    let out = tk.cru(&["session", "send", &id, "permit p2 Delete notes.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let second = wait_message_where(&client, &id, "the second approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && !m.responded && m.id != approval.id
    })
    .await;
    let second_buttons = format!(".message[data-message-id='{}'] button.option", second.id);
    browser
        .wait_for(
            "the second approval on the session's page",
            &format!("return document.querySelector(\"#session-asks {second_buttons}\")"),
        )
        .await;
    browser
        .wait_for(
            "the second approval",
            &format!("return document.querySelector(\"{second_buttons}\")"),
        )
        .await;
    let out = tk.cru(&["inbox", "respond", &second.id, "deny"]);
    assert!(out.status.success(), "{}", stderr(&out));
    browser
        .wait_for(
            "the approval answered elsewhere, gone",
            &format!("return !document.querySelector(\"{second_buttons}\")"),
        )
        .await;

    // The page's own requests are served; a wrong token gets 401 and nothing else.
    let (status, me) = browser.fetch("GET", "/api/me").await;
    assert_eq!(status, 200, "{me}");
    let device = serde_json::from_str::<Value>(&me).unwrap()["device"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cookie_name = browser
        .client
        .get_all_cookies()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name().to_string())
        .find(|n| n.starts_with("cru_"))
        .expect("the pairing cookie");
    let forged = format!("{cookie_name}={}", "0".repeat(64));
    for path in [
        "/",
        "/api/me",
        "/assets/app.js",
        "/api/events",
        "/no-such-page",
    ] {
        let (status, body) = http("GET", &format!("{base}{path}"), Some(&forged)).await;
        assert_eq!(status, 401, "{path}");
        assert!(
            !body.contains(&id),
            "{path} said something of a session: {body}"
        );
    }
    let (status, body) = http(
        "POST",
        &format!("{base}/api/call/session.list"),
        Some(&forged),
    )
    .await;
    assert_eq!(status, 401);
    assert!(!body.contains(&id));

    // Revoked from the CLI, the browser is refused at its next request.
    let out = tk.cru(&["web", "tokens", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed["devices"][0]["id"], device.as_str());
    assert!(!stdout(&out).contains(&pairing.code));
    let out = tk.cru(&["web", "tokens", "revoke", &device[..10]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (status, body) = browser.fetch("GET", "/api/me").await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = browser.fetch("POST", "/api/call/session.list").await;
    assert_eq!(status, 401);
    browser.close().await;
}

#[tokio::test]
async fn a_read_only_browser_sees_but_cannot_change_and_a_forged_change_is_refused() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let id = session_new(&tk, "permit p1 Write notes.txt");
    let approval = wait_message(&client, &id, MsgType::ApprovalRequired).await;
    let browser = desktop_paired(&tk, &["--read-only"]).await;
    let message = format!(".message[data-message-id='{}']", approval.id);
    browser
        .wait_for(
            "the approval",
            &format!("return document.querySelector(\"{message}\")"),
        )
        .await;
    let buttons = browser
        .run(
            &format!("return document.querySelectorAll(\"{message} button.option\").length"),
            vec![],
        )
        .await;
    assert_eq!(buttons, json!(0), "a read-only page offers no answer");
    // Even asked directly, with the page's own request token, the change is refused.
    let status = browser
        .client
        .execute_async(
            "const [id, done] = arguments;
             const me = await (await fetch('/api/me')).json();
             const r = await fetch('/api/call/inbox.respond', {method: 'POST',
               headers: {'Content-Type': 'application/json', 'X-Crucible-Csrf': me.csrf},
               body: JSON.stringify({id, response: 'allow'})});
             done(r.status);",
            vec![json!(approval.id)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    // A change without the request token (as another site would send it) is refused too.
    let status = browser
        .client
        .execute_async(
            "const [id, done] = arguments;
             fetch('/api/call/inbox.respond', {method: 'POST', headers: {'Content-Type': 'application/json'},
               body: JSON.stringify({id, response: 'allow'})}).then(r => done(r.status));",
            vec![json!(approval.id)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    let still = wait_message(&client, &id, MsgType::ApprovalRequired).await;
    assert!(!still.responded, "nothing answered it: {still:?}");
    // A method the page does not offer is not served at all.
    let (status, body) = browser.fetch("POST", "/api/call/db.query").await;
    assert_eq!(status, 404, "{body}");
    browser.close().await;
}

#[tokio::test]
async fn on_a_phone_the_inbox_and_its_buttons_fit_the_screen() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let id = session_new(
        &tk,
        "permit p1 Write a-file-with-a-very-long-name-that-would-widen-a-careless-page-beyond-its-screen.txt",
    );
    let approval = wait_message(&client, &id, MsgType::ApprovalRequired).await;
    let pairing = pairing(&tk, &[]);
    let browser = Browser::start(Screen::Phone {
        width: 390,
        height: 844,
    })
    .await;
    paired(&browser, &pairing).await;
    let message = format!("#inbox .message[data-message-id='{}']", approval.id);
    browser
        .wait_for(
            "the approval's buttons",
            &format!("return document.querySelector(\"{message} button.option\")"),
        )
        .await;
    let fit = browser
        .run(
            &format!(
                "const width = window.innerWidth;
                 const buttons = [...document.querySelectorAll(\"{message} button.option\")];
                 return {{
                   width,
                   scroll: document.documentElement.scrollWidth,
                   buttons: buttons.map(b => {{ const r = b.getBoundingClientRect();
                     return [r.left, r.right, r.width, r.height]; }}),
                 }};"
            ),
            vec![],
        )
        .await;
    assert_eq!(fit["width"], json!(390), "{fit}");
    assert!(
        fit["scroll"].as_f64().unwrap() <= 390.0,
        "the page scrolls sideways: {fit}"
    );
    let buttons = fit["buttons"].as_array().unwrap();
    assert_eq!(buttons.len(), 2, "{fit}");
    for b in buttons {
        let (left, right, height) = (
            b[0].as_f64().unwrap(),
            b[1].as_f64().unwrap(),
            b[3].as_f64().unwrap(),
        );
        assert!(
            left >= 0.0 && right <= 390.0,
            "a button is off the screen: {fit}"
        );
        assert!(height >= 40.0, "a button too small to touch: {fit}");
    }
    let artefact = std::path::PathBuf::from(
        std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into()),
    )
    .join("web-artefacts")
    .join("phone-inbox-390x844.png");
    browser.screenshot(&artefact).await;
    let png = std::fs::read(&artefact).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // Tapped, the answer goes through on the phone too.
    browser
        .click(&format!("{message} button.option[data-option='Allow']"))
        .await;
    wait_message_where(&client, &id, "the approval answered from the phone", |m| {
        m.id == approval.id && m.responded
    })
    .await;
    browser.close().await;
}

// ---- Bounds and lock-out, over plain HTTP (no browser) ----

/// The daemon's descriptor limit in the tests of slow clients, as on a stock system: the
/// web view then holds at most 256 connections.
const FD_LIMIT: u64 = 1024;

/// A request from the page's own origin, as its script sends it.
fn from_page(
    client: &reqwest::Client,
    method: &str,
    base: &str,
    path: &str,
) -> reqwest::RequestBuilder {
    client
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .header("origin", base)
        .header("sec-fetch-site", "same-origin")
}

/// Status, headers and body of an answer.
async fn answered(request: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, String) {
    let answer = request.send().await.expect("the web view answers");
    let status = answer.status().as_u16();
    let headers = answer.headers().clone();
    (status, headers, answer.text().await.unwrap_or_default())
}

/// Pairs with `code` as the pairing page does; the cookie the browser keeps (`name=token`).
async fn pair_over_http(base: &str, code: &str) -> String {
    let client = reqwest::Client::new();
    let answer = from_page(&client, "POST", base, "/api/pair")
        .header("content-type", "application/json")
        .body(json!({"code": code, "label": "a test"}).to_string())
        .send()
        .await
        .expect("the web view answers");
    assert_eq!(answer.status().as_u16(), 200);
    let set = answer.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

/// A paired owner: the cookie and the request token its page sends.
struct Owner {
    cookie: String,
    csrf: String,
}

impl Owner {
    async fn pair(tk: &TestKiln, base: &str) -> Owner {
        let cookie = pair_over_http(base, &pairing(tk, &[]).code).await;
        let (status, me) = http("GET", &format!("{base}/api/me"), Some(&cookie)).await;
        assert_eq!(status, 200, "{me}");
        let me: Value = serde_json::from_str(&me).unwrap();
        Owner {
            cookie,
            csrf: me["csrf"].as_str().unwrap().to_string(),
        }
    }

    /// The session list, as the page asks for it; on a connection of its own.
    async fn list(&self, base: &str) -> (u16, String) {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .unwrap();
        let (status, _, body) = answered(
            from_page(&client, "POST", base, "/api/call/session.list")
                .header("cookie", &self.cookie)
                .header("x-crucible-csrf", &self.csrf)
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
        (status, body)
    }
}

/// The `{"error": {"code", "message"}}` of an answer, which must be JSON of that shape.
fn error_of(headers: &reqwest::header::HeaderMap, body: &str) -> (i64, String) {
    assert_eq!(headers["content-type"], "application/json", "{body}");
    let said: Value = serde_json::from_str(body).expect("a JSON error");
    let code = said["error"]["code"].as_i64().expect("error.code");
    let message = said["error"]["message"].as_str().expect("error.message");
    (code, message.to_string())
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Whether the server closed `stream` (no answer) or answered it; a timeout reads as open.
fn read_all(stream: &mut std::net::TcpStream) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = Vec::new();
    stream.read_to_end(&mut text)?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

#[tokio::test]
async fn slow_bodies_leave_the_paired_owner_served_and_its_event_stream_open() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    const SLOW: usize = 256;
    const OWNER_CALLS: usize = 10;
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut cru = cru_on_path();
    limit_descriptors(&mut cru, FD_LIMIT);
    let daemon = tk.run_daemon(cru).await;
    let base = base(&pairing(&tk, &[]));
    let owner = Owner::pair(&tk, &base).await;
    let (status, body) = owner.list(&base).await;
    assert_eq!(status, 200, "{body}");

    // The owner's page is open: its event stream says it is ready.
    let mut events = reqwest::Client::new()
        .get(format!("{base}/api/events"))
        .header("cookie", &owner.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status().as_u16(), 200);
    let first = tokio::time::timeout(Duration::from_secs(10), events.chunk())
        .await
        .expect("the stream's first event")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("event: ready"));

    // As many half-sent pairings as the web view holds connections: headers that pass
    // every check, a body of 100 bytes announced and one sent.
    let port = base.rsplit(':').next().unwrap();
    let before = open_fds(daemon.pid());
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        stream
            .write_all(
                format!(
                    "POST /api/pair HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {base}\r\n\
                     Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
                )
                .as_bytes(),
            )
            .unwrap();
        slow.push(stream);
    }
    let started = Instant::now();
    // Wait until the daemon holds them all (a connection it refused it does not hold).
    let deadline = started + Duration::from_secs(10);
    while open_fds(daemon.pid()) < before + SLOW - OWNER_CALLS && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // While they are held, the owner is served, each call on a new connection.
    let mut took = Vec::new();
    for _ in 0..OWNER_CALLS {
        let asked = Instant::now();
        let (status, body) = owner.list(&base).await;
        took.push(asked.elapsed());
        assert_eq!(status, 200, "the owner was refused: {body}");
    }
    took.sort();
    println!(
        "the owner's session list with {SLOW} slow bodies held: median {:?}, slowest {:?}",
        took[took.len() / 2],
        took[took.len() - 1]
    );
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the owner was served only after {:?}",
        started.elapsed()
    );
    // The page's event stream was not shed to make room: it is still open (nothing
    // more within a moment, or an event; not its end).
    let more = tokio::time::timeout(Duration::from_millis(300), events.chunk()).await;
    assert!(
        matches!(more, Err(_) | Ok(Ok(Some(_)))),
        "the owner's event stream ended while slow bodies were held: {more:?}"
    );

    // The slow bodies still held are given up within the body's time limit (408, JSON);
    // those shed to make room were closed.
    let (mut timed_out, mut shed) = (0, 0);
    for stream in &mut slow {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let text = read_all(stream).unwrap_or_default();
        // Shed to make room: closed, or told so if its request came as it was shed.
        if text.is_empty() || text.starts_with("HTTP/1.1 503") {
            shed += 1;
        } else {
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            assert!(text.contains("\"code\":-32007"), "{text}");
            timed_out += 1;
        }
    }
    println!(
        "{timed_out} slow bodies timed out (408) after {:?}, {shed} shed",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(25));
    assert!(
        shed <= OWNER_CALLS + 1,
        "{shed} shed for {OWNER_CALLS} calls"
    );
    drop(slow);
    drop(events);
}

#[tokio::test]
async fn wrong_pairing_codes_lock_out_pairing_from_an_address_but_never_a_paired_browser() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let base = base(&pairing(&tk, &[]));
    let owner = Owner::pair(&tk, &base).await;
    let client = reqwest::Client::new();

    // A revoked cookie sent again and again guesses nothing new: it locks nothing.
    let stale = format!(
        "{}={}",
        owner.cookie.split('=').next().unwrap(),
        "0".repeat(64)
    );
    for _ in 0..30 {
        let (status, _) = http("GET", &format!("{base}/api/me"), Some(&stale)).await;
        assert_eq!(status, 401);
    }
    // Twenty different wrong codes from this address: the next try is refused, whatever
    // its code, and says for how long.
    for i in 0..20 {
        let (status, headers, body) = answered(
            from_page(&client, "POST", &base, "/api/pair")
                .header("content-type", "application/json")
                .body(json!({"code": format!("WRONG-CODE-{i:04}")}).to_string()),
        )
        .await;
        assert_eq!(status, 401, "{body}");
        error_of(&headers, &body);
    }
    let good = pairing(&tk, &[]);
    let (status, headers, body) = answered(
        from_page(&client, "POST", &base, "/api/pair")
            .header("content-type", "application/json")
            .body(json!({"code": good.code}).to_string()),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    let (_, message) = error_of(&headers, &body);
    assert!(message.contains("try again in 5 minutes"), "{message}");
    assert!(headers.contains_key("retry-after"));

    // The paired browser from the same address is served as before.
    let (status, body) = http("GET", &format!("{base}/api/me"), Some(&owner.cookie)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = owner.list(&base).await;
    assert_eq!(status, 200, "{body}");
    let (status, page) = http("GET", &format!("{base}/"), Some(&owner.cookie)).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("app.js"),
        "the app, not the login page: {page}"
    );

    // A browser without a cookie is told why it cannot pair, and for how long.
    for path in ["/", "/pair"] {
        let (status, headers, page) = answered(client.get(format!("{base}{path}"))).await;
        assert_eq!(status, 429, "{path}");
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(
            page.contains("Too many failed pairing attempts")
                && page.contains("try again in 5 minutes")
                && !page.contains("pair-form"),
            "{page}"
        );
    }
}

#[tokio::test]
async fn pairings_and_changes_from_another_origin_are_refused_and_lock_nothing() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let base = base(&pairing(&tk, &[]));
    let owner = Owner::pair(&tk, &base).await;
    let client = reqwest::Client::new();
    let port = base.rsplit(':').next().unwrap();
    // As a browser sends them for a page of another site, and of another port here.
    let elsewhere = [
        ("http://evil.example", "cross-site"),
        ("http://127.0.0.1:1", "same-site"),
    ];
    for i in 0..30 {
        let (origin, site) = elsewhere[i % 2];
        let (status, headers, body) = answered(
            client
                .post(format!("{base}/api/pair"))
                .header("origin", origin)
                .header("sec-fetch-site", site)
                .header("content-type", "text/plain")
                .body(json!({"code": format!("GUESS-{i:04}")}).to_string()),
        )
        .await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(error_of(&headers, &body).0, -32005);
        // A page on another port of this host is the same site: the browser sends the
        // cookie with its changes, which are refused too.
        let (status, _, body) = answered(
            client
                .post(format!("{base}/api/call/session.list"))
                .header("origin", format!("http://127.0.0.1:{port}1"))
                .header("sec-fetch-site", "same-site")
                .header("cookie", &owner.cookie)
                .body("{}"),
        )
        .await;
        assert_eq!(status, 403, "{body}");
    }
    // None of it counted: pairing from the page itself works, and the owner is served.
    pair_over_http(&base, &pairing(&tk, &[]).code).await;
    let (status, body) = owner.list(&base).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn every_error_of_the_web_api_is_json_in_the_api_shape() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let base = base(&pairing(&tk, &[]));
    let owner = Owner::pair(&tk, &base).await;
    let client = reqwest::Client::new();
    let big = format!("{{\"code\": \"{}\"}}", "x".repeat(300 * 1024));
    // A body over the limit, to pairing and to a call.
    let (status, headers, body) = answered(
        from_page(&client, "POST", &base, "/api/pair")
            .header("content-type", "application/json")
            .body(big.clone()),
    )
    .await;
    assert_eq!(status, 413);
    let (code, message) = error_of(&headers, &body);
    assert_eq!(code, -32600);
    assert!(message.contains("over 262144 bytes"), "{message}");
    let (status, headers, body) = answered(
        from_page(&client, "POST", &base, "/api/call/session.prompt")
            .header("cookie", &owner.cookie)
            .header("x-crucible-csrf", &owner.csrf)
            .body(big),
    )
    .await;
    assert_eq!(status, 413);
    error_of(&headers, &body);
    // Refusals of the routes and of the HTTP stack alike.
    for (method, path, cookie, want) in [
        ("GET", "/api/me", None, 401),
        ("GET", "/api/pair", None, 405),
        ("GET", "/no-such-page", Some(&owner.cookie), 404),
        ("POST", "/api/call/db.query", Some(&owner.cookie), 404),
    ] {
        let mut request = client.request(method.parse().unwrap(), format!("{base}{path}"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let (status, headers, body) = answered(request).await;
        assert_eq!(status, want, "{method} {path}: {body}");
        error_of(&headers, &body);
    }
}

#[tokio::test]
async fn an_agent_message_is_drawn_from_its_markdown_and_its_html_stays_text() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let browser = desktop_paired(&tk, &[]).await;
    let id = session_new(
        &tk,
        r"say ## Result\n\nIt is **fixed**; run:\n\n```sh\ncargo test <all>\n```\n\n<script>window.cruPwned = 1</script> [click me](javascript:window.cruPwned=2) and [docs](https://example.com/docs)",
    );
    let row = format!("li.session[data-session-id='{id}']");
    browser
        .wait_for(
            "the new session",
            &format!("return document.querySelector(\"{row}\")"),
        )
        .await;
    browser.click(&format!("{row} button")).await;
    // The stored message (not only the text streamed before it) is drawn.
    browser
        .wait_for(
            "the agent's message, stored",
            "return document.querySelector('#transcript .entry-message[data-seq] .md pre')",
        )
        .await;
    let seen = browser
        .run(
            "const m = document.querySelector('#transcript .entry-message[data-seq] .md');
             return {
               strong: [...m.querySelectorAll('strong')].map((e) => e.textContent),
               heading: [...m.querySelectorAll('h4')].map((e) => e.textContent),
               code: [...m.querySelectorAll('pre > code')].map((e) => e.textContent),
               scripts: document.querySelectorAll('#transcript script').length,
               links: [...m.querySelectorAll('a')].map((a) =>
                 [a.textContent, a.getAttribute('href'), a.rel]),
               text: m.innerText,
               pwned: window.cruPwned === undefined ? null : window.cruPwned,
             };",
            vec![],
        )
        .await;
    assert_eq!(seen["strong"], json!(["fixed"]), "{seen}");
    assert_eq!(seen["heading"], json!(["Result"]), "{seen}");
    assert_eq!(seen["code"], json!(["cargo test <all>"]), "{seen}");
    // The markup the agent wrote is shown as text, never run or followed.
    assert_eq!(seen["scripts"], json!(0), "{seen}");
    assert_eq!(seen["pwned"], Value::Null, "{seen}");
    assert_eq!(
        seen["links"],
        json!([["docs", "https://example.com/docs", "noopener noreferrer"]]),
        "{seen}"
    );
    let text = seen["text"].as_str().unwrap();
    assert!(
        text.contains("<script>window.cruPwned = 1</script> click me and docs"),
        "{text}"
    );
    assert!(!text.contains("**") && !text.contains("##"), "{text}");
    browser.close().await;
}
