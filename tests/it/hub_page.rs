//! The person's one page, with the real binary and no browser: `[web]` in the person's
//! own settings (a temp `XDG_CONFIG_HOME`) is served once, by the hub, which a kiln's
//! daemon starts itself; a kiln without a `[web]` of its own serves no page, and `cru
//! web` there pairs with the person's page; a kiln whose own settings ask for a page
//! keeps it. The paired page lists every kiln and its new sessions name their kiln.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crucible::protocol::methods as m;
use crucible::protocol::{ComponentState, WebPairing};
use serde_json::{Value, json};
use testkit::daemon::{call, try_call};
use testkit::params::session_id;

use crate::common::*;
use crate::sessions::agent_kiln;

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
    let status = call::<m::DaemonStatusOf>(&alpha_client, m::NoParams {}).await;
    let web = status.components.iter().find(|c| c.name == "web").unwrap();
    assert_eq!(web.state, ComponentState::Off, "{web:?}");

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
    let there = try_call::<m::SessionGet>(&beta_client, session_id(id)).await;
    assert!(there.is_ok(), "the session is beta's: {there:?}");
    let not_alpha = try_call::<m::SessionGet>(&alpha_client, session_id(id)).await;
    assert!(not_alpha.is_err(), "alpha holds no such session");
    drop(daemons);
}

/// A kiln whose daemon runs with the person's state and settings folders.
async fn person_kiln(
    name: &str,
    state: &Path,
    config: &Path,
) -> (TestKiln, testkit::DaemonProcess) {
    let tk = agent_kiln(&format!("[kiln]\nname = \"{name}\"\n"));
    let mut daemon = Command::new(CRU);
    daemon
        .env("XDG_STATE_HOME", state)
        .env("XDG_CONFIG_HOME", config)
        .stderr(Stdio::piped());
    let process = tk.run_daemon(daemon).await;
    (tk, process)
}

#[tokio::test]
async fn one_page_in_a_browser_shows_two_kilns_and_approves_and_starts_in_the_second() {
    use crate::browser::{Browser, Screen};
    use crucible::protocol::{InboxMessage, MsgType, SessionState};
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    let config = home.path().join("config");
    std::fs::create_dir_all(config.join("crucible")).unwrap();
    let _hub = HubGuard(state.clone());
    let page = free_port();
    std::fs::write(
        config.join("crucible/config.toml"),
        format!("[web]\nlisten = \"127.0.0.1:{page}\"\n"),
    )
    .unwrap();
    let (alpha, mut alpha_daemon) = person_kiln("alpha", &state, &config).await;
    let (beta, _beta_daemon) = person_kiln("beta", &state, &config).await;
    let _guards = (
        KillOnDrop(alpha.kiln.clone()),
        KillOnDrop(beta.kiln.clone()),
    );
    let mut asked = Vec::new();
    for tk in [&alpha, &beta] {
        let client = tk.client().await;
        let s = crate::sessions::create(
            &client,
            "scripted",
            Some("permit p1 Deploy it\nsay after the approval"),
        )
        .await;
        let m: InboxMessage =
            crate::sessions::wait_message_where(&client, &s.id, "the approval", |m| {
                m.msg_type == MsgType::ApprovalRequired && !m.responded
            })
            .await;
        asked.push((client, s.id, m.id));
    }

    let pairing = pairing(
        &state,
        &config,
        &["web", "--all-kilns", "--json", "--no-wait"],
    );
    let browser = Browser::start(Screen::Desktop {
        width: 1280,
        height: 900,
    })
    .await;
    crate::web::paired(&browser, &pairing).await;
    // Both kilns' sessions, each named with its kiln, and the page names every kiln.
    for (tk_name, (_, session, message)) in ["alpha", "beta"].iter().zip(&asked) {
        let tag = browser
            .wait_for(
                "the session named with its kiln",
                &format!(
                    "const t = document.querySelector(\"li.session[data-session-id='{session}'] .tag.kiln\"); return t && t.textContent"
                ),
            )
            .await;
        assert_eq!(tag, serde_json::json!(tk_name));
        let tag = browser
            .wait_for(
                "the question named with its kiln",
                &format!(
                    "const t = document.querySelector(\".message[data-message-id='{message}'] .tag.kiln\"); return t && t.textContent"
                ),
            )
            .await;
        assert_eq!(tag, serde_json::json!(tk_name));
    }
    let heading = browser
        .run("return document.getElementById('kiln').textContent", vec![])
        .await;
    assert_eq!(heading, serde_json::json!("every kiln"));

    // Approving beta's question by a click reaches beta's agent, and only it.
    let (beta_client, beta_session, beta_message) = &asked[1];
    browser
        .click(&format!(
            "#inbox .message[data-message-id='{beta_message}'] button.option[data-option='Allow']"
        ))
        .await;
    crate::sessions::wait_state(beta_client, beta_session, SessionState::Complete).await;
    let (alpha_client, alpha_session, _) = &asked[0];
    let alpha_now = call::<m::SessionGet>(alpha_client, session_id(alpha_session))
        .await
        .session;
    assert_eq!(
        alpha_now.state,
        Some(SessionState::Waiting),
        "{alpha_now:?}"
    );

    // A new session from the page's form, in the kiln chosen there.
    browser.click("#new-session").await;
    browser
        .run(
            "const a = document.getElementById('ns-agent'); const o = document.createElement('option'); \
             o.value = o.textContent = 'scripted'; a.append(o); a.value = 'scripted'; \
             document.getElementById('ns-kiln').value = 'beta'; \
             document.getElementById('ns-task').value = 'say made from the page';",
            vec![],
        )
        .await;
    browser.click("#ns-create").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = call::<m::SessionList>(beta_client, Default::default()).await;
        let made = list
            .sessions
            .iter()
            .any(|s| s.task.as_deref() == Some("say made from the page"));
        if made {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no session made in beta: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let alpha_list = call::<m::SessionList>(alpha_client, Default::default()).await;
    assert_eq!(alpha_list.sessions.len(), 1);

    // A kiln whose daemon is killed is said to be away, and its sessions are drawn so;
    // the other kiln's are not.
    alpha_daemon.kill9();
    let (_, alpha_session, _) = &asked[0];
    let away = browser
        .wait_for(
            "alpha said to be away",
            "const n = document.getElementById('kilns-away'); return !n.hidden && n.textContent.includes('alpha') && n.textContent",
        )
        .await;
    assert!(!away.as_str().unwrap().contains("beta"), "{away}");
    let drawn = browser
        .run(
            &format!(
                "const away = (id) => {{ const li = document.querySelector(`li.session[data-session-id='${{id}}']`); \
                   return li ? li.classList.contains('away') : 'no row ' + [...document.querySelectorAll('li.session')].map(l => l.dataset.sessionId + ' ' + l.textContent).join('; '); }}; \
                 return [away('{alpha_session}'), away('{beta_session}')]"
            ),
            vec![],
        )
        .await;
    assert_eq!(drawn, json!([true, false]));
    browser.close().await;
}
