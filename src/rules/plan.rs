//! An agent's plan as the gate reads it: its numbered steps, and what an approved plan
//! lets run without a question. A step names commands (in backticks, or written out
//! with their arguments) and files (`src/db.rs`, `README.md`); its verbs say what may be
//! done to those files ("edit", "delete", "read"…). An operation is in the plan when one
//! step names exactly its command, or names every path it touches with a verb that
//! allows its kind. Nothing else is: an operation with neither command nor path, a
//! command with other arguments, a file the plan does not name. Pure.

use serde::{Deserialize, Serialize};

use super::operation::{Operation, OperationKind};

/// One step of an agent's plan (ACP `plan` entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// The plan as the transcript shows it: one `[status] step` per line.
pub fn render(steps: &[PlanStep]) -> String {
    steps
        .iter()
        .map(|s| format!("[{}] {}", s.status, s.content))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The plan as a person reviews it: `1. step` per line.
pub fn numbered(steps: &[String]) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What each step of an approved plan allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanScope {
    steps: Vec<StepScope>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct StepScope {
    text: String,
    /// Commands the step names: backticked, or written out in its text.
    commands: Vec<String>,
    paths: Vec<String>,
    kinds: Vec<OperationKind>,
}

/// Verbs and the kinds of operation on a named file they allow.
const VERBS: [(&[&str], OperationKind); 6] = [
    (
        &[
            "edit",
            "modify",
            "update",
            "change",
            "write",
            "create",
            "add",
            "fix",
            "implement",
            "refactor",
            "replace",
            "patch",
            "append",
            "insert",
            "rewrite",
        ],
        OperationKind::Edit,
    ),
    (&["delete", "remove"], OperationKind::Delete),
    (&["move", "rename"], OperationKind::Move),
    (
        &[
            "read", "inspect", "review", "look", "open", "check", "examine", "study",
        ],
        OperationKind::Read,
    ),
    (&["search", "grep", "find"], OperationKind::Search),
    (&["fetch", "download"], OperationKind::Fetch),
];

impl PlanScope {
    pub fn new(steps: &[String]) -> PlanScope {
        PlanScope {
            steps: steps.iter().map(|s| StepScope::read(s)).collect(),
        }
    }

    /// The step (1-based) that allows `op`, if one does.
    pub fn covers(&self, op: &Operation) -> Option<usize> {
        self.steps
            .iter()
            .position(|step| step.allows(op))
            .map(|i| i + 1)
    }

    /// What the plan allows, a line a step that allows anything: `2. edit: src/db.rs`.
    pub fn allowances(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            let mut parts = Vec::new();
            for command in &step.commands {
                parts.push(format!("execute `{command}`"));
            }
            if !step.paths.is_empty() {
                let kinds: Vec<&str> = step.kinds.iter().map(|k| k.as_str()).collect();
                parts.push(format!("{}: {}", kinds.join("/"), step.paths.join(", ")));
            }
            if !parts.is_empty() {
                lines.push(format!("{}. {}", i + 1, parts.join("; ")));
            }
        }
        lines
    }
}

impl StepScope {
    fn read(text: &str) -> StepScope {
        let mut commands = Vec::new();
        let mut paths = Vec::new();
        // Backticked spans: a path when it is one word that looks like a file, else a
        // command.
        for (i, span) in text.split('`').enumerate() {
            let span = span.trim();
            if i % 2 == 0 || span.is_empty() {
                continue;
            }
            if looks_like_path(span) {
                paths.push(span.to_string());
            } else {
                commands.push(normalize(span));
            }
        }
        // Files written out: words that look like a path.
        let outside: String = text
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        for word in outside.split_whitespace() {
            let word = word.trim_matches(|c: char| ",;:()\"'".contains(c));
            let word = word.trim_end_matches('.');
            if looks_like_path(word) && !paths.iter().any(|p| p == word) {
                paths.push(word.to_string());
            }
        }
        let lower = outside.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let mut kinds: Vec<OperationKind> = VERBS
            .iter()
            .filter(|(verbs, _)| verbs.iter().any(|v| words.contains(v)))
            .map(|(_, kind)| *kind)
            .collect();
        if kinds.is_empty() {
            // A file named with no verb: read it and edit it, nothing more.
            kinds = vec![OperationKind::Read, OperationKind::Edit];
        }
        StepScope {
            text: normalize(text),
            commands,
            paths,
            kinds,
        }
    }

    fn allows(&self, op: &Operation) -> bool {
        if let Some(command) = &op.command {
            let command = normalize(command);
            return self.commands.contains(&command) || self.writes_out(&command);
        }
        if op.paths.is_empty() || !self.kinds.contains(&op.kind) {
            return false;
        }
        op.paths
            .iter()
            .all(|path| self.paths.iter().any(|named| same_file(path, named)))
    }

    /// The step's text has the whole command line in it, with its arguments, bounded by
    /// spaces or the text's ends (a lone program name is too little to go by).
    fn writes_out(&self, command: &str) -> bool {
        if !command.contains(' ') {
            return false;
        }
        let text = format!(" {} ", self.text.trim_end_matches('.'));
        text.contains(&format!(" {command} "))
    }
}

/// One word that names a file: with a `/`, or `name.ext`.
fn looks_like_path(word: &str) -> bool {
    if word.is_empty() || word.contains(char::is_whitespace) || word.starts_with('-') {
        return false;
    }
    if word.contains("://") {
        return false;
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    if (word.starts_with('/') || word.starts_with("./")) && !name.is_empty() {
        return true;
    }
    match name.rsplit_once('.') {
        Some((stem, ext)) => {
            stem.chars().count() > 1
                && stem
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_-.".contains(c))
                && !ext.is_empty()
                && ext.len() <= 8
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// `path` (absolute, as the operation has it) is the file the plan names: the same
/// path, or one that ends with the named relative path at a folder boundary.
fn same_file(path: &str, named: &str) -> bool {
    let named = named.trim_start_matches("./");
    if named.starts_with('/') {
        return path == named;
    }
    path == named || path.ends_with(&format!("/{named}"))
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
