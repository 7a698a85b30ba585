//! The audit log (every agent action, logged for review): per session, an
//! append-only file of what happened, one JSON object a line, in
//! `<kiln>/.crucible/audit/<session>.jsonl`. It outlives the session (`cru session
//! prune --audit` removes the logs of deleted sessions). Environment variables appear by
//! name only; no value the driver passes is ever written here.

use std::io::Write;
use std::path::PathBuf;

use crate::kiln::Kiln;
pub use crate::protocol::audit::{AuditEvent, AuditRecord};

/// The longest text kept for a prompt.
const MAX_TEXT: usize = 4096;

/// The kiln's audit logs.
#[derive(Debug, Clone)]
pub struct Audit {
    dir: PathBuf,
}

impl Audit {
    pub fn new(kiln: &Kiln) -> Audit {
        Audit {
            dir: kiln.state_dir().join("audit"),
        }
    }

    pub fn path(&self, session_id: &str) -> PathBuf {
        self.dir.join(format!("{session_id}.jsonl"))
    }

    /// Appends one record. A log that cannot be written is reported in the daemon's log
    /// and does not stop the session.
    pub fn record(&self, session_id: &str, event: AuditEvent) {
        let event = match event {
            AuditEvent::Prompt { text } => AuditEvent::Prompt {
                text: crate::text::cap(text, MAX_TEXT),
            },
            other => other,
        };
        let record = AuditRecord {
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            session_id: session_id.to_string(),
            event,
        };
        if let Err(e) = self.append(&record) {
            tracing::warn!(session = session_id, "cannot write the audit log: {e}");
        }
    }

    fn append(&self, record: &AuditRecord) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        // Not recursive: a kiln deleted under the daemon stays deleted.
        match std::fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.path(&record.session_id))?;
        // One write per record: appends never interleave.
        file.write_all(&line)
    }

    /// The session's records, oldest first; none if it has no log. A line that does
    /// not parse (a torn last write) is skipped.
    pub fn read(&self, session_id: &str) -> std::io::Result<Vec<AuditRecord>> {
        let text = match std::fs::read_to_string(self.path(session_id)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect())
    }

    /// Sessions that have a log.
    pub fn sessions(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".jsonl"))
                    .map(str::to_string)
            })
            .collect()
    }

    pub fn remove(&self, session_id: &str) -> std::io::Result<()> {
        match std::fs::remove_file(self.path(session_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_append_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        let audit = Audit::new(&kiln);
        audit.record("s0", AuditEvent::End { reason: "x".into() });
        assert!(
            !kiln.state_dir().exists(),
            "a kiln without its state folder (deleted) is not made again"
        );
        std::fs::create_dir(kiln.state_dir()).unwrap();
        audit.record(
            "s1",
            AuditEvent::Start {
                driver: "sandbox".into(),
                mounts: vec![],
                network: "none".into(),
                limits: vec!["memory 64 MiB (cgroup v1)".into()],
                env: vec!["API_KEY".into()],
            },
        );
        audit.record(
            "s1",
            AuditEvent::Prompt {
                text: "x".repeat(10_000),
            },
        );
        audit.record(
            "s2",
            AuditEvent::End {
                reason: "stopped".into(),
            },
        );
        let records = audit.read("s1").unwrap();
        assert_eq!(records.len(), 2);
        assert!(matches!(records[0].event, AuditEvent::Start { .. }));
        let AuditEvent::Prompt { text } = &records[1].event else {
            panic!("{:?}", records[1]);
        };
        assert!(text.len() < 5000, "prompts are capped");
        let mut sessions = audit.sessions();
        sessions.sort();
        assert_eq!(sessions, ["s1", "s2"]);
        audit.remove("s1").unwrap();
        assert!(audit.read("s1").unwrap().is_empty());
        assert!(records[0].line().contains("env API_KEY"));
    }
}
