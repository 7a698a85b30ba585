//! `daemon.status` lists what each component of the daemon reports: the web view where it
//! listens and how many browsers are paired, and a Matrix channel whose homeserver cannot
//! be reached failing with why, while the rest of the daemon is served. `cru daemon
//! status` shows the same, as lines and as JSON.

use std::time::{Duration, Instant};

use crucible::protocol::{ComponentState, ComponentStatus, DaemonStatus, WebPairing};
use serde_json::json;

use crate::common::*;

/// A homeserver address nobody listens on: a port just let go.
fn unreachable_homeserver() -> String {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", socket.local_addr().unwrap())
}

fn status_of(tk: &TestKiln) -> DaemonStatus {
    let out = tk.cru(&["daemon", "status", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("cru daemon status --json")
}

fn component<'a>(status: &'a DaemonStatus, name: &str) -> &'a ComponentStatus {
    status
        .components
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", status.components))
}

/// Pairs a browser over HTTP as the pairing page does.
async fn pair_a_browser(tk: &TestKiln) -> String {
    let out = tk.cru(&["web", "--json", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let pairing: WebPairing = serde_json::from_str(&stdout(&out)).unwrap();
    let base = pairing.url.split("/pair").next().unwrap().to_string();
    let answer = reqwest::Client::new()
        .post(format!("{base}/api/pair"))
        .header("origin", &base)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json")
        .body(json!({"code": pairing.code, "label": "a test"}).to_string())
        .send()
        .await
        .expect("the web view answers");
    assert_eq!(answer.status().as_u16(), 200);
    base
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_lists_each_component_and_a_broken_one_says_why() {
    let tk = TestKiln::builder()
        .scripted_agents()
        .settings(&format!(
            "[channels.matrix]\nhomeserver = {:?}\nuser_id = \"@bot:localhost\"\n\
             password_env = \"CRU_TEST_BOT_PASSWORD\"\nallowed_users = [\"@alice:localhost\"]\n\
             agent = \"scripted\"\n",
            unreachable_homeserver()
        ))
        .build();
    let mut cru = cru_on_path();
    cru.env("CRU_TEST_BOT_PASSWORD", "not-used");
    let _daemon = tk.run_daemon(cru).await;
    let base = pair_a_browser(&tk).await;

    // The bot tries its homeserver and fails; the status says so with the reason.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = status_of(&tk);
        if component(&status, "matrix").state == ComponentState::Failing {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "matrix never failed: {:?}",
            status.components
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let names: Vec<&str> = status.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["webhooks", "cron", "web", "matrix", "notify"]);

    let matrix = component(&status, "matrix");
    assert!(
        matrix.detail.contains("not logged in as @bot:localhost"),
        "{matrix:?}"
    );
    assert!(
        matrix.error.as_deref().is_some_and(|e| !e.is_empty()),
        "{matrix:?}"
    );
    // The field that came before the components says the same.
    let legacy = status.matrix.as_ref().expect("the matrix field");
    assert!(!legacy.logged_in);
    assert_eq!(legacy.error, matrix.error);

    // The web view: where it listens, and the browser just paired.
    let web = component(&status, "web");
    assert_eq!(web.state, ComponentState::On, "{web:?}");
    let at = base.trim_start_matches("http://");
    assert!(
        web.detail.contains(&format!("listening on {at}")),
        "{web:?}"
    );
    assert!(web.detail.contains("1 paired browsers"), "{web:?}");
    // Nothing set up: off, and saying so.
    for name in ["webhooks", "cron", "notify"] {
        assert_eq!(
            component(&status, name).state,
            ComponentState::Off,
            "{name}"
        );
    }

    // The command's lines: one per component, the broken one with its reason.
    let out = tk.cru(&["daemon", "status"]);
    let human = stdout(&out);
    assert!(human.contains("components:"), "{human}");
    let line = human
        .lines()
        .find(|l| l.trim_start().starts_with("matrix ") && l.contains("failing"))
        .unwrap_or_else(|| panic!("no failing matrix line: {human}"));
    assert!(line.contains(matrix.error.as_deref().unwrap()), "{line}");
    assert!(
        human
            .lines()
            .any(|l| l.trim_start().starts_with("web ") && l.contains(at)),
        "{human}"
    );
}
