//! The web view end to end, in a real browser (headless chromium through chromedriver):
//! pairing with the code `cru web` prints, sessions appearing as the CLI makes them, a
//! transcript updating live, an approval answered by a click (the agent proceeds) and one
//! answered from the CLI vanishing from the page, refused tokens, and a phone's screen.

use crucible::protocol::{MsgType, WebPairing};
use serde_json::{Value, json};

use crate::browser::{Browser, Screen};
use crate::common::*;
use crate::sessions::{agent_kiln, said, wait_message, wait_message_where};

/// Pairs through `cru web`, as a person would: the link it prints.
fn pairing(tk: &TestKiln, extra: &[&str]) -> WebPairing {
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
async fn paired(browser: &Browser, pairing: &WebPairing) {
    browser.goto(&pairing.url).await;
    browser
        .wait_for(
            "the app, paired",
            "return location.pathname === '/' && document.body.dataset.ready === '1'",
        )
        .await;
}

fn session_new(tk: &TestKiln, task: &str) -> String {
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
                "return [...document.querySelectorAll(\"{message} button.option\")].map(b => b.dataset.option)"
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

    // A click answers it: the agent proceeds, and the page shows it.
    browser
        .click(&format!("{message} button.option[data-option='Allow']"))
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
    let pairing = pairing(&tk, &["--read-only"]);
    let browser = Browser::start(Screen::Desktop {
        width: 1280,
        height: 900,
    })
    .await;
    paired(&browser, &pairing).await;
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
    let message = format!(".message[data-message-id='{}']", approval.id);
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
