//! The `qemu` driver end to end, where QEMU and a kernel to boot are here: the scripted
//! agent runs in a microVM (TCG where KVM does not work), writes in its worktree, does
//! not see the daemon's `$HOME`, cannot write elsewhere on the host, has no network
//! unless asked, comes back after its daemon is killed, and leaves no QEMU behind once
//! its session is deleted. Where QEMU or a kernel is missing, it prints why and stops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crucible::protocol::{Session, SessionState};

use crate::common::*;
use crate::sessions::{agent_kiln, said, wait_state};

/// A `$HOME` for the daemon with a secret in it, or `None` (said) when no microVM can
/// boot here.
struct Qemu {
    home: tempfile::TempDir,
}

impl Qemu {
    fn ready() -> Option<Qemu> {
        let qemu = Command::new("qemu-system-x86_64")
            .arg("--version")
            .stdin(Stdio::null())
            .output();
        if !qemu.is_ok_and(|o| o.status.success()) {
            eprintln!("NOT RUN: qemu-system-x86_64 is not installed");
            return None;
        }
        let kernel = std::fs::read_dir("/boot").ok().is_some_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("vmlinuz-"))
        });
        if !kernel {
            eprintln!("NOT RUN: no kernel in /boot to boot");
            return None;
        }
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("secret.txt"), "the-host-secret").unwrap();
        Some(Qemu { home })
    }

    fn home(&self) -> PathBuf {
        self.home.path().canonicalize().unwrap()
    }

    /// `cru daemon run` with that `$HOME`.
    fn daemon_command(&self) -> Command {
        let mut cru = Command::new(CRU);
        cru.env("HOME", self.home()).stderr(Stdio::null());
        cru
    }
}

/// A kiln with the scripted agents, its daemon (with the `$HOME` of [`Qemu`]) and a
/// client; dropped in this order.
struct Running {
    client: crucible::client::Client,
    _daemon: testkit::DaemonProcess,
    _guard: KillOnDrop,
    tk: TestKiln,
}

impl Qemu {
    async fn running(&self) -> Running {
        let tk = agent_kiln("");
        let guard = KillOnDrop(tk.kiln.clone());
        let daemon = tk.run_daemon(self.daemon_command()).await;
        Running {
            client: tk.client().await,
            _daemon: daemon,
            _guard: guard,
            tk,
        }
    }
}

