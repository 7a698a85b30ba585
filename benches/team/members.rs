//! The daemons of the scale phase: each on its own kiln (its own git repository), talking
//! to the shared server through a counting proxy of its own, with a subscriber that notes
//! when each session's name and owner change as this daemon reports them.
//!
//! Dropping a [`Member`] kills its daemon and the agents it ran (the failure path);
//! [`Member::stop`] stops them properly.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods::{self as m, NoParams};
use crucible::protocol::params::{CreateSessionParams, RegisterParams, SessionListParams};
use crucible::protocol::{Session, Topic};
use tokio::process::{Child, Command};

use crate::kiln::{TempKiln, temp_kiln};
use crate::proxy::Proxy;
use crate::{CRU, PASSWORD, PASSWORD_ENV};

/// How long a daemon may take to answer its first handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a daemon may take to exit after `daemon.shutdown`.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A session as one daemon last reported it, and when each part last changed.
#[derive(Debug, Clone)]
pub struct View {
    pub name: String,
    pub name_at: Instant,
    pub owner: String,
    pub owner_at: Instant,
}

/// What one daemon's subscriber saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub sessions: HashMap<String, View>,
    /// `events.lagged` notifications: events were missed, the views may be stale.
    pub lagged: u64,
}

pub struct Member {
    pub index: usize,
    pub kiln: Kiln,
    pub proxy: Proxy,
    child: Child,
    pub pid: u32,
    /// This daemon's instance id (`daemon.status`).
    pub id: String,
    pub control: Arc<Client>,
    /// A registered session that asks questions (`inbox.send`), and its id.
    pub asker: Option<(Client, String)>,
    pub seen: Arc<Mutex<Seen>>,
    /// The sessions this daemon made (`session.create`).
    pub sessions: Vec<String>,
    /// Their agents' pids, once known.
    pub agents: Vec<u32>,
    /// `session.create` calls that failed and were made again.
    pub create_failures: usize,
    stderr: PathBuf,
    /// Removed last, after everything running in it is gone.
    _lab: TempKiln,
}

/// The kiln's settings: the server through `proxy`, the lease, the scripted agent.
fn settings(proxy: &Proxy, lease_secs: u64, agent: &str) -> String {
    format!(
        "[daemon]\ngrace_period_secs = 600\n\n[store]\nurl = {:?}\nnamespace = \"bench\"\n\
         database = \"scale\"\nusername = \"root\"\npassword_env = {PASSWORD_ENV:?}\n\
         lease_secs = {lease_secs}\n\n[agents.scripted]\ncommand = {agent:?}\n",
        proxy.url()
    )
}

