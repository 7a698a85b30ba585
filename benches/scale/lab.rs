//! The scale benchmark's kiln and its daemon: a temp git repository with a scripted-agent
//! profile, `cru daemon run` on it, and how it is stopped (with every agent it ran).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use tokio::process::{Child, Command};

use super::figures::Stats;
use super::procfs::{alive, is_scripted_agent, signal};
use super::{cru, kiln, scripted_agent};

/// `fdatasync` calls timed by the disk probe, and the size of each append.
pub const PROBES: usize = 100;
pub const PROBE_BYTES: usize = 256;

/// How long the daemon may take to answer its first handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the daemon may take to exit after `daemon.shutdown` before it is killed (it
/// stops every agent first: up to a thousand).
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// Times `fdatasync` after a small append, as the daemon's stores do for every durable
/// write: the disk's floor for the write path (it varies with other I/O on the machine).
pub fn fsync_probe(dir: &Path) -> Result<Stats> {
    use std::io::Write as _;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut line = vec![b'x'; PROBE_BYTES - 1];
    line.push(b'\n');
    let mut times = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let start = Instant::now();
        file.write_all(&line).context("writing the probe file")?;
        file.sync_data().context("fdatasync of the probe file")?;
        times.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(&path).context("removing the probe file")?;
    Ok(Stats::new(times))
}

/// A temp git repository with one commit as the kiln, with a scripted-agent profile. The
/// worktrees the sessions make go with it.
pub struct Lab {
    pub kiln: Kiln,
    pub xdg: PathBuf,
    pub base: PathBuf,
    /// Removed last, after everything running in it is gone.
    _dir: tempfile::TempDir,
}

impl Lab {
    pub fn new() -> Result<Self> {
        let made = kiln::temp_kiln(
            "cru-bench-scale",
            &format!(
                "[daemon]\ngrace_period_secs = 600\n\n[agents.scripted]\ncommand = {:?}\n",
                scripted_agent()
            ),
        )?;
        Ok(Self {
            kiln: Kiln::new(made.root),
            xdg: made.xdg,
            base: made.base,
            _dir: made.dir,
        })
    }
}

/// `cru daemon run`, started here. Dropping it (on a panic) kills it and the agents it
/// ran; [`Daemon::stop`] stops it properly.
pub struct Daemon {
    pub child: Child,
    stderr_path: PathBuf,
    /// The agents' pids, once known.
    pub agents: Vec<u32>,
}

impl Daemon {
    pub fn start(lab: &Lab) -> Result<Self> {
        let stderr_path = lab.base.join("daemon.stderr");
        let stderr = std::fs::File::create(&stderr_path)
            .with_context(|| format!("creating {}", stderr_path.display()))?;
        let child = Command::new(cru())
            .arg("--kiln")
            .arg(lab.kiln.root())
            .args(["daemon", "run"])
            .env("CRU_KILN", lab.kiln.root())
            .env("CRU_DAEMON_EXE", cru())
            .env("XDG_CONFIG_HOME", &lab.xdg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Whatever happens to this process, the daemon does not outlive it.
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("running {} daemon run", cru().display()))?;
        Ok(Self {
            child,
            stderr_path,
            agents: Vec::new(),
        })
    }

    /// Retries the handshake until the daemon answers, it exits, or the deadline passes.
    pub async fn wait_ready(&mut self, kiln: &Kiln) -> Result<(Client, Duration)> {
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;
        loop {
            let last_error = match Client::connect(kiln).await {
                Ok(client) => return Ok((client, started.elapsed())),
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.child.try_wait().context("checking the daemon")? {
                bail!(
                    "the daemon exited ({status}) before answering: {}",
                    self.stderr_tail()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "the daemon did not answer within {START_TIMEOUT:?} (last error: \
                     {last_error})"
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `daemon.shutdown` (it stops the agents), a kill if it does not exit in time, then
    /// a kill for any agent left. What happened, in one line.
    pub async fn stop(&mut self, kiln: &Kiln) -> String {
        let started = Instant::now();
        let mut said = match self.child.try_wait() {
            Ok(Some(status)) => format!("the daemon had already exited ({status})"),
            _ => {
                let asked = tokio::time::timeout(Duration::from_secs(5), async {
                    let client = Client::connect(kiln).await?;
                    client.call::<m::DaemonShutdown>(&m::NoParams {}).await
                })
                .await;
                let asked = match asked {
                    Ok(Ok(_)) => "daemon.shutdown sent".to_string(),
                    Ok(Err(e)) => format!("daemon.shutdown failed ({e})"),
                    Err(_) => "daemon.shutdown got no answer within 5 s".to_string(),
                };
                match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
                    Ok(Ok(status)) => format!(
                        "{asked}; the daemon exited ({status}) after {:.1} s",
                        started.elapsed().as_secs_f64()
                    ),
                    Ok(Err(e)) => format!("{asked}; waiting for the daemon failed ({e})"),
                    Err(_) => {
                        let _ = self.child.kill().await;
                        format!(
                            "{asked}; the daemon did not exit within {STOP_TIMEOUT:?}, killed it"
                        )
                    }
                }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.agents.iter().any(|&p| alive(p)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = self.kill_agents();
        if left > 0 {
            said.push_str(&format!("; {left} agents were still running, killed them"));
        } else if !self.agents.is_empty() {
            said.push_str(&format!("; all {} agents gone", self.agents.len()));
        }
        said
    }

    /// Kills the agents still running; how many there were.
    fn kill_agents(&self) -> usize {
        let left: Vec<u32> = self
            .agents
            .iter()
            .copied()
            .filter(|&p| alive(p) && is_scripted_agent(p))
            .collect();
        for &pid in &left {
            signal(pid, libc::SIGKILL);
        }
        left.len()
    }

    pub fn stderr_tail(&self) -> String {
        stderr_tail(&self.stderr_path)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // `kill_on_drop` takes the daemon; the agents go with their stdin, or here.
        if let Some(pid) = self.child.id() {
            signal(pid, libc::SIGKILL);
        }
        self.kill_agents();
    }
}

fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(10).collect();
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
    }
}
