//! The `podman` driver end to end, where `podman run` works. On these build machines
//! the registry is unreachable and crun refuses cgroups in hybrid mode, so the test
//! uses a root folder made here (`--image /path` is `podman run --rootfs`) with the
//! host's `/usr` mounted read-only, and a podman configuration (`CONTAINERS_CONF`)
//! with runc and open-file/process limits the machine lets it set. Where even that
//! cannot run, it prints why and stops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crucible::protocol::{MsgType, Session};

use crate::common::*;
use crate::sandbox::{agent_itself_ended_for_memory, told_then_done};
use crate::sessions::{agent_kiln, wait_message};

/// A root folder whose `/usr` (and the usual links into it) the host lends.
fn rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("rootfs");
    for sub in [
        "usr",
        "tmp",
        "etc",
        "proc",
        "dev",
        "sys",
        "run",
        "workspace",
    ] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    for (link, target) in [
        ("bin", "usr/bin"),
        ("lib", "usr/lib"),
        ("lib64", "usr/lib64"),
        ("sbin", "usr/sbin"),
    ] {
        if Path::new("/").join(link).is_symlink() || Path::new("/").join(target).exists() {
            std::os::unix::fs::symlink(target, root.join(link)).unwrap();
        }
    }
    root
}

/// `CONTAINERS_CONF` for this machine: runc, and limits podman may set here.
fn containers_conf(dir: &Path) -> PathBuf {
    let path = dir.join("containers.conf");
    std::fs::write(
        &path,
        "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\n[engine]\nruntime = \"runc\"\n",
    )
    .unwrap();
    path
}

/// Why containers cannot run here, if they cannot.
fn unavailable(conf: &Path, root: &Path) -> Option<String> {
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", conf)
        .args([
            "run",
            "--rm",
            "--network=none",
            "--volume=/usr:/usr:ro",
            "--rootfs",
        ])
        .arg(root)
        .arg("true")
        .stdin(Stdio::null())
        .output();
    match out {
        Err(e) => Some(format!("podman is not installed ({e})")),
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`podman run` fails on this machine: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// `cru session new --driver podman` of `root` with the host's `/usr` and the scripted
/// agent's folder lent read-only, and `args`.
fn contained(tk: &TestKiln, root: &Path, args: &[&str]) -> Session {
    let agent_dir = PathBuf::from(scripted_agent())
        .parent()
        .unwrap()
        .display()
        .to_string();
    let agent_mount = format!("{agent_dir}:{agent_dir}:ro");
    let mut all = vec![
        "session",
        "new",
        "--driver",
        "podman",
        "--image",
        root.to_str().unwrap(),
        "--mount",
        "/usr:/usr:ro",
        "--mount",
        &agent_mount,
        "--json",
    ];
    all.extend_from_slice(args);
    let out = tk.cru(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// A root folder and podman configuration that work here, or `None` (said) when
/// containers cannot run on this machine.
struct Podman {
    _dir: tempfile::TempDir,
    root: PathBuf,
    conf: PathBuf,
}

impl Podman {
    fn ready() -> Option<Podman> {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = rootfs(&base);
        let conf = containers_conf(&base);
        if let Some(why) = unavailable(&conf, &root) {
            eprintln!("NOT RUN: {why}");
            return None;
        }
        Some(Podman {
            _dir: dir,
            root,
            conf,
        })
    }

    /// `cru daemon run` with podman's configuration.
    fn daemon_command(&self) -> Command {
        let mut cru = Command::new(CRU);
        cru.env("CONTAINERS_CONF", &self.conf).stderr(Stdio::null());
        cru
    }
}

#[tokio::test]
async fn a_podman_session_runs_the_scripted_agent_in_a_container() {
    let Some(podman) = Podman::ready() else {
        return;
    };
    let (root, conf) = (&podman.root, &podman.conf);
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.run_daemon(podman.daemon_command()).await;
    let client = tk.client().await;
    let task = "permit p1 Write box.txt\nwrite box.txt from the container\nsay done";
    let s = contained(
        &tk,
        root,
        &[
            "--agent", "scripted", "--memory", "512", "--pids", "256", "--task", task,
        ],
    );
    let approval = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = wait_message(&client, &s.id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains("done"),
        "{done:?}"
    );
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("box.txt")).unwrap(),
        "from the container",
        "the agent wrote /workspace/box.txt; the host has it in the worktree"
    );
    // What the session costs is the container's processes (its init and the agent),
    // not `podman run`'s alone.
    let out = tk.cru(&["session", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == s.id.as_str())
        .expect("the session is listed");
    assert!(
        row["resources"]["processes"].as_u64().unwrap_or(0) >= 2,
        "{row}"
    );
    let running = Command::new("podman")
        .env("CONTAINERS_CONF", conf)
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=crucible.session={}", s.id),
        ])
        .output()
        .unwrap();
    assert!(
        !running.stdout.is_empty(),
        "the agent runs in a labelled container"
    );
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let left = Command::new("podman")
        .env("CONTAINERS_CONF", conf)
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=crucible.session={}", s.id),
        ])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "delete removes the container");
}

