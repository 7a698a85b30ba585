//! Rooms mapped to kilns. Through the person's hub the bot serves every kiln, and each
//! room's conversation lives in one of them: the kiln the settings map the room to
//! (`kilns`, by room id or alias), else the one an allowed user chose in the room with
//! `!kiln NAME` (kept in `rooms.json` in the bot's folder, owner-only), else the default
//! `kiln` (direct chats and rooms not mapped). The settings win: a room they map is not
//! moved by a command. A room with no kiln while the hub serves several is told how to
//! choose one instead of starting anything. A kiln's own daemon's bot serves its kiln
//! alone and ignores all of this.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use matrix_sdk::Room;
use matrix_sdk::ruma::{RoomId, UserId};

use super::{Bot, lock};
use crate::config::MatrixConfig;
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, SessionIdParams, SessionListParams};

/// The file in the bot's folder keeping the rooms mapped by `!kiln NAME`.
const CHOSEN: &str = "rooms.json";

/// Why a room's conversation lives in its kiln.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// `kilns` in the settings names the room.
    Settings,
    /// An allowed user said `!kiln NAME` in it.
    Chosen,
    /// The settings' default `kiln`.
    Default,
}

/// Where a message in a room goes.
pub(super) enum Place {
    /// To the kiln named (none: a kiln's own bot, or a hub that serves one kiln).
    Kiln(Option<String>),
    /// Nowhere: the room has no kiln the hub serves, and is told this.
    Unplaced(String),
}

/// A room's kiln, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RoomKiln {
    pub name: String,
    pub why: Why,
}

/// The rooms mapped by `!kiln NAME` (by the id that keys the room's conversation), kept
/// on disk.
pub(super) struct Chosen {
    path: PathBuf,
    rooms: Mutex<BTreeMap<String, String>>,
}

impl Chosen {
    pub fn load(folder: &Path) -> Self {
        let path = folder.join(CHOSEN);
        let rooms = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self {
            path,
            rooms: Mutex::new(rooms),
        }
    }

    fn get(&self, room: &str) -> Option<String> {
        lock(&self.rooms).get(room).cloned()
    }

    /// Maps `room` to `kiln`, on disk before it counts.
    fn set(&self, room: &str, kiln: &str) -> std::io::Result<()> {
        let mut rooms = lock(&self.rooms);
        let mut changed = rooms.clone();
        changed.insert(room.to_string(), kiln.to_string());
        let bytes = serde_json::to_vec_pretty(&changed).map_err(std::io::Error::other)?;
        if let Some(folder) = self.path.parent() {
            std::fs::create_dir_all(folder)?;
        }
        crate::sys::write_private(&self.path, &bytes)?;
        *rooms = changed;
        Ok(())
    }
}

/// The kiln of a room known by `names` (its ids and aliases, the room's own first, then
/// those of the rooms it upgraded), whose conversation `chosen` was mapped to by a
/// command, if any.
fn pick(config: &MatrixConfig, names: &[String], chosen: Option<String>) -> Option<RoomKiln> {
    let kiln = |name: &str, why| RoomKiln {
        name: name.to_string(),
        why,
    };
    if let Some(name) = names.iter().find_map(|n| config.kilns.get(n)) {
        return Some(kiln(name, Why::Settings));
    }
    if let Some(name) = chosen {
        return Some(kiln(&name, Why::Chosen));
    }
    config.kiln.as_deref().map(|name| kiln(name, Why::Default))
}

impl Bot {
    /// The ids and aliases of `room` and of the rooms it upgraded.
    pub(super) fn names_of(&self, room: &RoomId) -> Vec<String> {
        let mut names = Vec::new();
        for id in self.line_of(room) {
            if let Some(known) = self.client.get_room(&id) {
                let aliases = known
                    .canonical_alias()
                    .into_iter()
                    .chain(known.alt_aliases());
                names.extend(aliases.map(|a| a.to_string()));
            }
            names.push(id.to_string());
        }
        names
    }

