//! How the hub reaches a kiln: by its daemon's socket on this machine (one the person
//! owns), or over the person's own ssh to `cru daemon bridge` on another.

use std::path::Path;

use crate::client::{Client, ClientError};
use crate::config::RemoteKilns;
use crate::kilns::{KilnEntry, KilnState};

/// How the hub reaches a kiln.
#[derive(Debug, Clone)]
pub(super) enum Road {
    /// A kiln of this machine, by its daemon's socket.
    Local,
    /// A kiln on another machine, through the person's ssh and `cru daemon bridge`
    /// there.
    Ssh(RemoteKilns),
}

impl Road {
    pub(super) fn is_local(&self) -> bool {
        matches!(self, Road::Local)
    }

    /// What tells this kiln apart from every other the hub reaches: its folder here, or
    /// `ssh://DESTINATION/FOLDER`.
    pub(super) fn key(&self, entry: &KilnEntry) -> String {
        let path = &entry.path;
        match self {
            Road::Local => path.display().to_string(),
            Road::Ssh(remote) => format!("ssh://{}{}", remote.ssh, path.display()),
        }
    }

    /// The machine it is on, when it is not this one.
    pub(super) fn host(&self) -> Option<&str> {
        match self {
            Road::Local => None,
            Road::Ssh(remote) => Some(remote.host()),
        }
    }

    /// Whether its daemon is worth trying now: a local one that runs; a remote one
    /// always (only trying tells).
    pub(super) fn running(&self, entry: &KilnEntry) -> bool {
        match self {
            Road::Local => matches!(entry.state(), KilnState::Running { .. }),
            Road::Ssh(_) => true,
        }
    }

    /// A new connection to its daemon, named `name` there.
    pub(super) async fn connect(
        &self,
        entry: &KilnEntry,
        name: String,
    ) -> Result<Client, ClientError> {
        match self {
            Road::Local => {
                owned_by_me(&entry.socket)?;
                Client::connect_named(&entry.socket, None, name).await
            }
            Road::Ssh(remote) => {
                let bridge = format!(
                    "{} --kiln {} daemon bridge",
                    remote.cru,
                    quoted(&entry.path.display().to_string())
                );
                let process = tokio::process::Command::new("ssh")
                    .args(&remote.ssh_args)
                    .args(["-o", "BatchMode=yes", "-T"])
                    .arg(&remote.ssh)
                    .arg("--")
                    .arg(bridge)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| ClientError::Local(format!("cannot run ssh: {e}")))?;
                Client::through_process(process, name).await
            }
        }
    }
}

/// Refuses a socket another user owns: the hub talks only to the person's own daemons.
fn owned_by_me(socket: &Path) -> Result<(), ClientError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(socket) else {
        return Ok(()); // connecting says what is missing
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == me {
        Ok(())
    } else {
        Err(ClientError::Local(format!(
            "{} belongs to another user (uid {}): not reached",
            socket.display(),
            meta.uid()
        )))
    }
}

/// `text` as one word for the remote shell.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