#[tokio::test]
async fn a_podman_session_answers_again_after_its_daemon_is_stopped_or_killed() {
    use crate::restart::{After, Gone, answers_after};
    let Some(podman) = Podman::ready() else {
        return;
    };
    let root = &podman.root;
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let daemon_command = || podman.daemon_command();
    let mut daemon = tk.run_daemon(daemon_command()).await;
    let s = contained(
        &tk,
        root,
        &["--agent", "loader", "--task", "say in the container"],
    );
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    for gone in [Gone::Stopped, Gone::Killed] {
        let after = After {
            id: &s.id,
            there: worktree.clone(),
            calls_in: true,
        };
        daemon = answers_after(&tk, &mut daemon, gone, daemon_command(), after).await;
        std::fs::remove_file(worktree.join("after.txt")).unwrap();
    }
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The memory watch reads the container's processes: an agent in a container near its
/// cap is reported, as on the host's own drivers (there `podman run` alone was read,
/// which never comes near).
#[tokio::test]
async fn an_agent_in_a_container_near_its_memory_cap_is_reported() {
    let Some(podman) = Podman::ready() else {
        return;
    };
    let root = &podman.root;
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.run_daemon(podman.daemon_command()).await;
    let client = tk.client().await;
    // 512 MiB allowed; the agent starts a program that holds 440 MiB for a while.
    let task = "spawn python3 -c x=b'a'*(440<<20);__import__('time').sleep(6)\nsay held it";
    let s = contained(
        &tk,
        root,
        &["--agent", "scripted", "--memory", "512", "--task", task],
    );
    let warned = told_then_done(
        &client,
        &s.id,
        "the memory warning",
        "Memory near its cap:",
        "held it",
    )
    .await;
    assert_eq!(warned.msg_type, MsgType::Error);
    assert!(warned.title.ends_with(" of 512 MiB"), "{}", warned.title);
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A command in a container that needs more than the session's memory cap is ended by
/// the kernel's OOM killer, and the inbox says so as it does on the host's drivers; the
/// mark podman's monitor leaves where it runs is not left in the kiln.
#[tokio::test]
async fn a_command_in_a_container_ended_for_memory_is_reported_as_out_of_memory() {
    let Some(podman) = Podman::ready() else {
        return;
    };
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    // Started in the kiln, as a person's daemon is.
    let mut daemon = podman.daemon_command();
    daemon.current_dir(tk.root());
    let _daemon = tk.run_daemon(daemon).await;
    let client = tk.client().await;
    let task = "spawn python3 -c x=b'a'*(400<<20)\nsay went on";
    let s = contained(
        &tk,
        &podman.root,
        &["--agent", "scripted", "--memory", "128", "--task", task],
    );
    let killed = told_then_done(
        &client,
        &s.id,
        "the out-of-memory report",
        "Killed: out of memory",
        "went on",
    )
    .await;
    assert_eq!(killed.title, "Killed: out of memory (cap 128 MiB)");
    assert!(
        !tk.root().join("oom").exists(),
        "podman's monitor left its mark in the person's repository"
    );
    agent_itself_ended_for_memory(&tk, &client, &s.id, 128).await;
    let out = tk.cru(&["session", "delete", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
}
