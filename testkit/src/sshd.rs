//! A real OpenSSH server on a free loopback port with its own keys and config (a temp
//! dir), and the client config that reaches it as `crucible-remote`: the "other
//! machine" of the ssh driver's and the hub's remote-kiln tests and of the hub
//! benchmark (`.ci/run` installs openssh-server).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// An sshd on a free loopback port, and the client config that reaches it as
/// `crucible-remote`.
pub struct Sshd {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    child: Child,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        for pid in children(self.child.id()) {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        if after.split_whitespace().nth(1) == Some(&pid.to_string()) {
            found.push(child);
        }
    }
    found
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success());
}

impl Sshd {
    /// Starts it and waits until it accepts a login; `None` (saying why on stderr) when
    /// there is no sshd here or it accepts none, so the caller can skip.
    pub fn start() -> Option<Sshd> {
        if !Path::new(SSHD).exists() {
            eprintln!("NOT RUN: no {SSHD} (install openssh-server)");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        keygen(&dir.join("host_key"));
        keygen(&dir.join("user_key"));
        std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile none\nAllowStreamLocalForwarding yes\n\
                 StreamLocalBindUnlink yes\nLogLevel ERROR\n",
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("ssh_config"),
            format!(
                "Host crucible-remote\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n\
                 IdentityFile {d}/user_key\n  IdentitiesOnly yes\n\
                 StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all("/run/sshd").ok();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sshd = Sshd {
            _dir: tmp,
            dir,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = Command::new("ssh")
                .args(["-F"])
                .arg(sshd.config())
                .args(["-o", "BatchMode=yes", "crucible-remote", "true"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(sshd);
            }
            if Instant::now() > deadline {
                eprintln!("NOT RUN: the test sshd did not accept a login on 127.0.0.1:{port}");
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its own folder (keys and configs), a temp dir removed when it is dropped; the tests
    /// may keep other things there.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The client config to pass as `ssh -F`: it names the server `crucible-remote`.
    pub fn config(&self) -> PathBuf {
        self.dir.join("ssh_config")
    }

    /// Ends every connection it serves (the listener stays).
    pub fn cut_connections(&self) {
        for pid in children(self.child.id()) {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}
