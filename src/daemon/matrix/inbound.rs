//! What arrives from rooms: invites (joined when an allowed user sent them), messages
//! (a conversation with the room's session, or a command: `!word`, or `/word` from a
//! client that passes it on), reactions (answers to posted questions), messages the bot
//! cannot decrypt, and rooms upgraded to a successor ([`super::upgrade`]). Anything from
//! a user who is not allowed is ignored, and logged once per user.

use std::sync::Arc;
use std::time::Duration;

use matrix_sdk::event_handler::Ctx;
use matrix_sdk::ruma::events::reaction::OriginalSyncReactionEvent;
use matrix_sdk::ruma::events::room::encrypted::OriginalSyncRoomEncryptedEvent;
use matrix_sdk::ruma::events::room::member::{MembershipState, StrippedRoomMemberEvent};
use matrix_sdk::ruma::events::room::message::{
    MessageType, OriginalSyncRoomMessageEvent, Relation,
};
use matrix_sdk::ruma::{OwnedEventId, UserId};
use matrix_sdk::{Room, RoomState};

use super::commands::Reply;
use super::mapping::Place;
use super::{Bot, SOURCE, approvals, upgrade, wording};
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, Resolution, ResolveParams};

/// The longest pause between attempts to join a room the bot was invited to.
const MOST_JOIN_BACKOFF: Duration = Duration::from_secs(300);

/// Registers the handlers of what arrives.
pub(super) fn listen(bot: &Arc<Bot>) {
    let client = &bot.client;
    client.add_event_handler_context(Arc::clone(bot));
    client.add_event_handler(on_invite);
    client.add_event_handler(on_message);
    client.add_event_handler(on_reaction);
    client.add_event_handler(on_undecryptable);
    client.add_event_handler(upgrade::on_tombstone);
}

impl Bot {
    /// Whether `user` may use the channel; a user who may not is logged once.
    fn admits(&self, user: &UserId, what: &str) -> bool {
        if user == self.own {
            return false;
        }
        if self.config.allows(user.as_str()) {
            return true;
        }
        if self.first_time(format!("user {user}")) {
            tracing::info!(user = %user, "matrix: ignoring a {what} of a user who is not in allowed_users");
        }
        false
    }

    /// Whether the bot serves `room`: any room when `allowed_rooms` is empty, else one
    /// it names (by id or alias), or a successor of one it names.
    pub(super) async fn serves(&self, room: &Room) -> bool {
        let allowed = &self.config.allowed_rooms;
        allowed.is_empty()
            || self
                .names_of(room.room_id())
                .iter()
                .any(|name| allowed.contains(name))
    }
}

