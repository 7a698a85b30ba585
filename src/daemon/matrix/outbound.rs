//! What the bot posts: each session's reply when its turn ends (Markdown; a long reply
//! and what the agent did — tool calls, files, its plan — in a thread under it), typing
//! while a turn runs, a short notice when the session errs, stops or is cancelled, and
//! the questions its agent asks (see [`super::approvals`]).

use std::collections::HashMap;
use std::sync::Arc;

use matrix_sdk::Room;
use matrix_sdk::ruma::OwnedEventId;
use matrix_sdk::ruma::events::relation::Thread;
use matrix_sdk::ruma::events::room::message::{Relation, RoomMessageEventContent};
use tokio::sync::broadcast::error::RecvError;

use super::{Bot, wording};
use crate::protocol::methods as m;
use crate::protocol::{
    EntryKind, Event, InboxMessage, ListParams, Session, SessionState, TranscriptEntry,
};

/// The most text one thread message carries (an event is at most 64 KiB).
const THREAD_PART_CHARS: usize = 24_000;

/// What a session's running turn has said so far.
#[derive(Default)]
struct Turn {
    reply: String,
    detail: Vec<String>,
}

/// Follows the daemon's events and posts what rooms need to hear.
pub(super) async fn follow(bot: Arc<Bot>) {
    let mut events = bot.door.events();
    post_open_questions(&bot).await;
    let mut turns: HashMap<String, Turn> = HashMap::new();
    let mut states: HashMap<String, Option<SessionState>> = HashMap::new();
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "matrix: fell behind the daemon's events");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        match &*event {
            Event::Transcript(entry) => {
                if let Some(room) = room_of(&bot, &entry.session_id).await {
                    let turn = turns.entry(entry.session_id.clone()).or_default();
                    if note(turn, entry) {
                        let turn = std::mem::take(turn);
                        bot.post_reply(&room, &turn.reply, &turn.detail).await;
                        let _ = room.typing_notice(false).await;
                    }
                }
            }
            Event::SessionUpdated(session) => {
                let before = states.insert(session.id.clone(), session.state);
                if before != Some(session.state) {
                    state_changed(&bot, session).await;
                }
            }
            Event::SessionDeregistered { session_id, .. } => {
                turns.remove(session_id);
                states.remove(session_id);
            }
            Event::InboxCreated(message) if message.msg_type.blocks() => {
                bot.post_question(message).await;
            }
            Event::InboxUpdated(message) if message.responded || message.withdrawn => {
                bot.question_settled(message).await;
            }
            _ => {}
        }
    }
}

/// The questions still open when the bot starts (asked while it was away).
async fn post_open_questions(bot: &Bot) {
    let params = ListParams {
        unread_only: false,
        limit: Some(crate::config::MAX_LIST_LIMIT),
        session_id: None,
    };
    let Ok(listed) = bot.call::<m::InboxList>(&params).await else {
        return;
    };
    let messages = listed.messages;
    let open: Vec<&InboxMessage> = messages
        .iter()
        .filter(|m| m.msg_type.blocks() && !m.responded && !m.withdrawn)
        .collect();
    for message in open.into_iter().rev() {
        bot.post_question(message).await;
    }
}

/// The room a session talks in now (the newest successor of its room, if upgraded).
async fn room_of(bot: &Bot, session_id: &str) -> Option<Room> {
    bot.current_room(&bot.room_of_session(session_id).await?)
}

/// Adds what `entry` says to the turn; true when the turn ended.
fn note(turn: &mut Turn, entry: &TranscriptEntry) -> bool {
    let text = entry.text.as_deref().unwrap_or("");
    match entry.kind {
        EntryKind::Message => {
            if !turn.reply.is_empty() {
                turn.reply.push_str("\n\n");
            }
            turn.reply.push_str(text);
        }
        EntryKind::ToolCall => turn.detail.push(format!("🔧 {text}")),
        EntryKind::ToolUpdate => {
            if let Some(status) = &entry.status {
                turn.detail.push(format!("   {status}{}", tail(text)));
            }
        }
        EntryKind::File => turn.detail.push(format!(
            "📄 {text} {}",
            entry.status.as_deref().unwrap_or("")
        )),
        EntryKind::Plan => turn.detail.push(format!("📋 plan\n{text}")),
        EntryKind::Permission => turn.detail.push(format!(
            "🔐 {text}: {}",
            entry.status.as_deref().unwrap_or("asked")
        )),
        EntryKind::TurnEnd => return true,
        _ => {}
    }
    false
}

