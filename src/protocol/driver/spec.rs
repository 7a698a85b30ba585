//! The resolved spec a session records: its driver with that driver's own options.
//! Stored and sent as one JSON object tagged by `kind` (`{"kind": "sandbox", "mounts":
//! […], "network": "none", …}`), the shape sessions were always recorded in: keys a kind
//! does not use are ignored when read.

use serde::{Deserialize, Serialize};

use super::{DriverKind, DriverOptions, DriverSpec, Mount, MountText, Network, SpecError};

/// The `local` driver's options: none (the agent runs as the user, unconfined).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unconfined {}

/// What a confining driver (sandbox, podman) shows the agent and allows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    #[serde(default)]
    pub mounts: Vec<Mount>,
    #[serde(default)]
    pub network: Network,
    /// Names only.
    #[serde(default)]
    pub env: Vec<String>,
    /// Memory limit, in MiB.
    #[serde(default)]
    pub memory: Option<u64>,
    /// CPU limit, in whole CPUs.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Process limit.
    #[serde(default)]
    pub pids: Option<u64>,
}

/// The `ssh` driver's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshOptions {
    /// `[USER@]HOST`, as the user's ssh config knows it.
    #[serde(default)]
    pub host: String,
    /// The repository's clone on the host, where the session's worktree is made.
    #[serde(default)]
    pub remote_path: Option<String>,
    /// Names only.
    #[serde(default)]
    pub env: Vec<String>,
}

/// The `podman` driver's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodmanOptions {
    /// The image, or an absolute path: a folder to use as the root.
    #[serde(default)]
    pub image: String,
    #[serde(flatten)]
    pub confinement: Confinement,
}

/// The `qemu` driver's options: the kernel to boot (the newest `/boot/vmlinuz-*` when
/// absent; its modules are read from `/lib/modules/<its version>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QemuOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(flatten)]
    pub confinement: Confinement,
}

/// What every driver's options can say; each kind's own options implement it.
pub(super) trait KindOptions {
    /// This kind's options from what a user gave, with what the kind needs.
    fn from_options(given: &DriverOptions, kind: DriverKind) -> Result<Self, SpecError>
    where
        Self: Sized;

    /// What confines the agent, for the drivers that do.
    fn confinement(&self) -> Option<&Confinement> {
        None
    }

    /// The names of the variables passed to the agent.
    fn env(&self) -> &[String] {
        self.confinement().map_or(&[], |c| &c.env)
    }

    /// Puts this kind's own options (besides the confinement) back as a user gives
    /// them.
    fn give_back(&self, _options: &mut DriverOptions) {}

    /// This kind's own options for people (`host me@box`), before the confinement's.
    fn describe(&self) -> Option<String> {
        None
    }
}

impl KindOptions for Unconfined {
    fn from_options(given: &DriverOptions, _kind: DriverKind) -> Result<Self, SpecError> {
        if given.confines_or_passes() {
            return Err(SpecError::Unconfined);
        }
        Ok(Unconfined {})
    }
}

impl KindOptions for Confinement {
    fn from_options(given: &DriverOptions, _kind: DriverKind) -> Result<Self, SpecError> {
        Ok(given.confinement())
    }

    fn confinement(&self) -> Option<&Confinement> {
        Some(self)
    }
}

impl KindOptions for SshOptions {
    fn from_options(given: &DriverOptions, kind: DriverKind) -> Result<Self, SpecError> {
        Ok(SshOptions {
            host: given.needs(&given.host, kind, "--host USER@HOST")?,
            remote_path: given.remote_path.clone(),
            env: given.env.clone(),
        })
    }

    fn env(&self) -> &[String] {
        &self.env
    }

    fn give_back(&self, options: &mut DriverOptions) {
        options.host = Some(self.host.clone());
        options.remote_path = self.remote_path.clone();
    }

    fn describe(&self) -> Option<String> {
        Some(format!("host {}", self.host))
    }
}

impl KindOptions for PodmanOptions {
    fn from_options(given: &DriverOptions, kind: DriverKind) -> Result<Self, SpecError> {
        Ok(PodmanOptions {
            image: given.needs(&given.image, kind, "--image IMAGE")?,
            confinement: given.confinement(),
        })
    }

    fn confinement(&self) -> Option<&Confinement> {
        Some(&self.confinement)
    }

    fn give_back(&self, options: &mut DriverOptions) {
        options.image = Some(self.image.clone());
    }

    fn describe(&self) -> Option<String> {
        Some(format!("image {}", self.image))
    }
}

impl KindOptions for QemuOptions {
    fn from_options(given: &DriverOptions, _kind: DriverKind) -> Result<Self, SpecError> {
        Ok(QemuOptions {
            kernel: given.kernel.as_deref().map(str::to_string),
            confinement: given.confinement(),
        })
    }

    fn confinement(&self) -> Option<&Confinement> {
        Some(&self.confinement)
    }

    fn give_back(&self, options: &mut DriverOptions) {
        options.kernel = self.kernel.as_deref().map(Into::into);
    }

