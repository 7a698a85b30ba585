//! The SurrealDB server from a `cru-surreal-server` already built elsewhere
//! (`CRU_BENCH_TEAM_SERVER`), started as testkit/src/team_server.rs starts the one it
//! builds: the same arguments, a free loopback port, surrealkv with an fsync on every
//! commit, a folder of its own. For when that build is not there yet and would take
//! longer than the run. Killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long the server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(60);

pub struct Prebuilt {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Prebuilt {
    pub async fn start(binary: &Path, password: &str) -> Result<Prebuilt> {
        let dir = tempfile::tempdir().context("a temp dir for the server")?;
        let data = dir.path().join("db");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("a free port")?
            .port();
        let child = Command::new(binary)
            .args(["start", "--no-banner", "--log", "warn", "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--username", "root", "--password", password])
            .arg(format!("surrealkv://{}?sync=every", data.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.path().join("server.log")).context("the server's log")?,
            )
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut server = Prebuilt {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + START_LIMIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = server.child.try_wait()? {
                bail!("the server exited ({status}) before listening");
            }
            if Instant::now() > deadline {
                bail!("the server did not listen within {START_LIMIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(server)
    }
}

impl Prebuilt {
    /// The server's warnings and errors so far (it logs at `warn`), counted by their text.
    pub fn warnings(&self) -> Vec<(usize, String)> {
        let text = std::fs::read_to_string(self._dir.path().join("server.log")).unwrap_or_default();
        let mut counted: std::collections::BTreeMap<String, usize> =
            std::collections::BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        {
            // Without the timestamp, so that repeats count as one.
            let message = line
                .split_once(" WARN ")
                .or_else(|| line.split_once(" ERROR "))
                .map_or(line, |(_, m)| m);
            *counted
                .entry(message.chars().take(160).collect())
                .or_default() += 1;
        }
        counted.into_iter().map(|(m, n)| (n, m)).collect()
    }
}

impl Drop for Prebuilt {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