/// `cru session new --driver qemu` with `args`.
fn in_vm(tk: &TestKiln, args: &[&str]) -> Session {
    let mut all = vec!["session", "new", "--driver", "qemu", "--json"];
    all.extend_from_slice(args);
    let out = tk.cru(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// The pids of the QEMUs of session `id` (named `crucible-<id>`).
fn qemus_of(id: &str) -> Vec<u32> {
    let wanted = format!("crucible-{id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == wanted.as_bytes()))
        })
        .collect()
}

/// Waits until session `id` has no QEMU left, and says whether that came.
async fn no_qemu_left(id: &str) -> bool {
    for _ in 0..100 {
        if qemus_of(id).is_empty() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn a_qemu_session_runs_the_agent_in_a_microvm_with_only_its_worktree_writable() {
    let Some(qemu) = Qemu::ready() else {
        return;
    };
    let Running { client, tk, .. } = &qemu.running().await;
    // A port on the host the guest must not reach without the network.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let home = qemu.home();
    let kiln_root = tk.root().canonicalize().unwrap();
    let task = format!(
        "spawn touch made-inside.txt\n\
         spawn cat {home}/secret.txt\n\
         spawn touch {kiln}/outside.txt\n\
         spawn touch /usr/crucible-was-here\n\
         spawn socat -u OPEN:/dev/null TCP:10.0.2.2:{port},connect-timeout=3\n\
         say done",
        home = home.display(),
        kiln = kiln_root.display(),
    );
    let s = in_vm(
        tk,
        &["--agent", "scripted", "--memory", "512", "--task", &task],
    );
    wait_state(client, &s.id, SessionState::Complete).await;
    let text = said(client, &s.id).await;
    assert!(text.contains("done"), "{text}");
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    assert!(
        worktree.join("made-inside.txt").exists(),
        "the agent's file is in the worktree on the host: {text}"
    );
    assert!(
        !text.contains("the-host-secret"),
        "the daemon's $HOME is not the guest's: {text}"
    );
    assert!(
        !Path::new(&kiln_root).join("outside.txt").exists(),
        "nothing outside the worktree reaches the host"
    );
    assert!(
        !Path::new("/usr/crucible-was-here").exists() && text.contains("Read-only"),
        "the host's root is read-only inside: {text}"
    );
    let socat = text
        .lines()
        .find(|l| l.contains("spawned socat"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !socat.is_empty() && !socat.contains("exit 0"),
        "no network unless asked: {text}"
    );
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "the host's port was not reached"
    );
    let out = tk.cru(&["session", "status", &s.id]);
    assert!(stdout(&out).contains("accel"), "{}", stdout(&out));
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(no_qemu_left(&s.id).await, "delete ends the session's QEMU");
}

#[tokio::test]
async fn a_qemu_session_answers_again_after_its_daemon_is_killed() {
    use crate::restart::{After, Gone, answers_after};
    let Some(qemu) = Qemu::ready() else {
        return;
    };
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.run_daemon(qemu.daemon_command()).await;
    let s = in_vm(&tk, &["--agent", "loader", "--task", "say in the vm"]);
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    let after = After {
        id: &s.id,
        there: worktree.clone(),
        calls_in: true,
    };
    daemon = answers_after(&tk, &mut daemon, Gone::Killed, qemu.daemon_command(), after).await;
    assert_eq!(qemus_of(&s.id).len(), 1, "one QEMU: the old one was ended");
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(no_qemu_left(&s.id).await, "delete ends the session's QEMU");
    drop(daemon);
}

/// Asked for the network, the guest reaches the host (QEMU's user network forwards
/// 10.0.2.2 to the host's loopback); the session's process limit holds inside; the
/// guest's figures for its agent are what `session list` gives.
#[tokio::test]
async fn a_qemu_session_with_the_network_reaches_the_host_within_its_process_limit() {
    let Some(qemu) = Qemu::ready() else {
        return;
    };
    let Running { client, tk, .. } = &qemu.running().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = format!(
        "spawn socat -u OPEN:/dev/null TCP:10.0.2.2:{port},connect-timeout=20\n\
         write fork.sh for i in 1 2 3 4 5 6 7 8 9; do sleep 5 & done; wait; echo forked\n\
         spawn sh fork.sh\n\
         say done"
    );
    let s = in_vm(
        tk,
        &[
            "--agent",
            "scripted",
            "--network",
            "host",
            "--pids",
            "6",
            "--task",
            &task,
        ],
    );
    wait_state(client, &s.id, SessionState::Complete).await;
    let text = said(client, &s.id).await;
    assert!(text.contains("spawned socat"), "{text}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "with the network the guest reached the host's port: {text}"
    );
    assert!(
        text.contains("Cannot fork") && !text.contains("forked"),
        "six processes at most: {text}"
    );
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(
        status.contains("pids 6 (a pids cgroup in the guest)"),
        "{status}"
    );
    // At rest, the guest answers for its agent: one process, its memory resident.
    let listed: Vec<Session> =
        serde_json::from_str(&stdout(&tk.cru(&["session", "list", "--json"]))).unwrap();
    let figures = listed
        .iter()
        .find(|l| l.id == s.id)
        .and_then(|l| l.resources.clone())
        .expect("the guest's figures");
    assert_eq!(figures.processes, 1, "{figures:?}");
    assert!(figures.rss_bytes > 1 << 20, "{figures:?}");
}

/// A capped guest: its agent's tree near the cap is reported while the turn runs, a
/// command the guest's OOM killer ends is reported in those words and the agent goes
/// on; an agent that is itself ended for memory ends its session saying so, never as
/// an exit.
#[tokio::test]
async fn a_capped_qemu_session_is_warned_then_told_out_of_memory() {
    use crucible::protocol::MsgType;
    let Some(qemu) = Qemu::ready() else {
        return;
    };
    let Running { client, tk, .. } = &qemu.running().await;
    // 1024 MiB of guest: hold 850 (past 80%), then grow a MiB at a time past it all.
    let task = "write near.py import time\\nx = b'a' * (850 << 20)\\ntime.sleep(6)\n\
                write past.py x = []\\nfor _ in range(1500): x.append(b'a' * (1 << 20))\n\
                spawn python3 near.py\n\
                spawn python3 past.py\n\
                say went on";
    let s = in_vm(
        tk,
        &["--agent", "scripted", "--memory", "1024", "--task", task],
    );
    let warned = crate::sandbox::told_then_done(
        client,
        &s.id,
        "the memory warning",
        "Memory near its cap:",
        "went on",
    )
    .await;
    assert!(warned.title.ends_with(" of 1024 MiB"), "{}", warned.title);
    let killed = crate::sessions::wait_message_where(client, &s.id, "the OOM report", |m| {
        m.title.starts_with("Killed: out of memory")
    })
    .await;
    assert_eq!(killed.msg_type, MsgType::Error);
    assert_eq!(killed.title, "Killed: out of memory (cap 1024 MiB)");
    crate::sandbox::agent_itself_ended_for_memory(tk, client, &s.id, 1024).await;
}
