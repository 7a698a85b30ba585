//! Rules as checked: a spec compiled into matchers (regexes, globs, kinds), and what
//! makes a spec wrong.

use std::path::{Path, PathBuf};

use super::operation::{Operation, OperationKind};
use super::spec::{MatcherSpec, OneOrMany, RuleAction, RuleSpec};

#[derive(Debug, Clone)]
pub(super) struct Matcher {
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
    pub(super) when: Vec<Matcher>,
    pub(super) activated_by: Vec<Matcher>,
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
    pub(super) fn matches(&self, op: &Operation, worktree: &[&Path]) -> bool {
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

pub(super) fn compile(spec: &RuleSpec, builtin: bool) -> Result<Rule, RuleError> {
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
