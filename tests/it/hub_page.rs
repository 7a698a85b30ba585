//! The person's one page, with the real binary and no browser: `[web]` in the person's
//! own settings (a temp `XDG_CONFIG_HOME`) is served once, by the hub, which a kiln's
//! daemon starts itself; a kiln without a `[web]` of its own serves no page, and `cru
//! web` there pairs with the person's page; a kiln whose own settings ask for a page
//! keeps it. The paired page lists every kiln and its new sessions name their kiln.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crucible::protocol::{ComponentState, WebPairing};
use serde_json::{Value, json};

use crate::common::*;
use crate::sessions::agent_kiln;

/// Stops the test's hub when the test ends, however it ends.
struct HubGuard(PathBuf);

impl Drop for HubGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0.join("crucible/hub.pid")) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
    }
}

/// `cru` with the person's state and settings folders.
fn cru_as(state: &Path, config: &Path, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(CRU);
    command
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env("XDG_CONFIG_HOME", config)
        .env("CRU_DAEMON_EXE", CRU)
        .env_remove("CRU_KILN");
    run_bounded(command, &format!("cru {}", args.join(" ")))
}

fn pairing(state: &Path, config: &Path, args: &[&str]) -> WebPairing {
    let out = cru_as(state, config, args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("cru web --json")
}

fn port_of(pairing: &WebPairing) -> u16 {
    let after = pairing
        .url
        .split("127.0.0.1:")
        .nth(1)
        .expect("a loopback link");
    after.split('/').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn the_persons_page_is_served_once_by_the_hub_a_kiln_daemon_starts() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let config = home.path().join("config");
    std::fs::create_dir_all(config.join("crucible")).unwrap();
    let _hub = HubGuard(state.clone());
    let (page, own_page) = (free_port(), free_port());
    std::fs::write(
        config.join("crucible/config.toml"),
        format!("[web]\nlisten = \"127.0.0.1:{page}\"\n"),
    )
    .unwrap();
    let alpha = agent_kiln("[kiln]\nname = \"alpha\"\n");
    let beta = agent_kiln(&format!(
        "[kiln]\nname = \"beta\"\n\n[web]\nlisten = \"127.0.0.1:{own_page}\"\n"
    ));
    let mut daemons = Vec::new();
    for tk in [&alpha, &beta] {
        let mut daemon = Command::new(CRU);
        daemon
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", &config)
            .stderr(Stdio::piped());
        daemons.push(tk.run_daemon(daemon).await);
    }

    // The first daemon started the hub; nothing else asked for it.
    let socket = state.join("crucible/hub.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(Instant::now() < deadline, "no kiln daemon started the hub");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // alpha serves no page of its own; beta, which asks in its own file, does.
    let alpha_client = alpha.client().await;
    let status = alpha_client
        .call_value("daemon.status", json!({}))
        .await
        .unwrap();
    let web = status["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "web")
        .cloned()
        .unwrap();
    assert_eq!(web["state"], "off", "{web}");

    // `cru web` in alpha pairs with the person's page; in beta with beta's own.
    let alpha_root = alpha.root().to_string_lossy().into_owned();
    let through_alpha = pairing(
        &state,
        &config,
        &["--kiln", &alpha_root, "web", "--json", "--no-wait"],
    );
    assert_eq!(port_of(&through_alpha), page, "{}", through_alpha.url);
    let beta_root = beta.root().to_string_lossy().into_owned();
    let beta_own = pairing(
        &state,
        &config,
        &["--kiln", &beta_root, "web", "--json", "--no-wait"],
    );
    assert_eq!(port_of(&beta_own), own_page, "{}", beta_own.url);
    let all = pairing(
        &state,
        &config,
        &["web", "--all-kilns", "--json", "--no-wait"],
    );
    assert_eq!(port_of(&all), page);

    // The hub's status names its page.
    let out = cru_as(&state, &config, &["hub", "status", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let hub: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let web = hub["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "web")
        .cloned()
        .unwrap_or_else(|| panic!("no web in {hub}"));
    assert_eq!(
        serde_json::from_value::<ComponentState>(web["state"].clone()).unwrap(),
        ComponentState::On
    );

    // Paired with the person's page: every kiln, and a new session in the one named.
    let base = format!("http://127.0.0.1:{page}");
    let browser = reqwest::Client::new();
    let paired = browser
        .post(format!("{base}/api/pair"))
        .header("origin", &base)
        .header("content-type", "application/json")
        .body(json!({"code": all.code, "label": "test"}).to_string())
        .send()
        .await
        .unwrap();
    assert!(paired.status().is_success(), "{}", paired.status());
    let cookie = paired.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let me = browser
        .get(format!("{base}/api/me"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let me: Value = serde_json::from_str(&me).unwrap();
    let mut kilns: Vec<String> = serde_json::from_value(me["kilns"].clone()).unwrap();
    kilns.sort();
    assert_eq!(kilns, ["alpha", "beta"], "{me}");
    assert!(me["kiln"].is_null(), "{me}");
    let call = |method: &str, params: Value| {
        browser
            .post(format!("{base}/api/call/{method}"))
            .header("origin", &base)
            .header("cookie", &cookie)
            .header("x-crucible-csrf", me["csrf"].as_str().unwrap())
            .header("content-type", "application/json")
            .body(params.to_string())
            .send()
    };
    let unnamed = call(
        "session.create",
        json!({"agent": "scripted", "task": "say hi"}),
    )
    .await
    .unwrap();
    assert_eq!(
        unnamed.status().as_u16(),
        400,
        "several kilns: one must be named"
    );
    let made = call(
        "session.create",
        json!({"agent": "scripted", "task": "say hi", "kiln": "beta"}),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let made: Value = serde_json::from_str(&made).unwrap();
    assert_eq!(made["session"]["kiln"], "beta", "{made}");
    let id = made["session_id"].as_str().unwrap();
    let beta_client = beta.client().await;
    let there = beta_client
        .call_value("session.get", json!({"session_id": id}))
        .await;
    assert!(there.is_ok(), "the session is beta's: {there:?}");
    let not_alpha = alpha_client
        .call_value("session.get", json!({"session_id": id}))
        .await;
    assert!(not_alpha.is_err(), "alpha holds no such session");
    drop(daemons);
}
