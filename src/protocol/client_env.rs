//! What the process asking for a session (`cru session new`, the workbench's `/new`) has
//! of its environment: its `PATH` and the values of the variables the session asks for.
//! It travels beside `session.create`'s params (the `client_env` field) over the
//! owner-only socket; the daemon holds it in memory for that session's agent starts and
//! never stores, logs or forwards it. Its `Debug` shows variable names, never values.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The `session.create` field that carries it.
pub const FIELD: &str = "client_env";

/// A process's `PATH` and some of its variables, as it sends them.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientEnv {
    /// Who asked, in the words of its command line: `cru session new`, `cru`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Its `PATH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The values of the names the session asks for that it has; a name it lacks is
    /// left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,
}

impl ClientEnv {
    /// The value it gave for `name`.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// Who asked, for messages: "the one running `cru session new`".
    pub fn asker(&self) -> String {
        match &self.by {
            Some(by) => format!("the one running `{by}`"),
            None => "the one that asked".into(),
        }
    }
}

impl fmt::Debug for ClientEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientEnv")
            .field("by", &self.by)
            .field("path", &self.path)
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether `name` can be the name of an environment variable (letters, digits and `_`,
/// not starting with a digit).
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_variables_but_never_shows_their_values() {
        let env = ClientEnv {
            by: Some("cru session new".into()),
            path: Some("/usr/bin".into()),
            vars: [("API_KEY".to_string(), "sk-hidden-value".to_string())].into(),
        };
        let shown = format!("{env:?} {env:#?}");
        assert!(shown.contains("API_KEY"), "{shown}");
        assert!(!shown.contains("sk-hidden-value"), "{shown}");
    }

    #[test]
    fn it_round_trips_and_leaves_out_what_is_empty() {
        let env = ClientEnv {
            by: None,
            path: Some("/bin".into()),
            vars: [("A".to_string(), "1".to_string())].into(),
        };
        let json = serde_json::to_value(&env).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"path": "/bin", "vars": {"A": "1"}})
        );
        assert_eq!(serde_json::from_value::<ClientEnv>(json).unwrap(), env);
        assert_eq!(
            serde_json::to_value(ClientEnv::default()).unwrap(),
            serde_json::json!({})
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(is_name("OPENAI_API_KEY"));
        assert!(is_name("_x1"));
        assert!(!is_name("1X"));
        assert!(!is_name("A=b"));
        assert!(!is_name(""));
    }
}
