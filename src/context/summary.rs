//! Context summaries, one labelled line each, never over [`MAX_SUMMARY_CHARS`]
//! characters:
//!
//! ```text
//! GOAL: <current user objective>
//! ENTITIES: <key names, files, URLs — comma separated>
//! DECISIONS: <choices made this session — comma separated>
//! PENDING: <unanswered questions or pending items>
//! TURNS: <N>
//! ```
//!
//! [`fallback_summary`] builds one from the stack's entries without a model, the same way
//! every time:
//! - GOAL: the first human entry (or the goal of a summary below it).
//! - ENTITIES: URLs, paths, file names (`main.rs`), `a::b` paths, snake_case and CamelCase
//!   identifiers and `backticked` spans from human, agent and tool-call entries, first
//!   mention first. Tool results and the system prompt are left out: they would drown
//!   the session's own names.
//! - DECISIONS: every later human message (an answer or an instruction) and each agent
//!   sentence that commits to something ("I'll …", "Let's …", "decided …"); the latest
//!   are kept when they do not all fit.
//! - PENDING: the last human message if no agent has answered it, the questions of the
//!   agent's last answer, and tool calls that have no result.
//! - TURNS: the human messages, plus the turns of earlier summaries.
//!
//! Earlier summaries in this format carry their goal, entities, decisions and turns
//! forward; any other summary text counts as a decision. Every field is one line (control
//! characters and runs of whitespace become one space), an empty field says `none`, and a
//! field too long for its share of the 1,000 characters is cut with `…`.

use super::message::{Entry, Message};

/// The most characters (not bytes) a summary may have.
pub const MAX_SUMMARY_CHARS: usize = 1000;

/// What a model is asked when it writes the summary instead; its answer goes through
/// [`clamp_summary`].
pub const MODEL_PROMPT: &str = "Summarise the conversation above for a fresh start. Answer \
with exactly these five lines and nothing else, at most 1000 characters in all:\n\
GOAL: <current user objective>\n\
ENTITIES: <key names, files, URLs — comma separated>\n\
DECISIONS: <choices made this session — comma separated>\n\
PENDING: <unanswered questions or pending items>\n\
TURNS: <number of human messages>";

// Shares of the budget. With the labels and newlines (47) and a 20-digit turn count the
// total stays under 1,000.
const GOAL_CHARS: usize = 200;
const ENTITIES_CHARS: usize = 220;
const DECISIONS_CHARS: usize = 300;
const PENDING_CHARS: usize = 200;
/// One decision or pending item, so a single long one cannot fill its field.
const ITEM_CHARS: usize = 120;
const NONE: &str = "none";

/// The deterministic summary of `entries` (bottom to top).
pub fn fallback_summary(entries: &[Entry]) -> String {
    let facts = Facts::gather(entries);
    format!(
        "GOAL: {}\nENTITIES: {}\nDECISIONS: {}\nPENDING: {}\nTURNS: {}",
        facts
            .goal
            .map_or_else(|| NONE.to_string(), |g| clip(&g, GOAL_CHARS)),
        join_first(&facts.entities, ENTITIES_CHARS),
        join_latest(&facts.decisions, DECISIONS_CHARS),
        join_first(&facts.pending, PENDING_CHARS),
        facts.turns
    )
}

/// `text` cut to [`MAX_SUMMARY_CHARS`] characters (for a model's summary).
pub fn clamp_summary(text: &str) -> String {
    clip(text.trim(), MAX_SUMMARY_CHARS)
}

#[derive(Default)]
struct Facts {
    goal: Option<String>,
    entities: Vec<String>,
    decisions: Vec<String>,
    pending: Vec<String>,
    turns: u64,
}

