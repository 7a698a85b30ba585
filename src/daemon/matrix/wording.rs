//! What the bot says in rooms, in Markdown, and why a daemon does not run it.

use matrix_sdk::ruma::UserId;

use crate::kilns::BotClaim;
use crate::protocol::ErrorObject;
use crate::protocol::{InboxMessage, MsgType, Purpose, Session, SessionState};

/// The keycap digits that pick options 1 to 9.
pub(super) const KEYCAPS: [&str; 9] = ["1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣"];

/// An approval or question as posted: its kind (and rule), the reason, the operation,
/// then the choices and how to answer. `tag`: the session it comes from, when it is
/// posted away from that session's own room; `kiln`: the kiln it comes from, when the
/// bot serves several.
pub(super) fn question(
    message: &InboxMessage,
    tag: Option<&Session>,
    kiln: Option<&str>,
) -> String {
    let mut text = String::new();
    let mut named: Vec<String> = kiln.map(|k| format!("kiln {k}")).into_iter().collect();
    if let Some(session) = tag {
        named.extend([session.display_name.clone(), session.id.clone()]);
    }
    if !named.is_empty() {
        text.push_str(&format!("`[{}]` ", named.join(" · ")));
    }
    match (message.msg_type, &message.rule) {
        (MsgType::ApprovalRequired, Some(rule)) => {
            text.push_str(&format!("**Approval Required** [rule: {rule}]"));
        }
        (MsgType::ApprovalRequired, None) => text.push_str("**Approval Required**"),
        _ => text.push_str("**Question**"),
    }
    text.push_str(&format!("\n\n{}", message.title));
    if let Some(body) = message.body.as_deref().filter(|b| !b.trim().is_empty()) {
        text.push_str(&format!("\n\n{body}"));
    }
    if let Some(operation) = &message.operation {
        text.push_str(&format!("\n\nOperation: `{operation}`"));
    }
    let options = message.options.clone().unwrap_or_default();
    if !options.is_empty() {
        text.push('\n');
        for (i, option) in options.iter().enumerate() {
            let key = KEYCAPS.get(i).copied().unwrap_or("·");
            text.push_str(&format!("\n{key} {option}"));
        }
    }
    text.push_str("\n\n");
    let plan = matches!(message.purpose, Some(Purpose::PlanReview { .. }));
    text.push_str(match (message.msg_type, options.is_empty()) {
        _ if plan => {
            "React ✅ to approve the plan or ❌ to reject it (or say `!approve`, `!deny`), or \
             comment on steps: `!answer 2: use the view` (one `N: comment` per line)."
        }
        (MsgType::ApprovalRequired, _) => {
            "React ✅ to approve or ❌ to deny (or say `!approve`, `!deny`, `!answer N`)."
        }
        (_, false) => "React with the option's number, or say `!answer N` or `!answer <text>`.",
        (_, true) => "Say `!answer <text>`.",
    });
    text
}

/// The confirmation of an answer given in the room.
pub(super) fn answered(message: &InboxMessage, by: &UserId) -> String {
    format!(
        "Answered by {by}: **{}**",
        message.response.as_deref().unwrap_or("")
    )
}

/// Why an answer given in the room was not taken.
pub(super) fn not_answered(error: &ErrorObject) -> String {
    format!("Not answered: {}", error.message)
}

/// A post whose question was answered or withdrawn elsewhere.
pub(super) fn settled_elsewhere(message: &InboxMessage) -> String {
    let response = message.response.as_deref().unwrap_or("");
    match (message.withdrawn, &message.answered_by) {
        (true, _) => format!("~~{}~~ — withdrawn: {response}", message.title),
        (false, Some(by)) => format!("~~{}~~ — answered by {by}: **{response}**", message.title),
        (false, None) => format!("~~{}~~ — answered elsewhere: **{response}**", message.title),
    }
}

/// A short notice of a session's new state, for the states a person wants to hear of.
pub(super) fn state_notice(session: &Session, state: SessionState) -> Option<String> {
    let reason = session.state_reason.as_deref().unwrap_or("");
    match state {
        SessionState::Error => Some(format!("⚠️ The session hit an error: {reason}")),
        SessionState::Stopped => Some(format!("⏹ The session stopped. {reason}")),
        SessionState::Cancelled => Some("The turn was cancelled.".into()),
        SessionState::Interrupted => Some(format!("⚠️ The turn was cut short: {reason}")),
        _ => None,
    }
}

/// A new session started for the room (in `kiln`, when the bot serves several), and why.
pub(super) fn new_session(
    session_id: &str,
    reason: &str,
    previous: Option<&str>,
    kiln: Option<&str>,
) -> String {
    let place = kiln.map(|k| format!(" in kiln {k}")).unwrap_or_default();
    match previous {
        Some(old) => format!("New session `{session_id}`{place} ({reason}); `{old}` is closed."),
        None => format!("New session `{session_id}`{place}."),
    }
}

/// The head of a long reply, posted in the room above the thread that holds it whole.
pub(super) fn head_of(reply: &str, chars: usize) -> String {
    let head: String = reply.chars().take(chars).collect();
    format!("{head}…\n\n*(the whole reply is in the thread)*")
}

/// The room's help. Commands start with `!` (clients such as Element take `/` for their
/// own); `/` works too where a client passes it on.
pub(super) const HELP: &str = "Talk to the room's session by writing to it. Commands:\n\n\
- `!approve`, `!deny`, `!answer N|text`: answer the open question (or react to it)\n\
- `!session`: the room's session\n\
- `!sessions`: every session of the workbench\n\
- `!stop`: stop the room's session (its worktree and transcript stay)\n\
- `!diff`: the session's changes, in a thread\n\
- `!rules`: the rules and how they stand in this session\n\
- `!disable RULE`, `!enable RULE`: switch a rule off or on for this session\n\
- `!reset`: forget what was approved in this session (rules ask again)\n\
- `!skills`: the agent's own commands\n\
- `!memory`: the session's context\n\
- `!kiln`, `!kiln NAME`: the kiln this room's sessions run in (a bot your hub runs \
serves every kiln), or run them in kiln NAME from now on\n\
- `!help`: this";

/// Said to plain words in reply to a question, or in a room of other sessions' questions.
pub(super) const HOW_TO_ANSWER: &str = "That is not passed on to any session: answer a \
    question with a reaction on it (✅ approve, ❌ deny, 1️⃣… an option), or with `!approve`, \
    `!deny` or `!answer N` in reply to it.";

/// Why this daemon does not run a bot account another kiln's daemon answers.
pub(super) fn answered_elsewhere(holder: &BotClaim) -> String {
    format!(
        "the bot {} is already answered by kiln {} ({}, pid {}); a bot answers from one \
         place: keep it in one kiln's settings",
        holder.user_id,
        holder.kiln,
        holder.path.display(),
        holder.pid
    )
}

/// The inbox's word on a refused bot: the refusal, and what follows from it.
pub(super) fn refused_body(refusal: &str, holder: &BotClaim) -> String {
    format!(
        "{refusal}.\n\nThis kiln's daemon does not log in as the bot, so each message is \
         answered once, by kiln {}. To answer from this kiln instead, remove \
         `[channels.matrix]` from kiln {}'s settings: once its daemon has stopped, this \
         kiln's daemon takes the bot when it starts again. This is not said again while \
         kiln {} answers the bot.",
        holder.kiln, holder.kiln, holder.kiln
    )
}
