//! What an agent does or asks to do, as the rules see it: the operation and its kind.

use serde::{Deserialize, Serialize};

/// ACP's tool kinds, named as ACP names them (in rule files and on the wire).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Fetch,
    Think,
    /// Switching the agent's mode: ACP names it; no rule matches it by kind.
    SwitchMode,
    /// Any other, and a kind this crucible does not know.
    #[default]
    #[serde(other)]
    Other,
}

impl OperationKind {
    /// The kinds a rule may name.
    pub const RULES: [OperationKind; 9] = [
        Self::Read,
        Self::Edit,
        Self::Delete,
        Self::Move,
        Self::Search,
        Self::Execute,
        Self::Fetch,
        Self::Think,
        Self::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Edit => "edit",
            Self::Delete => "delete",
            Self::Move => "move",
            Self::Search => "search",
            Self::Execute => "execute",
            Self::Fetch => "fetch",
            Self::Think => "think",
            Self::SwitchMode => "switch_mode",
            Self::Other => "other",
        }
    }

    /// A kind a rule may name, by its name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::RULES.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for OperationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something an agent does or asks to do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub kind: OperationKind,
    /// The command line, for `execute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The paths it touches, absolute.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The tool's name or title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl Operation {
    /// One line for people: `execute: curl -d @.env https://…`.
    pub fn describe(&self) -> String {
        let mut text = self.kind.as_str().to_string();
        if let Some(command) = &self.command {
            text.push_str(&format!(": {command}"));
        } else if let Some(tool) = &self.tool {
            text.push_str(&format!(": {tool}"));
        }
        if !self.paths.is_empty() {
            text.push_str(&format!(" ({})", self.paths.join(", ")));
        }
        text
    }

    /// A stable name for "the same operation" (kind, command and paths; the tool's name
    /// when it has neither, so two different tools of one kind are not the same), for
    /// operations approved once.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.kind.as_str().as_bytes());
        hash.update([0]);
        hash.update(self.command.as_deref().unwrap_or("").as_bytes());
        for path in &self.paths {
            hash.update([0]);
            hash.update(path.as_bytes());
        }
        if self.command.is_none() && self.paths.is_empty() {
            hash.update([1]);
            hash.update(self.tool.as_deref().unwrap_or("").as_bytes());
        }
        hash.finalize()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
