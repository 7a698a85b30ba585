//! Why an agent did not start, in words a person can act on: the failure itself, the last
//! lines the agent (or the sandbox, the container, ssh around it) wrote to stderr while it
//! started, and for the agents crucible knows how they sign in. "Incoming transport
//! closed" alone covers a program missing from a container image, a sandbox mount that
//! is not there and an agent that needs signing in; its stderr says which.

use std::path::Path;

/// The most stderr lines a start failure quotes.
const QUOTED_LINES: usize = 3;
/// The longest stderr line quoted whole.
const LONGEST_LINE: usize = 300;
/// The most bytes of stderr read from where the start began.
const READ_AT_MOST: u64 = 16 * 1024;

/// The length of the agent's stderr log before this start: what follows is this start's.
pub(super) fn stderr_mark(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// What the agent wrote to its stderr log since `mark`, at most [`READ_AT_MOST`] bytes
/// from its end.
pub(super) fn stderr_since(log: &Path, mark: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(log) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = mark.max(len.saturating_sub(READ_AT_MOST)).min(len);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `why`, followed by what stderr said and, for a known agent, how it signs in.
/// `program` is the agent's command as the profile names it.
pub fn explain(why: &str, program: &str, stderr: &str) -> String {
    let mut text = why.trim().trim_end_matches('.').to_string();
    let said: Vec<String> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| crate::text::clip(l, LONGEST_LINE))
        .collect();
    let quoted = &said[said.len().saturating_sub(QUOTED_LINES)..];
    if quoted.is_empty() {
        text.push_str(". It wrote nothing to stderr");
    } else {
        text.push_str(". Its stderr ends: ");
        text.push_str(&quoted.join(" / "));
    }
    let all = format!("{why}\n{stderr}").to_lowercase();
    if let Some(cause) = known_cause(&all) {
        text.push_str(". ");
        text.push_str(cause);
    }
    if let Some(sign_in) = sign_in(program) {
        text.push_str(". ");
        text.push_str(sign_in);
    }
    text
}

/// A cause recognised in what the failure and stderr say.
fn known_cause(said: &str) -> Option<&'static str> {
    if said.contains("executable file not found") || said.contains("no such file or directory: oci")
    {
        Some(
            "The container image lacks the agent's program: the image must contain it on its PATH (see the README's podman section)",
        )
    } else if said.contains("bwrap: can't find source path") {
        Some("A folder the sandbox mounts is not there: check the session's --mount folders")
    } else if said.contains("authentication required") || said.contains("not logged in") {
        Some("The agent needs signing in")
    } else if said.contains("command not found") || said.contains("not found in $path") {
        Some("A program the agent runs is not on its PATH")
    } else {
        None
    }
}

/// How a known agent signs in, by its program's name.
fn sign_in(program: &str) -> Option<&'static str> {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if name.contains("claude") {
        Some(
            "If Claude Code is not signed in: run `claude /login` once, or set ANTHROPIC_API_KEY in the shell that starts the session",
        )
    } else if name.contains("codex") {
        Some(
            "If Codex is not signed in: run `codex login` once, or set CODEX_API_KEY (or OPENAI_API_KEY) in the shell that starts the session",
        )
    } else if name.contains("gemini") {
        Some(
            "If Gemini is not signed in: run `gemini` once to sign in, or set GEMINI_API_KEY in the shell that starts the session",
        )
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_stderr_lines_and_the_cause_are_named() {
        let stderr = "starting\n\nbwrap: Can't find source path /home/me/missing: No such file or directory\n";
        let text = explain(
            "the agent failed to initialize: Incoming transport closed",
            "/usr/bin/my-agent",
            stderr,
        );
        assert_eq!(
            text,
            "the agent failed to initialize: Incoming transport closed. Its stderr ends: \
             starting / bwrap: Can't find source path /home/me/missing: No such file or \
             directory. A folder the sandbox mounts is not there: check the session's \
             --mount folders"
        );
    }

    #[test]
    fn a_known_agent_gets_its_sign_in_hint() {
        let text = explain(
            "the agent could not open a session: Authentication required",
            "codex-acp",
            "",
        );
        assert!(text.contains("It wrote nothing to stderr"), "{text}");
        assert!(text.contains("The agent needs signing in"), "{text}");
        assert!(text.contains("CODEX_API_KEY"), "{text}");
        let text = explain("exited with code 1", "/opt/bin/claude-agent-acp", "");
        assert!(text.contains("claude /login"), "{text}");
        assert!(!explain("x", "my-agent", "").contains("sign"));
    }

    #[test]
    fn a_program_missing_from_an_image_is_named() {
        let text = explain(
            "the agent failed to initialize: Incoming transport closed",
            "codex-acp",
            "Error: runc: exec: \"codex-acp\": executable file not found in $PATH: OCI runtime attempt failed",
        );
        assert!(text.contains("image lacks the agent's program"), "{text}");
    }

    #[test]
    fn only_this_starts_stderr_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.stderr.log");
        std::fs::write(&log, "an old failure\n").unwrap();
        let mark = stderr_mark(&log);
        assert_eq!(mark, 15);
        std::fs::write(&log, "an old failure\nthis start\n").unwrap();
        assert_eq!(stderr_since(&log, mark), "this start\n");
        assert_eq!(stderr_since(&dir.path().join("none"), 0), "");
    }
}
