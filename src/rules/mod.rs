//! Rules: what an agent may do, decided per operation. A rule matches an
//! operation (`when`: its kind, command line, paths, tool), may apply only once an
//! earlier operation of the session matched `activated_by`, and answers `allow`, `ask`
//! (an approval in the inbox, with the rule and its reason) or `deny`. Built-in rules
//! come first; `[[rules]]` in the settings and `<kiln>/.crucible/rules.toml` add rules or
//! switch built-in ones off (`enabled = false`). Pure: no I/O besides reading `$HOME`
//! for `~`.

mod operation;
pub mod plan;
mod rule;
mod spec;

use std::collections::BTreeMap;
use std::path::Path;

pub use operation::{Operation, OperationKind};
pub use plan::{PlanScope, PlanStep};
use rule::compile;
pub use rule::{Rule, RuleError};
pub use spec::{RuleAction, RuleSpec, builtin_specs};

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
