//! The kilns under the hub: `KILNS` temp kilns, each with a real `cru daemon run`, filled
//! with registered sessions (no agent) and inbox messages sent through their handles; and
//! the hub, a real `cru hub run`. Every process runs with `HOME` and the XDG folders in the
//! bench's temp dir, so the kiln registry and the hub's socket are the bench's own.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods as m;
use crucible::protocol::params::RegisterParams;
use crucible::protocol::{ComponentState, Handle, MsgType};
use testkit::params;
use tokio::process::{Child, Command};

/// How long a daemon or the hub may take to answer, and the hub to reach every kiln.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Of every kiln's messages, each `QUESTION_EVERY`th is a question waiting for an answer.
const QUESTION_EVERY: usize = 5;

/// The per-user folders every process of the bench gets, in its temp dir.
#[derive(Clone)]
pub struct Env {
    pub root: PathBuf,
    /// A folder that is no kiln and in no repository, where the cross-kiln commands run.
    pub outside: PathBuf,
}

impl Env {
    pub fn new(root: &Path) -> Result<Self> {
        let env = Self {
            root: root.to_path_buf(),
            outside: root.join("outside"),
        };
        for (_, dir) in env.vars() {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::create_dir_all(&env.outside).context("creating the outside folder")?;
        Ok(env)
    }

    /// `HOME` and the XDG folders, each a folder of the temp dir.
    pub fn vars(&self) -> Vec<(&'static str, PathBuf)> {
        [
            ("HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_DATA_HOME", "data"),
            ("XDG_CACHE_HOME", "cache"),
        ]
        .into_iter()
        .map(|(name, dir)| (name, self.root.join(dir)))
        .collect()
    }

    pub fn hub_socket(&self) -> PathBuf {
        self.root.join("state/crucible/hub.sock")
    }

    /// A tokio command for the bench's `cru` with the bench's folders.
    pub fn command(&self, exe: &Path) -> Command {
        let mut command = Command::new(exe);
        for (name, dir) in self.vars() {
            command.env(name, dir);
        }
        command
            .env_remove("CRU_KILN")
            .env("CRU_DAEMON_EXE", exe)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .kill_on_drop(true);
        command
    }
}

/// One kiln and the sessions made in it.
pub struct BenchKiln {
    pub name: String,
    pub kiln: Kiln,
    daemon: Child,
    /// Each session's id and handle.
    pub sessions: Vec<(String, Handle)>,
}

impl BenchKiln {
    pub fn pid(&self) -> Option<u32> {
        self.daemon.id()
    }