async fn on_invite(event: StrippedRoomMemberEvent, room: Room, Ctx(bot): Ctx<Arc<Bot>>) {
    if event.state_key != bot.own || event.content.membership != MembershipState::Invite {
        return;
    }
    if !bot.admits(&event.sender, "invite") || !bot.serves(&room).await {
        return;
    }
    tokio::spawn(async move {
        let mut pause = Duration::from_secs(1);
        while let Err(e) = room.join().await {
            tracing::warn!(room = %room.room_id(), "matrix: cannot join yet: {e}");
            if pause > MOST_JOIN_BACKOFF {
                return;
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
        tracing::info!(room = %room.room_id(), "matrix: joined");
        bot.note_rooms();
    });
}

async fn on_message(event: OriginalSyncRoomMessageEvent, room: Room, Ctx(bot): Ctx<Arc<Bot>>) {
    if room.state() != RoomState::Joined || !bot.admits(&event.sender, "message") {
        return;
    }
    if !bot.serves(&room).await {
        return;
    }
    let MessageType::Text(text) = &event.content.msgtype else {
        return;
    };
    let replied_to = match &event.content.relates_to {
        Some(Relation::Reply(reply)) => Some(reply.in_reply_to.event_id.clone()),
        Some(Relation::Thread(thread)) => Some(thread.event_id.clone()),
        // An edit of a message already passed on is not a new message.
        Some(Relation::Replacement(_)) => return,
        _ => None,
    };
    let body = without_reply_fallback(&text.body);
    if let Some(command) = command_in(body) {
        command_of(&bot, &room, &event.sender, replied_to.as_ref(), command).await;
    } else if bot
        .posted
        .is_about_questions(&bot.line_of(room.room_id()), replied_to.as_ref())
    {
        // Words are no answer, and a question's room is no conversation: nothing is
        // passed on, and the sender is told how to answer.
        bot.notice(&room, wording::HOW_TO_ANSWER, None).await;
    } else {
        converse(&bot, &room, &event.sender, body).await;
    }
}

/// The command a message is (`!word …`, or `/word …` where the client passes it on), with
/// its prefix: a word of letters right after the prefix. Anything else (`!!`, `/ `) is
/// words for the session.
fn command_in(body: &str) -> Option<&str> {
    let rest = body.strip_prefix(['!', '/'])?;
    rest.starts_with(|c: char| c.is_ascii_alphabetic())
        .then_some(body)
}

/// A reply's quoted lines (`> …`), which older clients put before the text.
fn without_reply_fallback(body: &str) -> &str {
    if !body.starts_with("> ") {
        return body.trim();
    }
    match body.find("\n\n") {
        Some(at) => body[at..].trim(),
        None => body.trim(),
    }
}

/// The room's message, to the room's session, from `sender`: resolved as a channel
/// message (a reset phrase, a closed or quiet conversation start a new session).
async fn converse(bot: &Arc<Bot>, room: &Room, sender: &UserId, text: &str) {
    if text.is_empty() {
        return;
    }
    let kiln = match bot.place_of_message(room.room_id()) {
        Place::Kiln(kiln) => kiln,
        Place::Unplaced(notice) => return bot.notice(room, &notice, None).await,
    };
    let direct = room.is_direct().await.unwrap_or(false) || room.joined_members_count() <= 2;
    let inbound = ResolveParams {
        channel: ChannelKind::Matrix,
        source: SOURCE.into(),
        // An upgraded room goes on with the conversation of the room it replaced.
        reference: bot.first_room(room.room_id()).to_string(),
        text: text.to_string(),
        words: None,
        agent: bot.config.agent.clone(),
        driver: bot.config.driver,
        persistent: direct,
        kiln: kiln.clone(),
    };
    match bot
        .call_as::<m::SessionResolve>(sender.as_str(), &inbound)
        .await
    {
        Ok(resolved) => {
            tracing::info!(room = %room.room_id(), session = %resolved.session_id, reason = resolved.reason.as_str(), "matrix message");
            if resolved.reason != Resolution::Continue {
                let reason = resolved.reason.as_str();
                let text = wording::new_session(
                    &resolved.session_id,
                    reason,
                    resolved.previous_session_id.as_deref(),
                    kiln.as_deref(),
                );
                bot.notice(room, &text, None).await;
            }
            let _ = room.typing_notice(true).await;
        }
        Err(e) => {
            bot.notice(room, &format!("Cannot pass that on: {}", e.message), None)
                .await
        }
    }
}

async fn on_reaction(event: OriginalSyncReactionEvent, room: Room, Ctx(bot): Ctx<Arc<Bot>>) {
    if !bot.admits(&event.sender, "reaction") {
        return;
    }
    let relation = &event.content.relates_to;
    let Some(answer) = approvals::answer_of_reaction(&relation.key) else {
        return;
    };
    // A reaction on anything but an open question of the room is no answer.
    bot.answer(&room, Some(&relation.event_id), &event.sender, &answer)
        .await;
}

async fn on_undecryptable(
    event: OriginalSyncRoomEncryptedEvent,
    room: Room,
    Ctx(bot): Ctx<Arc<Bot>>,
) {
    if event.sender == bot.own {
        return;
    }
    tracing::warn!(room = %room.room_id(), sender = %event.sender, "matrix: a message could not be decrypted");
    if bot.config.allows(event.sender.as_str())
        && bot.first_time(format!("undecryptable {}", room.room_id()))
    {
        bot.notice(
            &room,
            "I can't decrypt that; verify this device (or send it again once keys are shared).",
            None,
        )
        .await;
    }
}

/// A command in the room (`!approve`, `!session`, …, with its prefix), for the room's
/// session.
async fn command_of(
    bot: &Arc<Bot>,
    room: &Room,
    sender: &UserId,
    replied_to: Option<&OwnedEventId>,
    line: &str,
) {
    let (typed, rest) = line.split_once(' ').unwrap_or((line, ""));
    let name = &typed[1..];
    let rest = rest.trim();
    let answer = match name {
        "approve" => Some("approve".to_string()),
        "deny" => Some("deny".to_string()),
        "answer" if !rest.is_empty() => Some(rest.to_string()),
        _ => None,
    };
    if let Some(answer) = answer {
        if !bot.answer(room, replied_to, sender, &answer).await {
            bot.notice(room, "There is no open question here.", None)
                .await;
        }
        return;
    }
    match super::commands::run(bot, room, sender, typed, rest).await {
        Reply::Say(text) => bot.say_long(room, &text).await,
        Reply::Threaded { head, whole, code } => {
            bot.threaded(room, &head, &whole, code).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_a_word_after_bang_or_slash() {
        assert_eq!(command_in("!help"), Some("!help"));
        assert_eq!(command_in("!answer 2"), Some("!answer 2"));
        assert_eq!(command_in("/approve"), Some("/approve"));
        assert_eq!(command_in("!! it broke"), None);
        assert_eq!(command_in("! approve"), None);
        assert_eq!(command_in("/ 2"), None);
        assert_eq!(command_in("say !help"), None);
    }
}
