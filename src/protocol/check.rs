//! What a check of the database found: per table, how many records it read and the
//! stretches of keys it could not (`db.check`, `cru daemon check`, `daemon.status`).

use serde::{Deserialize, Serialize};

/// What a person does about damage; every error a damaged read returns ends with it.
pub const WHAT_TO_DO: &str = "The database has records it cannot read: `cru daemon check` names them; \
     `cru daemon stop` then `cru daemon repair` rebuilds it from what is readable and the journal";

/// What a check found in one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCheck {
    pub table: String,
    /// Records read.
    pub readable: usize,
    /// Stretches of keys that could not be read.
    pub damaged: Vec<Damaged>,
}

/// A stretch of a table that could not be read: between two readable records (or an end
/// of the table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Damaged {
    /// The last readable record before it.
    pub after: Option<String>,
    /// The first readable record after it.
    pub before: Option<String>,
}

impl Damaged {
    /// Whether `key` lies in this stretch.
    pub fn holds(&self, key: &str) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
            && self.before.as_deref().is_none_or(|b| key < b)
    }
}

/// A part of the engine's files that does not read back as written: a block of a table
/// file (records, or a search or lookup index's entries), or the manifest that lists the
/// table files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileDamage {
    /// The file.
    pub file: String,
    /// Where in the file the damaged block starts, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// What the damaged part holds, in words.
    pub holds: String,
    /// The table whose records or index entries it holds, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The index whose entries it holds, when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// What reading it said.
    pub error: String,
    /// What the damage does until a repair.
    pub effect: String,
}

/// A whole check: every table's records, and every block of the engine's files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub tables: Vec<TableCheck>,
    /// Damaged parts of the engine's files (an embedded database only).
    #[serde(default)]
    pub files: Vec<FileDamage>,
    /// Why the engine stopped merging its table files, when it met a damaged one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merging_stopped: Option<String>,
}

impl Check {
    pub fn damaged(&self) -> bool {
        self.tables.iter().any(|t| !t.damaged.is_empty()) || !self.files.is_empty()
    }

    /// One line per damaged stretch, for the log and the terminal.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for t in &self.tables {
            for d in &t.damaged {
                lines.push(format!(
                    "{}: unreadable records {}",
                    t.table,
                    describe_stretch(d)
                ));
            }
        }
        for f in &self.files {
            let at = f
                .offset
                .map(|o| format!(" (the block at byte {o})"))
                .unwrap_or_default();
            lines.push(format!(
                "{} cannot be read in {}{at}: {}; {}",
                f.holds, f.file, f.error, f.effect
            ));
        }
        if let Some(why) = &self.merging_stopped {
            lines.push(format!(
                "the engine stopped merging its table files at a damaged block ({why}): \
                 reads and writes go on, and its table files accumulate until `cru daemon \
                 repair`"
            ));
        }
        lines
    }
}

fn describe_stretch(d: &Damaged) -> String {
    let when = |key: &str| {
        ulid_time(key)
            .map(|t| format!(" (made {t})"))
            .unwrap_or_default()
    };
    match (&d.after, &d.before) {
        (Some(a), Some(b)) => format!("after {a}{} and before {b}{}", when(a), when(b)),
        (Some(a), None) => format!("after {a}{}, to the end of the table", when(a)),
        (None, Some(b)) => format!("from the start of the table to {b}{}", when(b)),
        (None, None) => "(the whole table)".to_string(),
    }
}

/// When a key that starts with a ULID was made.
fn ulid_time(key: &str) -> Option<String> {
    let ulid = ulid::Ulid::from_string(key.get(..26)?).ok()?;
    let at: chrono::DateTime<chrono::Utc> = ulid.datetime().into();
    Some(at.format("%Y-%m-%d %H:%M:%S UTC").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_holds_the_keys_between_its_ends() {
        let d = Damaged {
            after: Some("01B".into()),
            before: Some("01E".into()),
        };
        assert!(d.holds("01C"));
        assert!(!d.holds("01B") && !d.holds("01E") && !d.holds("01F"));
        let open = Damaged {
            after: None,
            before: Some("01E".into()),
        };
        assert!(open.holds("00") && !open.holds("01F"));
    }

    #[test]
    fn damage_is_described_with_when_its_neighbours_were_made() {
        let check = Check {
            tables: vec![TableCheck {
                table: "inbox_messages".into(),
                readable: 2,
                damaged: vec![Damaged {
                    after: Some("01ARZ3NDEKTSV4RRFFQ69G5FAV".into()),
                    before: None,
                }],
            }],
            files: Vec::new(),
            merging_stopped: None,
        };
        assert!(check.damaged());
        assert_eq!(
            check.describe(),
            [
                "inbox_messages: unreadable records after 01ARZ3NDEKTSV4RRFFQ69G5FAV (made 2016-07-30 23:54:10 UTC), to the end of the table"
            ]
        );
    }
}
