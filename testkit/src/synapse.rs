//! A real Matrix homeserver for the Matrix tests: Synapse, from PyPI's `matrix-synapse` at
//! the version `.ci/run` pins, installed by it into a virtual environment in the target
//! folder (`<target>/synapse-venv`). One homeserver per test, in a temp folder of its own:
//! server name `localhost`, SQLite, one plain HTTP listener on a free loopback port with the
//! client API (and the admin API) and no federation. Registration is closed; users are made
//! through the shared-secret admin API. Rate limits are raised out of the tests' way,
//! unless a test asks for Synapse's default message rate limit. Killed when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long Synapse may take to answer its first request.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The homeserver's name: users are `@name:localhost`.
pub const SERVER_NAME: &str = "localhost";

pub struct Homeserver {
    python: PathBuf,
    config: PathBuf,
    log: PathBuf,
    output: PathBuf,
    child: Option<Child>,
    pub port: u16,
    shared_secret: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

/// The Python of the virtual environment Synapse is installed in, beside the target folder
/// of `cru` (`<target>/<profile>/cru`).
pub fn synapse_python(cru: &Path) -> PathBuf {
    let target = cru
        .parent()
        .and_then(Path::parent)
        .expect("cru lives in <target>/<profile>/");
    let python = target.join("synapse-venv/bin/python");
    assert!(
        python.exists(),
        "Synapse is not installed at {}: run `bash .ci/run`, or \
         `python3 -m venv {venv} && {venv}/bin/pip install matrix-synapse==<version in .ci/run>`",
        python.display(),
        venv = target.join("synapse-venv").display(),
    );
    python
}

impl Homeserver {
    /// Starts a homeserver whose rate limits do not get in a test's way.
    pub async fn start(cru: &Path) -> Homeserver {
        Self::start_with(cru, false).await
    }

    /// Starts a homeserver that keeps Synapse's default message rate limit (a burst of
    /// about ten messages, then one every five seconds; past it, 429 Too Many Requests).
    pub async fn start_with_default_message_rate_limit(cru: &Path) -> Homeserver {
        Self::start_with(cru, true).await
    }

    async fn start_with(cru: &Path, default_message_rate_limit: bool) -> Homeserver {
        let python = synapse_python(cru);
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let shared_secret = uuid::Uuid::new_v4().simple().to_string();
        let config = dir.path().join("homeserver.yaml");
        let log = dir.path().join("homeserver.log");
        write_config(dir.path(), port, &shared_secret, default_message_rate_limit);
        let mut server = Homeserver {
            python,
            config,
            log,
            output: dir.path().join("output.log"),
            child: None,
            port,
            shared_secret,
            http: reqwest::Client::new(),
            dir,
        };
        server.synapse(&["--generate-keys"]);
        server.run().await;
        server
    }

