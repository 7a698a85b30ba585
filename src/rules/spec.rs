//! Rules as written: in the settings, in `rules.toml`, and the built-in ones.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    Allow,
    Ask,
    Deny,
}

/// One or several of a thing, as TOML lets users write either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub(super) fn list(&self) -> Vec<T> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// What an operation must be to match: every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
