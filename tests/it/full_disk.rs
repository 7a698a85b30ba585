//! A full disk is an error for new writes, never damage to stored ones.
//!
//! The database and its journal live on a small tmpfs that a holder process mounts in a
//! user and mount namespace of its own (no root needed); the daemon runs inside that
//! namespace through `nsenter`, so it can be stopped and started again on the same small
//! disk, while its socket stays in the kiln where the test reaches it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crucible::protocol::methods as m;
use crucible::protocol::params::CreateSessionParams;
use serde_json::{Value, json};
use testkit::params;

use crate::common::*;

/// A tmpfs of `size_mb` at `dir`, alive as long as this is.
struct SmallDisk {
    holder: Child,
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: &Path, size_mb: u64) -> SmallDisk {
        std::fs::create_dir_all(dir).expect("mount point");
        let script = format!(
            "mount -t tmpfs -o size={size_mb}m tmpfs {dir:?} && echo mounted && exec sleep 3600",
        );
        let mut holder = Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--mount",
                "--propagation",
                "private",
            ])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unshare (util-linux) runs");
        use std::io::BufRead;
        let mut line = String::new();
        let out = holder.stdout.take().expect("holder stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("read the holder");
        assert_eq!(
            line.trim(),
            "mounted",
            "could not mount a tmpfs in a user namespace"
        );
        SmallDisk {
            holder,
            dir: dir.to_path_buf(),
        }
    }

    /// A command run inside the namespace that sees the small disk.
    fn inside(&self, program: &str) -> Command {
        let mut command = Command::new("nsenter");
        command
            .args(["--target", &self.holder.id().to_string()])
            .args(["--user", "--mount", "--preserve-credentials"])
            .arg(program);
        command
    }

    fn sh(&self, script: &str) {
        let status = self
            .inside("sh")
            .args(["-c", script])
            .status()
            .expect("nsenter sh");
        assert!(status.success(), "{script} failed");
    }

    fn free_kib(&self) -> u64 {
        let out = self
            .inside("df")
            .args(["-k", "--output=avail"])
            .arg(&self.dir)
            .output()
            .expect("df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .expect("df prints the free space")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

async fn start_daemon(tk: &TestKiln, disk: &SmallDisk) -> DaemonProcess {
    let mut cru = disk.inside(CRU);
    cru.stderr(Stdio::null());
    tk.run_daemon(cru).await
}

/// Sends one message with a large body; its id when acknowledged, else the error.
async fn send(raw: &mut Raw, session: &str, n: usize) -> Result<String, Value> {
    let body = "x".repeat(60_000);
    let reply = raw
        .call(json!({"jsonrpc": "2.0", "id": n, "method": "inbox.send",
                     "params": {"session_id": session, "msg_type": "info",
                                "title": format!("m{n}"), "body": body}}))
        .await;
    match reply["result"]["id"].as_str() {
        Some(id) => Ok(id.to_string()),
        None => Err(reply["error"].clone()),
    }
}

async fn stored_ids(raw: &mut Raw) -> Vec<String> {
    let reply = raw
        .call(json!({"jsonrpc": "2.0", "id": 1, "method": "db.query",
                     "params": {"sql": "SELECT VALUE record::id(id) FROM inbox_messages"}}))
        .await;
    serde_json::from_value(reply["result"]["result"][0].clone()).expect("ids")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_refused_at_the_reserve_and_loses_nothing_acknowledged() {
    fill_the_disk(4).await;
}

/// With no reserve the engine itself meets the full disk: the case where something else
/// took the space between crucible's check and the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_under_the_engine_loses_nothing_acknowledged() {
    fill_the_disk(0).await;
}

/// Fills the small disk with large messages until the daemon refuses one, frees a
/// little, stops the daemon cleanly on the nearly full disk, frees the rest, starts it
/// again, and checks every acknowledged message.
async fn fill_the_disk(reserve_mb: u64) {
    let tk = TestKiln::with_settings("");
    let dir = tk.root().join("disk");
    std::fs::write(
        tk.root().join(".crucible.toml"),
        format!(
            "[daemon]\ngrace_period_secs = 600\n\n[store]\nurl = \"surrealkv://{}/db\"\nreserve_mb = {reserve_mb}\n",
            dir.display()
        ),
    )
    .expect("settings");
    let disk = SmallDisk::mount(&dir, 40);
    let mut daemon = start_daemon(&tk, &disk).await;
    let mut raw = Raw::handshaken(&tk.kiln).await;
    let reply = raw
        .call(
            json!({"jsonrpc": "2.0", "id": 0, "method": "session.register",
                     "params": {"agent_type": "acp", "agent_name": "filler"}}),
        )
        .await;
    let session = reply["result"]["session_id"]
        .as_str()
        .expect("session")
        .to_string();

    // Leave about 6 MiB, then write until the disk says no.
    let filler_kib = disk.free_kib().saturating_sub(6 * 1024);
    disk.sh(&format!(
        "dd if=/dev/zero of={:?} bs=1K count={filler_kib} 2>/dev/null",
        dir.join("filler")
    ));
    let mut acknowledged = Vec::new();
    let mut first_error = None;
    for n in 0..2000 {
        match send(&mut raw, &session, n).await {
            Ok(id) => acknowledged.push(id),
            Err(error) => {
                first_error = Some(error);
                break;
            }
        }
    }
    let error = first_error.expect("the disk never filled");
    println!("{} acknowledged, then: {error}", acknowledged.len());
    assert_eq!(error["code"], -32004, "{error}");
    assert!(!acknowledged.is_empty());

    // Further sends are refused while the disk is full, and after a little is freed.
    for n in 0..20 {
        assert!(send(&mut raw, &session, 5000 + n).await.is_err());
    }
    disk.sh(&format!("truncate -s -2M {:?}", dir.join("filler")));
    for n in 0..50 {
        if let Ok(id) = send(&mut raw, &session, 6000 + n).await {
            acknowledged.push(id);
        }
    }

    // A clean stop on the nearly full disk, then a start with the space back.
    let _ = raw
        .call(json!({"jsonrpc": "2.0", "id": 9, "method": "daemon.shutdown"}))
        .await;
    daemon.wait_exit(Duration::from_secs(30)).await;
    disk.sh(&format!("rm -f {:?}", dir.join("filler")));
    let _daemon = start_daemon(&tk, &disk).await;
    let mut raw = Raw::handshaken(&tk.kiln).await;

    let stored = stored_ids(&mut raw).await;
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged messages lost: {:?}",
        lost.len(),
        acknowledged.len(),
        &lost[..lost.len().min(5)]
    );
    println!(
        "{} acknowledged in all, {} stored after the restart",
        acknowledged.len(),
        stored.len()
    );
    // Readable, not just present.
    let list = raw
        .call(json!({"jsonrpc": "2.0", "id": 2, "method": "inbox.list",
                     "params": {"limit": 10000}}))
        .await;
    let listed = list["result"]["messages"]
        .as_array()
        .expect("inbox.list works")
        .len();
    assert!(listed >= acknowledged.len(), "{list}");
    for id in acknowledged.iter().step_by(7) {
        let got = raw
            .call(json!({"jsonrpc": "2.0", "id": 3, "method": "inbox.get", "params": {"id": id}}))
            .await;
        assert_eq!(
            got["result"]["message"]["body"].as_str().map(str::len),
            Some(60_000)
        );
    }
    // And it takes writes again.
    assert!(send(&mut raw, &session, 9000).await.is_ok());
}

/// A turn whose output cannot be stored ends in `error` with the reason, never
/// `complete`: the disk falls below the reserve between the prompt and the agent's reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_output_cannot_be_stored_ends_in_error() {
    let tk = crate::sessions::agent_kiln(
        "[agents.talker]\ntype = \"command\"\ncommand = \"sh\"\n\
         args = [\"-c\", \"sleep 2; echo line one; echo line two\"]\n",
    );
    let dir = tk.root().join("disk");
    let settings = tk.root().join(".crucible.toml");
    let mut text = std::fs::read_to_string(&settings).expect("settings");
    text.push_str(&format!(
        "\n[store]\nurl = \"surrealkv://{}/db\"\nreserve_mb = 4\n",
        dir.display()
    ));
    std::fs::write(&settings, text).expect("settings");
    let disk = SmallDisk::mount(&dir, 40);
    let _daemon = start_daemon(&tk, &disk).await;
    let client = TestDaemon::from(
        crucible::client::Client::connect(&tk.kiln)
            .await
            .expect("connect"),
    );
    let id = client
        .call::<m::SessionCreate>(CreateSessionParams {
            agent: "talker".into(),
            worktree: Some("feat/talk".into()),
            ..Default::default()
        })
        .await
        .session_id;
    crate::sessions::wait_state(&client, &id, crucible::protocol::SessionState::Complete).await;

    let filler_kib = disk.free_kib().saturating_sub(2 * 1024);
    disk.sh(&format!(
        "dd if=/dev/zero of={:?} bs=1K count={filler_kib} 2>/dev/null",
        dir.join("filler")
    ));
    client
        .call::<m::SessionPrompt>(params::prompt(&id, "talk"))
        .await;
    let ended = crate::sessions::wait_session(&client, &id, "the turn to end", |s| {
        matches!(
            s.state,
            Some(
                crucible::protocol::SessionState::Error
                    | crucible::protocol::SessionState::Complete
            )
        ) && s.turn_count >= 1
            && s.state_reason.as_deref() != Some("ready for a prompt")
    })
    .await;
    assert_eq!(
        ended.state,
        Some(crucible::protocol::SessionState::Error),
        "{ended:?}"
    );
    let reason = ended.state_reason.unwrap_or_default();
    assert!(reason.contains("could not"), "{reason}");
}
