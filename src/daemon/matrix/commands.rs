//! A room's commands other than answers: what the room's session is and does, and the
//! rules that judge it.

use std::fmt::Write as _;
use std::sync::Arc;

use matrix_sdk::Room;

use super::{Bot, wording};
use crate::protocol::{Session, SessionState};

/// The reply to `/<name> <rest>` in `room`.
pub(super) async fn run(bot: &Arc<Bot>, room: &Room, name: &str, rest: &str) -> String {
    if name == "help" {
        return wording::HELP.into();
    }
    if name == "sessions" {
        return sessions(bot);
    }
    let Some(session) = room_session(bot, room) else {
        return match known(name) {
            true => "This room has no session yet: write to start one.".into(),
            false => format!("Unknown command /{name}: say /help."),
        };
    };
    let id = session.id.clone();
    let result = match name {
        "session" => Ok(describe(&session)),
        "stop" => bot
            .sessions
            .stop(&id)
            .await
            .map(|s| format!("Stopped `{}`: its worktree and transcript stay.", s.id)),
        "rules" => bot.sessions.rules(Some(&id)).map(|reply| {
            let mut text = String::from("Rules:");
            for rule in reply.rules {
                let stands = if rule.disabled || rule.off {
                    "off"
                } else {
                    &rule.action
                };
                let _ = write!(text, "\n- `{}` ({stands}): {}", rule.id, rule.description);
            }
            text
        }),
        "disable" | "enable" if !rest.is_empty() => bot
            .sessions
            .set_rule(&id, rest, name == "enable")
            .await
            .map(|_| format!("Rule `{rest}` is {name}d for this session.")),
        "reset" => bot.sessions.reset(&id, true).await.map(|s| {
            format!(
                "A fresh session `{}` takes over; nothing approved before stands.",
                s.id
            )
        }),
        "skills" => Ok(match session.skills.is_empty() {
            true => "The agent has announced no commands.".into(),
            false => format!("- {}", session.skills.join("\n- ")),
        }),
        "memory" => Ok(session
            .context_summary
            .clone()
            .unwrap_or_else(|| "No context summary yet (after the first turn).".into())),
        "diff" => bot
            .sessions
            .diff(&id, None)
            .await
            .map(|reply| diff_text(&reply.diff)),
        _ => return format!("Unknown command /{name}: say /help."),
    };
    result.unwrap_or_else(|e| format!("/{name}: {e}"))
}

fn known(name: &str) -> bool {
    [
        "session", "stop", "rules", "disable", "enable", "reset", "skills", "memory", "diff",
    ]
    .contains(&name)
}

/// The live session of the room (the newest, if several were).
fn room_session(bot: &Bot, room: &Room) -> Option<Session> {
    let room_id = room.room_id().as_str();
    bot.ledger
        .list_sessions()
        .into_iter()
        .filter(|s| {
            s.channel
                .as_ref()
                .is_some_and(|t| t.kind == super::CHANNEL && t.reference == room_id && !t.closed)
        })
        .max_by(|a, b| a.id.cmp(&b.id))
}

/// The state a session is in, as a word for people.
fn state_word(state: Option<SessionState>) -> &'static str {
    state.map_or("registered", SessionState::as_str)
}

fn describe(session: &Session) -> String {
    format!(
        "`{}` {} — {}, agent {}, {} turns{}",
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

fn sessions(bot: &Bot) -> String {
    let all = bot.ledger.list_sessions();
    if all.is_empty() {
        return "No sessions.".into();
    }
    let mut text = String::new();
    for session in all {
        let _ = writeln!(text, "- {}", describe(&session));
    }
    text
}

/// A diff as unified text in a code block.
fn diff_text(diff: &crate::protocol::Diff) -> String {
    if diff.files.is_empty() {
        return "No changes.".into();
    }
    format!("```diff\n{}```", diff.unified())
}