impl Facts {
    fn gather(entries: &[Entry]) -> Self {
        let mut facts = Facts::default();
        for entry in entries {
            match &entry.message {
                Message::System { .. } | Message::ToolResult { .. } => {}
                Message::Human { text } => facts.human(text),
                Message::Agent { text } => {
                    facts.add_entities(text);
                    facts.decisions.extend(commitments(text));
                }
                Message::ToolCall { arguments, .. } => facts.add_entities(arguments),
                Message::Summary { text } => facts.summary(text),
            }
        }
        facts.pending = pending(entries);
        facts
    }

    fn human(&mut self, text: &str) {
        self.turns = self.turns.saturating_add(1);
        self.add_entities(text);
        let text = clean(text);
        if text.is_empty() {
            return;
        }
        if self.goal.is_none() {
            self.goal = Some(text);
        } else {
            self.decisions.push(clip(&text, ITEM_CHARS));
        }
    }

    fn summary(&mut self, text: &str) {
        let Some(turns) = field(text, "TURNS") else {
            self.add_entities(text);
            let text = clean(text);
            if !text.is_empty() {
                self.decisions.push(clip(&text, ITEM_CHARS));
            }
            return;
        };
        let turns = turns.parse::<u64>().unwrap_or(0);
        self.turns = self.turns.saturating_add(turns);
        if self.goal.is_none() {
            self.goal = field(text, "GOAL")
                .map(clean)
                .filter(|g| !g.is_empty() && g != NONE);
        }
        for entity in list(field(text, "ENTITIES")) {
            push_unique(&mut self.entities, entity);
        }
        self.decisions.extend(list(field(text, "DECISIONS")));
    }

    fn add_entities(&mut self, text: &str) {
        for entity in entities(text) {
            push_unique(&mut self.entities, entity);
        }
    }
}

/// The value of the `label:` line of a summary in this format.
fn field<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        line.strip_prefix(label)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// The items of a comma-separated field, without `none` and `…` markers.
fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or("")
        .split(", ")
        .map(clean)
        .filter(|item| !item.is_empty() && item != NONE && item != "…")
        .collect()
}

fn push_unique(items: &mut Vec<String>, item: String) {
    if !items.contains(&item) {
        items.push(item);
    }
}

/// What is still open at the top of the conversation.
fn pending(entries: &[Entry]) -> Vec<String> {
    let mut pending = Vec::new();
    let last_human = entries
        .iter()
        .rposition(|e| matches!(e.message, Message::Human { .. }));
    let after = last_human.map_or(entries, |i| &entries[i + 1..]);
    let last_agent = after.iter().rev().find_map(|e| match &e.message {
        Message::Agent { text } => Some(text),
        _ => None,
    });
    match (last_human, last_agent) {
        (Some(i), None) => {
            let text = clean(entries[i].message.text());
            if !text.is_empty() {
                pending.push(clip(&format!("answer: {text}"), ITEM_CHARS));
            }
        }
        (_, Some(text)) => pending.extend(
            sentences(text)
                .into_iter()
                .filter(|s| s.ends_with('?'))
                .map(|s| clip(&s, ITEM_CHARS)),
        ),
        (None, None) => {}
    }
    pending.extend(unanswered_calls(entries));
    pending
}

fn unanswered_calls(entries: &[Entry]) -> Vec<String> {
    let answered = |id: &str| {
        entries
            .iter()
            .any(|e| matches!(&e.message, Message::ToolResult { call_id, .. } if call_id == id))
    };
    entries
        .iter()
        .filter_map(|e| match &e.message {
            Message::ToolCall { call_id, tool, .. } if !answered(call_id) => Some(clip(
                &clean(&format!("result of {tool} ({call_id})")),
                ITEM_CHARS,
            )),
            _ => None,
        })
        .collect()
}

/// The agent's sentences that commit to something.
fn commitments(text: &str) -> Vec<String> {
    const OPENERS: [&str; 8] = [
        "i'll ",
        "i will ",
        "i decided",
        "i chose",
        "let's ",
        "we'll ",
        "we will ",
        "decision:",
    ];
    sentences(text)
        .into_iter()
        .filter(|s| {
            let lower = s.to_lowercase();
            OPENERS.iter().any(|o| lower.starts_with(o)) || lower.contains(" decided ")
        })
        .map(|s| clip(&s, ITEM_CHARS))
        .collect()
}

