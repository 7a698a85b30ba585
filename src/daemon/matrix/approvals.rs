//! Questions in rooms: an approval or question of a session is posted in its room, or,
//! for a cron or webhook session, in its `approval_target` (tagged with the session's
//! name and id), mentioning the allowed users in that room ([`super::mentions`]). An
//! allowed user answers with a reaction on that post (✅ 👍 approve, ❌ 👎 deny, 1️⃣…9️⃣ an
//! option) or with `!approve`, `!deny`, `!answer N` in the room;
//! the answer is confirmed in a thread under the post. An answer given elsewhere (the
//! workbench, the command line) edits the post to say so; later reactions are ignored.
//! What was posted is kept in `.crucible/matrix/posted.json`, so a restarted daemon
//! still knows its posts.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use matrix_sdk::Room;
use matrix_sdk::ruma::events::reaction::ReactionEventContent;
use matrix_sdk::ruma::events::relation::{Annotation, Thread};
use matrix_sdk::ruma::events::room::message::{
    Relation, ReplacementMetadata, RoomMessageEventContent,
};
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomAliasId, RoomId, UserId};
use serde::{Deserialize, Serialize};

use super::{Bot, lock, mentions, wording};
use crate::protocol::methods as m;
use crate::protocol::{ChannelKind, InboxMessage, MsgType, RespondParams, Session};

/// One question as posted.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Post {
    /// The inbox message.
    message_id: String,
    room: OwnedRoomId,
    event: OwnedEventId,
    /// Answered (here or elsewhere), or withdrawn: reactions no longer count.
    settled: bool,
    /// An answer from the room is being given: its own update is not "elsewhere".
    answering: bool,
    /// Posted in an `approval_target`, not in the session's own room.
    #[serde(default)]
    tagged: bool,
    /// What the post asked (the message's digest): an answer from the room answers
    /// only that question.
    #[serde(default)]
    asked: Option<String>,
}

/// The questions posted, kept on disk.
pub(super) struct Posted {
    path: PathBuf,
    posts: Mutex<Vec<Post>>,
}

/// How many settled posts are remembered (the newest).
const KEPT_SETTLED: usize = 500;

impl Posted {
    pub fn load(folder: &Path) -> Self {
        let path = folder.join("posted.json");
        let posts = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self {
            path,
            posts: Mutex::new(posts),
        }
    }

    fn save(&self, posts: &mut Vec<Post>) {
        let settled = posts.iter().filter(|p| p.settled).count();
        if settled > KEPT_SETTLED {
            let mut drop = settled - KEPT_SETTLED;
            posts.retain(|p| {
                let keep = !p.settled || drop == 0;
                drop -= usize::from(!keep);
                keep
            });
        }
        let written = serde_json::to_vec(posts)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                let temp = self.path.with_extension("json.new");
                std::fs::write(&temp, bytes)?;
                std::fs::rename(&temp, &self.path)
            });
        if let Err(e) = written {
            tracing::warn!("matrix: cannot keep the posted questions: {e}");
        }
    }

    fn change<R>(&self, change: impl FnOnce(&mut Vec<Post>) -> R) -> R {
        let mut posts = lock(&self.posts);
        let result = change(&mut posts);
        self.save(&mut posts);
        result
    }

    fn is_posted(&self, message_id: &str) -> bool {
        lock(&self.posts).iter().any(|p| p.message_id == message_id)
    }

    /// Whether a message in a room (of the line `rooms`: the room, then the rooms it
    /// upgraded) replying to `event` (if any) is about questions rather than to a
    /// session: a reply to a posted question, or any message in a room that receives
    /// other sessions' questions (an `approval_target`).
    pub(super) fn is_about_questions(
        &self,
        rooms: &[OwnedRoomId],
        event: Option<&OwnedEventId>,
    ) -> bool {
        lock(&self.posts)
            .iter()
            .any(|p| rooms.contains(&p.room) && (p.tagged || event.is_some_and(|e| p.event == *e)))
    }

    /// The open question a reaction on `event` (or a command) in a room of `rooms`
    /// answers, marked as being answered.
    fn take_for_answer(&self, rooms: &[OwnedRoomId], event: Option<&OwnedEventId>) -> Option<Post> {
        self.change(|posts| {
            let post = posts.iter_mut().find(|p| {
                rooms.contains(&p.room)
                    && !p.settled
                    && !p.answering
                    && event.is_none_or(|e| p.event == *e)
            })?;
            post.answering = true;
            Some(post.clone())
        })
    }

    fn finish_answer(&self, message_id: &str, answered: bool) {
        self.change(|posts| {
            if let Some(post) = posts.iter_mut().find(|p| p.message_id == message_id) {
                post.answering = false;
                post.settled |= answered;
            }
        });
    }

    /// Marks the post of `message_id` settled; the post, when it was settled elsewhere.
    fn settle(&self, message_id: &str) -> Option<Post> {
        self.change(|posts| {
            let post = posts
                .iter_mut()
                .find(|p| p.message_id == message_id && !p.settled)?;
            post.settled = true;
            (!post.answering).then(|| post.clone())
        })
    }
}

