//! `[channels.matrix]`: the Matrix channel. The daemon logs in as a bot account, joins the
//! rooms allowed users invite it to, and carries each room's conversation to a session;
//! approvals and questions are posted in the room (or in an `approval_target`) and
//! answered there.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::DriverKind;

/// What is wrong with `[channels.matrix]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("channels.matrix: {0}")]
pub struct MatrixSettingsError(String);

/// `[channels.matrix]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// The homeserver's address, `https://matrix.example.org`.
    pub homeserver: String,
    /// The bot account, `@crucible:example.org`.
    pub user_id: String,
    /// The daemon's environment variable holding the account's password, used to log in
    /// once; the device and its keys are kept under `.crucible/matrix/` after that. The
    /// value is never written anywhere.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Or: the variable holding an access token of the account.
    #[serde(default)]
    pub access_token_env: Option<String>,
    /// The name the bot's device shows to other users.
    #[serde(default = "device_name")]
    pub device_name: String,
    /// Who may talk to sessions and answer approvals (`@alice:example.org`). Messages,
    /// reactions and invites of anyone else are ignored.
    pub allowed_users: Vec<String>,
    /// The rooms it serves (ids `!…` or aliases `#…`); empty: any room an allowed user
    /// invites it to.
    #[serde(default)]
    pub allowed_rooms: Vec<String>,
    /// The agent profile a room's new session runs.
    pub agent: String,
    /// Where a room's sessions run, over the profile's driver.
    #[serde(default)]
    pub driver: Option<DriverKind>,
    /// Where the approvals and questions of cron and webhook sessions go when their job
    /// or hook names no `approval_target` of its own: a room (`!id` or `#alias`) or a
    /// user (`@alice:example.org`, in a direct chat).
    #[serde(default)]
    pub approval_target: Option<String>,
    /// An agent reply longer than this (in characters) is posted in a thread under its
    /// first lines; tool output always goes in the thread.
    #[serde(default = "thread_after_chars")]
    pub thread_after_chars: usize,
    /// In your own settings, where your hub runs the bot for every kiln: the kiln each
    /// room's sessions run in, by room (`!id` or `#alias`) → kiln name. A room these map
    /// is not moved by `!kiln NAME` in it. A kiln's own bot serves only its kiln and
    /// ignores this.
    #[serde(default)]
    pub kilns: BTreeMap<String, String>,
    /// In your own settings: the kiln of direct chats and of rooms neither `kilns` nor
    /// `!kiln NAME` maps. Unset, with several kilns, such a room is asked to choose one.
    #[serde(default)]
    pub kiln: Option<String>,
}

fn device_name() -> String {
    "crucible".into()
}

fn thread_after_chars() -> usize {
    2000
}

/// What a Matrix id is: `@user:server`, `#alias:server`, or a room's `!id` (with
/// `:server` in rooms of versions before 12, without it since).
fn is_id(sigil: char, text: &str) -> bool {
    let Some(rest) = text.strip_prefix(sigil) else {
        return false;
    };
    if rest.chars().any(char::is_whitespace) {
        return false;
    }
    match rest.split_once(':') {
        Some((local, server)) => !local.is_empty() && !server.is_empty(),
        None => sigil == '!' && !rest.is_empty(),
    }
}

/// Whether `target` names a room or a user to post approvals to.
pub fn is_target(target: &str) -> bool {
    is_id('!', target) || is_id('#', target) || is_id('@', target)
}

