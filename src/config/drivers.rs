//! `[drivers]`: the defaults of each driver, and the spec a session gets from what it
//! asks for, its profile and those defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Config;
use super::profiles::AgentProfile;
use crate::protocol::{DriverKind, DriverOptions, DriverSpec, SpecError};

/// `[drivers]`: defaults per driver, under what a session asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriversConfig {
    /// A sandbox, ssh or podman environment idle this long is torn down (the worktree
    /// and transcript stay) and made again by the next prompt.
    pub idle_timeout_minutes: f64,
    /// `[drivers.<name>]`, keyed by the driver's name: an unknown name is refused with
    /// the names there are.
    #[serde(flatten)]
    pub sections: BTreeMap<DriverKind, DriverOptions>,
}

impl DriversConfig {
    /// `[drivers.<kind>]`: the defaults of a driver that makes an environment; none for
    /// the others.
    pub fn section(&self, kind: DriverKind) -> DriverOptions {
        self.sections.get(&kind).cloned().unwrap_or_default()
    }

    /// Refuses a section for a driver that makes no environment (it has no options).
    pub fn check(&self) -> Result<(), DriversError> {
        match self.sections.keys().find(|kind| !kind.makes_environment()) {
            Some(kind) => Err(DriversError::TakesNoOptions(*kind)),
            None => Ok(()),
        }
    }
}

/// A `[drivers]` table that cannot be meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriversError {
    /// A section for a driver that makes no environment, so has no options to give.
    #[error("[drivers.{0}]: the {0} driver takes no options")]
    TakesNoOptions(DriverKind),
}

/// The schema of `[drivers]`: `idle_timeout_minutes` and a `[drivers.<name>]` table for
/// each driver that makes an environment (the names serde's flattened map takes, less
/// the ones [`DriversConfig::check`] refuses); nothing else.
impl schemars::JsonSchema for DriversConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DriversConfig".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut properties = serde_json::Map::new();
        properties.insert(
            "idle_timeout_minutes".into(),
            serde_json::json!({
                "description": "A sandbox, ssh or podman environment idle this long is torn down (the worktree and transcript stay) and made again by the next prompt.",
                "type": "number",
                "minimum": 0,
                "default": Self::default().idle_timeout_minutes,
            }),
        );
        for kind in DriverKind::ALL.iter().filter(|k| k.makes_environment()) {
            let mut options = generator.subschema_for::<DriverOptions>();
            options.insert(
                "description".into(),
                format!("`[drivers.{kind}]`: the {kind} driver's defaults, under what a session asks for.").into(),
            );
            properties.insert(kind.as_str().into(), options.to_value());
        }
        schemars::json_schema!({
            "description": "`[drivers]`: defaults per driver, under what a session asks for.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

impl Default for DriversConfig {
    fn default() -> Self {
        Self {
            idle_timeout_minutes: 15.0,
            sections: BTreeMap::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Network;

    #[test]
    fn sections_are_keyed_by_the_drivers_names() {
        let config: Config = toml::from_str(
            "[drivers]\nidle_timeout_minutes = 5\n\
             [drivers.sandbox]\nmemory = 512\nnetwork = \"host\"\n\
             [drivers.ssh]\nhost = \"me@box\"\n",
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.drivers.idle_timeout_minutes, 5.0);
        let sandbox = config.drivers.section(DriverKind::Sandbox);
        assert_eq!(
            (sandbox.memory, sandbox.network),
            (Some(512), Some(Network::Host))
        );
        assert_eq!(
            config.drivers.section(DriverKind::Ssh).host.as_deref(),
            Some("me@box")
        );
        assert_eq!(
            config.drivers.section(DriverKind::Podman),
            DriverOptions::default()
        );
    }

    #[test]
    fn a_section_of_no_driver_or_of_local_is_refused() {
        let err = Config::parse_layer("[drivers.lxc]\nmemory = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lxc") && err.contains("sandbox"), "{err}");
        let err = Config::parse_layer("[drivers.local]\nmemory = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("[drivers.local]"), "{err}");
        let err = Config::parse_layer("[drivers.sandbox]\nmemroy = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("memroy"), "{err}");
    }
}
