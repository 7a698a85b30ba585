//! Temp kilns: a folder of its own per test, removed when the test ends, with the
//! settings, agents, drivers and git history the test asks its builder for.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crucible::client::{Client, StartOptions, connect_or_start};
use crucible::kiln::Kiln;

use crate::daemon::{DaemonProcess, TestDaemon};
use crate::process::{cru, run_bounded, scripted_agent};
use crate::sessions::git;

pub struct TestKiln {
    /// Removed with the kiln when the test ends.
    _dir: tempfile::TempDir,
    pub kiln: Kiln,
}

/// What a [`TestKiln`] is made with: its `.crucible.toml` is written in this order: the
/// `[daemon]` grace period, the scripted agents, each agent and driver, then the
/// settings given as text.
#[derive(Debug, Clone)]
pub struct TestKilnBuilder {
    grace_period_secs: Option<u64>,
    scripted_agents: bool,
    git: bool,
    sections: String,
    settings: String,
}

impl TestKilnBuilder {
    /// The daemon's `grace_period_secs` (60 unless set); `None` leaves the default.
    pub fn grace_period(mut self, secs: Option<u64>) -> Self {
        self.grace_period_secs = secs;
        self
    }

    /// The scripted ACP agent as two profiles: `scripted` (cannot resume a session) and
    /// `loader` (can).
    pub fn scripted_agents(mut self) -> Self {
        self.scripted_agents = true;
        self
    }

    /// A git repository with one commit on `main`: `README.md` ("project") and
    /// `secret.txt` ("not for agents").
    pub fn git(mut self) -> Self {
        self.git = true;
        self
    }

    /// An agent profile `[agents.<name>]` with these keys (TOML lines).
    pub fn agent(mut self, name: &str, keys: &str) -> Self {
        let _ = write!(self.sections, "[agents.{name}]\n{keys}\n\n");
        self
    }

    /// A command agent (`type = "command"`): `command` with `args`.
    pub fn command_agent(self, name: &str, command: &str, args: &[&str]) -> Self {
        let keys = format!("type = \"command\"\ncommand = {command:?}\nargs = {args:?}");
        self.agent(name, &keys)
    }

    /// A driver's defaults, `[drivers.<name>]` with these keys (TOML lines).
    pub fn driver(mut self, name: &str, keys: &str) -> Self {
        let _ = write!(self.sections, "[drivers.{name}]\n{keys}\n\n");
        self
    }

    /// More settings (TOML), written last.
    pub fn settings(mut self, toml: &str) -> Self {
        self.settings.push_str(toml);
        self
    }

    /// The settings file's text as the kiln gets it.
    pub fn settings_text(&self) -> String {
        let mut text = String::new();
        if let Some(secs) = self.grace_period_secs {
            let _ = write!(text, "[daemon]\ngrace_period_secs = {secs}\n");
        }
        if self.scripted_agents {
            let agent = scripted_agent();
            let _ = write!(
                text,
                "\n[agents.scripted]\ncommand = {agent:?}\n\n\
                 [agents.loader]\ncommand = {agent:?}\nargs = [\"--load\"]\n\n"
            );
        }
        text.push_str(&self.sections);
        text.push_str(&self.settings);
        text
    }

    pub fn build(self) -> TestKiln {
        let tk = TestKiln::with_settings(&self.settings_text());
        if self.git {
            git(tk.root(), &["init", "-q", "-b", "main"]);
            std::fs::write(tk.root().join("README.md"), "project\n").unwrap();
            std::fs::write(tk.root().join("secret.txt"), "not for agents\n").unwrap();
            git(tk.root(), &["add", "README.md", "secret.txt"]);
            git(tk.root(), &["commit", "-q", "-m", "start"]);
        }
        tk
    }
}

impl Default for TestKilnBuilder {
    fn default() -> Self {
        TestKilnBuilder {
            grace_period_secs: Some(60),
            scripted_agents: false,
            git: false,
            sections: String::new(),
            settings: String::new(),
        }
    }
}

impl TestKiln {
    /// A kiln made to measure: see [`TestKilnBuilder`].
    pub fn builder() -> TestKilnBuilder {
        TestKilnBuilder::default()
    }

    /// A fresh kiln with these settings (TOML) in `.crucible.toml`.
    pub fn with_settings(settings: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cru")
            .tempdir()
            .expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        std::fs::write(root.join(".crucible.toml"), settings).expect("write settings");
        TestKiln {
            kiln: Kiln::new(root),
            _dir: dir,
        }
    }

    /// A kiln whose daemon lingers long enough not to exit between steps of a test.
    pub fn new() -> Self {
        Self::builder().build()
    }

    pub fn root(&self) -> &Path {
        self.kiln.root()
    }

    pub fn start_options(&self) -> StartOptions {
        StartOptions {
            exe: Some(PathBuf::from(cru())),
        }
    }

    /// Connects, starting the daemon (the real binary) if needed.
    pub async fn client(&self) -> Client {
        connect_or_start(&self.kiln, &self.start_options())
            .await
            .expect("connect or start the daemon")
    }

    /// Connects, starting the daemon if needed, for typed calls.
    pub async fn daemon(&self) -> TestDaemon {
        TestDaemon::from(self.client().await)
    }

    /// Runs `cru --kiln <kiln> args…` to completion; one that takes longer than
    /// [`crate::COMMAND_LIMIT`] is killed and the test fails, naming it (a hang must not
    /// eat the whole run).
    pub fn cru(&self, args: &[&str]) -> Output {
        let mut command = Command::new(cru());
        command
            .arg("--kiln")
            .arg(self.root())
            .args(args)
            .env("CRU_DAEMON_EXE", cru());
        run_bounded(command, &format!("cru {}", args.join(" ")))
    }

    /// Starts `cru daemon run` as our child and waits until it answers.
    pub async fn spawn_daemon(&self) -> DaemonProcess {
        let mut cru = Command::new(cru());
        cru.stderr(Stdio::piped());
        self.run_daemon(cru).await
    }

    /// Runs `command` (`cru`, or something that runs it) with `--kiln <kiln> daemon run`
    /// as our child and waits until the daemon answers.
    pub async fn run_daemon(&self, mut command: Command) -> DaemonProcess {
        let mut child = command
            .arg("--kiln")
            .arg(self.root())
            .args(["daemon", "run"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn daemon");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if Client::connect(&self.kiln).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the daemon exited ({status}) before it answered\n{}",
                    self.daemon_story(&mut child)
                );
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the daemon did not answer within 60 s\n{}",
                    self.daemon_story(&mut child)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        DaemonProcess { child }
    }

    /// What an ended daemon left: its standard error (when piped) and its log.
    fn daemon_story(&self, child: &mut Child) -> String {
        use std::io::Read;
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        let log = std::fs::read_to_string(self.kiln.log_dir().join("daemon.log"))
            .unwrap_or_else(|e| format!("(no daemon log: {e})"));
        format!("--- stderr ---\n{stderr}\n--- daemon.log ---\n{log}")
    }

    pub fn daemon_pid(&self) -> Option<u32> {
        self.kiln.read_pid()
    }
}

impl Default for TestKiln {
    fn default() -> Self {
        Self::new()
    }
}
