//! The daemon as a service sees it, with the real binary: run under systemd (its
//! `JOURNAL_STREAM` and `NOTIFY_SOCKET` given here), it says `READY=1` once it answers
//! and logs to stderr (the journal) as well as its file; `cru daemon logs` prints the
//! file's last lines, and `--follow` the lines written after them.

use std::io::{BufRead as _, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

#[tokio::test]
async fn under_systemd_the_daemon_says_ready_and_logs_to_the_journal_and_its_file() {
    let tk = TestKiln::new();
    let notify_dir = tempfile::tempdir().unwrap();
    let notify_path = notify_dir.path().join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut daemon = Command::new(CRU)
        .arg("--kiln")
        .arg(tk.root())
        .args(["daemon", "run"])
        .env("JOURNAL_STREAM", "8:12345")
        .env("NOTIFY_SOCKET", &notify_path)
        .env("XDG_STATE_HOME", notify_dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _killed = KillOnDrop(tk.kiln.clone());

    // READY=1, and by then the daemon answers.
    let mut said = [0u8; 64];
    let n = notify.recv(&mut said).expect("READY=1 from the daemon");
    assert_eq!(&said[..n], b"READY=1");
    let client = tk.client().await;
    testkit::daemon::call::<crucible::protocol::methods::Ping>(
        &client,
        crucible::protocol::methods::NoParams {},
    )
    .await;

    // Its stderr (the journal) has the log's lines.
    let journal = daemon.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(journal).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("`daemon ready` on stderr");
        if line.contains("daemon ready") {
            assert!(!line.contains('\u{1b}'), "plain for the journal: {line:?}");
            break;
        }
    }

    // `cru daemon logs` prints the file's last lines.
    let out = tk.cru(&["daemon", "logs", "-n", "200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("daemon ready"), "{}", stdout(&out));
    let one = tk.cru(&["daemon", "logs", "-n", "1"]);
    assert_eq!(stdout(&one).lines().count(), 1, "{}", stdout(&one));

    // `--follow` prints what is written after: the daemon's stop.
    let mut follow = Command::new(CRU)
        .arg("--kiln")
        .arg(tk.root())
        .args(["daemon", "logs", "--follow", "-n", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let followed = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(followed).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = tk.cru(&["daemon", "stop"]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains("daemon stopped") => break,
            Ok(line) => seen.push(line),
            Err(_) => panic!("--follow did not print the stop; it printed {seen:?}"),
        }
    }
    assert!(
        !seen.iter().any(|l| l.contains("daemon ready")),
        "-n 0 printed old lines: {seen:?}"
    );
    let _ = follow.kill();
    let _ = follow.wait();
    let _ = daemon.wait();
}
