//! One bot account answers from one kiln. Before it logs in, the daemon claims the bot
//! account in the person's registry ([`crate::kilns`]); a bot that another kiln's running
//! daemon answers is refused here: the daemon does not log in or sync, says why in the
//! log, in `daemon.status` and once in the inbox, and the rest of it works. The claim is
//! given back when the bot stops (new settings, the daemon stopping); a daemon that is
//! killed leaves a claim the next daemon finds stale. A registry that cannot be used
//! costs only the check (said in the log).

use std::path::{Path, PathBuf};

use super::super::caller::Caller;
use super::super::door::Door;
use super::wording;
use crate::config::MatrixConfig;
use crate::kiln::Kiln;
use crate::kilns::{BotAccount, BotClaim, Claimed, Registry};
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, DeregisterParams, MsgType, RegisterParams, SendParams};

/// The file in the bot's folder naming the refusal the inbox was told of, so a daemon
/// started again while the bot is still answered elsewhere does not say it again.
const SAID: &str = "refused";

/// What claiming the bot came to.
pub(super) enum Claim {
    /// This daemon runs the bot: its claim, given back when dropped (none when the
    /// registry could not be used).
    Serve(Option<Held>),
    /// Another kiln's daemon answers the bot: the claim that holds it, and why this
    /// daemon does not, in a sentence.
    Refused { holder: BotClaim, refusal: String },
}

/// The bot's claim, held while this daemon runs the bot.
pub(super) struct Held {
    registry: Registry,
    bot: BotAccount,
    kiln: Kiln,
    pid: u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        match self.registry.release_bot(&self.bot, &self.kiln, self.pid) {
            Ok(_) => tracing::debug!(user = %self.bot.user_id, "matrix: bot account given back"),
            Err(e) => tracing::warn!("matrix: cannot give the bot account back: {e}"),
        }
    }
}

/// Claims the bot `config` names for this daemon.
pub(super) fn take(door: &Door, folder: &Path, config: &MatrixConfig) -> Claim {
    let bot = BotAccount::new(&config.homeserver, &config.user_id);
    let kiln = door.kiln().clone();
    let name = crate::kilns::name_of(&kiln, door.settings().kiln.name.as_deref());
    let pid = std::process::id();
    let claimed = Registry::for_user().and_then(|registry| {
        let claimed = registry.claim_bot(&bot, &kiln, &name, pid)?;
        Ok((registry, claimed))
    });
    match claimed {
        Ok((registry, Claimed::Taken)) => {
            unsay(folder);
            Claim::Serve(Some(Held {
                registry,
                bot,
                kiln,
                pid,
            }))
        }
        Ok((_, Claimed::HeldBy(holder))) => Claim::Refused {
            refusal: wording::answered_elsewhere(&holder),
            holder,
        },
        Err(e) => {
            tracing::warn!(
                "matrix: cannot check in the person's registry that no other kiln answers the bot: {e}"
            );
            Claim::Serve(None)
        }
    }
}

/// Says the refusal in the inbox, unless it was said for the same kiln before: under a
/// record standing for the bot (an inbox message belongs to a session), ended at once.
pub(super) async fn say(door: Door, folder: PathBuf, holder: BotClaim, refusal: String) {
    let said = format!("{} {}", holder.user_id, holder.path.display());
    if std::fs::read_to_string(folder.join(SAID)).is_ok_and(|s| s == said) {
        return;
    }
    let caller = || Caller::channel(ChannelKind::Matrix, holder.user_id.clone());
    let record = RegisterParams {
        worktree: None,
        agent_type: "matrix".into(),
        agent_name: format!("bot {}", holder.user_id),
    };
    let registered = match door.call::<m::SessionRegister>(caller(), &record).await {
        Ok(registered) => registered,
        Err(e) => {
            tracing::error!("matrix: cannot say that the bot is refused: {}", e.message);
            return;
        }
    };
    let message = SendParams {
        session_id: registered.session_id.clone(),
        msg_type: MsgType::Error,
        title: format!(
            "Matrix bot {} answers from kiln {}",
            holder.user_id, holder.kiln
        ),
        body: Some(wording::refused_body(&refusal, &holder)),
        options: None,
        option_kinds: None,
        flagged: None,
    };
    match door.call::<m::InboxSend>(caller(), &message).await {
        Ok(_) => keep_said(&folder, &said),
        Err(e) => tracing::error!("matrix: cannot say that the bot is refused: {}", e.message),
    }
    let ended = DeregisterParams {
        session_id: registered.session_id,
        reason: Some(refusal),
        exit_code: None,
    };
    if let Err(e) = door.call::<m::SessionDeregister>(caller(), &ended).await {
        tracing::warn!(
            "matrix: cannot end the record of the refused bot: {}",
            e.message
        );
    }
}

fn keep_said(folder: &Path, said: &str) {
    let kept = std::fs::create_dir_all(folder)
        .and_then(|()| crate::sys::write_private(&folder.join(SAID), said.as_bytes()));
    if let Err(e) = kept {
        tracing::warn!("matrix: cannot note that the refusal was said: {e}");
    }
}

/// The bot is this kiln's again: a later refusal is news.
fn unsay(folder: &Path) {
    if let Err(e) = std::fs::remove_file(folder.join(SAID))
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("matrix: cannot clear the refusal said before: {e}");
    }
}
