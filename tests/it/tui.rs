//! The workbench end to end: the real `cru` binary in a real terminal (tmux) on a temp
//! kiln, with the scripted ACP agent, read back with `capture-pane` at every step.

use crucible::protocol::methods as m;
use crucible::protocol::{RegisterParams, SessionListParams};
use serde_json::Value;

use crate::common::*;
use crate::sessions::agent_kiln;
use crate::tmux::Tmux;

fn open(name: &str, tk: &TestKiln, size: (u16, u16)) -> Tmux {
    let root = tk.root().display().to_string();
    Tmux::start(
        name,
        size,
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    )
}

/// The session ids, oldest first.
fn session_ids(tk: &TestKiln) -> Vec<String> {
    let out = tk.cru(&["session", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let mut ids: Vec<String> = list
        .as_array()
        .expect("an array")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

/// The status bar: the screen's last non-empty line.
fn status_bar(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

#[test]
fn two_sessions_an_approval_from_the_inbox_pane_and_a_second_terminal() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let one = open("main", &tk, (120, 30));
    one.wait_text("no sessions — /new creates one");

    // Two sessions with /new; the newest is focused.
    one.type_text("/new --agent scripted say hello from one");
    one.keys(&["Enter"]);
    one.wait_text("hello from one");
    one.wait_for("session 1 done", |s| {
        status_bar(s).contains("[1]") && status_bar(s).contains("●done")
    });
    one.type_text("/new --agent scripted");
    one.keys(&["Enter"]);
    let screen = one.wait_for("session 2 focused", |s| status_bar(s).contains("▸[2]"));
    assert!(status_bar(&screen).contains(" [1] "), "{screen}");

    // Switch with keys: Alt-1 focuses session 1 and shows its transcript.
    one.keys(&["M-1"]);
    let screen = one.wait_for("session 1 focused", |s| status_bar(s).contains("▸[1]"));
    assert!(screen.contains("hello from one"), "{screen}");

    // A second terminal on the same kiln shows the same sessions.
    let two = open("second", &tk, (80, 24));
    two.wait_for("both sessions in the second terminal", |s| {
        let bar = status_bar(s);
        bar.contains("[1]") && bar.contains("[2]")
    });

    // Session 2 (not focused) asks for permission: the bar flags it, the inbox shows it.
    let ids = session_ids(&tk);
    assert_eq!(ids.len(), 2);
    let out = tk.cru(&["session", "send", &ids[1], "permit p1 Run the deploy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let screen = one.wait_for("the flagged waiting session", |s| {
        status_bar(s).contains("![2]") && status_bar(s).contains("●waiting")
    });
    assert!(
        screen.contains("Run the deploy"),
        "the inbox lists it:\n{screen}"
    );
    two.wait_text("Run the deploy");

    // Approve it from the inbox pane: F2 gives the pane the keyboard, Enter opens the
    // selected (newest) message and `a` approves it. The agent goes on and reports back.
    one.keys(&["F2"]);
    one.wait_text("enter open to answer");
    one.keys(&["Enter"]);
    one.wait_text("approve/deny");
    one.keys(&["a"]);
    let screen = one.wait_text("Done: permit p1 Run the deploy");
    assert!(screen.contains("Run the deploy → Allow"), "{screen}");
    // The answer given in one terminal shows in the other.
    two.wait_text("Done: permit p1");
    two.wait_for("the approval answered in the second terminal", |s| {
        !s.contains("approval required")
    });

    one.keys(&["M-2"]);
    let screen = one.wait_text("granted: Run the deploy");
    assert!(status_bar(&screen).contains("▸[2]"), "{screen}");
    assert!(!status_bar(&screen).contains("●waiting"), "{screen}");

    // Quit: the program ends and the terminal is back on the normal screen.
    one.keys(&["C-q"]);
    one.wait_for("cru to exit", |_| one.exited());
    assert!(
        !one.alternate_screen(),
        "the terminal was left on the alternate screen"
    );
    // The agents live on in the daemon: the other terminal still sees both sessions.
    assert!(status_bar(&two.screen()).contains("[2]"));
}

#[test]
fn the_daemon_going_away_shows_a_banner_and_the_workbench_reconnects() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let term = open("banner", &tk, (80, 24));
    term.wait_text("no sessions — /new creates one");
    term.type_text("/new --agent scripted say still here");
    term.keys(&["Enter"]);
    term.wait_for("the session done", |s| {
        status_bar(s).contains("[1]") && status_bar(s).contains("●done")
    });

    // A broken settings edit is reported, and the last good settings stay in use.
    let settings = tk.kiln.settings_path();
    let good = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(&settings, format!("{good}\n[tui]\ncolour = \"red\"\n")).unwrap();
    let screen = term.wait_text("keeping the previous ones");
    assert!(
        screen.contains("colour"),
        "the error names the key:\n{screen}"
    );

    // The daemon dies; with the settings broken no new one can start, so the banner
    // stays up and cru keeps running.
    let pid = tk.daemon_pid().expect("a daemon");
    // SAFETY: kill(2) on the test's own daemon; nothing else is touched.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let screen = term.wait_text("daemon gone");
    assert!(
        !term.exited(),
        "cru survived the daemon going away:\n{screen}"
    );
    // Mended settings: the workbench reconnects (starting a daemon) and reads it all again.
    std::fs::write(&settings, &good).unwrap();
    let screen = term.wait_for("reconnected", |s| {
        !s.contains("daemon gone") && s.contains("still here")
    });
    assert!(status_bar(&screen).contains("[1]"), "{screen}");
    assert_ne!(tk.daemon_pid(), Some(pid));

    // Tiny terminals get a clear message instead of a broken layout.
    term.resize(30, 6);
    term.wait_text("too small");
    term.resize(80, 24);
    term.wait_text("still here");
    term.keys(&["C-c"]);
    term.wait_for("cru to exit", |_| term.exited());
}

#[test]
fn the_screen_is_drawn_before_the_daemon_answers_and_fills_in_after() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    // Something holds the kiln's socket and does not answer (a daemon still opening its
    // database, say): the workbench must not wait for it to draw.
    tk.kiln.ensure_state_dir().unwrap();
    let listener = std::os::unix::net::UnixListener::bind(tk.kiln.socket_path()).unwrap();
    let term = open("connecting", &tk, (80, 24));
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let held = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(_) if std::time::Instant::now() < deadline && !term.exited() => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("the workbench never connected: {e}"),
        }
    };
    let screen = term.wait_text("connecting…");
    assert!(screen.contains("┌ transcript"), "{screen}");
    assert!(!screen.contains("no sessions"), "{screen}");
    // It goes away without answering: the workbench starts a daemon and fills in.
    drop(held);
    drop(listener);
    let screen = term.wait_text("no sessions — /new creates one");
    assert!(!screen.contains("connecting…"), "{screen}");
    assert!(tk.daemon_pid().is_some(), "a daemon was started");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

