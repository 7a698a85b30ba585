//! Where the rules come from, and the set in force for the whole daemon. The files
//! (`[[rules]]` in the user's and the kiln's settings, `<kiln>/.crucible/rules.toml`) are
//! read again whenever one of them changes. A file that cannot be read (anything but
//! absent), cannot be parsed, or holds a bad rule does not take effect: the last good
//! set stays for every session, new ones too, the fault is logged once and shown by
//! `rules.list`. Until a good set was read once, there is no set to keep, and the gate
//! refuses every operation it judges rather than let it run unguarded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::{Config, ConfigError, FileStamp};
use crate::kiln::Kiln;
use crate::rules::{RuleSet, RuleSpec};

/// Why the rules are not in force: the file at fault and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", file.display())]
pub struct RulesFault {
    pub file: PathBuf,
    pub reason: String,
}

impl RulesFault {
    fn new(file: &Path, reason: impl Into<String>) -> Self {
        Self {
            file: file.to_path_buf(),
            reason: reason.into(),
        }
    }
}

pub fn rules_path(kiln: &Kiln) -> PathBuf {
    kiln.state_dir().join("rules.toml")
}

/// The rules the files give for `kiln`, or the first fault found in them.
pub fn load_rules(kiln: &Kiln) -> Result<RuleSet, RulesFault> {
    let config = Config::load(&kiln.settings_path()).map_err(|e| settings_fault(kiln, e))?;
    let mut specs = config.rules;
    let path = rules_path(kiln);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|e| {
                let at = e.utf8_error().valid_up_to();
                RulesFault::new(&path, format!("not UTF-8 text (byte {at} is not)"))
            })?;
            let rules = parse_rules_file(&path, &text)?;
            specs.extend(rules.into_iter().map(|spec| RuleSpec {
                from: Some(path.clone()),
                ..spec
            }));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(RulesFault::new(&path, format!("cannot read it: {e}"))),
    }
    RuleSet::build(&specs).map_err(|e| {
        let file = e.file.clone().unwrap_or_else(|| settings_with_rules(kiln));
        RulesFault::new(&file, e.to_string())
    })
}

/// The rules of the `rules.toml` at `path`; a TOML error names its line.
fn parse_rules_file(path: &Path, text: &str) -> Result<Vec<RuleSpec>, RulesFault> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        rules: Vec<RuleSpec>,
    }
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        let reason = match line {
            Some(line) => format!("line {line}: {}", e.message()),
            None => e.message().to_string(),
        };
        RulesFault::new(path, reason)
    })?;
    Ok(file.rules)
}

fn settings_fault(kiln: &Kiln, e: ConfigError) -> RulesFault {
    match e {
        ConfigError::Read { path, source } => {
            RulesFault::new(&path, format!("cannot read it: {source}"))
        }
        // An error of the merged layers is the kiln's settings' to fix.
        ConfigError::Invalid { path, message } if path.is_relative() => {
            RulesFault::new(&kiln.settings_path(), message)
        }
        ConfigError::Invalid { path, message } => RulesFault::new(&path, message),
    }
}

/// The settings file whose `[[rules]]` are in force: the kiln's, unless only the user's
/// has rules (the kiln's replaces the user's list when it has one).
fn settings_with_rules(kiln: &Kiln) -> PathBuf {
    let has_rules = |path: &Path| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.parse::<toml::Table>().ok())
            .is_some_and(|table| table.contains_key("rules"))
    };
    let kiln_settings = kiln.settings_path();
    if has_rules(&kiln_settings) {
        return kiln_settings;
    }
    match crate::config::user_settings_path() {
        Some(user) if has_rules(&user) => user,
        _ => kiln_settings,
    }
}

/// How the settings files and `rules.toml` stand now, to tell whether one changed.
fn stamps(kiln: &Kiln) -> Vec<FileStamp> {
    let mut files = crate::config::settings_files(&kiln.settings_path());
    files.push(rules_path(kiln));
    FileStamp::all(&files)
}

/// The rules in force now, as [`RuleBook::in_force`] gives them.
#[derive(Debug, Clone)]
pub struct InForce {
    /// The set that judges: the files' when they are good, else the last good one;
    /// `None` when no good set was read since the daemon started.
    pub rules: Option<Arc<RuleSet>>,
    /// Why the files are not in force, if they are not.
    pub fault: Option<RulesFault>,
}

/// The daemon's rules, shared by every session: the last good set and the fault, if any.
pub struct RuleBook {
    kiln: Kiln,
    state: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    /// The files as last read; `None` before the first read.
    stamps: Option<Vec<FileStamp>>,
    good: Option<Arc<RuleSet>>,
    fault: Option<RulesFault>,
}

impl RuleBook {
    /// Reads the rules for the first time.
    pub fn new(kiln: Kiln) -> Self {
        let book = Self {
            kiln,
            state: Mutex::new(Book::default()),
        };
        book.in_force();
        book
    }

    /// The rules in force, read again first if a file changed since the last read.
    pub fn in_force(&self) -> InForce {
        let now = stamps(&self.kiln);
        let mut book = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if book.stamps.as_ref() != Some(&now) {
            book.stamps = Some(now);
            match load_rules(&self.kiln) {
                Ok(rules) => {
                    if let Some(fault) = book.fault.take() {
                        tracing::info!("the rules are in force again (the fault was: {fault})");
                    }
                    book.good = Some(Arc::new(rules));
                }
                Err(fault) => {
                    if book.fault.as_ref() != Some(&fault) {
                        if book.good.is_some() {
                            tracing::warn!("rules not in force: {fault}; the last good set stays");
                        } else {
                            tracing::error!(
                                "rules not in force: {fault}; no good set was read since the \
                                 daemon started, so every operation the rules judge is refused"
                            );
                        }
                    }
                    book.fault = Some(fault);
                }
            }
        }
        InForce {
            rules: book.good.clone(),
            fault: book.fault.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAD_REGEX: &str =
        "[[rules]]\nid = \"bad\"\naction = \"deny\"\nwhen = { command = \"(\" }\n";

    #[test]
    fn a_fault_names_the_file_it_is_in_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        assert!(load_rules(&kiln).is_ok(), "no files: the built-in rules");

        std::fs::write(rules_path(&kiln), BAD_REGEX).unwrap();
        let fault = load_rules(&kiln).unwrap_err();
        assert_eq!(fault.file, rules_path(&kiln));
        assert!(fault.reason.contains("bad command regex"), "{fault}");

        std::fs::write(rules_path(&kiln), "\n\n[[rules]]\nid = \"x\"\nbogus = 1\n").unwrap();
        let fault = load_rules(&kiln).unwrap_err();
        assert_eq!(fault.file, rules_path(&kiln));
        assert!(fault.reason.starts_with("line 5:"), "{fault}");
        assert!(fault.reason.contains("bogus"), "{fault}");

        // A bad rule in the settings names the settings.
        std::fs::remove_file(rules_path(&kiln)).unwrap();
        std::fs::write(kiln.settings_path(), BAD_REGEX).unwrap();
        let fault = load_rules(&kiln).unwrap_err();
        assert_eq!(fault.file, kiln.settings_path());
        assert!(fault.reason.contains("bad command regex"), "{fault}");
    }
}
