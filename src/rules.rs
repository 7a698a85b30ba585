//! Rules: what an agent may do, decided per operation. A rule matches an
//! operation (`when`: its kind, command line, paths, tool), may apply only once an
//! earlier operation of the session matched `activated_by`, and answers `allow`, `ask`
//! (an approval in the inbox, with the rule and its reason) or `deny`. Built-in rules
//! come first; `[[rules]]` in the settings and `<kiln>/.crucible/rules.toml` add rules or
//! switch built-in ones off (`enabled = false`). Pure: no I/O besides reading `$HOME`
//! for `~`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    Allow,
    Ask,
    Deny,
}

/// One or several of a thing, as TOML lets users write either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn list(&self) -> Vec<T> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// What an operation must be to match: every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MatcherSpec {
    pub kind: Option<OneOrMany<String>>,
    /// A regular expression searched in the command line.
    pub command: Option<String>,
    /// Globs (`~` is the home folder; a glob not starting with `/` matches anywhere).
    pub path: Option<OneOrMany<String>>,
    /// A regular expression searched in the tool's name or title.
    pub tool: Option<String>,
    /// A path outside the session's worktree.
    pub outside_worktree: Option<bool>,
}

/// A rule as written in the settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    pub description: String,
    /// Matches if any of these matches.
    pub when: Option<OneOrMany<MatcherSpec>>,
    pub activated_by: Option<OneOrMany<MatcherSpec>>,
    pub action: Option<RuleAction>,
    /// `false` switches a rule (a built-in one, say) off.
    pub enabled: Option<bool>,
    /// The file the rule was read from, so an error names it (filled in by whoever reads
    /// the file; never written in it).
    #[serde(skip)]
    pub from: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Matcher {
    kinds: Vec<OperationKind>,
    command: Option<regex::Regex>,
    paths: Vec<glob::Pattern>,
    tool: Option<regex::Regex>,
    outside_worktree: Option<bool>,
}

/// A checked rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub description: String,
    pub action: RuleAction,
    pub builtin: bool,
    when: Vec<Matcher>,
    activated_by: Vec<Matcher>,
}

impl Rule {
    pub fn gated_by_activation(&self) -> bool {
        !self.activated_by.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rule {id:?}: {reason}")]
pub struct RuleError {
    pub id: String,
    pub reason: String,
    /// The file the bad rule came from, when its spec says ([`RuleSpec::from`]).
    pub file: Option<PathBuf>,
}

const SENSITIVE: &[&str] = &[
    "**/.env*",
    "**/*.pem",
    "**/*secret*",
    "~/.ssh/**",
    "~/.aws/**",
];
const EXFIL: &str = r"(^|[\s;&|(])(curl|wget|nc|ncat|ssh|scp|rsync)(\s|$)|git\s+push";

/// The rules every session starts with.
pub fn builtin_specs() -> Vec<RuleSpec> {
    let sensitive = MatcherSpec {
        kind: Some(OneOrMany::One("read".into())),
        path: Some(OneOrMany::Many(
            SENSITIVE.iter().map(|s| s.to_string()).collect(),
        )),
        ..Default::default()
    };
    vec![
        RuleSpec {
            id: "no-exfil-after-sensitive".into(),
            description: "after a read of secrets (.env, keys, ~/.ssh, ~/.aws), anything that can send data out asks".into(),
            when: Some(OneOrMany::Many(vec![
                MatcherSpec {
                    kind: Some(OneOrMany::One("fetch".into())),
                    ..Default::default()
                },
                MatcherSpec {
                    command: Some(EXFIL.into()),
                    ..Default::default()
                },
            ])),
            activated_by: Some(OneOrMany::One(sensitive)),
            action: Some(RuleAction::Ask),
            enabled: None,
            from: None,
        },
        RuleSpec {
            id: "ask-before-push".into(),
            description: "git push asks".into(),
            when: Some(OneOrMany::One(MatcherSpec {
                command: Some(r"git\s+push".into()),
                ..Default::default()
            })),
            activated_by: None,
            action: Some(RuleAction::Ask),
            enabled: None,
            from: None,
        },
        RuleSpec {
            id: "deny-writes-outside-worktree".into(),
            description: "an edit, delete or move of a path outside the session's worktree is refused".into(),
            when: Some(OneOrMany::One(MatcherSpec {
                kind: Some(OneOrMany::Many(vec!["edit".into(), "delete".into(), "move".into()])),
                outside_worktree: Some(true),
                ..Default::default()
            })),
            activated_by: None,
            action: Some(RuleAction::Deny),
            enabled: None,
            from: None,
        },
    ]
}

fn home() -> String {
    std::env::var("HOME").unwrap_or_default()
}

fn compile_matcher(id: &str, spec: &MatcherSpec) -> Result<Matcher, RuleError> {
    let err = |reason: String| RuleError {
        id: id.to_string(),
        reason,
        file: None,
    };
    let mut kinds = Vec::new();
    for kind in spec.kind.as_ref().map(OneOrMany::list).unwrap_or_default() {
        let Some(known) = OperationKind::parse(&kind) else {
            let names: Vec<&str> = OperationKind::RULES.iter().map(|k| k.as_str()).collect();
            return Err(err(format!(
                "unknown kind {kind:?} (use {})",
                names.join(", ")
            )));
        };
        kinds.push(known);
    }
    let regex = |what: &str, text: &Option<String>| {
        text.as_ref()
            .map(|t| regex::Regex::new(t).map_err(|e| err(format!("bad {what} regex {t:?}: {e}"))))
            .transpose()
    };
    let mut paths = Vec::new();
    for glob in spec.path.as_ref().map(OneOrMany::list).unwrap_or_default() {
        let expanded = match glob.strip_prefix("~/") {
            Some(rest) => format!("{}/{rest}", home()),
            None => glob.clone(),
        };
        let anchored = if expanded.starts_with('/') {
            expanded
        } else {
            format!("/**/{expanded}")
        };
        paths.push(
            glob::Pattern::new(&anchored)
                .map_err(|e| err(format!("bad path glob {glob:?}: {e}")))?,
        );
    }
    let matcher = Matcher {
        kinds,
        command: regex("command", &spec.command)?,
        paths,
        tool: regex("tool", &spec.tool)?,
        outside_worktree: spec.outside_worktree,
    };
    let empty = matcher.kinds.is_empty()
        && matcher.command.is_none()
        && matcher.paths.is_empty()
        && matcher.tool.is_none()
        && matcher.outside_worktree.is_none();
    if empty {
        return Err(err(
            "a matcher must say something (kind, command, path, tool or outside_worktree)".into(),
        ));
    }
    Ok(matcher)
}

impl Matcher {
    fn matches(&self, op: &Operation, worktree: &[&Path]) -> bool {
        if !self.kinds.is_empty() && !self.kinds.contains(&op.kind) {
            return false;
        }
        if let Some(re) = &self.command
            && !op.command.as_deref().is_some_and(|c| re.is_match(c))
        {
            return false;
        }
        if let Some(re) = &self.tool
            && !op.tool.as_deref().is_some_and(|t| re.is_match(t))
        {
            return false;
        }
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        if !self.paths.is_empty()
            && !op
                .paths
                .iter()
                .any(|p| self.paths.iter().any(|g| g.matches_with(p, options)))
        {
            return false;
        }
        if let Some(outside) = self.outside_worktree {
            let any_outside = op
                .paths
                .iter()
                .any(|p| !worktree.iter().any(|w| Path::new(p).starts_with(w)));
            if any_outside != outside {
                return false;
            }
        }
        true
    }
}

fn compile(spec: &RuleSpec, builtin: bool) -> Result<Rule, RuleError> {
    let err = |reason: &str| RuleError {
        id: spec.id.clone(),
        reason: reason.to_string(),
        file: None,
    };
    if spec.id.trim().is_empty() {
        return Err(err("a rule needs an id"));
    }
    let when = spec
        .when
        .as_ref()
        .ok_or_else(|| err("a rule needs `when`"))?
        .list()
        .iter()
        .map(|m| compile_matcher(&spec.id, m))
        .collect::<Result<Vec<_>, _>>()?;
    let activated_by = spec
        .activated_by
        .as_ref()
        .map(OneOrMany::list)
        .unwrap_or_default()
        .iter()
        .map(|m| compile_matcher(&spec.id, m))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rule {
        id: spec.id.clone(),
        description: spec.description.clone(),
        action: spec
            .action
            .ok_or_else(|| err("a rule needs `action` (allow, ask or deny)"))?,
        builtin,
        when,
        activated_by,
    })
}

/// The rules in force for a kiln.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// Rules switched off in the settings.
    pub off: Vec<String>,
}