#[test]
fn embedded_runs_the_daemon_inside_cru_and_stops_it_on_quit() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let root = tk.root().display().to_string();
    let term = Tmux::start(
        "embedded",
        (100, 24),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &["--embedded"],
    );
    term.wait_text("no sessions — /new creates one");
    let pid = tk
        .daemon_pid()
        .expect("the embedded daemon holds the pid file");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--embedded"),
        "the daemon is the workbench's own process, not a separate one"
    );
    term.type_text("/new --agent scripted say inside one process");
    term.keys(&["Enter"]);
    // The typed line shows "inside one process" too: wait for the finished session.
    term.wait_for("the session done", |s| {
        status_bar(s).contains("[1]") && status_bar(s).contains("●done")
    });
    // Other commands still reach it while it runs.
    let out = tk.cru(&["session", "list"]);
    assert!(stdout(&out).contains("scripted"), "{}", stderr(&out));

    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
    assert_eq!(tk.daemon_pid(), None, "no daemon is left behind");
}

#[test]
fn reset_in_the_workbench_starts_a_fresh_session_and_keeps_the_old_one() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let term = open("reset", &tk, (120, 30));
    term.wait_text("no sessions — /new creates one");
    term.type_text("/new --agent scripted write .env A=1");
    term.keys(&["Enter"]);
    term.wait_for("session 1 done", |s| status_bar(s).contains("●done"));
    let old = session_ids(&tk).remove(0);
    // Give it some security state: a read of .env activates the exfil rule.
    let out = tk.cru(&["session", "send", &old, "read .env"]);
    assert!(out.status.success(), "{}", stderr(&out));
    term.wait_text("read .env: A=1");
    let before = stdout(&tk.cru(&["session", "security", &old]));
    assert!(before.contains("no-exfil-after-sensitive"), "{before}");

    term.type_text("/reset");
    term.keys(&["Enter"]);
    let screen = term.wait_for("the new session focused", |s| {
        status_bar(s).contains("▸[2]")
    });
    let ids = session_ids(&tk);
    assert_eq!(ids.len(), 2, "{screen}");
    let new = ids.into_iter().find(|id| id != &old).unwrap();
    let status = stdout(&tk.cru(&["session", "status", &old]));
    assert!(
        status.contains("stopped") && status.contains("reset"),
        "{status}"
    );
    let logs = stdout(&tk.cru(&["session", "logs", &old]));
    assert!(
        logs.contains("wrote .env"),
        "the old transcript is still readable: {logs}"
    );
    let security = stdout(&tk.cru(&["session", "security", &new]));
    assert!(
        security.contains("activated rules:      none")
            && security.contains("approved operations:  none"),
        "{security}"
    );
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

