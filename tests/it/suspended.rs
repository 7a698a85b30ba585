//! A daemon stopped by a signal (`kill -STOP`): commands end saying so and how to resume
//! it instead of hanging, none advises stopping it, `cru daemon stop` still stops it, and
//! the workbench shows a banner while it does not answer, keeps taking keys, and clears
//! the banner once it answers again.

use crucible::client::ClientError;

use crate::common::*;
use crate::sessions::agent_kiln;
use crate::tmux::Tmux;

/// Continues the daemon when dropped, so that no stopped process outlives a test that
/// failed halfway (whoever kills it afterwards then finds it running).
struct Continue(u32);

impl Drop for Continue {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on the test's own daemon; nothing else is touched.
    unsafe { libc::kill(pid as i32, signal) };
}

/// Stops the daemon and waits until the system says it is stopped.
async fn suspend(pid: u32) {
    signal(pid, libc::SIGSTOP);
    wait_until(
        "the daemon to be stopped",
        std::time::Duration::from_secs(30),
        || crucible::sys::is_suspended(pid),
    )
    .await;
}

#[tokio::test]
async fn a_command_to_a_stopped_daemon_says_so_and_how_to_resume_it() {
    let tk = TestKiln::new();
    let mut daemon = tk.spawn_daemon().await;
    let pid = daemon.pid();
    let _continue = Continue(pid);
    // A connection made before the stop, with a call under way when it comes.
    let client = tk.client().await;
    suspend(pid).await;

    let resume = format!("kill -CONT {pid}");
    let err = testkit::daemon::try_call::<crucible::protocol::methods::SessionList>(
        &client,
        Default::default(),
    )
    .await
    .expect_err("a stopped daemon answers nothing");
    assert!(
        matches!(err, ClientError::Suspended { pid: p, sent: true } if p == pid),
        "{err:?}"
    );
    assert!(err.to_string().contains(&resume), "{err}");

    // Commands end, non-zero, saying what holds them and how to resume it; none says
    // there is no daemon, or advises stopping it.
    for args in [
        &["session", "list"][..],
        &["inbox"][..],
        &["daemon", "status"][..],
        &["cron", "list"][..],
    ] {
        let out = tk.cru(args);
        let said = stderr(&out);
        assert!(!out.status.success(), "cru {args:?}: {}", stdout(&out));
        assert!(
            said.contains(&format!("the daemon (pid {pid}) is stopped (suspended)"))
                && said.contains(&resume),
            "cru {args:?}: {said}"
        );
        for wrong in ["daemon stop", "kill it", "no daemon", "could not start"] {
            assert!(
                !said.contains(wrong) && !stdout(&out).contains(wrong),
                "cru {args:?} says {wrong:?}: {said}"
            );
        }
    }
    assert!(crucible::sys::is_suspended(pid), "nothing continued it");

    // Continued, it answers the same connection again.
    signal(pid, libc::SIGCONT);
    let listed = testkit::daemon::try_call::<crucible::protocol::methods::SessionList>(
        &client,
        Default::default(),
    )
    .await
    .expect("a continued daemon answers");
    // A typed reply holds `sessions` by construction: decoding it is the check.
    let _ = listed.sessions;

    // Asked to stop while stopped, it stops (it is continued to act on the signal).
    suspend(pid).await;
    let out = tk.cru(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("daemon stopped"), "{}", stdout(&out));
    let status = daemon.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(status.success(), "it stopped as asked: {status}");
}

/// A workbench on the kiln, in a terminal of its own.
fn workbench(name: &str, tk: &TestKiln) -> Tmux {
    let root = tk.root().display().to_string();
    Tmux::start(
        name,
        (120, 30),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        CRU,
        &[],
    )
}

#[test]
fn the_workbench_shows_a_stopped_daemon_and_clears_the_banner_once_it_answers() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let term = workbench("suspended", &tk);
    term.wait_text("no sessions — /new creates one");
    let pid = tk.daemon_pid().expect("the workbench started a daemon");
    let _continue = Continue(pid);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(suspend(pid));

    // A key while it is stopped: the banner names it and how to resume it.
    term.type_text("x");
    let banner = format!("the daemon (pid {pid}) is stopped (suspended)");
    let screen = term.wait_text(&banner);
    assert!(screen.contains(&format!("kill -CONT {pid}")), "{screen}");
    assert!(!screen.contains("daemon gone"), "{screen}");
    // It keeps drawing and taking keys meanwhile.
    term.type_text("yz");
    term.wait_text("xyz");

    // Continued: it answers, and the banner goes without a key.
    signal(pid, libc::SIGCONT);
    let screen = term.wait_for("the banner to clear", |s| !s.contains(&banner));
    assert!(screen.contains("xyz"), "{screen}");
    assert!(!term.exited(), "{screen}");

    // Opened while it is stopped, a workbench says so (it starts no other daemon), and
    // still quits.
    runtime.block_on(suspend(pid));
    let late = workbench("suspended-late", &tk);
    let screen = late.wait_text(&banner);
    assert!(!screen.contains("daemon gone"), "{screen}");
    late.keys(&["C-q"]);
    late.wait_for("cru to exit", |_| late.exited());
    assert_eq!(tk.daemon_pid(), Some(pid));

    // Another opened while it is stopped fills in once it is continued.
    let later = workbench("suspended-later", &tk);
    later.wait_text(&banner);
    signal(pid, libc::SIGCONT);
    let screen = later.wait_for("the state read", |s| {
        !s.contains(&banner) && s.contains("no sessions — /new creates one")
    });
    assert!(!screen.contains("daemon gone"), "{screen}");
    assert_eq!(tk.daemon_pid(), Some(pid));
    later.keys(&["C-q"]);
    later.wait_for("cru to exit", |_| later.exited());
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}
