//! The agents crucible knows without settings: well-known programs that speak ACP on
//! their stdin and stdout. A built-in profile is used when its program is on `PATH` and
//! the settings do not define a profile of the same name.

use std::path::PathBuf;

use serde::Serialize;

use super::Config;
use super::profiles::{AgentKind, AgentProfile};

/// Why no profile of a name can be used; each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A built-in profile whose program is not found (`looked`: where, after "not on
    /// PATH").
    #[error(
        "the built-in profile {name} runs {command}, which is not on PATH{looked}: install it ({install}) or set `command` in [agents.{name}]"
    )]
    NotInstalled {
        name: String,
        command: &'static str,
        install: &'static str,
        looked: String,
    },
    /// No profile of that name (`known`: the ones there are).
    #[error("no agent profile {name:?}; {known} (cru agents lists every one)")]
    Unknown { name: String, known: String },
}

/// Why a session that names no agent gets none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAgent {
    /// No profile is configured and no built-in one is installed.
    None,
    /// Several could start: these.
    Many(Vec<String>),
}

/// A well-known ACP agent: the profile name it gets, how it is started, how to get it.
pub struct Known {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    pub install: &'static str,
}

/// Each of these starts in ACP mode with the arguments given (checked against each
/// project's documentation).
pub const KNOWN: &[Known] = &[
    Known {
        name: "claude",
        command: "claude-agent-acp",
        args: &[],
        install: "npm install -g @agentclientprotocol/claude-agent-acp",
    },
    Known {
        name: "codex",
        command: "codex-acp",
        args: &[],
        install: "npm install -g @zed-industries/codex-acp",
    },
    Known {
        name: "gemini",
        command: "gemini",
        args: &["--acp"],
        install: "npm install -g @google/gemini-cli",
    },
    Known {
        name: "opencode",
        command: "opencode",
        args: &["acp"],
        install: "npm install -g opencode-ai",
    },
    Known {
        name: "copilot",
        command: "copilot",
        args: &["--acp", "--stdio"],
        install: "npm install -g @github/copilot",
    },
    Known {
        name: "goose",
        command: "goose",
        args: &["acp"],
        install: "see https://block.github.io/goose/",
    },
];

/// Where a profile comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileSource {
    Settings,
    BuiltIn,
}

impl ProfileSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileSource::Settings => "settings",
            ProfileSource::BuiltIn => "built-in",
        }
    }
}

/// One profile, as `cru agents` lists it.
#[derive(Debug, Clone)]
pub struct ProfileEntry {
    pub name: String,
    pub profile: AgentProfile,
    pub source: ProfileSource,
    /// Where its program is; `None` when it is not found (an `internal` profile has
    /// none to find).
    pub program: Option<PathBuf>,
}

impl ProfileEntry {
    /// Whether a session of this profile can start: its program is there, or it needs
    /// none.
    pub fn usable(&self) -> bool {
        self.profile.kind == AgentKind::Internal || self.program.is_some()
    }
}

impl AgentProfile {
    /// An ACP profile running `command` with `args`, every other setting at its default.
    pub fn acp(command: &str, args: &[&str]) -> Self {
        Self {
            kind: AgentKind::Acp,
            command: command.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Default::default(),
            startup_timeout_secs: super::profiles::default_startup_timeout(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: None,
            system_prompt: None,
            allow_writes: false,
            allow_commands: false,
            recover_tool_errors: false,
            driver: None,
            model_summaries: true,
            idle_stop_minutes: None,
            fallback: Vec::new(),
            fallback_return: false,
            plan_review: false,
        }
    }
}

/// How a program is looked for: [`crate::sys::on_path`], another process's `PATH`, or a
/// stand-in in tests.
pub type Finder<'a> = &'a dyn Fn(&str) -> Option<PathBuf>;

impl Config {
    /// The profile called `name`: the settings' own, else a built-in one whose program
    /// is on `PATH`. The error says what to do.
    pub fn profile(&self, name: &str) -> Result<AgentProfile, ProfileError> {
        self.profile_with(name, &crate::sys::on_path)
    }

    /// Every profile: the settings', then the built-in ones the settings do not
    /// override, each with where its program is.
    pub fn profiles(&self) -> Vec<ProfileEntry> {
        self.profiles_with(&crate::sys::on_path)
    }

    /// The profiles `/new` chooses among: the settings' when they name any, otherwise
    /// the built-in ones whose program is on `PATH`.
    pub fn startable(&self) -> Vec<String> {
        self.startable_with(&crate::sys::on_path)
    }

    fn profile_with(&self, name: &str, find: Finder) -> Result<AgentProfile, ProfileError> {
        self.profile_found(name, find, "")
    }