impl Bot {
    /// Posts a question of a session where it can be answered, once.
    pub(super) async fn post_question(&self, message: &InboxMessage) {
        if self.posted.is_posted(&message.id) {
            return;
        }
        let Some(session) = self.session(&message.session_id).await else {
            return;
        };
        let (room, tagged) = match super::room_of_tag(&session) {
            Some(room) => (self.current_room(&room), false),
            None => match self.approval_target(&session) {
                Some(target) => (self.target_room(&target).await, true),
                None => return,
            },
        };
        let Some(room) = room else {
            tracing::warn!(message = %message.id, "matrix: the room for the question is not joined");
            return;
        };
        // Through the hub every kiln's questions come here: each names its kiln.
        let kiln = self.door.kilns().and(message.kiln.clone());
        let text = wording::question(message, tagged.then_some(&session), kiln.as_deref());
        let people = self.people_in(&room).await;
        let event = match room.send(mentions::mentioning(&text, people)).await {
            Ok(sent) => sent.response.event_id,
            Err(e) => {
                tracing::warn!(message = %message.id, "matrix: cannot post the question: {e}");
                return;
            }
        };
        self.posted.change(|posts| {
            posts.push(Post {
                message_id: message.id.clone(),
                room: room.room_id().to_owned(),
                event: event.clone(),
                settled: false,
                answering: false,
                tagged,
                asked: message.digest.clone(),
            });
        });
        // The choices as reactions of the bot's own, for a client to show as buttons.
        let options = message.options.as_ref().map_or(0, Vec::len);
        let keys: Vec<&str> = match message.msg_type {
            MsgType::ApprovalRequired => vec!["✅", "❌"],
            _ => wording::KEYCAPS.iter().take(options).copied().collect(),
        };
        for key in keys {
            if let Err(e) = room.send(reaction(event.clone(), key)).await {
                tracing::debug!("matrix: cannot add the choice {key}: {e}");
            }
        }
    }

    /// The `approval_target` of a cron or webhook session: its job's or hook's (as the
    /// settings here say, else as its kiln's said when the session was tagged: through
    /// the hub, the jobs are in the kiln's settings, not the person's), else the
    /// channel's.
    fn approval_target(&self, session: &Session) -> Option<String> {
        let tag = session.channel.as_ref()?;
        // Through the hub: a kiln with a bot of its own posts its own questions.
        if tag.own_bot && self.door.kilns().is_some() {
            return None;
        }
        let config = self.door.settings();
        let here = match tag.kind {
            ChannelKind::Cron => config
                .cron
                .iter()
                .find(|j| j.id == tag.source)
                .and_then(|j| j.approval_target.clone()),
            ChannelKind::Webhook => config
                .webhook(&tag.source)
                .and_then(|h| h.approval_target.clone()),
            _ => return None,
        };
        here.or_else(|| tag.approval_target.clone())
            .or_else(|| config.channels.matrix.as_ref()?.approval_target.clone())
    }

    /// The room a target names: a room id or an alias (the newest room of its line, if it
    /// was upgraded), or a user's direct chat with the bot (made when there is none).
    async fn target_room(&self, target: &str) -> Option<Room> {
        if let Ok(id) = RoomId::parse(target) {
            return self.current_room(&id);
        }
        if let Ok(alias) = RoomAliasId::parse(target) {
            let found = self.client.resolve_room_alias(&alias).await.ok()?;
            return self.current_room(&found.room_id);
        }
        let user: OwnedUserId = UserId::parse(target).ok()?;
        if let Some(room) = self.client.get_dm_room(&user) {
            return Some(room);
        }
        match self.client.create_dm(&user).await {
            Ok(room) => Some(room),
            Err(e) => {
                tracing::warn!(user = %user, "matrix: cannot open a direct chat: {e}");
                None
            }
        }
    }

    /// Answers the open question of `event` (or the room's oldest, with `None`; a
    /// question asked before the room was upgraded counts as the room's) for `sender`;
    /// `answer` as `inbox.respond` takes it. Says so in a thread under the post (in the
    /// room, when the post is in the room it replaced). False when there was no open
    /// question.
    pub(super) async fn answer(
        &self,
        room: &Room,
        event: Option<&OwnedEventId>,
        sender: &UserId,
        answer: &str,
    ) -> bool {
        let line = self.line_of(room.room_id());
        let Some(post) = self.posted.take_for_answer(&line, event) else {
            return false;
        };
        let asked = RespondParams {
            id: post.message_id.clone(),
            response: answer.to_string(),
            asked: post.asked.clone(),
        };
        let result = self
            .call_as::<m::InboxRespond>(sender.as_str(), &asked)
            .await
            .map(|reply| reply.message);
        self.posted.finish_answer(&post.message_id, result.is_ok());
        let text = match &result {
            Ok(message) => wording::answered(message, sender),
            Err(e) => wording::not_answered(e),
        };
        let mut reply = RoomMessageEventContent::notice_markdown(text);
        if post.room == room.room_id() {
            reply.relates_to = Some(Relation::Thread(Thread::plain(
                post.event.clone(),
                post.event.clone(),
            )));
        }
        if let Err(e) = room.send(reply).await {
            tracing::warn!("matrix: cannot confirm the answer: {e}");
        }
        true
    }