    /// Waits until its daemon answers.
    pub async fn answers(&self) -> Result<()> {
        wait_until(START_TIMEOUT, || Client::connect(&self.kiln))
            .await
            .with_context(|| format!("{}'s daemon did not answer", self.name))?;
        Ok(())
    }
}

/// Starts `count` kilns' daemons and waits until each answers.
pub async fn start_kilns(env: &Env, exe: &Path, count: usize) -> Result<Vec<BenchKiln>> {
    let mut kilns = Vec::with_capacity(count);
    for i in 0..count {
        kilns.push(spawn_kiln(env, exe, &format!("k{i:02}"), None)?);
    }
    for k in &kilns {
        k.answers().await?;
    }
    Ok(kilns)
}

/// Makes the kiln `name` (a folder of the temp dir's `kilns`) and starts its daemon,
/// with the bench's folders, or with `state_home` as its `XDG_STATE_HOME` (a kiln "on
/// another machine", in a registry of its own).
pub fn spawn_kiln(
    env: &Env,
    exe: &Path,
    name: &str,
    state_home: Option<&Path>,
) -> Result<BenchKiln> {
    let kiln = Kiln::new(env.root.join("kilns").join(name));
    std::fs::create_dir_all(kiln.root()).context("creating a kiln")?;
    // A long grace period and session timeout: registered sessions never heartbeat.
    std::fs::write(
        kiln.settings_path(),
        format!(
            "[kiln]\nname = \"{name}\"\n\n[daemon]\ngrace_period_secs = 3600\n\
             session_timeout_secs = 3600\n"
        ),
    )
    .context("writing .crucible.toml")?;
    let stderr = std::fs::File::create(env.root.join(format!("{name}.stderr")))?;
    let mut command = env.command(exe);
    if let Some(state) = state_home {
        command.env("XDG_STATE_HOME", state);
    }
    let daemon = command
        .arg("--kiln")
        .arg(kiln.root())
        .args(["daemon", "run"])
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {name}'s daemon"))?;
    Ok(BenchKiln {
        name: name.to_string(),
        kiln,
        daemon,
        sessions: Vec::new(),
    })
}

/// Retries `connect` until it succeeds or `limit` passes.
pub async fn wait_until<F, Fut>(limit: Duration, mut connect: F) -> Result<Client>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crucible::client::Result<Client>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match connect().await {
            Ok(client) => return Ok(client),
            Err(e) if Instant::now() >= deadline => bail!("not answered in {limit:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Registers `sessions` sessions in the kiln and sends `messages` inbox messages through
/// the handles of its first sessions, one each; every [`QUESTION_EVERY`]th is a question.
pub async fn fill(k: &mut BenchKiln, sessions: usize, messages: usize) -> Result<()> {
    let owner = Client::connect(&k.kiln).await?;
    let registers = (0..sessions).map(|j| {
        let owner = &owner;
        async move {
            let answer = owner
                .call::<m::SessionRegister>(&RegisterParams {
                    agent_type: "bench".into(),
                    agent_name: format!("s{j:03}"),
                    worktree: Some("bench".into()),
                })
                .await
                .context("session.register")?;
            let handle = Handle::parse(&answer.handle)
                .ok_or_else(|| anyhow!("session.register answered no handle"))?;
            Ok::<_, anyhow::Error>((answer.session_id, handle))
        }
    });
    k.sessions = futures::future::try_join_all(registers).await?;
    for (j, (id, handle)) in k.sessions.iter().take(messages).enumerate() {
        let agent = Client::connect_at(&k.kiln.socket_path(), Some(handle)).await?;
        if j % QUESTION_EVERY == 0 {
            ask(&agent, id, &format!("Question {j} of {}", k.name)).await?;
        } else {
            let note = params::note(
                id,
                &format!("Note {j} of {}", k.name),
                "A step of the task is done; this is its report.",
            );
            agent
                .call::<m::InboxSend>(&note)
                .await
                .context("inbox.send")?;
        }
    }
    Ok(())
}

/// Sends a question (two options) as the session `id`'s agent; its message id.
pub async fn ask(agent: &Client, id: &str, title: &str) -> Result<String> {
    let question = params::send(id, MsgType::DecisionNeeded, title, &["yes", "no"]);
    let sent = agent
        .call::<m::InboxSend>(&question)
        .await
        .context("inbox.send of a question")?;
    Ok(sent.id)
}

/// The hub, a real `cru hub run`.
pub struct HubProcess {
    child: Child,
}

impl HubProcess {
    pub fn pid(&self) -> Result<u32> {
        self.child.id().context("the hub has exited")
    }
}

/// Starts the hub and waits until it has reached every one of `kilns` kilns (its
/// status lists them beside the person's own parts, such as the web view).
pub async fn start_hub(env: &Env, exe: &Path, kilns: usize) -> Result<HubProcess> {
    let stderr = std::fs::File::create(env.root.join("hub.stderr"))?;
    let child = env
        .command(exe)
        .args(["hub", "run"])
        .current_dir(&env.outside)
        .stderr(stderr)
        .spawn()
        .context("starting cru hub run")?;
    let socket = env.hub_socket();
    let hub = wait_until(START_TIMEOUT, || Client::connect_at(&socket, None)).await?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let status = hub.call::<m::DaemonStatusOf>(&m::NoParams {}).await?;
        let on = status
            .components
            .iter()
            .filter(|c| c.name.starts_with("kiln ") && c.state == ComponentState::On)
            .count();
        if on == kilns {
            return Ok(HubProcess { child });
        }
        if Instant::now() >= deadline {
            bail!("the hub reached {on} of {kilns} kilns in {START_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops the hub, then every daemon, each with `daemon.shutdown` (killed if it lingers).
pub async fn stop(env: &Env, hub: Option<HubProcess>, kilns: Vec<BenchKiln>) {
    if let Some(mut hub) = hub {
        if let Ok(client) = Client::connect_at(&env.hub_socket(), None).await {
            let _ = client.call::<m::DaemonShutdown>(&m::NoParams {}).await;
        }
        finish(&mut hub.child).await;
    }
    for mut k in kilns {
        if let Ok(client) = Client::connect(&k.kiln).await {
            let _ = client.call::<m::DaemonShutdown>(&m::NoParams {}).await;
        }
        finish(&mut k.daemon).await;
    }
}

async fn finish(child: &mut Child) {
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}
