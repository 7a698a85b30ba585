//! A room's commands other than answers: what the room's session is and does, and the
//! rules that judge it. Replies name commands with `!` (Element keeps `/` for its own).

use std::fmt::Write as _;
use std::sync::Arc;

use matrix_sdk::Room;
use matrix_sdk::ruma::{RoomId, UserId};

use super::{Bot, wording};
use crate::protocol::methods as m;
use crate::protocol::{
    ChannelKind, DiffParams, ResetParams, RuleInfo, RulesParams, Session, SessionIdParams,
    SessionListParams, SessionRuleParams, SessionState,
};

/// What a command answers: words in the room (a long answer in a thread under its first
/// lines), or a head in the room with the whole in a thread under it.
pub(super) enum Reply {
    Say(String),
    Threaded {
        head: String,
        whole: String,
        /// The code block's language, when the whole is code (`diff`).
        code: Option<&'static str>,
    },
}

impl From<String> for Reply {
    fn from(text: String) -> Self {
        Reply::Say(text)
    }
}

/// The reply to `typed` (`!name` or `/name`) with `rest` in `room`, said by `sender`.
pub(super) async fn run(
    bot: &Arc<Bot>,
    room: &Room,
    sender: &UserId,
    typed: &str,
    rest: &str,
) -> Reply {
    let name = typed.get(1..).unwrap_or_default();
    if name == "help" {
        return Reply::Say(wording::HELP.into());
    }
    if name == "kiln" {
        return super::mapping::command(bot, room, sender, rest)
            .await
            .into();
    }
    let all = match bot
        .call::<m::SessionList>(&SessionListParams::default())
        .await
    {
        Ok(listed) => listed.sessions,
        Err(e) => return format!("!{name}: {}", e.message).into(),
    };
    if name == "sessions" {
        return sessions(all).into();
    }
    let key = bot.first_room(room.room_id());
    let Some(session) = room_session(all, &key) else {
        return Reply::Say(match known(name) {
            true => "This room has no session yet: write to start one.".into(),
            false => format!("Unknown command {typed}: say !help."),
        });
    };
    on_session(bot, &session, sender.as_str(), typed, rest).await
}

/// The reply to `typed` with `rest` about the room's `session`, said by `who`.
async fn on_session(
    bot: &Arc<Bot>,
    session: &Session,
    who: &str,
    typed: &str,
    rest: &str,
) -> Reply {
    let name = typed.get(1..).unwrap_or_default();
    let id = session.id.clone();
    let this = SessionIdParams {
        session_id: id.clone(),
    };
    let result = match name {
        "session" => Ok(describe(session)),
        "stop" => bot.call_as::<m::SessionStop>(who, &this).await.map(|r| {
            format!(
                "Stopped `{}`: its worktree and transcript stay.",
                r.session.id
            )
        }),
        "rules" => bot
            .call_as::<m::RulesList>(
                who,
                &RulesParams {
                    session_id: Some(id.clone()),
                },
            )
            .await
            .map(|reply| rules_text(&reply.rules)),
        "disable" | "enable" if !rest.is_empty() => {
            let rule = SessionRuleParams {
                session_id: id.clone(),
                rule: rest.to_string(),
                enabled: name == "enable",
            };
            bot.call_as::<m::SessionRule>(who, &rule)
                .await
                .map(|_| format!("Rule `{rest}` is {name}d for this session."))
        }
        "reset" => {
            let reset = ResetParams {
                session_id: id.clone(),
                keep_disabled: true,
            };
            bot.call_as::<m::SessionReset>(who, &reset).await.map(|s| {
                format!(
                    "A fresh session `{}` takes over; nothing approved before stands.",
                    s.session_id
                )
            })
        }
        "skills" => Ok(match session.skills.is_empty() {
            true => "The agent has announced no commands.".into(),
            false => format!("- {}", session.skills.join("\n- ")),
        }),
        "memory" => Ok(session
            .context_summary
            .clone()
            .unwrap_or_else(|| "No context summary yet (after the first turn).".into())),
        "diff" => {
            let asked = DiffParams {
                session_id: id.clone(),
                context: None,
            };
            return match bot.call_as::<m::SessionDiff>(who, &asked).await {
                Ok(reply) => diff_reply(&reply.diff),
                Err(e) => format!("!diff: {}", e.message).into(),
            };
        }
        _ => return format!("Unknown command {typed}: say !help.").into(),
    };
    result
        .unwrap_or_else(|e| format!("!{name}: {}", e.message))
        .into()
}

/// The rules that judge the session, one line each: id, how it stands, what it does.
fn rules_text(rules: &[RuleInfo]) -> String {
    let mut text = String::from("Rules:");
    for rule in rules {
        let stands = if rule.disabled || rule.off {
            "off"
        } else {
            &rule.action
        };
        let _ = write!(text, "\n- `{}` ({stands}): {}", rule.id, rule.description);
    }
    text
}

fn known(name: &str) -> bool {
    [
        "session", "stop", "rules", "disable", "enable", "reset", "skills", "memory", "diff",
    ]
    .contains(&name)
}

/// The live session of the conversation keyed by `room` among `all` (the newest, if
/// several were).
fn room_session(all: Vec<Session>, room: &RoomId) -> Option<Session> {
    let room_id = room.as_str();
    all.into_iter()
        .filter(|s| {
            s.channel.as_ref().is_some_and(|t| {
                t.kind == ChannelKind::Matrix && t.reference == room_id && !t.closed
            })
        })
        .max_by(|a, b| a.id.cmp(&b.id))
}

/// The state a session is in, as a word for people.
fn state_word(state: Option<SessionState>) -> &'static str {
    state.map_or("registered", SessionState::as_str)
}

fn describe(session: &Session) -> String {
    let kiln = session
        .kiln
        .as_deref()
        .map(|k| format!(" (kiln {k})"))
        .unwrap_or_default();
    format!(
        "`{}`{kiln} {} — {}, agent {}, {} turns{}",
        session.id,
        session.display_name,
        state_word(session.state),
        session.agent_name,
        session.turn_count,
        session
            .state_reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    )
}

fn sessions(all: Vec<Session>) -> String {
    if all.is_empty() {
        return "No sessions.".into();
    }
    let mut text = String::new();
    for session in all {
        let _ = writeln!(text, "- {}", describe(&session));
    }
    text
}

/// A diff: which files changed, in the room; the unified diff in a thread under it.
fn diff_reply(diff: &crate::protocol::Diff) -> Reply {
    if diff.files.is_empty() {
        return Reply::Say("No changes.".into());
    }
    let mut head = String::from("The session's changes (the diff is in the thread):");
    for file in &diff.files {
        let _ = write!(
            head,
            "\n- `{}` +{} −{}",
            file.path, file.added, file.removed
        );
    }
    Reply::Threaded {
        head,
        whole: diff.unified(),
        code: Some("diff"),
    }
}
