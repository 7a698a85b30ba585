//! Test equipment: temp kilns, the daemon as a child process, raw socket connections, and
//! waiting on conditions with deadlines (never sleep-and-hope).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crucible::client::{Client, StartOptions, connect_or_start};
use crucible::kiln::Kiln;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub const CRU: &str = env!("CARGO_BIN_EXE_cru");

/// The scripted ACP agent (test equipment, an example of this package), built on first use.
pub fn scripted_agent() -> &'static str {
    crate::built::scripted_agent(Path::new(CRU))
}

/// The longest a `cru` command of a test may take.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(180);

/// Runs `command` (stdin closed, output captured) and returns its output; kills it and
/// panics if it has not ended within [`COMMAND_LIMIT`].
pub fn run_bounded(mut command: Command, what: &str) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let pid = child.id();
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match result.recv_timeout(COMMAND_LIMIT) {
        Ok(output) => output.expect("run the command"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{what} did not end within {COMMAND_LIMIT:?}; it was killed");
        }
    }
}

/// Waits until `check` is true, polling, or panics with `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub struct TestKiln {
    /// Removed with the kiln when the test ends.
    _dir: tempfile::TempDir,
    pub kiln: Kiln,
}

impl TestKiln {
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
        Self::with_settings("[daemon]\ngrace_period_secs = 60\n")
    }

    pub fn root(&self) -> &Path {
        self.kiln.root()
    }

    pub fn start_options(&self) -> StartOptions {
        StartOptions {
            exe: Some(PathBuf::from(CRU)),
        }
    }

    /// Connects, starting the daemon (the real binary) if needed.
    pub async fn client(&self) -> Client {
        connect_or_start(&self.kiln, &self.start_options())
            .await
            .expect("connect or start the daemon")
    }

    /// Runs `cru --kiln <kiln> args…` to completion; one that takes longer than
    /// [`COMMAND_LIMIT`] is killed and the test fails, naming it (a hang must not eat
    /// the whole run).
    pub fn cru(&self, args: &[&str]) -> Output {
        let mut command = Command::new(CRU);
        command
            .arg("--kiln")
            .arg(self.root())
            .args(args)
            .env("CRU_DAEMON_EXE", CRU);
        run_bounded(command, &format!("cru {}", args.join(" ")))
    }

    /// Starts `cru daemon run` as our child and waits until it answers.
    pub async fn spawn_daemon(&self) -> DaemonProcess {
        let mut cru = Command::new(CRU);
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

/// A daemon started by the test; killed if the test ends first.
pub struct DaemonProcess {
    pub child: Child,
}

impl DaemonProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL the daemon");
        self.child.wait().expect("reap the daemon");
    }

    /// Waits for the process to exit by itself.
    pub async fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not exit within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Kills whatever daemon runs for the kiln when dropped (for daemons started detached).
pub struct KillOnDrop(pub Kiln);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0.read_pid() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

/// A raw line-level connection, for sending what a well-behaved client never would.
pub struct Raw {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Raw {
    pub async fn connect(kiln: &Kiln) -> Raw {
        Raw::connect_path(&kiln.socket_path()).await
    }

    pub async fn connect_path(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).await.expect("connect raw");
        let (read, writer) = stream.into_split();
        Raw {
            reader: BufReader::new(read),
            writer,
        }
    }

    /// Connects and performs the handshake.
    pub async fn handshaken(kiln: &Kiln) -> Raw {
        let mut raw = Raw::connect(kiln).await;
        let reply = raw
            .call(json!({"jsonrpc": "2.0", "id": 0, "method": "handshake",
                         "params": {"protocol_version": crucible::protocol::PROTOCOL_VERSION}}))
            .await;
        assert!(reply.get("result").is_some(), "handshake failed: {reply}");
        raw
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.expect("write");
    }

    pub async fn send(&mut self, value: Value) {
        let mut line = value.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes()).await;
    }

    pub async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_text().await).expect("the daemon sent JSON")
    }

    /// The next line exactly as the daemon wrote it.
    pub async fn recv_text(&mut self) -> String {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("a reply within 10 s")
            .expect("read");
        assert!(n > 0, "the daemon closed the connection");
        line
    }

    pub async fn call(&mut self, request: Value) -> Value {
        self.send(request).await;
        self.recv().await
    }
}

/// The error code of a JSON-RPC reply, or panic.
pub fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {reply}"))
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Registers a session through the client and returns its id.
pub async fn register(client: &Client, agent: &str) -> String {
    let reply = client
        .call_value(
            "session.register",
            json!({"agent_type": "acp", "agent_name": agent}),
        )
        .await
        .expect("register");
    reply["session_id"]
        .as_str()
        .expect("session_id")
        .to_string()
}

/// Pids of running `cru … daemon run` processes for this kiln (from /proc).
pub fn daemon_processes(kiln: &Path) -> Vec<u32> {
    let kiln = kiln.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_daemon = args.windows(2).any(|w| w[0] == "daemon" && w[1] == "run");
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state.split_whitespace().nth(2) == Some("Z");
        if is_daemon && !zombie && args.iter().any(|a| a == &kiln) {
            pids.push(pid);
        }
    }
    pids
}

/// A loopback port free at the moment of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes an executable script.
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `cru` with its own folder first on `PATH`, as agents' scripts call it by name.
pub fn cru_on_path() -> Command {
    let folder = Path::new(CRU).parent().expect("the binary's folder");
    let path = std::env::var("PATH").unwrap_or_default();
    let mut cru = Command::new(CRU);
    cru.env("PATH", format!("{}:{path}", folder.display()))
        .stderr(Stdio::null());
    cru
}

/// Fails if any file under `dir` holds `value` (a secret that must not be kept).
pub fn assert_in_no_file(dir: &Path, value: &str) {
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => found.extend(files(&path)),
                Ok(t) if t.is_file() => found.push(path),
                _ => {}
            }
        }
        found
    }
    for file in files(dir) {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "the value is in {}",
            file.display()
        );
    }
}

/// Runs `command` with at most `limit` open descriptors (soft and hard), as a stock
/// system gives a process.
pub fn limit_descriptors(command: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
