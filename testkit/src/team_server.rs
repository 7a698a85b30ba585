//! A real SurrealDB server for the team-mode tests and benchmark: SurrealDB's own server
//! code at the engine's version (the `cru-surreal-server` example,
//! `tests/equipment/surreal_server.rs`, built on first use into the same target folder as
//! `cru`), on a free loopback port, its data in surrealkv with an fsync on every commit,
//! in a folder of its own. Killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The server binary, built once per process (whoever asks first waits for the build).
/// `cru` is the crucible binary of this build: the server goes into its target folder.
pub fn server_binary(cru: &Path) -> PathBuf {
    crate::built::debug_example(cru, "cru-surreal-server")
}

pub struct Server {
    binary: PathBuf,
    child: Option<Child>,
    pub port: u16,
    password: String,
    /// For `wss://`: the server's certificate and key (PEM).
    tls: Option<(PathBuf, PathBuf)>,
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts a server whose root user has `password`.
    pub async fn start(cru: &Path, password: &str) -> Server {
        Self::start_with(cru, password, None).await
    }

    /// Starts a server that speaks TLS (`wss://`) with this certificate and key.
    pub async fn start_tls(cru: &Path, password: &str, cert: &Path, key: &Path) -> Server {
        Self::start_with(cru, password, Some((cert.to_path_buf(), key.to_path_buf()))).await
    }

    async fn start_with(cru: &Path, password: &str, tls: Option<(PathBuf, PathBuf)>) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("db");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = Server {
            binary: server_binary(cru),
            child: None,
            port,
            password: password.to_string(),
            tls,
            data,
            _dir: dir,
        };
        server.run().await;
        server
    }

    async fn run(&mut self) {
        let mut command = Command::new(&self.binary);
        command
            .args(["start", "--no-banner", "--log", "warn", "--bind"])
            .arg(format!("127.0.0.1:{}", self.port))
            .args(["--username", "root", "--password", &self.password]);
        if let Some((cert, key)) = &self.tls {
            command.arg("--web-crt").arg(cert).arg("--web-key").arg(key);
        }
        let child = command
            .arg(format!("surrealkv://{}?sync=every", self.data.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the SurrealDB server");
        self.child = Some(child);
        let address = format!("127.0.0.1:{}", self.port);
        let deadline = Instant::now() + START_LIMIT;
        while tokio::net::TcpStream::connect(&address).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the SurrealDB server did not listen"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn url(&self) -> String {
        match self.tls {
            None => format!("ws://127.0.0.1:{}", self.port),
            Some(_) => format!("wss://localhost:{}", self.port),
        }
    }

    /// Kills the server (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub async fn restart(&mut self) {
        self.kill();
        self.run().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A certificate authority of the test's own and a certificate for `localhost` signed by
/// it (openssl): `(ca.pem, server.pem, server.key)` in `dir`.
pub fn make_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=crucible test team CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write the extensions");
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}