fn tail(text: &str) -> String {
    match text.trim() {
        "" => String::new(),
        text => format!(": {text}"),
    }
}

async fn state_changed(bot: &Bot, session: &Session) {
    let Some(room) = super::room_of_tag(session).and_then(|room| bot.current_room(&room)) else {
        return;
    };
    let Some(state) = session.state else {
        return;
    };
    let _ = room.typing_notice(state == SessionState::Working).await;
    if let Some(notice) = wording::state_notice(session, state) {
        bot.notice(&room, &notice, None).await;
    }
}

impl Bot {
    /// A turn's reply in the room; a long reply whole, and what the agent did, in a
    /// thread under it.
    async fn post_reply(&self, room: &Room, reply: &str, detail: &[String]) {
        let reply = reply.trim();
        if reply.is_empty() && detail.is_empty() {
            return;
        }
        let limit = self.config.thread_after_chars;
        let long = reply.chars().count() > limit;
        let shown = match (reply.is_empty(), long) {
            (true, _) => "*(no reply; what the agent did is in the thread)*".to_string(),
            (false, true) => wording::head_of(reply, limit),
            (false, false) => reply.to_string(),
        };
        let root = match room
            .send(RoomMessageEventContent::text_markdown(shown))
            .await
        {
            Ok(sent) => sent.response.event_id,
            Err(e) => {
                tracing::warn!(room = %room.room_id(), "matrix: cannot post the reply: {e}");
                return;
            }
        };
        if long {
            self.in_thread(room, &root, reply, None).await;
        }
        if !detail.is_empty() {
            self.in_thread(room, &root, &detail.join("\n"), Some(""))
                .await;
        }
    }

    /// Posts `text` in the thread under `root`, in parts an event can carry; as code (a
    /// block in the language `code` names, if any) or as Markdown.
    async fn in_thread(&self, room: &Room, root: &OwnedEventId, text: &str, code: Option<&str>) {
        let chars: Vec<char> = text.chars().collect();
        for part in chars.chunks(THREAD_PART_CHARS) {
            let part: String = part.iter().collect();
            let body = match code {
                Some(language) => format!("```{language}\n{}\n```", part.trim_end()),
                None => part,
            };
            self.notice(room, &body, Some(root)).await;
        }
    }

    /// A notice in the room, or in the thread under `root`.
    pub(super) async fn notice(&self, room: &Room, text: &str, root: Option<&OwnedEventId>) {
        let mut content = RoomMessageEventContent::notice_markdown(text);
        if let Some(root) = root {
            content.relates_to = Some(Relation::Thread(Thread::plain(root.clone(), root.clone())));
        }
        if let Err(e) = room.send(content).await {
            tracing::warn!(room = %room.room_id(), "matrix: cannot post: {e}");
        }
    }

    /// A reply to a command: long ones in a thread under their first lines.
    pub(super) async fn say_long(&self, room: &Room, text: &str) {
        let limit = self.config.thread_after_chars;
        if text.chars().count() <= limit {
            self.notice(room, text, None).await;
            return;
        }
        let head = wording::head_of(text, limit.min(400));
        match room
            .send(RoomMessageEventContent::notice_markdown(head))
            .await
        {
            Ok(sent) => {
                self.in_thread(room, &sent.response.event_id, text, None)
                    .await
            }
            Err(e) => tracing::warn!(room = %room.room_id(), "matrix: cannot post: {e}"),
        }
    }

    /// `head` in the room, and `whole` in a thread under it (as code in the language
    /// `code` names, if any).
    pub(super) async fn threaded(&self, room: &Room, head: &str, whole: &str, code: Option<&str>) {
        match room
            .send(RoomMessageEventContent::notice_markdown(head))
            .await
        {
            Ok(sent) => {
                self.in_thread(room, &sent.response.event_id, whole, code)
                    .await
            }
            Err(e) => tracing::warn!(room = %room.room_id(), "matrix: cannot post: {e}"),
        }
    }
}
