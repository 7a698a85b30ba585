//! A temporary kiln for a benchmark: `<tmp>/kiln`, a git repository with one commit of its
//! `.crucible.toml`, and a private config home `<tmp>/xdg-config` that keeps the user's
//! own settings out of the measurement.

use std::path::PathBuf;
use std::process::Command;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;

pub struct TempKiln {
    /// Removed last, after everything running in it is gone.
    pub dir: tempfile::TempDir,
    /// The temp folder, canonical.
    pub base: PathBuf,
    pub root: PathBuf,
    pub xdg: PathBuf,
}

/// Makes the kiln with `settings` as its `.crucible.toml`.
pub fn temp_kiln(prefix: &str, settings: &str) -> Result<TempKiln> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("creating a temp dir")?;
    let base = dir.path().canonicalize().context("the temp dir's path")?;
    let root = base.join("kiln");
    let xdg = base.join("xdg-config");
    std::fs::create_dir_all(&root).context("creating the kiln")?;
    std::fs::create_dir_all(&xdg).context("creating the private config home")?;
    std::fs::write(root.join(".crucible.toml"), settings).context("writing .crucible.toml")?;
    std::fs::write(root.join("README.md"), "bench\n").context("writing README.md")?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README.md", ".crucible.toml"],
        &["commit", "-q", "-m", "start"],
    ] {
        let out = Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(&root)
            .output()
            .context("running git")?;
        if !out.status.success() {
            bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(TempKiln {
        dir,
        base,
        root,
        xdg,
    })
}

/// Connects to the kiln's daemon once it answers (within a minute).
pub async fn connect(kiln: &Kiln) -> Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(client) = Client::connect(kiln).await {
            return Ok(client);
        }
        if Instant::now() >= deadline {
            bail!("the daemon did not answer");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
