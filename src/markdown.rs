//! The readable side of a transcript: `<kiln>/.crucible/sessions/<id>.md`, appended as
//! entries are stored, so `less` or an editor shows what a session did.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::protocol::{EntryKind, Session, TranscriptEntry};

pub struct MarkdownLog {
    path: PathBuf,
    /// Opened once, for appending; `None` if it could not be (the store still has it all).
    file: Option<std::fs::File>,
}

impl MarkdownLog {
    pub fn path_for(dir: &Path, session_id: &str) -> PathBuf {
        dir.join(format!("{session_id}.md"))
    }

    /// Opens the log, writing its heading if it is new.
    pub fn open(dir: &Path, session: &Session) -> Self {
        let path = Self::path_for(dir, &session.id);
        let is_new = !path.exists();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| tracing::warn!(path = %path.display(), "cannot open the session log: {e}"))
            .ok();
        let mut log = Self { path, file };
        if is_new {
            let mut head = format!(
                "# {}\n\n- session: `{}`\n",
                session.display_name, session.id
            );
            head.push_str(&format!(
                "- agent: {} ({})\n",
                session.agent_name, session.agent_type
            ));
            match (&session.worktree, &session.branch) {
                (Some(w), Some(b)) => head.push_str(&format!("- worktree: `{w}` (branch `{b}`)\n")),
                (Some(w), None) => head.push_str(&format!("- worktree: `{w}`\n")),
                (None, _) => head.push_str("- worktree: the kiln itself (in place)\n"),
            }
            head.push_str(&format!("- created: {}\n", session.started_at));
            log.append(&head);
        }
        log
    }

    pub fn write(&mut self, entry: &TranscriptEntry) {
        self.append(&render(entry));
    }

    fn append(&mut self, text: &str) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if let Err(e) = file.write_all(text.as_bytes()) {
            tracing::warn!(path = %self.path.display(), "cannot write the session log: {e}");
        }
    }
}

fn time_of(at: &str) -> &str {
    // RFC 3339: the clock time sits between 'T' and the seconds' end.
    at.get(11..19).unwrap_or(at)
}

/// One entry as markdown.
pub fn render(e: &TranscriptEntry) -> String {
    let text = e.text.as_deref().unwrap_or("");
    let status = e.status.as_deref().unwrap_or("");
    let time = time_of(&e.at);
    match e.kind {
        EntryKind::Prompt => format!("\n## {time} · prompt\n\n{}\n", quote(text)),
        EntryKind::Message => format!("\n### {time} · agent\n\n{text}\n"),
        EntryKind::Thought => format!("\n*{time} · thinking*\n\n{}\n", quote(text)),
        EntryKind::ToolCall => format!(
            "\n- {time} · tool `{}` {text} — {status}\n",
            e.tool_call_id.as_deref().unwrap_or("")
        ),
        EntryKind::ToolUpdate => format!(
            "- {time} · tool `{}` {text}{}{status}\n",
            e.tool_call_id.as_deref().unwrap_or(""),
            if text.is_empty() { "" } else { " — " }
        ),
        EntryKind::Plan => format!("\n**{time} · plan**\n\n{}\n", list(text)),
        EntryKind::Permission if status.is_empty() => {
            format!("\n- {time} · **permission asked:** {text}\n")
        }
        EntryKind::Permission => format!("- {time} · **permission {status}:** {text}\n"),
        EntryKind::File => format!("- {time} · file {status}: `{text}`\n"),
        EntryKind::TurnEnd => format!("\n— {time} · turn ended: {status}\n"),
        EntryKind::State => format!("\n*{time} · state → {status}*{}\n", suffix(text)),
        EntryKind::Error => format!("\n**{time} · error:** {text}\n"),
    }
}

fn quote(text: &str) -> String {
    text.lines()
        .map(|l| format!("> {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn list(text: &str) -> String {
    text.lines()
        .map(|l| format!("- {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn suffix(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" ({text})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EntryKind, text: Option<&str>, status: Option<&str>) -> TranscriptEntry {
        TranscriptEntry {
            session_id: "s".into(),
            seq: 1,
            at: "2026-11-22T10:11:12Z".into(),
            kind,
            text: text.map(String::from),
            tool_call_id: Some("t1".into()),
            status: status.map(String::from),
        }
    }

    #[test]
    fn entries_render_as_markdown() {
        assert_eq!(
            render(&entry(EntryKind::Prompt, Some("fix it\nplease"), None)),
            "\n## 10:11:12 · prompt\n\n> fix it\n> please\n"
        );
        assert_eq!(
            render(&entry(
                EntryKind::ToolCall,
                Some("Run tests"),
                Some("pending")
            )),
            "\n- 10:11:12 · tool `t1` Run tests — pending\n"
        );
        assert_eq!(
            render(&entry(
                EntryKind::Permission,
                Some("Edit a.rs"),
                Some("Allow")
            )),
            "- 10:11:12 · **permission Allow:** Edit a.rs\n"
        );
        assert_eq!(
            render(&entry(
                EntryKind::State,
                Some("agent exited with code 3"),
                Some("error")
            )),
            "\n*10:11:12 · state → error* (agent exited with code 3)\n"
        );
    }
}