    /// The kiln `room`'s conversation lives in, through the hub (none on a kiln's own
    /// bot, or when nothing maps the room).
    fn kiln_of(&self, room: &RoomId) -> Option<RoomKiln> {
        self.door.kilns()?;
        let chosen = self.chosen.get(self.first_room(room).as_str());
        pick(&self.config, &self.names_of(room), chosen)
    }

    /// Where a message in `room` goes.
    pub(super) fn place_of_message(&self, room: &RoomId) -> Place {
        let Some(kilns) = self.door.kilns() else {
            return Place::Kiln(None);
        };
        match self.kiln_of(room) {
            Some(kiln) if kilns.contains(&kiln.name) => Place::Kiln(Some(kiln.name)),
            Some(kiln) => Place::Unplaced(format!(
                "This room's kiln is {} ({}), which your hub does not serve; it serves {}. \
                 {}",
                kiln.name,
                why_words(kiln.why),
                listed(&kilns),
                match kiln.why {
                    Why::Settings => "Change `kilns` in your settings ([channels.matrix]).",
                    _ => "Say `!kiln NAME` to choose another.",
                }
            )),
            None if kilns.len() <= 1 => Place::Kiln(None),
            None => Place::Unplaced(format!(
                "Nothing was passed on: this room has no kiln, and your hub serves several \
                 ({}). Say `!kiln NAME` here to choose the kiln this room's sessions run in, \
                 or map the room in your settings: `kilns = {{ \"{}\" = \"NAME\" }}` (or a \
                 default `kiln = \"NAME\"`) in [channels.matrix].",
                listed(&kilns),
                self.first_room(room)
            )),
        }
    }
}

fn why_words(why: Why) -> &'static str {
    match why {
        Why::Settings => "mapped in your settings",
        Why::Chosen => "chosen with `!kiln`",
        Why::Default => "the default kiln of your settings",
    }
}

fn listed(kilns: &[String]) -> String {
    match kilns.is_empty() {
        true => "no kiln yet".into(),
        false => kilns.join(", "),
    }
}

/// `!kiln` (the room's kiln, and the kilns) or `!kiln NAME` (the room's sessions run in
/// kiln NAME from now on), said by `sender` in `room`.
pub(super) async fn command(bot: &Bot, room: &Room, sender: &UserId, name: &str) -> String {
    let Some(kilns) = bot.door.kilns() else {
        let settings = bot.door.settings();
        let own = crate::kilns::name_of(bot.door.kiln(), settings.kiln.name.as_deref());
        return format!(
            "This bot is kiln {own}'s own and serves that kiln alone. A bot in your own \
             settings (~/.config/crucible/config.toml) is run by your hub for every kiln, \
             and maps rooms to kilns."
        );
    };
    let now = bot.kiln_of(room.room_id());
    if name.is_empty() {
        let mut text = match &now {
            Some(kiln) => format!("This room's kiln: {} ({}).", kiln.name, why_words(kiln.why)),
            None if kilns.len() == 1 => format!("This room's kiln: {} (the only one).", kilns[0]),
            None => "This room has no kiln yet.".to_string(),
        };
        let _ = write!(
            text,
            " Your hub serves: {}. Say `!kiln NAME` to run this room's sessions in another.",
            listed(&kilns)
        );
        return text;
    }
    if !kilns.iter().any(|k| k == name) {
        return format!("No kiln {name}: your hub serves {}.", listed(&kilns));
    }
    match now {
        Some(kiln) if kiln.why == Why::Settings && kiln.name != name => {
            return format!(
                "This room is mapped to kiln {} in your settings, which win: change `kilns` \
                 in [channels.matrix] there to move it.",
                kiln.name
            );
        }
        Some(kiln) if kiln.name == name && kiln.why != Why::Default => {
            return format!("This room's sessions already run in kiln {name}.");
        }
        _ => {}
    }
    let key = bot.first_room(room.room_id());
    if let Err(e) = bot.chosen.set(key.as_str(), name) {
        tracing::warn!("matrix: cannot keep the room's kiln: {e}");
        return format!("Cannot keep this room's kiln: {e}");
    }
    let mut text = format!("This room's sessions run in kiln {name} from now on.");
    if let Some(closed) = close_elsewhere(bot, &key, sender, name).await {
        text.push(' ');
        text.push_str(&closed);
    }
    text
}