    /// [`Config::profile`], programs looked for by `find`; `looked` says where, after
    /// "not on PATH" (e.g. " in this shell nor the daemon's (PATH=…)").
    pub fn profile_found(
        &self,
        name: &str,
        find: Finder,
        looked: &str,
    ) -> Result<AgentProfile, ProfileError> {
        if let Some(profile) = self.agents.get(name) {
            return Ok(profile.clone());
        }
        if let Some(known) = KNOWN.iter().find(|k| k.name == name) {
            return match find(known.command) {
                Some(_) => Ok(AgentProfile::acp(known.command, known.args)),
                None => Err(ProfileError::NotInstalled {
                    name: name.to_string(),
                    command: known.command,
                    install: known.install,
                    looked: looked.to_string(),
                }),
            };
        }
        let configured: Vec<&str> = self.agents.keys().map(String::as_str).collect();
        let found: Vec<String> = self
            .profiles_with(find)
            .into_iter()
            .filter(|p| p.source == ProfileSource::BuiltIn && p.usable())
            .map(|p| p.name)
            .collect();
        let mut known = Vec::new();
        if !configured.is_empty() {
            known.push(format!("configured: {}", configured.join(", ")));
        }
        if !found.is_empty() {
            known.push(format!("built-in: {}", found.join(", ")));
        }
        if known.is_empty() {
            known.push("none found".into());
        }
        Err(ProfileError::Unknown {
            name: name.to_string(),
            known: known.join("; "),
        })
    }

    fn profiles_with(&self, find: Finder) -> Vec<ProfileEntry> {
        let mut out: Vec<ProfileEntry> = self
            .agents
            .iter()
            .map(|(name, profile)| ProfileEntry {
                name: name.clone(),
                program: program_of(profile, find),
                profile: profile.clone(),
                source: ProfileSource::Settings,
            })
            .collect();
        for known in KNOWN {
            if self.agents.contains_key(known.name) {
                continue;
            }
            let profile = AgentProfile::acp(known.command, known.args);
            out.push(ProfileEntry {
                name: known.name.to_string(),
                program: program_of(&profile, find),
                profile,
                source: ProfileSource::BuiltIn,
            });
        }
        out
    }

    /// The profiles a new session may start: every configured one, then the built-in ones
    /// whose program is installed.
    fn startable_with(&self, find: Finder) -> Vec<String> {
        self.profiles_with(find)
            .into_iter()
            .filter(|p| p.source == ProfileSource::Settings || p.usable())
            .map(|p| p.name)
            .collect()
    }

    /// The profile a new session starts when none is named: `[tui] default_agent`, else
    /// the one profile the settings configure, else the one startable profile.
    pub fn default_agent(&self) -> Option<String> {
        self.chosen_agent().ok()
    }

    /// [`Config::default_agent`], or why there is none: no startable profile, or several
    /// (named, for the person to choose).
    pub fn chosen_agent(&self) -> Result<String, NoAgent> {
        if !self.tui.default_agent.is_empty() {
            return Ok(self.tui.default_agent.clone());
        }
        if let (1, Some(only)) = (self.agents.len(), self.agents.keys().next()) {
            return Ok(only.clone());
        }
        let mut found = self.startable();
        match found.len() {
            0 => Err(NoAgent::None),
            1 => Ok(found.remove(0)),
            _ => Err(NoAgent::Many(found)),
        }
    }
}

/// Where a profile's program is: a path as given, else found by `find`.
fn program_of(profile: &AgentProfile, find: Finder) -> Option<PathBuf> {
    if profile.kind == AgentKind::Internal {
        return None;
    }
    if profile.command.contains('/') {
        let path = PathBuf::from(&profile.command);
        return crate::sys::is_executable(&path).then_some(path);
    }
    find(&profile.command)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `PATH` holding only `claude-agent-acp`.
    fn claude_only(program: &str) -> Option<PathBuf> {
        (program == "claude-agent-acp").then(|| PathBuf::from("/opt/bin/claude-agent-acp"))
    }

    #[test]
    fn built_in_profiles_are_used_when_found_and_settings_override_them() {
        let find: Finder = &claude_only;
        {
            let config = Config::default();
            let claude = config.profile_with("claude", find).unwrap();
            assert_eq!(claude.command, "claude-agent-acp");
            assert_eq!(config.startable_with(find), ["claude"]);
            let codex = config.profile_with("codex", find).unwrap_err().to_string();
            assert!(
                codex.contains("codex-acp") && codex.contains("npm install"),
                "{codex}"
            );
            let list = config.profiles_with(find);
            let entry = list.iter().find(|p| p.name == "claude").unwrap();
            assert_eq!(entry.source, ProfileSource::BuiltIn);
            assert!(entry.usable());
            assert!(!list.iter().find(|p| p.name == "gemini").unwrap().usable());

            let mut config = Config::default();
            config
                .agents
                .insert("claude".into(), AgentProfile::acp("my-claude", &["--x"]));
            assert_eq!(
                config.profile_with("claude", find).unwrap().command,
                "my-claude"
            );
            let list = config.profiles_with(find);
            assert_eq!(list.iter().filter(|p| p.name == "claude").count(), 1);
            assert_eq!(list[0].source, ProfileSource::Settings);
            // A configured profile stands for the built-in of its name.
            assert_eq!(config.startable_with(find), ["claude"]);
            // Profiles of the settings come first, then the installed built-in ones: one
            // configured profile does not hide them.
            let mut fixer = Config::default();
            fixer
                .agents
                .insert("fixer".into(), AgentProfile::acp("not-installed", &[]));
            assert_eq!(fixer.startable_with(find), ["fixer", "claude"]);
            assert_eq!(fixer.default_agent().as_deref(), Some("fixer"));
            let unknown = config.profile_with("nope", find).unwrap_err().to_string();
            assert!(unknown.contains("configured: claude "), "{unknown}");
            assert!(unknown.contains("cru agents"), "{unknown}");
        }
    }
}
