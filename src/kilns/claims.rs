//! Which kiln answers a chat bot account. A bot account (a user id on a homeserver) that
//! two kilns' settings name would answer every message twice; so the daemon that runs a
//! bot claims it first, in the person's registry folder (`bots.json`, owner-only, changed
//! under the registry's lock, so two daemons starting at once cannot both win), and a
//! daemon of another kiln is refused it while the claim holds. A claim names the kiln and
//! its daemon: a kiln's own claim is its own to take again, and a claim whose daemon no
//! longer runs that kiln (killed, stopped, its pid now another process's) is stale and
//! taken over. A daemon gives its claim back when it stops serving the bot.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Registry, Result, read_json};
use crate::kiln::Kiln;

/// A bot account: its user id on its homeserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotAccount {
    /// The homeserver's address as the settings give it.
    pub homeserver: String,
    /// `@crucible:example.org`.
    pub user_id: String,
}

impl BotAccount {
    pub fn new(homeserver: &str, user_id: &str) -> Self {
        Self {
            homeserver: homeserver.to_string(),
            user_id: user_id.to_string(),
        }
    }

    /// Whether `claim` is of this account: the same user id on the same homeserver
    /// (its address without case or a trailing `/`).
    fn is(&self, claim: &BotClaim) -> bool {
        let server = |s: &str| s.trim().trim_end_matches('/').to_ascii_lowercase();
        claim.user_id == self.user_id && server(&claim.homeserver) == server(&self.homeserver)
    }
}

/// The kiln whose daemon answers a bot account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BotClaim {
    pub homeserver: String,
    pub user_id: String,
    /// The kiln's name (`[kiln] name`, else its folder's).
    pub kiln: String,
    /// The kiln's folder.
    pub path: PathBuf,
    /// The daemon that claimed it.
    pub pid: u32,
    /// When (RFC 3339, UTC).
    pub since: String,
}

impl BotClaim {
    /// Whether its daemon still runs its kiln: the pid is alive and is the one the
    /// kiln's pid file names.
    pub fn held(&self) -> bool {
        crate::sys::pid_alive(self.pid) && Kiln::new(&self.path).read_pid() == Some(self.pid)
    }

    fn of_kiln(&self, root: &Path) -> bool {
        self.path == root
    }
}

/// What claiming a bot account came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// This kiln's daemon answers it now.
    Taken,
    /// Another kiln's running daemon answers it.
    HeldBy(BotClaim),
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Bots {
    #[serde(default)]
    bots: Vec<BotClaim>,
}

impl Registry {
    /// The claims file.
    pub fn bots_path(&self) -> PathBuf {
        self.dir.join("bots.json")
    }

    /// Every bot account claimed, stale claims too.
    pub fn bot_claims(&self) -> Result<Vec<BotClaim>> {
        read_json::<Bots>(&self.bots_path()).map(|b| b.bots)
    }

    /// Claims `bot` for the daemon `pid` of `kiln` (named `name`), unless another
    /// kiln's daemon that still runs holds it.
    pub fn claim_bot(
        &self,
        bot: &BotAccount,
        kiln: &Kiln,
        name: &str,
        pid: u32,
    ) -> Result<Claimed> {
        let root = kiln.root();
        self.locked(|| {
            let mut book = read_json::<Bots>(&self.bots_path())?;
            if let Some(holder) = book.bots.iter().find(|c| bot.is(c))
                && !holder.of_kiln(root)
                && holder.held()
            {
                return Ok(Claimed::HeldBy(holder.clone()));
            }
            book.bots.retain(|c| !bot.is(c));
            book.bots.push(BotClaim {
                homeserver: bot.homeserver.clone(),
                user_id: bot.user_id.clone(),
                kiln: name.to_string(),
                path: root.to_path_buf(),
                pid,
                since: crate::text::now_rfc3339(),
            });
            self.replace(&self.bots_path(), &book)?;
            Ok(Claimed::Taken)
        })
    }

    /// Gives `bot` back if the daemon `pid` of `kiln` holds it (a claim taken over since
    /// stays). Answers whether it was held.
    pub fn release_bot(&self, bot: &BotAccount, kiln: &Kiln, pid: u32) -> Result<bool> {
        let root = kiln.root();
        self.locked(|| {
            let mut book = read_json::<Bots>(&self.bots_path())?;
            let before = book.bots.len();
            book.bots
                .retain(|c| !(bot.is(c) && c.of_kiln(root) && c.pid == pid));
            if book.bots.len() == before {
                return Ok(false);
            }
            self.replace(&self.bots_path(), &book)?;
            Ok(true)
        })
    }
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
