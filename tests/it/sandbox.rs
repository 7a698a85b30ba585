//! The `sandbox` driver for real: sessions whose agent runs under bubblewrap, checked
//! from inside (what the agent could see and do) and from the host (what it left).
//! Skipped with a printed reason where `bwrap` cannot make a sandbox (`.ci/run`
//! installs it).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crucible::protocol::{MsgType, Session, SessionState};
use serde_json::Value;

use crate::common::*;
use crate::sessions::{agent_kiln, git, said, wait_message, wait_message_where, wait_state};

const SECRET_NAME: &str = "CRUCIBLE_TEST_SANDBOX_SECRET";
const SECRET_VALUE: &str = "s3cr3t-value-that-must-not-leak-7f1c";
const OTHER_NAME: &str = "CRUCIBLE_TEST_SANDBOX_OTHER";

pub(crate) fn bwrap_works() -> bool {
    let ok = Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("NOT RUN: bwrap is missing or cannot make a sandbox here (install bubblewrap)");
    }
    ok
}

/// The host side of one test: a fake `$HOME` with a private file, a folder outside the
/// kiln with another, a TCP listener on 127.0.0.1, and the agent script in a folder of
/// its own.
struct Host {
    _dir: tempfile::TempDir,
    home: PathBuf,
    outside: PathBuf,
    script: PathBuf,
    port: u16,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let outside = root.join("outside");
        let agent = root.join("agent");
        for d in [&home, &outside, &agent] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(home.join("id_secret"), "home secret\n").unwrap();
        std::fs::write(outside.join("outside.txt"), "outside secret\n").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut sink = [0u8; 64];
                let _ = stream.read(&mut sink);
            }
        });
        let script = agent.join("agent.sh");
        Host {
            _dir: dir,
            home,
            outside,
            script,
            port,
        }
    }

    /// Writes the agent script, which checks what it can see of `kiln`.
    fn write_script(&self, kiln: &Path) {
        write_script(
            &self.script,
            &script_text(&self.home, &self.outside, self.port, kiln),
        );
    }

    /// `cru daemon run` with this `$HOME` and the two variables in its environment.
    async fn daemon(&self, tk: &TestKiln) -> DaemonProcess {
        let mut cru = Command::new(CRU);
        cru.env("HOME", &self.home)
            .env(SECRET_NAME, SECRET_VALUE)
            .env(OTHER_NAME, "other-value")
            .stderr(Stdio::null());
        tk.run_daemon(cru).await
    }
}

/// A command agent that reports, one `CHECK name result` line each, what it can do.
/// The prompt says which checks to run: `all` or `net`.
fn script_text(home: &Path, outside: &Path, port: u16, kiln: &Path) -> String {
    let kiln = kiln.display();
    let home = home.display();
    let outside = outside.display();
    format!(
        r#"#!/bin/sh
read -r what
net() {{
  if python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)" 2>/dev/null; then
    echo "CHECK net connected"
  else
    echo "CHECK net refused"
  fi
}}
if [ "$what" = net ]; then net; exit 0; fi
echo "made in the sandbox" > sandbox.txt
git add sandbox.txt && git -c user.name=agent -c user.email=agent@example.com commit -qm "from the sandbox" && echo "CHECK commit ok"
if cat "{home}/id_secret" >/dev/null 2>&1; then echo "CHECK home readable"; else echo "CHECK home unreadable"; fi
if cat "$HOME/id_secret" >/dev/null 2>&1; then echo "CHECK HOME readable"; else echo "CHECK HOME unreadable"; fi
if cat "{outside}/outside.txt" >/dev/null 2>&1; then echo "CHECK outside readable"; else echo "CHECK outside unreadable"; fi
if touch "{outside}/created.txt" 2>/dev/null; then echo "CHECK outside writable"; else echo "CHECK outside unwritable"; fi
touch "{home}/created.txt" 2>/dev/null
net
if [ -n "${SECRET_NAME}" ]; then echo "CHECK secret set ${{#{SECRET_NAME}}}"; else echo "CHECK secret unset"; fi
if [ -n "${OTHER_NAME}" ]; then echo "CHECK other set"; else echo "CHECK other unset"; fi
if python3 -c "b = bytearray(400 * 1024 * 1024); b[-1] = 1" 2>/dev/null; then echo "CHECK alloc ok"; else echo "CHECK alloc stopped"; fi
answer=$(cru ask "Which way?" --option left --option right)
echo "CHECK ask $answer"
python3 - <<'PY'
import json, os, socket
def call(path, request):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except OSError as e:
        return "cannot connect: %s" % e.strerror
    s.sendall((json.dumps(request) + "\n").encode())
    s.settimeout(5)
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.decode().strip() or "nothing"
bare = call(os.environ["CRUCIBLE_SOCKET"], {{"jsonrpc": "2.0", "id": 1, "method": "session.list"}})
print("CHECK bare " + ("sessions" if '"sessions"' in bare else "refused"))
PY
if [ -e "{kiln}/.crucible/daemon.sock" ] || ls /run/crucible | grep -q daemon; then echo "CHECK owner visible"; else echo "CHECK owner absent"; fi
if [ -e "{kiln}/.crucible/db" ]; then echo "CHECK db visible"; else echo "CHECK db absent"; fi
"#
    )
}