#[test]
fn a_workbench_opened_on_broken_settings_says_why_and_answers_the_waiting_agent() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    // An agent waits for an approval, then the settings get a typo.
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--task",
        "permit p1 Run the deploy",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !stdout(&tk.cru(&["inbox"])).contains("Run the deploy") {
        assert!(std::time::Instant::now() < deadline, "no approval asked");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let settings = tk.kiln.settings_path();
    let good = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(
        &settings,
        format!("{good}\n[agents.typo]\ncomand = \"sh\"\n"),
    )
    .unwrap();

    // The workbench opens on the daemon's last good settings, the error in a banner.
    let term = open("broken", &tk, (120, 30));
    let screen = term.wait_text("Run the deploy");
    let banner = screen.lines().next().unwrap_or_default();
    assert!(
        banner.contains("settings: .crucible.toml, line 13, column 1: unknown field `comand`")
            && banner.contains("the last good ones stay in use"),
        "{screen}"
    );

    // The waiting agent is answered from the inbox pane, and goes on.
    term.keys(&["F2"]);
    term.wait_text("enter open to answer");
    term.keys(&["Enter"]);
    term.wait_text("approve/deny");
    term.keys(&["a"]);
    term.wait_text("granted: Run the deploy");

    // Mended: the banner goes.
    std::fs::write(&settings, &good).unwrap();
    term.wait_for("the banner to go", |s| {
        !s.contains("the last good ones stay")
    });
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}

#[test]
fn a_prompt_typed_while_the_agent_waits_for_an_answer_says_it_is_queued() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let one = open("queued", &tk, (120, 30));
    one.wait_text("no sessions — /new creates one");
    one.type_text("/new --agent scripted permit p1 Run the deploy");
    one.keys(&["Enter"]);
    one.wait_for("the session waiting", |s| {
        status_bar(s).contains("●waiting")
    });
    one.type_text("say tidied");
    one.keys(&["Enter"]);
    let screen = one.wait_text("queued: the agent waits for your answer first");
    assert!(status_bar(&screen).contains("●waiting"), "{screen}");
    one.keys(&["C-q"]);
    one.wait_for("cru to exit", |_| one.exited());
}

#[tokio::test(flavor = "multi_thread")]
async fn more_sessions_than_the_first_page_are_all_there_once_the_rest_is_read() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.daemon().await;
    // Registered sessions (no agent to start): more than the workbench reads first.
    for n in 0..70 {
        client
            .call::<m::SessionRegister>(RegisterParams {
                worktree: Some(format!("/src/w{n}")),
                agent_type: "acp".into(),
                agent_name: "claude".into(),
            })
            .await;
    }
    // The daemon answers a first page when asked for one, the oldest first.
    let page = client
        .call::<m::SessionList>(SessionListParams {
            limit: Some(3),
            ..SessionListParams::default()
        })
        .await;
    let all = client
        .call::<m::SessionList>(SessionListParams::default())
        .await;
    assert_eq!(all.sessions.len(), 70);
    let ids = |list: &[crucible::protocol::Session]| -> Vec<String> {
        list.iter().map(|s| s.id.clone()).collect()
    };
    assert_eq!(ids(&page.sessions), ids(&all.sessions[..3]));

    let term = open("first-page", &tk, (120, 30));
    term.wait_for("session 1 focused", |s| status_bar(s).contains("▸[1]"));
    // The 70th is past the first page: it is there once the rest is read.
    // Typed at once: carried out against every session, held if the rest is still
    // being read, never refused.
    term.type_text("/goto 70");
    term.keys(&["Enter"]);
    let screen = term.wait_for("session 70 focused", |s| {
        status_bar(s).contains("▸[70]") || s.contains("no session [70]")
    });
    assert!(status_bar(&screen).contains("▸[70]"), "{screen}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}
