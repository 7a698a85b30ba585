//! The kilns a person has: a per-user registry that every kiln's daemon records itself in
//! when it starts (`$XDG_STATE_HOME/crucible/kilns.json`, owner-only), so that one
//! command can list, reach and answer every project from anywhere.
//!
//! The registry holds where each kiln is and how to reach its daemon, nothing of its
//! state: sessions and inbox stay in the kiln, and are asked of its daemon. Entries stay
//! when a daemon stops (the kiln is then "resting", and its daemon starts again when the
//! person acts on it) until `cru kilns forget` removes them; a kiln whose folder is gone
//! is shown as missing.
//!
//! Beside it, which kiln answers a chat bot account ([`claims`]): one bot in two kilns'
//! settings answers from the first only.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::kiln::Kiln;

mod claims;

pub use claims::{BotAccount, BotClaim, Claimed};

/// One kiln as the registry keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KilnEntry {
    /// `[kiln] name`, else the folder's name.
    pub name: String,
    /// The kiln's folder.
    pub path: PathBuf,
    /// Its daemon's owner socket.
    pub socket: PathBuf,
    /// The daemon that last started there (it may have stopped since).
    pub pid: u32,
    /// When that daemon started (RFC 3339, UTC).
    pub started_at: String,
}

impl KilnEntry {
    pub fn kiln(&self) -> Kiln {
        Kiln::new(&self.path)
    }

    /// Whether the kiln's daemon runs now, rests, or the kiln is gone.
    pub fn state(&self) -> KilnState {
        if !self.path.is_dir() {
            return KilnState::Missing;
        }
        match self.kiln().read_pid() {
            Some(pid) if crate::sys::pid_alive(pid) && self.socket.exists() => {
                KilnState::Running { pid }
            }
            _ => KilnState::Resting,
        }
    }
}

/// A registered kiln's daemon, as seen from outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KilnState {
    Running {
        pid: u32,
    },
    /// No daemon runs; the next command that acts on the kiln starts one.
    Resting,
    /// The kiln's folder is gone.
    Missing,
}

impl KilnState {
    pub fn word(self) -> &'static str {
        match self {
            KilnState::Running { .. } => "running",
            KilnState::Resting => "resting",
            KilnState::Missing => "missing",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("no per-user state folder (HOME is not set)")]
    NoHome,
    #[error("the kiln registry {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the kiln registry {path} cannot be read: {source}")]
    Damaged {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("no kiln named {0:?} is registered (`cru kilns` lists them)")]
    Unknown(String),
    #[error("{count} kilns are named {name:?} ({paths}); name one by its path")]
    Ambiguous {
        name: String,
        count: usize,
        paths: String,
    },
}

type Result<T> = std::result::Result<T, RegistryError>;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Book {
    #[serde(default)]
    kilns: Vec<KilnEntry>,
}

/// The registry file, and a lock beside it that every change holds.
#[derive(Debug, Clone)]
pub struct Registry {
    dir: PathBuf,
}

impl Registry {
    /// The person's registry: `$XDG_STATE_HOME/crucible` (`~/.local/state/crucible`).
    pub fn for_user() -> Result<Self> {
        let dirs =
            directories::ProjectDirs::from("", "", "crucible").ok_or(RegistryError::NoHome)?;
        let dir = dirs
            .state_dir()
            .map_or_else(|| dirs.data_local_dir().to_path_buf(), Path::to_path_buf);
        Ok(Self::at(dir))
    }