impl RuleSet {
    /// The built-in rules with `specs` (settings first, then `rules.toml`) over them.
    pub fn build(specs: &[RuleSpec]) -> Result<RuleSet, RuleError> {
        let mut by_id: BTreeMap<String, (usize, RuleSpec, bool)> = BTreeMap::new();
        for (i, spec) in builtin_specs().into_iter().enumerate() {
            by_id.insert(spec.id.clone(), (i, spec, true));
        }
        let mut off = Vec::new();
        for spec in specs {
            if spec.enabled == Some(false) {
                if !by_id.contains_key(&spec.id) && spec.when.is_none() {
                    return Err(RuleError {
                        id: spec.id.clone(),
                        reason: "switched off, but there is no such rule".into(),
                        file: spec.from.clone(),
                    });
                }
                off.push(spec.id.clone());
                if spec.when.is_none() {
                    continue;
                }
            }
            let next = by_id.len() + 100;
            let builtin = by_id.get(&spec.id).is_some_and(|(_, _, b)| *b) && spec.when.is_none();
            if builtin {
                continue;
            }
            let order = by_id.get(&spec.id).map_or(next, |(i, _, _)| *i);
            by_id.insert(spec.id.clone(), (order, spec.clone(), false));
        }
        let mut ordered: Vec<(usize, RuleSpec, bool)> = by_id.into_values().collect();
        ordered.sort_by_key(|(i, _, _)| *i);
        let rules = ordered
            .iter()
            .map(|(_, spec, builtin)| {
                compile(spec, *builtin).map_err(|e| RuleError {
                    file: spec.from.clone(),
                    ..e
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RuleSet { rules, off })
    }

    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The rules whose `activated_by` this operation matches (to record as activated).
    pub fn activations(&self, op: &Operation, worktree: &[&Path]) -> Vec<&Rule> {
        self.rules
            .iter()
            .filter(|r| r.activated_by.iter().any(|m| m.matches(op, worktree)))
            .collect()
    }

    /// What the rules say of `op`: the strictest of the rules that match it, are not
    /// switched off (in the settings or in `disabled`), and are active (no
    /// `activated_by`, or an id in `activated`).
    pub fn decide(
        &self,
        op: &Operation,
        worktree: &[&Path],
        activated: &dyn Fn(&str) -> bool,
        disabled: &dyn Fn(&str) -> bool,
    ) -> Option<&Rule> {
        self.rules
            .iter()
            .filter(|r| !self.off.contains(&r.id) && !disabled(&r.id))
            .filter(|r| !r.gated_by_activation() || activated(&r.id))
            .filter(|r| r.when.iter().any(|m| m.matches(op, worktree)))
            .max_by_key(|r| r.action)
    }
}

#[cfg(test)]
mod tests;
