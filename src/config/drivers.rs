//! `[drivers]`: the defaults of each driver, and the spec a session gets from what it
//! asks for, its profile and those defaults.

use serde::{Deserialize, Serialize};

use super::{AgentProfile, Config};
use crate::protocol::{DriverKind, DriverOptions, DriverSpec, SpecError};

/// `[drivers]`: defaults per driver, under what a session asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DriversConfig {
    /// A sandbox, ssh or podman environment idle this long is torn down (the worktree
    /// and transcript stay) and made again by the next prompt.
    pub idle_timeout_minutes: f64,
    pub sandbox: DriverOptions,
    pub ssh: DriverOptions,
    pub podman: DriverOptions,
}

impl DriversConfig {
    /// `[drivers.<kind>]`: the defaults of a driver that makes an environment; none for
    /// the others.
    pub fn section(&self, kind: DriverKind) -> DriverOptions {
        match kind {
            DriverKind::Sandbox => self.sandbox.clone(),
            DriverKind::Ssh => self.ssh.clone(),
            DriverKind::Podman => self.podman.clone(),
            DriverKind::Local => DriverOptions::default(),
        }
    }
}

impl Default for DriversConfig {
    fn default() -> Self {
        Self {
            idle_timeout_minutes: 15.0,
            sandbox: DriverOptions::default(),
            ssh: DriverOptions::default(),
            podman: DriverOptions::default(),
        }
    }
}

impl Config {
    /// The driver a session of `profile` gets when it asks for `asked`: the driver named
    /// in `asked`, else the profile's, else `local`; options from `asked` over
    /// `[drivers.<name>]`.
    pub fn driver_spec(
        &self,
        profile: &AgentProfile,
        asked: &DriverOptions,
    ) -> Result<DriverSpec, SpecError> {
        let kind = asked.driver.or(profile.driver).unwrap_or_default();
        let mut merged = asked.over(&self.drivers.section(kind));
        merged.driver = Some(kind);
        merged.resolve()
    }
}