    /// A registry kept in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("kilns.json")
    }

    /// Every registered kiln, in the order they were first recorded.
    pub fn entries(&self) -> Result<Vec<KilnEntry>> {
        read_json::<Book>(&self.path()).map(|book| book.kilns)
    }

    /// Records `kiln`'s daemon (this process) under `name`, over an earlier entry of the
    /// same folder.
    pub fn record(&self, kiln: &Kiln, name: &str, pid: u32) -> Result<()> {
        let entry = KilnEntry {
            name: name.to_string(),
            path: kiln.root().to_path_buf(),
            socket: kiln.socket_path(),
            pid,
            started_at: crate::text::now_rfc3339(),
        };
        self.change(|book| {
            match book.kilns.iter_mut().find(|k| k.path == entry.path) {
                Some(known) => *known = entry.clone(),
                None => book.kilns.push(entry.clone()),
            }
            Ok(())
        })
    }

    /// Removes the kiln named `which` (its name, or its folder's path) and returns it.
    pub fn forget(&self, which: &str) -> Result<KilnEntry> {
        let mut gone = None;
        self.change(|book| {
            let at = find(&book.kilns, which)?;
            gone = Some(book.kilns.remove(at));
            Ok(())
        })?;
        gone.ok_or_else(|| RegistryError::Unknown(which.to_string()))
    }

    /// The kiln named `which` (its name, or its folder's path).
    pub fn find(&self, which: &str) -> Result<KilnEntry> {
        let kilns = self.entries()?;
        let at = find(&kilns, which)?;
        Ok(kilns[at].clone())
    }

    /// Reads, changes and writes the registry back whole, under the lock, so two daemons
    /// starting at once both stay recorded.
    fn change(&self, edit: impl FnOnce(&mut Book) -> Result<()>) -> Result<()> {
        self.locked(|| {
            let mut book = Book {
                kilns: self.entries()?,
            };
            edit(&mut book)?;
            self.replace(&self.path(), &book)
        })
    }

    /// Runs `work` holding the lock every change to the registry's folder holds
    /// (`kilns.lock`), between daemons and commands alike.
    fn locked<T>(&self, work: impl FnOnce() -> Result<T>) -> Result<T> {
        ensure_private_dir(&self.dir).map_err(io_err(&self.dir))?;
        let lock_path = self.dir.join("kilns.lock");
        let lock = private_file(&lock_path).map_err(io_err(&lock_path))?;
        crate::sys::lock(&lock).map_err(io_err(&lock_path))?;
        let done = work();
        drop(lock);
        done
    }

    /// Writes `value` as the file `path` whole: a new owner-only file renamed over the
    /// old one.
    fn replace(&self, path: &Path, value: &impl Serialize) -> Result<()> {
        let name = path
            .file_name()
            .map_or_else(|| "registry".into(), |n| n.to_string_lossy());
        let fresh = self.dir.join(format!("{name}.{}", std::process::id()));
        let text = serde_json::to_vec_pretty(value).map_err(|source| RegistryError::Damaged {
            path: path.to_path_buf(),
            source,
        })?;
        write_private(&fresh, &text).map_err(io_err(&fresh))?;
        std::fs::rename(&fresh, path).map_err(io_err(path))
    }
}

/// What an I/O error with `path` is, as the registry's error.
fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RegistryError {
    let path = path.to_path_buf();
    move |source| RegistryError::Io { path, source }
}

/// The JSON file `path`, or its default when there is none.
fn read_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| RegistryError::Damaged {
            path: path.to_path_buf(),
            source,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(io_err(path)(source)),
    }
}

/// The index of the kiln `which` names: a folder path, or a name only one kiln has.
fn find(kilns: &[KilnEntry], which: &str) -> Result<usize> {
    let as_path = Path::new(which);
    let canonical = as_path.canonicalize().ok();
    if let Some(at) = kilns
        .iter()
        .position(|k| k.path == as_path || Some(&k.path) == canonical.as_ref())
    {
        return Ok(at);
    }
    let named: Vec<usize> = (0..kilns.len())
        .filter(|&i| kilns[i].name == which)
        .collect();
    match named.as_slice() {
        [] => Err(RegistryError::Unknown(which.to_string())),
        [one] => Ok(*one),
        many => Err(RegistryError::Ambiguous {
            name: which.to_string(),
            count: many.len(),
            paths: many
                .iter()
                .map(|&i| kilns[i].path.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    if std::fs::metadata(dir)?.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// Writes `bytes` to a new owner-only file and makes them durable.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The name a kiln goes by: `[kiln] name`, else its folder's name.
pub fn name_of(kiln: &Kiln, configured: Option<&str>) -> String {
    configured
        .map(str::to_string)
        .or_else(|| {
            kiln.root()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| kiln.root().display().to_string())
}

#[cfg(test)]
#[path = "kilns_tests.rs"]
mod tests;
