//! Where a session's agent runs (seed 004's drivers) and with what: the options a user
//! gives (`cru session new --driver …`, `/new`, a session file, `[drivers.<name>]`) and
//! the resolved spec a session records. Only environment variable *names* are ever
//! kept: their values come from the environment of the process that asked for the
//! session (held in the daemon's memory, see [`super::client_env`]), else from the
//! daemon's, when the agent starts.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverKind {
    /// On the host, as the user (no isolation).
    #[default]
    Local,
    /// On the host in a default-deny bubblewrap sandbox.
    Sandbox,
    /// On another machine over the system's `ssh`.
    Ssh,
    /// In a podman container.
    Podman,
}

impl DriverKind {
    pub const ALL: [DriverKind; 4] = [
        DriverKind::Local,
        DriverKind::Sandbox,
        DriverKind::Ssh,
        DriverKind::Podman,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DriverKind::Local => "local",
            DriverKind::Sandbox => "sandbox",
            DriverKind::Ssh => "ssh",
            DriverKind::Podman => "podman",
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| format!("unknown driver {text:?}: use local, sandbox, ssh or podman"))
    }
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// Its own network namespace: not even the host's loopback.
    #[default]
    None,
    /// The host's network.
    Host,
}

impl Network {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "none" => Ok(Network::None),
            "host" => Ok(Network::Host),
            other => Err(format!("unknown network {other:?}: use none or host")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
        }
    }
}

/// `SRC[:DST][:ro]`: a host path made visible inside, read-write unless `ro`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub source: String,
    /// Where it appears inside; the same path when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default)]
    pub read_only: bool,
}

impl Mount {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts: Vec<&str> = text.split(':').collect();
        let read_only = match parts.last() {
            Some(&"ro") if parts.len() > 1 => {
                parts.pop();
                true
            }
            Some(&"rw") if parts.len() > 1 => {
                parts.pop();
                false
            }
            _ => false,
        };
        let (source, target) = match parts.as_slice() {
            [source] => (*source, None),
            [source, target] => (*source, Some(*target)),
            _ => return Err(format!("bad mount {text:?}: use SRC[:DST][:ro]")),
        };
        if source.is_empty() || target.is_some_and(str::is_empty) {
            return Err(format!("bad mount {text:?}: use SRC[:DST][:ro]"));
        }
        if target.is_some_and(|t| !t.starts_with('/')) {
            return Err(format!(
                "bad mount {text:?}: the place inside must be an absolute path"
            ));
        }
        Ok(Mount {
            source: source.to_string(),
            target: target.map(str::to_string),
            read_only,
        })
    }

    /// Where it appears inside.
    pub fn inside(&self) -> &str {
        self.target.as_deref().unwrap_or(&self.source)
    }
}

impl fmt::Display for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let Some(target) = &self.target {
            write!(f, ":{target}")?;
        }
        f.write_str(if self.read_only { ":ro" } else { ":rw" })
    }
}

impl Serialize for MountText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for MountText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Mount::parse(&text)
            .map(MountText)
            .map_err(serde::de::Error::custom)
    }
}

/// A mount written as `SRC[:DST][:ro]`, as settings and session files spell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountText(pub Mount);

/// What a user asks for; anything left out comes from the profile, `[drivers.<name>]`
/// and the defaults. The same keys in settings, session files and on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriverOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverKind>,
    /// Added to the configured mounts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<MountText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// Names of environment variables to pass (added to the configured); the values are
    /// the asking process's, else the daemon's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Memory limit, in MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// CPU limit, in whole CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Process limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// `podman`: the image, or an absolute path: a folder to use as the root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `ssh`: `[USER@]HOST`, as the user's ssh config knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `ssh`: the repository's clone on the host, where the session's worktree is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_path: Option<String>,
}

impl DriverOptions {
    /// `self` over `base`: single values from `self` when given, lists joined.
    pub fn over(&self, base: &DriverOptions) -> DriverOptions {
        let mut mounts = base.mounts.clone();
        mounts.extend(self.mounts.iter().cloned());
        let mut env = base.env.clone();
        for name in &self.env {
            if !env.contains(name) {
                env.push(name.clone());
            }
        }
        DriverOptions {
            driver: self.driver.or(base.driver),
            mounts,
            network: self.network.or(base.network),
            env,
            memory: self.memory.or(base.memory),
            cpus: self.cpus.or(base.cpus),
            pids: self.pids.or(base.pids),
            image: self.image.clone().or_else(|| base.image.clone()),
            host: self.host.clone().or_else(|| base.host.clone()),
            remote_path: self
                .remote_path
                .clone()
                .or_else(|| base.remote_path.clone()),
        }
    }

