//! The `ssh` driver against a real OpenSSH server started on 127.0.0.1 with a key made
//! here (`.ci/run` installs openssh-server). The "remote" is this machine reached over
//! ssh: a clone of the kiln stands for the repository there.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crucible::protocol::{MsgType, Session, SessionState};

use crate::common::*;
use crate::sessions::{agent_kiln, git, said, wait_message, wait_state};

/// A kiln whose daemon reaches `crucible-remote`, an OpenSSH server on loopback, where a
/// clone of the kiln stands for the repository over there.
pub(crate) struct Remote {
    pub sshd: Sshd,
    pub tk: TestKiln,
    /// The clone "over there".
    pub remote: PathBuf,
}

impl Remote {
    /// `None` where no sshd can run (the test is then skipped, as `Sshd::start` says).
    pub(crate) fn start() -> Option<Remote> {
        let sshd = Sshd::start()?;
        let tk = agent_kiln("");
        let remote = sshd.dir().join("remote-clone");
        let kiln = tk.root().to_str().unwrap();
        git(tk.root(), &["clone", "-q", kiln, remote.to_str().unwrap()]);
        Some(Remote { sshd, tk, remote })
    }

    /// The daemon's command: `cru` with `CRU_SSH` pointing at the server's config.
    pub(crate) fn cru(&self) -> Command {
        let mut cru = Command::new(CRU);
        cru.env(
            "CRU_SSH",
            format!("ssh -F {}", self.sshd.config().display()),
        )
        .stderr(Stdio::null());
        cru
    }

    /// `cru session new` of the resumable scripted agent over there, with `task`.
    pub(crate) fn session(&self, task: &str) -> Session {
        let out = self.tk.cru(&[
            "session",
            "new",
            "--agent",
            "loader",
            "--driver",
            "ssh",
            "--host",
            "crucible-remote",
            "--remote-path",
            self.remote.to_str().unwrap(),
            "--task",
            task,
            "--json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str(&stdout(&out)).unwrap()
    }
}

#[tokio::test]
async fn an_ssh_session_runs_its_agent_over_there_and_a_cut_connection_is_an_error() {
    let Some(over) = Remote::start() else { return };
    let (sshd, tk, remote) = (&over.sshd, &over.tk, &over.remote);
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut daemon = tk.run_daemon(over.cru()).await;
    let client = tk.client().await;

    let task = "say hello from over there\npermit p1 Write remote.txt\nwrite remote.txt written through ssh\nsay done";
    let s = over.session(task);
    let approval = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    let out = tk.cru(&["inbox", "respond", &approval.id, "allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = wait_message(&client, &s.id, MsgType::TaskComplete).await;
    assert!(
        done.body.as_deref().unwrap_or("").contains("done"),
        "{done:?}"
    );
    assert!(said(&client, &s.id).await.contains("hello from over there"));

    // The worktree is under the remote path, on the session's branch, and the write
    // went there (not to the local worktree).
    let there = remote.join(".crucible/worktrees").join(&s.id);
    assert!(there.is_dir(), "no worktree at {}", there.display());
    let branch = s.branch.clone().unwrap();
    assert_eq!(git(&there, &["branch", "--show-current"]), branch);
    assert_eq!(
        std::fs::read_to_string(there.join("remote.txt")).unwrap(),
        "written through ssh"
    );
    let local = PathBuf::from(s.worktree.clone().unwrap());
    assert!(!local.join("remote.txt").exists());
    let status = stdout(&tk.cru(&["session", "status", &s.id]));
    assert!(status.contains("ssh (host crucible-remote"), "{status}");

    // Review and landing see the work done over there: the diff names the remote file,
    // and a commit made there comes back on the local branch.
    let out = tk.cru(&["session", "diff", &s.id, "--stat"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("remote.txt"), "{}", stdout(&out));
    let out = tk.cru(&["session", "commit", &s.id, "-m", "work from over there"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        git(&local, &["log", "-1", "--format=%s"]),
        "work from over there"
    );
    assert_eq!(
        git(&local, &["show", "HEAD:remote.txt"]),
        "written through ssh"
    );
    assert_eq!(
        git(&there, &["rev-parse", "HEAD"]),
        git(&local, &["rev-parse", "HEAD"]),
        "the commit was made there and the local branch is moved to it"
    );

    // A daemon killed and started again resumes it over a new connection, and it is
    // prompted, asks and answers again.
    let before = wait_state(&client, &s.id, SessionState::Complete).await;
    let old_ssh = before.agent_pid.expect("the ssh client's pid");
    drop(client);
    let cru = over.cru();
    let after = crate::restart::After {
        id: &s.id,
        there: there.clone(),
        calls_in: false,
    };
    let gone = crate::restart::Gone::Killed;
    let _daemon = crate::restart::answers_after(tk, &mut daemon, gone, cru, after).await;
    let client = tk.client().await;
    let resumed = crate::sessions::session(&client, &s.id).await;
    assert_eq!(
        resumed.driver.as_ref().map(|d| d.kind().as_str()),
        Some("ssh"),
        "the driver is kept across restarts: a resumed agent never runs elsewhere"
    );
    wait_until(
        "the old ssh client to be gone",
        Duration::from_secs(10),
        || !crucible::sys::pid_alive(old_ssh),
    )
    .await;

    // Cutting the connection ends the session in error, saying why.
    sshd.cut_connections();
    let failed = wait_state(&client, &s.id, SessionState::Error).await;
    let reason = failed.state_reason.unwrap_or_default();
    assert!(
        reason.contains("ssh connection to crucible-remote was lost"),
        "{reason}"
    );
}
