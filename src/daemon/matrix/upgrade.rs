//! Upgraded rooms: when a room the bot serves is replaced (its `m.room.tombstone` names
//! a successor), the bot joins the successor, and the room's conversation goes on there.
//! A conversation keeps the id of the room it began in as its key; a message in a
//! successor resolves to that first room's conversation, and what a session says goes
//! to the newest room of the line the bot has joined. The links are the tombstones of
//! rooms the bot is or was in (a tombstone only someone with the power to send it can
//! send), as the bot's Matrix store keeps them: nothing else is kept.

use std::sync::Arc;

use matrix_sdk::event_handler::Ctx;
use matrix_sdk::ruma::events::room::tombstone::OriginalSyncRoomTombstoneEvent;
use matrix_sdk::ruma::{OwnedRoomId, RoomId, RoomOrAliasId};
use matrix_sdk::{Room, RoomState};

use super::Bot;

/// The most upgrades followed from a room (a bound, should tombstones ever loop).
const MOST_UPGRADES: usize = 16;

/// A tombstone in a room the bot serves: it joins the successor (when it may; otherwise
/// the invite to it, from an allowed user, is taken when it comes).
pub(super) async fn on_tombstone(
    event: OriginalSyncRoomTombstoneEvent,
    room: Room,
    Ctx(bot): Ctx<Arc<Bot>>,
) {
    if room.state() != RoomState::Joined || !bot.serves(&room).await {
        return;
    }
    let successor = event.content.replacement_room;
    if bot
        .client
        .get_room(&successor)
        .is_some_and(|r| r.state() == RoomState::Joined)
    {
        return;
    }
    let via = [event.sender.server_name().to_owned()];
    match bot
        .client
        .join_room_by_id_or_alias(<&RoomOrAliasId>::from(&*successor), &via)
        .await
    {
        Ok(_) => {
            tracing::info!(room = %room.room_id(), successor = %successor, "matrix: the room was upgraded; joined its successor");
            bot.note_rooms();
        }
        Err(e) => {
            tracing::info!(room = %room.room_id(), successor = %successor, "matrix: the room was upgraded; its successor is joined once invited ({e})");
        }
    }
}

impl Bot {
    /// The room a conversation that began in `room` talks in now: the newest successor
    /// the bot has joined, or `room` itself.
    pub(super) fn current_room(&self, room: &RoomId) -> Option<Room> {
        let mut current = self.client.get_room(room)?;
        for _ in 0..MOST_UPGRADES {
            let Some(next) = current.successor_room() else {
                break;
            };
            match self.client.get_room(&next.room_id) {
                Some(newer) if newer.state() == RoomState::Joined => current = newer,
                _ => break,
            }
        }
        Some(current)
    }

    /// The rooms `room` succeeds, newest first, after `room` itself: each one the bot is
    /// or was in whose tombstone names the one after it.
    pub(super) fn line_of(&self, room: &RoomId) -> Vec<OwnedRoomId> {
        let known: Vec<Room> = self
            .client
            .rooms()
            .into_iter()
            .filter(|r| matches!(r.state(), RoomState::Joined | RoomState::Left))
            .collect();
        let mut line = vec![room.to_owned()];
        for _ in 0..MOST_UPGRADES {
            let Some(last) = line.last() else {
                break;
            };
            let before = known
                .iter()
                .find(|r| r.successor_room().is_some_and(|s| s.room_id == *last));
            match before {
                Some(old) if !line.iter().any(|r| r == old.room_id()) => {
                    line.push(old.room_id().to_owned());
                }
                _ => break,
            }
        }
        line
    }

    /// The room whose id keys `room`'s conversation: the first of the rooms it succeeds,
    /// or itself.
    pub(super) fn first_room(&self, room: &RoomId) -> OwnedRoomId {
        let mut line = self.line_of(room);
        line.pop().unwrap_or_else(|| room.to_owned())
    }
}
