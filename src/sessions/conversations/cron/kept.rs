//! The runs in a row that could not start, per job, kept in the kiln's state folder
//! ([`FILE`]) each time they change, so that a restarted daemon still counts them, shows
//! them in `cron list`, and does not say them in the inbox again as a new row.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file in the kiln's state folder.
pub(super) const FILE: &str = "cron-failures.json";

/// A job's runs in a row that could not start.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Failing {
    pub(super) failures: u64,
    #[serde(default)]
    pub(super) last_error: Option<String>,
    #[serde(default)]
    pub(super) last_failed_at: Option<String>,
}

/// What the file holds: the failing jobs by id. A file that is missing or does not read
/// holds nothing (said in the log).
pub(super) fn load(path: &Path) -> HashMap<String, Failing> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(file = %path.display(), "cron failures not read: {e}");
            return HashMap::new();
        }
    };
    serde_json::from_slice(&text).unwrap_or_else(|e| {
        tracing::warn!(file = %path.display(), "cron failures not read: {e}");
        HashMap::new()
    })
}

/// Replaces the file with `failing` (the jobs that fail); no file when none does.
pub(super) fn save(path: &Path, failing: &HashMap<String, Failing>) {
    let saved = if failing.is_empty() {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    } else {
        serde_json::to_vec_pretty(failing)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::sys::write_private(path, &bytes))
    };
    if let Err(e) = saved {
        tracing::warn!(file = %path.display(), "cron failures not kept: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_jobs_are_read_back_and_none_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        assert!(load(&path).is_empty());
        let stuck = Failing {
            failures: 4,
            last_error: Some("branch main is checked out".into()),
            last_failed_at: Some("2026-01-01T00:00:00Z".into()),
        };
        save(
            &path,
            &HashMap::from([("stuck".to_string(), stuck.clone())]),
        );
        assert_eq!(load(&path).get("stuck"), Some(&stuck));
        save(&path, &HashMap::new());
        assert!(!path.exists());
        std::fs::write(&path, "not json").unwrap();
        assert!(load(&path).is_empty());
    }
}