/// Closes the room's open conversation in a kiln other than `kiln`, so that its next
/// message starts one in `kiln`; what was done, in words.
async fn close_elsewhere(bot: &Bot, key: &RoomId, sender: &UserId, kiln: &str) -> Option<String> {
    let listed = bot
        .call::<m::SessionList>(&SessionListParams::default())
        .await
        .ok()?;
    let open: Vec<_> = listed
        .sessions
        .into_iter()
        .filter(|s| {
            s.kiln.as_deref() != Some(kiln)
                && s.channel.as_ref().is_some_and(|t| {
                    t.kind == ChannelKind::Matrix && t.reference == key.as_str() && !t.closed
                })
        })
        .collect();
    let mut said = Vec::new();
    for session in open {
        let this = SessionIdParams {
            session_id: session.id.clone(),
        };
        let from = session.kiln.as_deref().unwrap_or("?");
        match bot.call_as::<m::SessionClose>(sender.as_str(), &this).await {
            Ok(_) => said.push(format!(
                "Its session `{}` in kiln {from} is closed (its worktree and transcript stay).",
                session.id
            )),
            Err(e) => said.push(format!(
                "Its session `{}` in kiln {from} could not be closed: {}",
                session.id, e.message
            )),
        }
    }
    (!said.is_empty()).then(|| said.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> MatrixConfig {
        toml::from_str(&format!(
            "homeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\n\
             password_env = \"P\"\nallowed_users = [\"@alice:example.org\"]\n\
             agent = \"claude\"\n{extra}"
        ))
        .unwrap()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_settings_win_then_the_room_s_choice_then_the_default() {
        let c = config(
            "kiln = \"alpha\"\n[kilns]\n\"!mapped:example.org\" = \"beta\"\n\
             \"#ops:example.org\" = \"gamma\"\n",
        );
        let picked = |room: &[&str], chosen: Option<&str>| {
            pick(&c, &names(room), chosen.map(String::from)).map(|k| (k.name, k.why))
        };
        // By id, over a choice made in the room.
        assert_eq!(
            picked(&["!mapped:example.org"], Some("alpha")),
            Some(("beta".into(), Why::Settings))
        );
        // By alias, and by the id of a room it upgraded.
        assert_eq!(
            picked(&["#ops:example.org", "!new:example.org"], None),
            Some(("gamma".into(), Why::Settings))
        );
        assert_eq!(
            picked(&["!new:example.org", "!mapped:example.org"], None),
            Some(("beta".into(), Why::Settings))
        );
        // A room the settings do not map: its choice, else the default.
        assert_eq!(
            picked(&["!other:example.org"], Some("gamma")),
            Some(("gamma".into(), Why::Chosen))
        );
        assert_eq!(
            picked(&["!other:example.org"], None),
            Some(("alpha".into(), Why::Default))
        );
        assert_eq!(
            pick(&config(""), &names(&["!other:example.org"]), None),
            None
        );
    }

    #[test]
    fn a_room_s_choice_is_kept_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("matrix");
        let chosen = Chosen::load(&folder);
        assert_eq!(chosen.get("!r:example.org"), None);
        chosen.set("!r:example.org", "beta").unwrap();
        chosen.set("!s:example.org", "alpha").unwrap();
        chosen.set("!r:example.org", "gamma").unwrap();
        let again = Chosen::load(&folder);
        assert_eq!(again.get("!r:example.org").as_deref(), Some("gamma"));
        assert_eq!(again.get("!s:example.org").as_deref(), Some("alpha"));
        let mode = std::fs::metadata(folder.join(CHOSEN))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
    }
}