    /// A question answered or withdrawn: a post answered elsewhere says so.
    pub(super) async fn question_settled(&self, message: &InboxMessage) {
        let Some(post) = self.posted.settle(&message.id) else {
            return;
        };
        let Some(room) = self.client.get_room(&post.room) else {
            return;
        };
        let edit = RoomMessageEventContent::text_markdown(wording::settled_elsewhere(message))
            .make_replacement(ReplacementMetadata::new(post.event.clone(), None));
        if let Err(e) = room.send(edit).await {
            tracing::warn!("matrix: cannot mark the question answered: {e}");
        }
    }
}

/// The answer a reaction stands for: approve, deny, or an option's number.
pub(super) fn answer_of_reaction(key: &str) -> Option<String> {
    let key = key.trim_end_matches('\u{fe0f}');
    match key {
        "✅" | "👍" | "✔" => Some("approve".into()),
        "❌" | "👎" | "✖" => Some("deny".into()),
        _ => {
            let mut chars = key.chars();
            let digit = chars.next()?.to_digit(10)?;
            let rest: String = chars.collect();
            let keycap = rest.trim_start_matches('\u{fe0f}');
            (keycap == "\u{20e3}" && (1..=9).contains(&digit)).then(|| digit.to_string())
        }
    }
}

/// A reaction the bot puts on its own post: a client shows it as a button to tap.
fn reaction(event: OwnedEventId, key: &str) -> ReactionEventContent {
    ReactionEventContent::new(Annotation::new(event, key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reactions_stand_for_answers() {
        assert_eq!(answer_of_reaction("✅").as_deref(), Some("approve"));
        assert_eq!(answer_of_reaction("👍").as_deref(), Some("approve"));
        assert_eq!(answer_of_reaction("👍️").as_deref(), Some("approve"));
        assert_eq!(answer_of_reaction("❌").as_deref(), Some("deny"));
        assert_eq!(answer_of_reaction("👎").as_deref(), Some("deny"));
        assert_eq!(answer_of_reaction("2️⃣").as_deref(), Some("2"));
        assert_eq!(answer_of_reaction("2\u{20e3}").as_deref(), Some("2"));
        assert_eq!(answer_of_reaction("0️⃣"), None);
        assert_eq!(answer_of_reaction("🎉"), None);
        assert_eq!(answer_of_reaction("2"), None);
    }

    #[test]
    fn words_in_reply_to_a_question_or_in_an_approval_room_are_about_questions() {
        let dir = tempfile::tempdir().unwrap();
        let posted = Posted::load(dir.path());
        let own: OwnedRoomId = "!own:example.org".try_into().unwrap();
        let target: OwnedRoomId = "!approvals:example.org".try_into().unwrap();
        let other: OwnedRoomId = "!other:example.org".try_into().unwrap();
        let question: OwnedEventId = "$question".try_into().unwrap();
        let chat: OwnedEventId = "$chat".try_into().unwrap();
        posted.change(|posts| {
            posts.push(Post {
                message_id: "m1".into(),
                room: own.clone(),
                event: question.clone(),
                settled: false,
                answering: false,
                tagged: false,
                asked: None,
            });
            posts.push(Post {
                message_id: "m2".into(),
                room: target.clone(),
                event: "$elsewhere".try_into().unwrap(),
                settled: true,
                answering: false,
                tagged: true,
                asked: None,
            });
        });
        // A session's own room: only a reply to its question is held back.
        assert!(posted.is_about_questions(std::slice::from_ref(&own), Some(&question)));
        assert!(!posted.is_about_questions(std::slice::from_ref(&own), Some(&chat)));
        assert!(!posted.is_about_questions(std::slice::from_ref(&own), None));
        // A room other sessions' questions go to: nothing there starts a session.
        assert!(posted.is_about_questions(std::slice::from_ref(&target), None));
        assert!(posted.is_about_questions(std::slice::from_ref(&target), Some(&chat)));
        assert!(!posted.is_about_questions(std::slice::from_ref(&other), None));
        // A room that upgraded the approvals room (its line: itself, then the old room).
        assert!(posted.is_about_questions(&[other.clone(), target.clone()], None));
        // Posts kept before the flag existed read back as the session's own.
        let old =
            r#"[{"message_id":"m","room":"!r:x","event":"$e","settled":false,"answering":false}]"#;
        let posts: Vec<Post> = serde_json::from_str(old).unwrap();
        assert!(!posts[0].tagged);
    }
}