    /// The spec a session records, checked: what the driver needs is there, names are
    /// names, and nothing is given that the driver would silently ignore.
    pub fn resolve(&self) -> Result<DriverSpec, String> {
        let kind = self.driver.unwrap_or_default();
        for name in &self.env {
            if name.contains('=') {
                // Never echo it: what follows the `=` may be a secret.
                return Err("an env entry holds '=': pass variable names only; values come from your environment".into());
            }
            if !super::client_env::is_name(name) {
                return Err(format!(
                    "{name:?} is not an environment variable name (pass names; values come from your environment)"
                ));
            }
        }
        if self.cpus == Some(0) || self.memory == Some(0) || self.pids == Some(0) {
            return Err("a limit of 0 would stop the agent from starting".into());
        }
        let isolating = !matches!(kind, DriverKind::Local | DriverKind::Ssh);
        if kind == DriverKind::Local {
            let given = !self.mounts.is_empty()
                || self.network.is_some()
                || !self.env.is_empty()
                || self.memory.is_some()
                || self.cpus.is_some()
                || self.pids.is_some();
            if given {
                return Err("the local driver runs the agent as you, unconfined: mounts, network, env and limits need --driver sandbox, ssh or podman".into());
            }
        }
        if kind == DriverKind::Ssh && self.host.is_none() {
            return Err("the ssh driver needs --host USER@HOST".into());
        }
        if kind == DriverKind::Podman && self.image.is_none() {
            return Err("the podman driver needs --image IMAGE".into());
        }
        Ok(DriverSpec {
            kind,
            mounts: self.mounts.iter().map(|m| m.0.clone()).collect(),
            network: if isolating {
                self.network.unwrap_or_default()
            } else {
                Network::Host
            },
            env: self.env.clone(),
            memory: self.memory,
            cpus: self.cpus,
            pids: self.pids,
            image: self.image.clone(),
            host: self.host.clone(),
            remote_path: self.remote_path.clone(),
        })
    }
}

/// Where a session's agent runs, resolved; recorded with the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverSpec {
    pub kind: DriverKind,
    #[serde(default)]
    pub mounts: Vec<Mount>,
    #[serde(default)]
    pub network: Network,
    /// Names only.
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub memory: Option<u64>,
    #[serde(default)]
    pub cpus: Option<u32>,
    #[serde(default)]
    pub pids: Option<u64>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub remote_path: Option<String>,
}

impl DriverSpec {
    /// The options that resolve to this spec again.
    pub fn options(&self) -> DriverOptions {
        DriverOptions {
            driver: Some(self.kind),
            mounts: self.mounts.iter().cloned().map(MountText).collect(),
            network: (self.kind != DriverKind::Local && self.kind != DriverKind::Ssh)
                .then_some(self.network),
            env: self.env.clone(),
            memory: self.memory,
            cpus: self.cpus,
            pids: self.pids,
            image: self.image.clone(),
            host: self.host.clone(),
            remote_path: self.remote_path.clone(),
        }
    }

    /// One line for people: `sandbox (network none, memory 256 MiB, env API_KEY)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(host) = &self.host {
            parts.push(format!("host {host}"));
        }
        if let Some(image) = &self.image {
            parts.push(format!("image {image}"));
        }
        if self.kind != DriverKind::Local && self.kind != DriverKind::Ssh {
            parts.push(format!("network {}", self.network.as_str()));
        }
        for mount in &self.mounts {
            parts.push(format!("mount {mount}"));
        }
        if let Some(mb) = self.memory {
            parts.push(format!("memory {mb} MiB"));
        }
        if let Some(n) = self.cpus {
            parts.push(format!("cpus {n}"));
        }
        if let Some(n) = self.pids {
            parts.push(format!("pids {n}"));
        }
        if !self.env.is_empty() {
            parts.push(format!("env {}", self.env.join(",")));
        }
        if parts.is_empty() {
            self.kind.to_string()
        } else {
            format!("{} ({})", self.kind, parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_parse_as_the_cli_spells_them() {
        let m = Mount::parse("/data").unwrap();
        assert_eq!(
            (m.source.as_str(), m.inside(), m.read_only),
            ("/data", "/data", false)
        );
        let m = Mount::parse("/data:ro").unwrap();
        assert_eq!((m.inside(), m.read_only), ("/data", true));
        let m = Mount::parse("./cache:/cache").unwrap();
        assert_eq!(
            (m.source.as_str(), m.inside(), m.read_only),
            ("./cache", "/cache", false)
        );
        let m = Mount::parse("/a:/b:ro").unwrap();
        assert_eq!((m.inside(), m.read_only), ("/b", true));
        assert!(Mount::parse("/a:relative").is_err());
        assert!(Mount::parse("/a:/b:/c").is_err());
        assert!(Mount::parse(":/b").is_err());
    }

    #[test]
    fn options_layer_and_resolve() {
        let base = DriverOptions {
            driver: Some(DriverKind::Sandbox),
            env: vec!["A".into()],
            memory: Some(512),
            ..Default::default()
        };
        let asked = DriverOptions {
            env: vec!["B".into(), "A".into()],
            memory: Some(128),
            ..Default::default()
        };
        let spec = asked.over(&base).resolve().unwrap();
        assert_eq!(spec.kind, DriverKind::Sandbox);
        assert_eq!(spec.env, ["A", "B"]);
        assert_eq!(spec.memory, Some(128));
        assert_eq!(
            spec.network,
            Network::None,
            "isolated drivers default to no network"
        );
    }

    #[test]
    fn resolve_refuses_what_would_be_ignored_or_leak() {
        let local_with_limits = DriverOptions {
            memory: Some(100),
            ..Default::default()
        };
        assert!(local_with_limits.resolve().is_err());
        let value_not_name = DriverOptions {
            driver: Some(DriverKind::Sandbox),
            env: vec!["TOKEN=abc".into()],
            ..Default::default()
        };
        let err = value_not_name.resolve().unwrap_err();
        assert!(!err.contains("abc"), "a value is never echoed: {err}");
        let ssh = DriverOptions {
            driver: Some(DriverKind::Ssh),
            ..Default::default()
        };
        assert!(ssh.resolve().unwrap_err().contains("--host"));
        let podman = DriverOptions {
            driver: Some(DriverKind::Podman),
            ..Default::default()
        };
        assert!(podman.resolve().unwrap_err().contains("--image"));
    }
}
