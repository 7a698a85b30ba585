//! `[hub]`: what the person's hub reaches besides the kilns of this machine's registry:
//! kilns on other machines, over the person's own ssh (`[[hub.remotes]]`). Read from the
//! person's settings (`~/.config/crucible/config.toml`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HubConfig {
    /// `[[hub.remotes]]`: kilns on other machines.
    pub remotes: Vec<RemoteKilns>,
}

/// Kilns on one other machine, reached with `ssh [ssh_args] SSH CRU --kiln PATH daemon
/// bridge`: nothing listens there but the kiln's own daemon socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteKilns {
    /// The ssh destination: `user@host`, or a `Host` of the ssh config.
    pub ssh: String,
    /// The kilns' folders there (absolute).
    pub kilns: Vec<String>,
    /// The `cru` command there (default `cru`, found on its `PATH`).
    #[serde(default = "default_cru")]
    pub cru: String,
    /// Arguments for ssh before the destination (`-p 2222`, `-i KEY`, `-F CONFIG`).
    #[serde(default)]
    pub ssh_args: Vec<String>,
}

fn default_cru() -> String {
    "cru".into()
}

/// Why `[[hub.remotes]]` is refused.
#[derive(Debug, thiserror::Error)]
pub enum HubSettingsError {
    #[error(
        "hub.remotes: ssh {0:?} is not an ssh destination (user@host, or a Host of the ssh config)"
    )]
    Destination(String),
    #[error("hub.remotes: kiln {0:?} on {1} is not an absolute path")]
    Kiln(String, String),
    #[error("hub.remotes: {0} lists no kilns")]
    NoKilns(String),
}

impl HubConfig {
    pub fn validate(&self) -> Result<(), HubSettingsError> {
        for remote in &self.remotes {
            let ssh = &remote.ssh;
            if ssh.is_empty() || ssh.starts_with('-') || ssh.chars().any(char::is_whitespace) {
                return Err(HubSettingsError::Destination(ssh.clone()));
            }
            if remote.kilns.is_empty() {
                return Err(HubSettingsError::NoKilns(ssh.clone()));
            }
            if let Some(bad) = remote.kilns.iter().find(|k| !k.starts_with('/')) {
                return Err(HubSettingsError::Kiln(bad.clone(), ssh.clone()));
            }
        }
        Ok(())
    }
}

impl RemoteKilns {
    /// The host part of the destination, to name its kilns by (`api@build`).
    pub fn host(&self) -> &str {
        self.ssh.rsplit('@').next().unwrap_or(&self.ssh)
    }

    /// Each kiln there with the name every view shows it by: its folder and the host
    /// (`api@build.example.org`).
    pub fn named_kilns(&self) -> Vec<(String, std::path::PathBuf)> {
        self.kilns
            .iter()
            .map(|path| {
                let path = std::path::PathBuf::from(path);
                let folder = path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into(),
                );
                (format!("{folder}@{}", self.host()), path)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(ssh: &str, kilns: &[&str]) -> HubConfig {
        HubConfig {
            remotes: vec![RemoteKilns {
                ssh: ssh.into(),
                kilns: kilns.iter().map(|k| k.to_string()).collect(),
                cru: default_cru(),
                ssh_args: Vec::new(),
            }],
        }
    }

    #[test]
    fn a_remote_is_a_destination_with_absolute_kilns() {
        assert!(remote("me@build", &["/srv/api"]).validate().is_ok());
        assert_eq!(remote("me@build", &["/srv/api"]).remotes[0].host(), "build");
        assert!(
            remote("-oProxyCommand=x", &["/srv/api"])
                .validate()
                .is_err()
        );
        assert!(remote("me@build", &["srv/api"]).validate().is_err());
        assert!(remote("me@build", &[]).validate().is_err());
    }
}