    fn describe(&self) -> Option<String> {
        self.kernel.as_ref().map(|k| format!("kernel {k}"))
    }
}

impl DriverSpec {
    /// What confines the agent, for the drivers that do.
    pub fn confinement(&self) -> Option<&Confinement> {
        self.kind_options().confinement()
    }

    /// The names of the variables passed to the agent.
    pub fn env(&self) -> &[String] {
        self.kind_options().env()
    }

    pub fn mounts(&self) -> &[Mount] {
        self.confinement().map_or(&[], |c| &c.mounts)
    }

    /// The agent's network: the host's unless the driver confines it.
    pub fn network(&self) -> Network {
        self.confinement().map_or(Network::Host, |c| c.network)
    }

    pub fn memory(&self) -> Option<u64> {
        self.confinement().and_then(|c| c.memory)
    }

    pub fn cpus(&self) -> Option<u32> {
        self.confinement().and_then(|c| c.cpus)
    }

    pub fn pids(&self) -> Option<u64> {
        self.confinement().and_then(|c| c.pids)
    }

    /// The options that resolve to this spec again.
    pub fn options(&self) -> DriverOptions {
        let mut options = DriverOptions {
            driver: Some(self.kind()),
            env: self.env().to_vec(),
            ..Default::default()
        };
        if let Some(c) = self.confinement() {
            options.mounts = c.mounts.iter().cloned().map(MountText).collect();
            options.network = Some(c.network);
            (options.memory, options.cpus, options.pids) = (c.memory, c.cpus, c.pids);
        }
        self.kind_options().give_back(&mut options);
        options
    }

    /// One line for people: `sandbox (network none, memory 256 MiB, env API_KEY)`.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self.kind_options().describe().into_iter().collect();
        if let Some(c) = self.confinement() {
            parts.push(format!("network {}", c.network.as_str()));
            for mount in &c.mounts {
                parts.push(format!("mount {mount}"));
            }
            if let Some(mb) = c.memory {
                parts.push(format!("memory {mb} MiB"));
            }
            if let Some(n) = c.cpus {
                parts.push(format!("cpus {n}"));
            }
            if let Some(n) = c.pids {
                parts.push(format!("pids {n}"));
            }
        }
        if !self.env().is_empty() {
            parts.push(format!("env {}", self.env().join(",")));
        }
        if parts.is_empty() {
            self.kind().to_string()
        } else {
            format!("{} ({})", self.kind(), parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_specs_of_every_kind_read_back() {
        // The shape every session was recorded in: all keys, whatever the kind.
        let old = |kind: &str| {
            serde_json::json!({
                "kind": kind, "mounts": [{"source": "/data", "read_only": true}],
                "network": "none", "env": ["A"], "memory": 256, "cpus": null, "pids": 64,
                "image": "img", "host": "me@box", "remote_path": "/srv/repo"
            })
        };
        let read = |kind: &str| serde_json::from_value::<DriverSpec>(old(kind)).unwrap();
        assert_eq!(read("local"), DriverSpec::default());
        let confinement = Confinement {
            mounts: vec![Mount::parse("/data:ro").unwrap()],
            network: Network::None,
            env: vec!["A".into()],
            memory: Some(256),
            cpus: None,
            pids: Some(64),
        };
        assert_eq!(read("sandbox"), DriverSpec::Sandbox(confinement.clone()));
        assert_eq!(
            read("ssh"),
            DriverSpec::Ssh(SshOptions {
                host: "me@box".into(),
                remote_path: Some("/srv/repo".into()),
                env: vec!["A".into()],
            })
        );
        assert_eq!(
            read("podman"),
            DriverSpec::Podman(PodmanOptions {
                image: "img".into(),
                confinement,
            })
        );
        let minimal: DriverSpec =
            serde_json::from_str(r#"{"kind":"sandbox","network":"host"}"#).unwrap();
        assert_eq!(minimal.network(), Network::Host);
        for kind in ["local", "sandbox", "ssh", "podman"] {
            let spec = read(kind);
            let text = serde_json::to_string(&spec).unwrap();
            assert!(
                text.starts_with(&format!("{{\"kind\":\"{kind}\"")),
                "{text}"
            );
            assert_eq!(serde_json::from_str::<DriverSpec>(&text).unwrap(), spec);
            assert_eq!(spec.options().resolve().unwrap(), spec, "{kind}");
        }
    }

    #[test]
    fn summaries_name_what_applies() {
        let spec = DriverSpec::Sandbox(Confinement {
            memory: Some(256),
            env: vec!["API_KEY".into()],
            ..Default::default()
        });
        assert_eq!(
            spec.summary(),
            "sandbox (network none, memory 256 MiB, env API_KEY)"
        );
        assert_eq!(DriverSpec::default().summary(), "local");
        let ssh = DriverSpec::Ssh(SshOptions {
            host: "me@box".into(),
            ..Default::default()
        });
        assert_eq!(ssh.summary(), "ssh (host me@box)");
        assert_eq!(ssh.network(), Network::Host);
    }
}
