//! The webhooks whose deliveries fail in a row, kept in the kiln's state folder ([`FILE`])
//! each time that changes: a restarted daemon goes on counting them (and does not say a
//! row in the inbox again), and `cron list` shows them beside the jobs that fail.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::kiln::Kiln;
use crate::protocol::FailingHook;

/// The file in the kiln's state folder.
const FILE: &str = "webhook-failures.json";

/// A hook's deliveries that failed in a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failing {
    pub(crate) failures: u64,
    pub(crate) last_error: String,
    /// When the first of them failed (RFC 3339).
    pub(crate) since: String,
}

pub(crate) fn path(kiln: &Kiln) -> PathBuf {
    kiln.state_dir().join(FILE)
}

/// The failing hooks the file holds. A file that is missing or does not read holds
/// none (said in the log).
pub(crate) fn load(path: &Path) -> HashMap<String, Failing> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            tracing::warn!(file = %path.display(), "webhook failures not read: {e}");
            return HashMap::new();
        }
    };
    serde_json::from_slice(&text).unwrap_or_else(|e| {
        tracing::warn!(file = %path.display(), "webhook failures not read: {e}");
        HashMap::new()
    })
}

/// Replaces the file with `failing`; no file when no hook fails.
pub(crate) fn save(path: &Path, failing: &HashMap<String, Failing>) {
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
        tracing::warn!(file = %path.display(), "webhook failures not kept: {e}");
    }
}

/// The failing hooks as `cron list` shows them, by name.
pub(crate) fn listed(kiln: &Kiln) -> Vec<FailingHook> {
    let mut hooks: Vec<FailingHook> = load(&path(kiln))
        .into_iter()
        .map(|(name, f)| FailingHook {
            name,
            failures: f.failures,
            last_error: f.last_error,
            since: f.since,
        })
        .collect();
    hooks.sort_by(|a, b| a.name.cmp(&b.name));
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_hooks_are_read_back_and_none_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        assert!(load(&path).is_empty());
        let broken = Failing {
            failures: 3,
            last_error: "no agent profile \"gone\"".into(),
            since: "2026-01-01T00:00:00Z".into(),
        };
        save(
            &path,
            &HashMap::from([("broken".to_string(), broken.clone())]),
        );
        assert_eq!(load(&path).get("broken"), Some(&broken));
        save(&path, &HashMap::new());
        assert!(!path.exists());
        std::fs::write(&path, "not json").unwrap();
        assert!(load(&path).is_empty());
    }
}