    /// Runs `python -m synapse.app.homeserver --config-path <config> <args>` to its end.
    fn synapse(&self, args: &[&str]) {
        let out = Command::new(&self.python)
            .args(["-m", "synapse.app.homeserver", "--config-path"])
            .arg(&self.config)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("run Synapse");
        assert!(
            out.status.success(),
            "synapse {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    async fn run(&mut self) {
        use std::os::unix::process::CommandExt;
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.output)
            .expect("Synapse's output file");
        let mut command = Command::new(&self.python);
        command
            .args(["-m", "synapse.app.homeserver", "--config-path"])
            .arg(&self.config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(output.try_clone().expect("Synapse's output file"))
            .stderr(output);
        // SAFETY: prctl only, between fork and exec. Synapse goes with the test process
        // even when that is killed and no destructor runs.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        self.child = Some(command.spawn().expect("start Synapse"));
        let versions = format!("{}/_matrix/client/versions", self.url());
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok(response) = self.http.get(&versions).send().await
                && response.status().is_success()
            {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "Synapse exited ({status}) before it answered\n{}",
                    self.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "Synapse did not answer {versions} within {START_LIMIT:?}\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `http://127.0.0.1:PORT`, the client API's base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `@name:localhost`.
    pub fn user_id(&self, name: &str) -> String {
        format!("@{name}:{SERVER_NAME}")
    }

    /// Synapse's whole log (its access lines name each request's user and status).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The end of Synapse's log and output, for a failure's message.
    pub fn log_tail(&self) -> String {
        let tail = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- Synapse's log ({}):\n{}\n--- its output:\n{}",
            self.log.display(),
            tail(&self.log),
            tail(&self.output)
        )
    }

    /// Registers a user through the shared-secret admin API; returns its user id.
    pub async fn register(&self, user: &str, password: &str, admin: bool) -> String {
        let endpoint = format!("{}/_synapse/admin/v1/register", self.url());
        let nonce = self
            .http
            .get(&endpoint)
            .send()
            .await
            .expect("ask Synapse for a registration nonce")
            .bytes()
            .await
            .expect("a nonce");
        let nonce: serde_json::Value = serde_json::from_slice(&nonce).expect("a nonce");
        let nonce = nonce["nonce"].as_str().expect("a nonce").to_string();
        let role = if admin { "admin" } else { "notadmin" };
        let mac = self.hmac_sha1(format!("{nonce}\0{user}\0{password}\0{role}").as_bytes());
        let response = self
            .http
            .post(&endpoint)
            .header("content-type", "application/json")
            .body(
                serde_json::json!({
                    "nonce": nonce,
                    "username": user,
                    "password": password,
                    "admin": admin,
                    "mac": mac,
                })
                .to_string(),
            )
            .send()
            .await
            .expect("register a user");
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert!(status.is_success(), "registering {user}: {status} {body}");
        body["user_id"].as_str().expect("a user id").to_string()
    }

    /// HMAC-SHA1 of `message` under the shared secret, hex: computed by the Python that
    /// runs Synapse (the crate's own build has no SHA-1).
    fn hmac_sha1(&self, message: &[u8]) -> String {
        let mut child = Command::new(&self.python)
            .args([
                "-c",
                "import hashlib, hmac, sys; \
                 print(hmac.new(sys.argv[1].encode(), sys.stdin.buffer.read(), hashlib.sha1).hexdigest())",
                &self.shared_secret,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run Python for the HMAC");
        child
            .stdin
            .take()
            .expect("its stdin")
            .write_all(message)
            .expect("write the message");
        let out = child.wait_with_output().expect("the HMAC");
        assert!(out.status.success(), "computing the HMAC failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Kills Synapse (SIGKILL: no goodbye to its clients); its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts Synapse again, on the same port with the same data.
    pub async fn start_again(&mut self) {
        self.kill();
        self.run().await;
    }
}

impl Drop for Homeserver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `homeserver.yaml` and its log configuration in `dir`.
fn write_config(dir: &Path, port: u16, shared_secret: &str, default_message_rate_limit: bool) {
    let d = dir.display();
    // Out of the tests' way: a test logs in, joins, invites and sends far faster than a
    // person would.
    let high = "{per_second: 1000, burst_count: 10000}";
    let message_limit = if default_message_rate_limit {
        String::new()
    } else {
        format!("rc_message: {high}\n")
    };
    let secret = uuid::Uuid::new_v4().simple();
    let config = format!(
        "server_name: {SERVER_NAME}\n\
         signing_key_path: {d}/signing.key\n\
         log_config: {d}/log.yaml\n\
         media_store_path: {d}/media\n\
         database:\n  name: sqlite3\n  args:\n    database: {d}/homeserver.db\n\
         listeners:\n  - port: {port}\n    bind_addresses: ['127.0.0.1']\n    type: http\n    \
         tls: false\n    x_forwarded: false\n    resources:\n      - names: [client]\n        \
         compress: false\n\
         registration_shared_secret: \"{shared_secret}\"\n\
         enable_registration: false\n\
         report_stats: false\n\
         trusted_key_servers: []\n\
         suppress_key_server_warning: true\n\
         macaroon_secret_key: \"{secret}\"\n\
         form_secret: \"{secret}\"\n\
         {message_limit}\
         rc_registration: {high}\n\
         rc_login:\n  address: {high}\n  account: {high}\n  failed_attempts: {high}\n\
         rc_joins:\n  local: {high}\n  remote: {high}\n\
         rc_joins_per_room: {high}\n\
         rc_invites:\n  per_room: {high}\n  per_user: {high}\n  per_issuer: {high}\n\
         rc_key_requests: {high}\n\
         rc_room_creation: {high}\n\
         rc_presence:\n  per_user: {high}\n\
         rc_delayed_event_mgmt: {high}\n\
         rc_media_create: {high}\n\
         rc_profile: {high}\n"
    );
    std::fs::write(dir.join("homeserver.yaml"), config).expect("write homeserver.yaml");
    let log = format!(
        "version: 1\n\
         formatters:\n  precise:\n    format: '%(asctime)s - %(name)s - %(lineno)d - \
         %(levelname)s - %(request)s - %(message)s'\n\
         handlers:\n  file:\n    class: logging.FileHandler\n    formatter: precise\n    \
         filename: {d}/homeserver.log\n    encoding: utf8\n\
         root:\n  level: INFO\n  handlers: [file]\n\
         disable_existing_loggers: false\n"
    );
    std::fs::write(dir.join("log.yaml"), log).expect("write the log configuration");
}