impl MatrixConfig {
    pub fn validate(&self) -> Result<(), MatrixSettingsError> {
        let invalid = |why: String| Err(MatrixSettingsError(why));
        if !(self.homeserver.starts_with("https://") || self.homeserver.starts_with("http://")) {
            return invalid(format!(
                "homeserver {:?} must start with https:// (or http:// on loopback)",
                self.homeserver
            ));
        }
        if !is_id('@', &self.user_id) {
            return invalid(format!(
                "user_id {:?} is not a Matrix user id (@name:server)",
                self.user_id
            ));
        }
        match (&self.password_env, &self.access_token_env) {
            (None, None) => {
                return invalid(
                    "give password_env or access_token_env: the variable holding the bot's password or token".into(),
                );
            }
            (Some(_), Some(_)) => {
                return invalid("give password_env or access_token_env, not both".into());
            }
            _ => {}
        }
        if self.allowed_users.is_empty() {
            return invalid("allowed_users is empty: nobody could use it".into());
        }
        if let Some(user) = self.allowed_users.iter().find(|u| !is_id('@', u)) {
            return invalid(format!("allowed_users: {user:?} is not a Matrix user id"));
        }
        if let Some(room) = self
            .allowed_rooms
            .iter()
            .find(|r| !(is_id('!', r) || is_id('#', r)))
        {
            return invalid(format!("allowed_rooms: {room:?} is not a room id or alias"));
        }
        if let Some(target) = self.approval_target.as_deref().filter(|t| !is_target(t)) {
            return invalid(format!(
                "approval_target {target:?} is not a room (!id, #alias) or a user (@name:server)"
            ));
        }
        if let Some(room) = self
            .kilns
            .keys()
            .find(|r| !(is_id('!', r) || is_id('#', r)))
        {
            return invalid(format!("kilns: {room:?} is not a room id or alias"));
        }
        if self
            .kilns
            .values()
            .chain(&self.kiln)
            .any(|k| k.trim().is_empty())
        {
            return invalid("kilns, kiln: a kiln's name must not be empty".into());
        }
        if self.device_name.trim().is_empty() || self.thread_after_chars == 0 {
            return invalid(
                "device_name must not be empty and thread_after_chars at least 1".into(),
            );
        }
        Ok(())
    }

    /// Whether `user` may use the channel.
    pub fn allows(&self, user: &str) -> bool {
        self.allowed_users.iter().any(|u| u == user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MatrixConfig {
        toml::from_str(
            "homeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\n\
             password_env = \"BOT_PASSWORD\"\nallowed_users = [\"@alice:example.org\"]\n\
             agent = \"claude\"\n",
        )
        .unwrap()
    }

    #[test]
    fn settings_read_with_defaults_and_are_checked() {
        let c = config();
        assert_eq!(c.device_name, "crucible");
        assert!(c.validate().is_ok());
        assert!(c.allows("@alice:example.org") && !c.allows("@mallory:example.org"));
        for (change, needle) in [
            (
                Box::new(|c: &mut MatrixConfig| c.user_id = "bot".into())
                    as Box<dyn Fn(&mut MatrixConfig)>,
                "user_id",
            ),
            (Box::new(|c| c.password_env = None), "password_env"),
            (
                Box::new(|c| c.access_token_env = Some("T".into())),
                "not both",
            ),
            (Box::new(|c| c.allowed_users.clear()), "nobody"),
            (
                Box::new(|c| c.allowed_rooms = vec!["general".into()]),
                "allowed_rooms",
            ),
            (
                Box::new(|c| c.approval_target = Some("alice".into())),
                "approval_target",
            ),
            (
                Box::new(|c| c.homeserver = "m.example.org".into()),
                "https://",
            ),
            (
                Box::new(|c| {
                    c.kilns.insert("general".into(), "beta".into());
                }),
                "kilns: \"general\"",
            ),
            (
                Box::new(|c| {
                    c.kilns.insert("#ops:example.org".into(), " ".into());
                }),
                "must not be empty",
            ),
            (
                Box::new(|c| c.kiln = Some(String::new())),
                "must not be empty",
            ),
        ] {
            let mut c = config();
            change(&mut c);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{needle}: {err}");
        }
        assert!(
            toml::from_str::<MatrixConfig>("homeserver = \"x\"\npasword_env = \"P\"\n").is_err()
        );
    }

    #[test]
    fn rooms_map_to_kilns_by_id_or_alias_with_a_default() {
        let text = "homeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\n\
             password_env = \"P\"\nallowed_users = [\"@alice:example.org\"]\nagent = \"claude\"\n\
             kiln = \"alpha\"\nkilns = { \"!r1:example.org\" = \"beta\", \"#ops:example.org\" = \"alpha\" }\n";
        let c: MatrixConfig = toml::from_str(text).unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.kiln.as_deref(), Some("alpha"));
        assert_eq!(c.kilns["!r1:example.org"], "beta");
        assert_eq!(c.kilns["#ops:example.org"], "alpha");
        assert!(config().kilns.is_empty() && config().kiln.is_none());
    }

    #[test]
    fn targets_are_rooms_aliases_and_users() {
        // Rooms of version 12 have no server in their id.
        assert!(is_target("!bal8F0l1RGyV-4FXdJIKlPtYsBxFg9IaW0_kA-RBgOc"));
        assert!(is_target("!old:example.org") && is_target("#ops:example.org"));
        assert!(is_target("@alice:example.org"));
        assert!(!is_target("#ops") && !is_target("@alice") && !is_target("!"));
        assert!(!is_target("! x") && !is_target("alice"));
    }
}