fn checks(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("CHECK "))
        .map(str::to_string)
        .collect()
}

fn cru_json(tk: &TestKiln, args: &[&str]) -> Value {
    let out = tk.cru(args);
    assert!(out.status.success(), "cru {args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("JSON")
}

#[tokio::test]
async fn a_sandboxed_script_keeps_to_its_worktree_and_reaches_only_its_own_inbox() {
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    let tk = agent_kiln(&format!(
        "[agents.boxed]\ntype = \"command\"\ncommand = {:?}\n",
        host.script.display().to_string()
    ));
    host.write_script(tk.root());
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let client = tk.client().await;

    let created = cru_json(
        &tk,
        &[
            "session",
            "new",
            "--agent",
            "boxed",
            "--driver",
            "sandbox",
            "--env",
            SECRET_NAME,
            "--memory",
            "128",
            "--pids",
            "200",
            "--task",
            "all",
            "--json",
        ],
    );
    let s: Session = serde_json::from_value(created).unwrap();
    let spec = s.driver.clone().expect("the driver is recorded");
    assert_eq!(spec.kind().as_str(), "sandbox");
    assert_eq!(spec.env(), [SECRET_NAME]);

    let question = wait_message(&client, &s.id, MsgType::DecisionNeeded).await;
    assert_eq!(question.title, "Which way?");
    let out = tk.cru(&["inbox", "respond", &question.id, "right"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    let seen = checks(&text);
    let expect = [
        "commit ok",
        "home unreadable",
        "HOME unreadable",
        "outside unreadable",
        "outside unwritable",
        "net refused",
        &format!("secret set {}", SECRET_VALUE.len()),
        "other unset",
        "alloc stopped",
        "ask right",
        "bare refused",
        "owner absent",
        "db absent",
    ];
    for check in expect {
        assert!(
            seen.iter().any(|c| c == check),
            "no `{check}` in {seen:?}\n{text}"
        );
    }

    // On the host: the commit is on the session's branch, the host paths are untouched.
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    assert_eq!(
        git(&worktree, &["log", "-1", "--format=%s"]),
        "from the sandbox"
    );
    assert!(!host.outside.join("created.txt").exists());
    assert!(!host.home.join("created.txt").exists());

    // Status says where it runs and which limits hold.
    let status = tk.cru(&["session", "status", &s.id]);
    let status = stdout(&status);
    assert!(
        status.contains("driver") && status.contains("sandbox"),
        "{status}"
    );
    assert!(status.contains("memory 128 MiB"), "{status}");

    // A command run through crucible runs in the same sandbox, and is audited.
    let out = tk.cru(&[
        "session",
        "exec",
        &s.id,
        "--",
        "sh",
        "-c",
        &format!(
            "cat {}/outside.txt || echo no-outside; pwd",
            host.outside.display()
        ),
    ]);
    let exec_out = stdout(&out);
    assert!(exec_out.contains("no-outside"), "{exec_out}");
    assert!(exec_out.contains(worktree.to_str().unwrap()), "{exec_out}");

    // The audit log lists each action, env by name only.
    let audit = cru_json(&tk, &["session", "audit", &s.id, "--json"]);
    let events: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    for event in ["start", "prompt", "state", "command"] {
        assert!(events.contains(&event), "no {event} in {events:?}");
    }
    let start = &audit[0];
    assert_eq!(start["event"], "start");
    assert_eq!(start["driver"], "sandbox");
    assert_eq!(start["network"], "none");
    assert_eq!(start["env"][0], SECRET_NAME);
    assert!(
        start["limits"].to_string().contains("memory 128 MiB"),
        "{start}"
    );

    // The second session asks for the host's network, and gets it.
    let created = cru_json(
        &tk,
        &[
            "session",
            "new",
            "--agent",
            "boxed",
            "--driver",
            "sandbox",
            "--network",
            "host",
            "--task",
            "net",
            "--json",
        ],
    );
    let net: Session = serde_json::from_value(created).unwrap();
    wait_message(&client, &net.id, MsgType::TaskComplete).await;
    let seen = checks(&said(&client, &net.id).await);
    assert_eq!(seen, ["net connected"], "port {}", host.port);

    // No secret value in any file crucible keeps.
    assert_in_no_file(&tk.root().join(".crucible"), SECRET_VALUE);
    let _ = wait_state(&client, &net.id, SessionState::Complete).await;
}

#[tokio::test]
async fn the_scripted_acp_agent_works_in_a_sandbox() {
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    let tk = agent_kiln("[drivers.sandbox]\nmemory = 512\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let client = tk.client().await;
    let task = "say starting\npermit p1 Write notes.txt\nwrite notes.txt hello from the sandbox\nsay finished";
    let created = cru_json(
        &tk,
        &[
            "session", "new", "--agent", "scripted", "--driver", "sandbox", "--task", task,
            "--json",
        ],
    );
    let s: Session = serde_json::from_value(created).unwrap();
    let approval = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = wait_message(&client, &s.id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains("finished"),
        "{done:?}"
    );
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "hello from the sandbox"
    );
    let s = wait_state(&client, &s.id, SessionState::Complete).await;
    assert!(
        s.limits.iter().any(|l| l.starts_with("memory 512 MiB")),
        "the [drivers.sandbox] default applies: {:?}",
        s.limits
    );
    let audit = cru_json(&tk, &["session", "audit", &s.id, "--json"]);
    let events: Vec<String> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["event"].as_str().unwrap().to_string())
        .collect();
    for event in [
        "start",
        "prompt",
        "permission_asked",
        "permission_answered",
        "file_write",
        "state",
    ] {
        assert!(
            events.iter().any(|e| e == event),
            "no {event} in {events:?}"
        );
    }
}

/// A scripted-agent session on the sandbox driver with `--memory <mib>`, on `task`.
fn capped_session(tk: &TestKiln, mib: &str, task: &str) -> Session {
    let created = cru_json(
        tk,
        &[
            "session", "new", "--agent", "scripted", "--driver", "sandbox", "--memory", mib,
            "--task", task, "--json",
        ],
    );
    serde_json::from_value(created).unwrap()
}

/// The agent itself grows past the session's cap: the kernel ends it, and its session
/// says so, never as an exit or a signal alone.
pub(crate) async fn agent_itself_ended_for_memory(
    tk: &TestKiln,
    client: &crucible::client::Client,
    id: &str,
    cap_mib: u64,
) {
    let out = tk.cru(&["session", "send", id, &format!("hog {}", cap_mib * 3)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ended = crate::sessions::wait_session(client, id, "the agent's end", |s| {
        s.state_reason
            .as_deref()
            .is_some_and(|r| r.contains("out of memory"))
    })
    .await;
    let reason = ended.state_reason.unwrap_or_default();
    assert!(
        reason.contains(&format!("was killed: out of memory (cap {cap_mib} MiB)")),
        "{reason}"
    );
}

/// Waits for the session's message whose title starts with `title` (`what` names it),
/// then for its task to complete with `said` in its report; returns that message.
pub(crate) async fn told_then_done(
    client: &crucible::client::Client,
    id: &str,
    what: &str,
    title: &str,
    said: &str,
) -> crucible::protocol::InboxMessage {
    let told = wait_message_where(client, id, what, |m| m.title.starts_with(title)).await;
    let done = wait_message(client, id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains(said),
        "{done:?}"
    );
    told
}

#[tokio::test]
async fn an_agent_near_its_memory_cap_is_reported_before_the_kernel_ends_it() {
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let client = tk.client().await;
    // 512 MiB allowed; the agent starts a program that holds 440 MiB for a while.
    let task = "spawn python3 -c x=b'a'*(440<<20);__import__('time').sleep(6)\nsay held it";
    let s = capped_session(&tk, "512", task);
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
    // Said once: at rest nothing is watched, and the warning is not repeated.
    let messages = testkit::daemon::call::<crucible::protocol::methods::InboxList>(
        &client,
        crucible::protocol::ListParams {
            session_id: Some(s.id.clone()),
            ..Default::default()
        },
    )
    .await;
    let warnings = messages
        .messages
        .iter()
        .filter(|m| m.title.starts_with("Memory near"))
        .count();
    assert_eq!(warnings, 1, "{messages:?}");
}

#[tokio::test]
async fn a_sandbox_refuses_what_it_cannot_honour_before_anything_is_made() {
    let host = Host::new();
    let tk = agent_kiln(&format!(
        "[agents.boxed]\ntype = \"command\"\ncommand = {:?}\n",
        host.script.display().to_string()
    ));
    host.write_script(tk.root());
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let cases: [(&[&str], &str); 4] = [
        (&["--memory", "64"], "local driver"),
        (&["--driver", "sandbox", "--env", "A=b"], "names only"),
        (
            &["--driver", "sandbox", "--mount", "/no/such/folder"],
            "/no/such/folder",
        ),
        (&["--driver", "ssh"], "--host"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["session", "new", "--agent", "boxed"];
        args.extend_from_slice(extra);
        let out = tk.cru(&args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("=b"), "a value is echoed: {err}");
    }
    let out = tk.cru(&["session", "list", "--json"]);
    assert_eq!(stdout(&out).trim(), "[]", "nothing was created");
    let worktrees = git(tk.root(), &["worktree", "list"]);
    assert_eq!(
        worktrees.lines().count(),
        1,
        "no worktree was left behind: {worktrees}"
    );
}

#[tokio::test]
async fn an_idle_sandbox_is_parked_and_the_next_prompt_makes_it_again() {
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    // 0.05 minutes: three seconds idle.
    let tk = agent_kiln("[drivers]\nidle_timeout_minutes = 0.05\n");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let client = tk.client().await;
    for agent in ["loader", "scripted"] {
        let created = cru_json(
            &tk,
            &[
                "session",
                "new",
                "--agent",
                agent,
                "--driver",
                "sandbox",
                "--task",
                "say first",
                "--json",
            ],
        );
        let s: Session = serde_json::from_value(created).unwrap();
        wait_message(&client, &s.id, MsgType::TaskComplete).await;
        let parked = wait_state(&client, &s.id, SessionState::Parked).await;
        assert!(parked.state_reason.unwrap().contains("torn down"));
        let pid = parked.agent_pid;
        assert!(
            pid.is_none_or(|p| !crucible::sys::pid_alive(p)),
            "{agent}: the sandbox is gone"
        );

        let out = tk.cru(&["session", "send", &s.id, "say second"]);
        assert!(out.status.success(), "{agent}: {}", stderr(&out));
        crate::sessions::wait_session(&client, &s.id, "the second turn", |s| {
            s.turn_count >= 2 && s.state == Some(SessionState::Complete)
        })
        .await;
        let text = said(&client, &s.id).await;
        assert!(
            text.contains("first") && text.contains("second"),
            "{agent}: {text}"
        );

        let audit = cru_json(&tk, &["session", "audit", &s.id, "--json"]);
        let records = audit.as_array().unwrap();
        let starts = records.iter().filter(|r| r["event"] == "start").count();
        assert_eq!(starts, 2, "{agent}: made twice: {audit:#}");
        assert!(
            records
                .iter()
                .any(|r| r["event"] == "end"
                    && r["reason"].as_str().unwrap_or("").contains("torn down")),
            "{agent}: {audit:#}"
        );
        let prompts: Vec<&str> = records
            .iter()
            .filter(|r| r["event"] == "prompt")
            .map(|r| r["text"].as_str().unwrap())
            .collect();
        assert_eq!(prompts, ["say first", "say second"], "{agent}");
    }
}

#[tokio::test]
async fn a_sandboxed_session_answers_again_after_its_daemon_is_stopped_or_killed() {
    use crate::restart::{After, Gone, answers_after};
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = host.daemon(&tk).await;
    let created = cru_json(
        &tk,
        &[
            "session",
            "new",
            "--agent",
            "loader",
            "--driver",
            "sandbox",
            "--task",
            "say in the sandbox",
            "--json",
        ],
    );
    let s: Session = serde_json::from_value(created).unwrap();
    let worktree = PathBuf::from(s.worktree.clone().unwrap());
    let next = || {
        let mut cru = Command::new(CRU);
        cru.env("HOME", &host.home).stderr(Stdio::null());
        cru
    };
    for gone in [Gone::Stopped, Gone::Killed] {
        let after = After {
            id: &s.id,
            there: worktree.clone(),
            calls_in: true,
        };
        daemon = answers_after(&tk, &mut daemon, gone, next(), after).await;
        std::fs::remove_file(worktree.join("after.txt")).unwrap();
    }
}

/// A command the agent runs that needs more than the session's memory cap is ended by
/// the kernel's OOM killer, and the inbox says so in those words; the agent goes on.
#[tokio::test]
async fn a_command_ended_by_the_oom_killer_is_reported_as_out_of_memory() {
    if !bwrap_works() {
        return;
    }
    let host = Host::new();
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = host.daemon(&tk).await;
    let client = tk.client().await;
    let task = "spawn python3 -c x=b'a'*(400<<20)\nsay went on";
    let s = capped_session(&tk, "128", task);
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    if !status.contains("memory 128 MiB (cgroup") {
        eprintln!("NOT RUN: no memory cgroup here, so no OOM killer to report: {status}");
        return;
    }
    let killed = told_then_done(
        &client,
        &s.id,
        "the out-of-memory report",
        "Killed: out of memory",
        "went on",
    )
    .await;
    assert_eq!(killed.msg_type, MsgType::Error);
    assert_eq!(killed.title, "Killed: out of memory (cap 128 MiB)");
    agent_itself_ended_for_memory(&tk, &client, &s.id, 128).await;
}
