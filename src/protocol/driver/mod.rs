//! Where a session's agent runs and with what: the driver kinds and what each can do,
//! the options a user gives (`cru session new --driver …`, `/new`, a session file,
//! `[drivers.<name>]`, see [`options`]) and the resolved spec a session records (see
//! [`spec`]). Only environment variable *names* are ever kept: their values come from
//! the environment of the process that asked for the session (held in the daemon's
//! memory, see [`super::client_env`]), else from the daemon's, when the agent starts.

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod options;
pub mod spec;

pub use options::{DriverOptions, NewWords, parse_new_words};
use spec::KindOptions;
pub use spec::{Confinement, PodmanOptions, QemuOptions, SshOptions, Unconfined};

/// Why driver options cannot be used: each names what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown driver {0:?}: use {names}", names = DriverKind::names())]
    UnknownDriver(String),
    #[error("unknown network {0:?}: use none or host")]
    UnknownNetwork(String),
    #[error("bad mount {0:?}: use SRC[:DST][:ro]")]
    BadMount(String),
    #[error("bad mount {0:?}: the place inside must be an absolute path")]
    RelativeMount(String),
    #[error("needs a path, not an empty value")]
    BadPath,
    #[error("needs a whole number, not {0:?}")]
    NotWhole(String),
    /// Never echoes the entry: what follows the `=` may be a secret.
    #[error("an env entry holds '=': pass variable names only; values come from your environment")]
    EnvValue,
    #[error(
        "{0:?} is not an environment variable name (pass names; values come from your environment)"
    )]
    NotAName(String),
    #[error("a limit of 0 would stop the agent from starting")]
    ZeroLimit,
    #[error(
        "the local driver runs the agent as you, unconfined: mounts, network, env and limits need --driver sandbox, ssh, podman or qemu"
    )]
    Unconfined,
    /// A driver without an option it cannot run without (`what`: the flag to give).
    #[error("the {driver} driver needs {what}")]
    Needs {
        driver: DriverKind,
        what: &'static str,
    },
}

