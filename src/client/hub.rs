//! Reaching the person's hub: where it listens (beside the kiln registry, in the
//! owner-only state folder), connecting to it, and starting it when none runs, under a
//! start-up lock as a kiln's daemon is started.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Client, ClientError, Result, StartOptions};
use crate::kilns::Registry;
use crate::sys;

/// How long a new hub may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the hub keeps its socket, pid file and start-up lock: the registry's folder.
#[derive(Debug, Clone)]
pub struct HubPlace {
    dir: PathBuf,
}

impl HubPlace {
    /// The person's hub: beside their kiln registry.
    pub fn for_user() -> Result<Self> {
        let registry = Registry::for_user().map_err(|e| ClientError::Local(e.to_string()))?;
        Ok(Self::beside(&registry))
    }

    /// The hub of the registry `registry`.
    pub fn beside(registry: &Registry) -> Self {
        let path = registry.path();
        let dir = path.parent().map_or_else(PathBuf::new, PathBuf::from);
        Self { dir }
    }

    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("hub.sock")
    }

    pub fn pid_path(&self) -> PathBuf {
        self.dir.join("hub.pid")
    }

    fn start_lock_path(&self) -> PathBuf {
        self.dir.join("hub.start.lock")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    fn stderr_path(&self) -> PathBuf {
        self.log_dir().join("hub.stderr")
    }

    /// The running hub's pid, if its pid file names a live process.
    pub fn read_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.pid_path())
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .filter(|&pid| pid > 0 && sys::pid_alive(pid))
    }

    /// Makes the folder, owner-only.
    pub fn ensure_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
    }
}

/// Connects to the hub, if one answers.
pub async fn connect_hub(place: &HubPlace) -> Result<Client> {
    Client::connect_at(&place.socket_path(), None).await
}

/// Connects to the person's hub, starting one if none answers.
pub async fn connect_or_start_hub(place: &HubPlace, opts: &StartOptions) -> Result<Client> {
    if let Ok(client) = connect_hub(place).await {
        return Ok(client);
    }
    place
        .ensure_dir()
        .map_err(|e| ClientError::Start(e.to_string()))?;
    let lock = super::spawn::start_lock(&place.start_lock_path()).await?;
    // Someone may have started it while we waited for the lock.
    if let Ok(client) = connect_hub(place).await {
        return Ok(client);
    }
    // A hub on its way out still holds its pid file: wait for it to go.
    let deadline = Instant::now() + START_TIMEOUT;
    while place.read_pid().is_some() && Instant::now() < deadline {
        if let Ok(client) = connect_hub(place).await {
            return Ok(client);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_file(place.socket_path());
    let child = spawn_hub(place, opts)?;
    let stderr = place.stderr_path();
    let result =
        super::spawn::until_answered(child, "the hub", &stderr, || connect_hub(place)).await;
    drop(lock);
    result
}

fn spawn_hub(place: &HubPlace, opts: &StartOptions) -> Result<tokio::process::Child> {
    let exe = opts
        .exe()
        .map_err(|e| ClientError::Start(format!("cannot find the cru executable: {e}")))?;
    std::fs::create_dir_all(place.log_dir()).map_err(|e| ClientError::Start(e.to_string()))?;
    let stderr = std::fs::File::create(place.stderr_path())
        .map_err(|e| ClientError::Start(e.to_string()))?;
    tokio::process::Command::new(&exe)
        .args(["hub", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Its own process group: a Ctrl-C in the terminal that started it does not stop it.
        .process_group(0)
        .spawn()
        .map_err(|e| ClientError::Start(format!("cannot run {}: {e}", exe.display())))
}