impl Member {
    /// Makes the kiln and its proxy, starts the daemon, waits for it to answer, and
    /// subscribes to its session events.
    pub async fn start(index: usize, upstream: u16, lease_secs: u64, agent: &str) -> Result<Self> {
        let proxy = Proxy::start(upstream).await?;
        let lab = temp_kiln(
            &format!("cru-bench-team-{index}-"),
            &settings(&proxy, lease_secs, agent),
        )?;
        let kiln = Kiln::new(lab.root.clone());
        let stderr = lab.base.join("daemon.stderr");
        let file = std::fs::File::create(&stderr).context("the daemon's stderr file")?;
        let mut child = Command::new(CRU)
            .arg("--kiln")
            .arg(kiln.root())
            .args(["daemon", "run"])
            .env(PASSWORD_ENV, PASSWORD)
            .env("CRU_KILN", kiln.root())
            .env("XDG_CONFIG_HOME", &lab.xdg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            // Whatever happens to this process, the daemon does not outlive it.
            .kill_on_drop(true)
            .spawn()
            .context("starting a daemon")?;
        let pid = child.id().ok_or_else(|| anyhow!("the daemon has no pid"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let control = loop {
            if let Ok(client) = Client::connect(&kiln).await {
                break client;
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "daemon {index} exited ({status}) before answering: {}",
                    tail(&stderr)
                );
            }
            if Instant::now() > deadline {
                bail!("daemon {index} did not answer within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let status = control.call::<m::DaemonStatusOf>(&NoParams {}).await?;
        let id = status
            .instance
            .ok_or_else(|| anyhow!("daemon {index} has no instance: is it in team mode?"))?
            .id;
        let seen = Arc::new(Mutex::new(Seen::default()));
        follow(&kiln, Arc::clone(&seen)).await?;
        Ok(Member {
            index,
            kiln,
            proxy,
            child,
            pid,
            id,
            control: Arc::new(control),
            asker: None,
            seen,
            sessions: Vec::new(),
            agents: Vec::new(),
            create_failures: 0,
            stderr,
            _lab: lab,
        })
    }

    /// Registers the session that asks this daemon's questions.
    pub async fn register_asker(&mut self) -> Result<()> {
        let client = Client::connect(&self.kiln).await?;
        let registered = client
            .call::<m::SessionRegister>(&RegisterParams {
                agent_type: "bench".into(),
                agent_name: format!("asker-{}", self.index),
                worktree: None,
            })
            .await?;
        self.asker = Some((client, registered.session_id));
        Ok(())
    }

    /// Makes `count` sessions of the scripted agent, one after another; each says one line
    /// and ends its turn. A call that fails is made again (up to 3 times) and counted: a
    /// daemon whose connection the server closed reconnects by itself.
    pub async fn create_sessions(&mut self, count: usize) -> Result<Vec<Duration>> {
        let mut times = Vec::with_capacity(count);
        for i in 0..count {
            let params = CreateSessionParams {
                agent: "scripted".into(),
                task: Some(format!("say ready {}/{i}", self.index)),
                ..Default::default()
            };
            let mut attempt = 0;
            let started = Instant::now();
            let created = loop {
                match self.control.call::<m::SessionCreate>(&params).await {
                    Ok(reply) => break reply,
                    Err(e) if attempt < 3 => {
                        eprintln!(
                            "  session.create {i} on daemon {} failed, made again: {e}",
                            self.index
                        );
                        self.create_failures += 1;
                        attempt += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("session.create {i} on daemon {}", self.index)
                        });
                    }
                }
            };
            times.push(started.elapsed());
            self.sessions.push(created.session_id);
        }
        Ok(times)
    }

    /// This daemon's `session.list`.
    pub async fn list(&self) -> Result<Vec<Session>> {
        let listed = self
            .control
            .call::<m::SessionList>(&SessionListParams::default())
            .await?;
        Ok(listed.sessions)
    }

    /// SIGKILL: no goodbye to the server, the lease is left to run out.
    pub fn kill9(&mut self) -> Result<()> {
        self.child.start_kill().context("killing the daemon")
    }

    /// `daemon.shutdown` (it stops the agents), a kill if it does not exit in time, then
    /// a kill for any agent left. What happened, in a few words.
    pub async fn stop(&mut self) -> String {
        let mut said = match self.child.try_wait() {
            Ok(Some(status)) => format!("had exited ({status})"),
            _ => {
                let asked = tokio::time::timeout(
                    Duration::from_secs(10),
                    self.control.call::<m::DaemonShutdown>(&NoParams {}),
                )
                .await;
                let asked = if matches!(asked, Ok(Ok(_))) {
                    "shut down"
                } else {
                    "no answer to daemon.shutdown"
                };
                match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
                    Ok(_) => asked.to_string(),
                    Err(_) => {
                        let _ = self.child.kill().await;
                        format!("{asked}, then killed after {STOP_TIMEOUT:?}")
                    }
                }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.agents.iter().any(|&p| is_scripted_agent(p)) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = self.kill_agents();
        if left > 0 {
            said.push_str(&format!(", {left} agents left running, killed"));
        }
        said
    }

    /// Kills this daemon's agents still running; how many there were.
    pub fn kill_agents(&self) -> usize {
        let left: Vec<u32> = self
            .agents
            .iter()
            .copied()
            .filter(|&p| is_scripted_agent(p))
            .collect();
        for &pid in &left {
            // SAFETY: a signal to an agent this benchmark's daemon started (its command
            // line checked just above).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        left.len()
    }

    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // `kill_on_drop` takes the daemon; the agents go with their stdin, or here.
        let _ = self.child.start_kill();
        self.kill_agents();
    }
}

/// Whether `pid` is a live `cru-scripted-agent` (not a zombie).
pub fn is_scripted_agent(pid: u32) -> bool {
    let alive =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    alive
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("cru-scripted-agent"))
}

/// A subscriber on its own connection: every session event updates `seen`, stamped
/// when it arrives here.
async fn follow(kiln: &Kiln, seen: Arc<Mutex<Seen>>) -> Result<()> {
    let client = Client::connect(kiln).await?;
    let mut notes = client.subscribe(Some(vec![Topic::Session])).await?;
    tokio::spawn(async move {
        // The task owns the connection: it ends when the daemon goes.
        let _client = client;
        while let Some(note) = notes.recv().await {
            let now = Instant::now();
            match note.method.as_str() {
                "session.registered" | "session.updated" => {
                    let p = &note.params;
                    let Some(id) = p["id"].as_str() else { continue };
                    let name = p["display_name"].as_str().unwrap_or_default();
                    let owner = p["owner"].as_str().unwrap_or_default();
                    let mut seen = seen.lock().unwrap();
                    let view = seen.sessions.entry(id.to_string()).or_insert(View {
                        name: String::new(),
                        name_at: now,
                        owner: String::new(),
                        owner_at: now,
                    });
                    if view.name != name {
                        view.name = name.to_string();
                        view.name_at = now;
                    }
                    if view.owner != owner {
                        view.owner = owner.to_string();
                        view.owner_at = now;
                    }
                }
                "events.lagged" => seen.lock().unwrap().lagged += 1,
                _ => {}
            }
        }
    });
    Ok(())
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let last: Vec<&str> = text.lines().rev().take(10).collect();
    if last.is_empty() {
        "(no output)".into()
    } else {
        last.into_iter().rev().collect::<Vec<_>>().join("\n  ")
    }
}