/// Every driver, one row each: its kind, its name (in flags, settings and the recorded
/// spec), the options it records and what it can do. A row gives a [`DriverKind`], a
/// [`DriverSpec`] variant holding those options, the name, the capabilities and the
/// resolving of a user's options; the driver itself is its own file under `driver/`.
macro_rules! drivers {
    ($( $(#[$doc:meta])* $kind:ident = $name:literal, $options:ty, $capabilities:expr; )*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum DriverKind {
            $( $(#[$doc])* #[serde(rename = $name)] $kind, )*
        }

        /// Where a session's agent runs, resolved; recorded with the session. Stored
        /// and sent as one JSON object tagged by `kind` (see [`spec`]).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum DriverSpec {
            $( $(#[$doc])* #[serde(rename = $name)] $kind($options), )*
        }

        impl DriverKind {
            pub const ALL: &[DriverKind] = &[$(DriverKind::$kind),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(DriverKind::$kind => $name,)*
                }
            }

            fn capabilities(self) -> Capabilities {
                match self {
                    $(DriverKind::$kind => $capabilities,)*
                }
            }

            /// This kind's spec from what a user gave (checked in
            /// [`DriverOptions::resolve`] for what every kind needs).
            fn spec_of(self, given: &DriverOptions) -> Result<DriverSpec, SpecError> {
                match self {
                    $(DriverKind::$kind => {
                        <$options as KindOptions>::from_options(given, self).map(DriverSpec::$kind)
                    })*
                }
            }
        }

        impl DriverSpec {
            pub fn kind(&self) -> DriverKind {
                match self {
                    $(DriverSpec::$kind(_) => DriverKind::$kind,)*
                }
            }

            /// The kind's own options, as what every kind's options can say.
            fn kind_options(&self) -> &dyn KindOptions {
                match self {
                    $(DriverSpec::$kind(options) => options,)*
                }
            }
        }
    };
}

drivers! {
    /// On the host, as the user (no isolation).
    Local = "local", Unconfined, Capabilities {
        confines: false, passes_env: false, runs_apart: false, makes_environment: false,
    };
    /// On the host in a default-deny bubblewrap sandbox.
    Sandbox = "sandbox", Confinement, Capabilities {
        confines: true, passes_env: true, runs_apart: false, makes_environment: true,
    };
    /// On another machine over the system's `ssh`.
    Ssh = "ssh", SshOptions, Capabilities {
        confines: false, passes_env: true, runs_apart: true, makes_environment: true,
    };
    /// In a podman container.
    Podman = "podman", PodmanOptions, Capabilities {
        confines: true, passes_env: true, runs_apart: true, makes_environment: true,
    };
    /// In a QEMU microVM of its own, booted from the host's kernel and files.
    Qemu = "qemu", QemuOptions, Capabilities {
        confines: true, passes_env: true, runs_apart: false, makes_environment: true,
    };
}

/// What a driver can do; the answers of [`DriverKind`]'s methods of the same names.
#[derive(Debug, Clone, Copy)]
struct Capabilities {
    confines: bool,
    passes_env: bool,
    runs_apart: bool,
    makes_environment: bool,
}

#[allow(
    clippy::derivable_impls,
    reason = "the kinds come from the drivers! table; the default is chosen here"
)]
impl Default for DriverKind {
    fn default() -> Self {
        DriverKind::Local
    }
}

impl Default for DriverSpec {
    fn default() -> Self {
        DriverSpec::Local(Unconfined {})
    }
}

impl DriverKind {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| SpecError::UnknownDriver(text.to_string()))
    }

    /// Every kind's name, for people: `local, sandbox, ssh or podman`.
    pub fn names() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// Whether the agent is confined (sandbox, podman): mounts, a network of its own
    /// (none unless asked) and limits apply. The others run it with the host's network.
    pub fn confines(self) -> bool {
        self.capabilities().confines
    }

    /// Whether the agent gets only the variables named for it (every driver but local,
    /// whose agent inherits the daemon's environment).
    pub fn passes_env(self) -> bool {
        self.capabilities().passes_env
    }

    /// Whether the agent runs apart from this machine's files and programs (ssh: another
    /// machine; podman: a container): its program is found there, not on this `PATH`;
    /// it needs a worktree of its own; crucible's own agent, which runs in the daemon,
    /// cannot use it.
    pub fn runs_apart(self) -> bool {
        self.capabilities().runs_apart
    }

    /// Whether the driver makes an environment per session that is torn down when idle
    /// and made again by the next prompt (every driver but local), and so has a
    /// `[drivers.<name>]` section of defaults.
    pub fn makes_environment(self) -> bool {
        self.capabilities().makes_environment
    }
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// Its own network namespace: not even the host's loopback.
    #[default]
    None,
    /// The host's network.
    Host,
}

impl Network {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        match text {
            "none" => Ok(Network::None),
            "host" => Ok(Network::Host),
            other => Err(SpecError::UnknownNetwork(other.to_string())),
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
    pub fn parse(text: &str) -> Result<Self, SpecError> {
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
            _ => return Err(SpecError::BadMount(text.to_string())),
        };
        if source.is_empty() || target.is_some_and(str::is_empty) {
            return Err(SpecError::BadMount(text.to_string()));
        }
        if target.is_some_and(|t| !t.starts_with('/')) {
            return Err(SpecError::RelativeMount(text.to_string()));
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

/// A mount written as `SRC[:DST][:ro]`, as settings, session files and flags spell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountText(pub Mount);

impl MountText {
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        Mount::parse(text).map(MountText)
    }
}

/// Written as a string, `SRC[:DST][:ro]`.
impl schemars::JsonSchema for MountText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MountText".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A host path made visible inside: `SRC[:DST][:ro]`, read-write unless `:ro`.",
            "type": "string",
            "minLength": 1,
        })
    }
}

/// A whole number as a flag gives it.
pub fn whole<T: std::str::FromStr>(text: &str) -> Result<T, SpecError> {
    text.parse()
        .map_err(|_| SpecError::NotWhole(text.to_string()))
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
}