/// `text` split after `.`, `!` or `?` followed by whitespace, and at line ends; each
/// cleaned, empty ones dropped.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let line_end = c == '\n';
        if !line_end {
            current.push(c);
        }
        let stop = matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|n| n.is_whitespace());
        if line_end || stop {
            out.push(clean(&std::mem::take(&mut current)));
        }
    }
    out.push(clean(&current));
    out.retain(|s| !s.is_empty());
    out
}

/// The names in `text` worth keeping: see the module docs.
fn entities(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let span = clean(span);
            if !span.is_empty() && span.chars().count() <= 60 {
                found.push(span);
            }
            continue;
        }
        let tokens = span
            .split(|c: char| c.is_whitespace() || c.is_control() || "\"'()[]{}<>,;|".contains(c));
        for token in tokens {
            let token = token.trim_matches(|c: char| ".:!?*".contains(c));
            if looks_like_entity(token) {
                found.push(token.to_string());
            }
        }
    }
    found
}

fn looks_like_entity(token: &str) -> bool {
    let has_letter = token.chars().any(char::is_alphabetic);
    if !has_letter || token.chars().count() > 80 {
        return false;
    }
    if token.starts_with("http://") || token.starts_with("https://") {
        return true;
    }
    let path_like = token
        .chars()
        .all(|c| c.is_alphanumeric() || "/._-~@+:".contains(c));
    if !path_like {
        return false;
    }
    token.contains('/') || token.contains("::") || is_file_name(token) || is_identifier(token)
}

/// `name.ext` with a letter-led, short alphanumeric extension: `main.rs`, `README.md`.
fn is_file_name(token: &str) -> bool {
    let Some((name, ext)) = token.rsplit_once('.') else {
        return false;
    };
    token.chars().count() >= 4
        && !name.is_empty()
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// snake_case (`validate_token`) or CamelCase (`AuthService`).
fn is_identifier(token: &str) -> bool {
    let word = token.chars().all(|c| c.is_alphanumeric() || c == '_');
    let snake = token.contains('_') && !token.starts_with('_') && !token.ends_with('_');
    let camel = token
        .chars()
        .zip(token.chars().skip(1))
        .any(|(a, b)| a.is_lowercase() && b.is_uppercase());
    word && (snake || camel)
}

/// One line: control characters and whitespace runs become one space.
fn clean(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// At most `max` characters; a cut ends with `…`.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// As many items as fit, first first; `, …` says some were left out.
fn join_first(items: &[String], max: usize) -> String {
    if items.is_empty() {
        return NONE.to_string();
    }
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if out.is_empty() { "" } else { ", " };
        let rest = if i + 1 < items.len() { 3 } else { 0 };
        if chars(&out) + chars(sep) + chars(item) + rest > max {
            return if out.is_empty() {
                "…".into()
            } else {
                out + ", …"
            };
        }
        out = format!("{out}{sep}{item}");
    }
    out
}

/// As many items as fit, latest kept; `…, ` says earlier ones were left out.
fn join_latest(items: &[String], max: usize) -> String {
    if items.is_empty() {
        return NONE.to_string();
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for (i, item) in items.iter().enumerate().rev() {
        let sep = if kept.is_empty() { 0 } else { 2 };
        let rest = if i > 0 { 3 } else { 0 };
        if used + sep + chars(item) + rest > max {
            break;
        }
        used += sep + chars(item);
        kept.push(item);
    }
    kept.reverse();
    let joined = kept.join(", ");
    match (kept.len() == items.len(), joined.is_empty()) {
        (true, _) => joined,
        (false, true) => "…".into(),
        (false, false) => format!("…, {joined}"),
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
