//! What a session says to people, in one place to review: the inbox messages it sends
//! (done, turn failed, agent failed to start, agent lost, session resumed…), the reasons
//! its state gives, and the notes it leaves on withdrawn questions and in its transcript.
//! Only words: which message is sent when is decided in [`super::machine`].

use std::path::Path;

use crate::agent::PermissionChoice;
use crate::protocol::{ClientEnv, MsgType, SendParams};
use crate::text::{clip, first_line};

/// How much of a reply a `task_complete` message quotes.
const SUMMARY_CHARS: usize = 4000;
/// How much of the prompt the title of a `task_complete` message quotes.
const TITLE_CHARS: usize = 80;

/// The reason a session starting again after a daemon restart gives.
pub const RESUMING: &str = "resuming after a daemon restart";
/// The reason of a started session with no prompt yet.
pub const READY: &str = "ready for a prompt";
/// The status of an approval nobody can answer any more.
pub const WITHDRAWN: &str = "withdrawn";

/// Why open approvals (and questions) are withdrawn.
pub const TURN_ENDED: &str = "the turn ended";
pub const TURN_FAILED: &str = "the turn failed";
pub const TURN_CANCELLED: &str = "the turn was cancelled";
pub const SHUTTING_DOWN: &str = "the daemon is shutting down";
pub const STOPPED: &str = "the session was stopped";
/// The reason of a parked session.
pub const PARKED: &str =
    "idle: its environment was torn down; the next prompt makes it again and resumes";
/// Why open questions are withdrawn when crucible ends a session.
pub const TERMINATED: &str = "crucible ended the session";
/// The reason while it is made again.
pub const UNPARKING: &str = "making its environment again for a prompt";
/// The reason of a session whose environment was made again.
pub const UNPARKED: &str = "its environment was made again";
/// Why a session restarted by the human is starting, and once it is ready.
pub const RESTARTING: &str = "restarting its agent";
pub const RESTARTED: &str = "its agent was restarted";
pub const AGENT_EXITED: &str = "the agent exited";
/// Why a question is withdrawn when its session is resumed after a daemon restart.
pub const ASKER_GONE: &str = "the daemon restarted, and the agent process that asked is gone";
pub const DELETED: &str = "the session was deleted";
/// The options of the question a context miss asks: widen the read manifest and restart
/// the agent, or leave the session stopped.
pub const WIDEN: &str = "Widen and restart";
pub const LEAVE_STOPPED: &str = "Leave it stopped";

/// Why a session's agent did not survive a daemon restart (see [`lost`]).
pub const LOST_WHILE_CREATED: &str = "the daemon ended while the session was being created";
pub const LOST_NEVER_OPENED: &str = "the agent never opened its session";
pub const LOST_PROFILE_GONE: &str = "its agent profile is no longer configured";

/// An inbox message the session sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub msg_type: MsgType,
    pub title: String,
    pub body: Option<String>,
    /// The last lines of the agent's stderr go below the body.
    pub stderr_tail: bool,
}

impl Notice {
    fn new(msg_type: MsgType, title: impl Into<String>, body: Option<String>) -> Self {
        Self {
            msg_type,
            title: title.into(),
            body,
            stderr_tail: false,
        }
    }

    fn with_stderr_tail(mut self) -> Self {
        self.stderr_tail = true;
        self
    }

    /// The message, as sent by this session.
    pub fn into_params(self, session_id: &str) -> SendParams {
        SendParams {
            session_id: session_id.to_string(),
            msg_type: self.msg_type,
            title: self.title,
            body: self.body,
            options: None,
            option_kinds: None,
            flagged: None,
        }
    }
}

/// The `error` a background session posts when nobody answered its question in time.
/// The prompt a session whose turn a budget cut short goes on with, once it is raised.
pub const BUDGET_RAISED_GO_ON: &str =
    "The budget was raised: go on with the task from where you stopped.";
/// The note on a budget question no longer asked.
pub const BUDGET_RAISED: &str = "the budget was raised";
/// The note on a budget question when another budget is the one reached now.
pub const BUDGET_OTHER: &str = "another budget is the one reached now";

/// The reason of a session a usage limit parked.
pub fn limited(resumes: &str) -> String {
    format!("usage limit reached: resumes at {resumes}")
}

/// The note of a session whose usage limit reset with nothing to send.
pub const LIMIT_RESET: &str = "the usage limit reset";

/// The inbox is told a usage limit parked the session.
pub fn limit_notice(why: &str, resumes: &str) -> Notice {
    Notice::new(
        MsgType::Info,
        format!("Usage limit: resumes at {resumes}"),
        Some(format!(
            "The agent hit a usage or rate limit:\n\n{why}\n\nThe session is parked until \
             then, with no retry meanwhile; then the prompt is sent again. Prompts sent \
             meanwhile wait behind it."
        )),
    )
}

/// The prompt that brings the answer to a question the session's agent asked on the
/// daemon it moved from.
pub fn carried_answer(title: &str, by: &str, answer: &str) -> String {
    format!(
        "Before this session moved to this machine, you asked: \"{title}\". {by} answered: \
         {answer}"
    )
}

/// The inbox is told a limit the agent announced parked the session.
pub fn limit_ahead_notice(why: &str, resumes: &str) -> Notice {
    Notice::new(
        MsgType::Info,
        format!("Usage limit ahead: parked until {resumes}"),
        Some(format!(
            "{why}, before a turn failed on it. The session is parked until then, so \
             no turn fails meanwhile; a prompt sent meanwhile goes to the profile's \
             fallback chain when it has one, else waits for the reset."
        )),
    )
}

/// A budget is nearly spent.
pub fn budget_near(what: &str) -> Notice {
    Notice::new(
        MsgType::Info,
        format!("Budget: {what}"),
        Some(
            "At 100% no new turn starts and the inbox asks whether to raise it or stop. \
             [budget] in .crucible.toml sets the budgets; `cru usage` shows what was spent."
                .into(),
        ),
    )
}

pub fn unanswered(title: &str, secs: u64) -> Notice {
    Notice {
        msg_type: MsgType::Error,
        title: "Nobody answered in time; the turn is cancelled".into(),
        body: Some(format!(
            "\"{title}\" waited {secs}s (channels.approval_timeout_secs) with no answer, so the turn was cancelled. Send a prompt to try again."
        )),
        stderr_tail: false,
    }
}

/// The note on an inbox message withdrawn for `why`.
pub fn withdrawn(why: &str) -> String {
    format!("withdrawn: {why}")
}

/// The reason a session gives when its agent reloaded its session after a daemon
/// restart, and the `info` message that says so.
pub fn resumed(interrupted: bool) -> (String, Notice) {
    let reason = if interrupted {
        "resumed after a daemon restart; the turn that was running was interrupted"
    } else {
        "resumed after a daemon restart"
    };
    let body = format!("{reason}. The agent reopened its session; send a prompt to continue.");
    let notice = Notice::new(
        MsgType::Info,
        "Session resumed after a daemon restart",
        Some(body),
    );
    (reason.to_string(), notice)
}

/// The body of an approval: what the agent asks and the options it gives.
pub fn approval_body(options: &[PermissionChoice]) -> String {
    let listed: Vec<String> = options
        .iter()
        .map(|o| format!("{} ({})", o.name, o.kind.as_str().replace('_', " ")))
        .collect();
    format!(
        "The agent asks for permission and waits for your answer.\nOptions: {}",
        listed.join(", ")
    )
}

/// The transcript note when an approval could not be posted.
pub fn approval_not_posted(error: &str) -> String {
    format!("could not ask for permission ({error}); refused it")
}

/// The state reason of a turn that ended for another reason than `end_turn`.
pub fn stopped_for(stop_reason: &str) -> Option<String> {
    (stop_reason != "end_turn").then(|| format!("stopped: {stop_reason}"))
}

/// The `task_complete` message of a turn: the prompt in the title, the reply as the body.
pub fn done(prompt: &str, reply: &str, stop_reason: &str) -> Notice {
    let mut body = clip(reply.trim(), SUMMARY_CHARS);
    if stop_reason != "end_turn" {
        body = format!("(the turn stopped: {stop_reason})\n\n{body}");
    }
    Notice::new(
        MsgType::TaskComplete,
        format!("Done: {}", clip(first_line(prompt), TITLE_CHARS)),
        Some(body).filter(|b| !b.is_empty()),
    )
}

/// The state reason of a failed turn, and the `error` message that says so.
pub fn turn_failed(why: &str, dropped: usize) -> (String, Notice) {
    let reason = format!("the agent failed the turn: {why}");
    let mut body = format!("{reason}\n\nThe agent is still running; send a prompt to try again.");
    if dropped > 0 {
        body.push_str(&format!(" {dropped} queued prompt(s) were dropped."));
    }
    let notice = Notice::new(MsgType::Error, "Turn failed", Some(body)).with_stderr_tail();
    (reason, notice)
}

/// The `error` message of an agent that could not start.
pub fn start_failed(why: &str) -> Notice {
    Notice::new(
        MsgType::Error,
        "Agent failed to start",
        Some(why.to_string()),
    )
    .with_stderr_tail()
}

/// Why a session whose agent did not survive a restart is stopped, and the `error`
/// message that says so.
pub fn lost(why: &str) -> (String, Notice) {
    let reason = format!("the agent was lost when the daemon restarted: {why}");
    let body = format!(
        "{reason}. The session is stopped; its worktree and transcript are kept. \
         Start a new session to continue the work."
    );
    let notice = Notice::new(MsgType::Error, "Agent lost in a daemon restart", Some(body));
    (reason, notice)
}

/// Why a session of a daemon that went away is stopped, and the `error` message that
/// says so (team mode: another daemon took its sessions over after its lease ran out).
pub fn lost_with_daemon(host: &str, kiln: &str) -> (String, Notice) {
    let reason = format!(
        "the agent was lost with its daemon on {host} ({kiln}), which stopped renewing its lease"
    );
    let body = format!(
        "{reason}. The session is stopped; its transcript is kept here, and its worktree \
         on {host}. Start a new session to continue the work."
    );
    let notice = Notice::new(MsgType::Error, "Agent lost with its daemon", Some(body));
    (reason, notice)
}

/// Where programs were looked for, after "not on PATH": the asking process's `PATH`
/// (when it sent one) and the daemon's.
pub fn looked(given: Option<&ClientEnv>, daemon_path: &str) -> String {
    match given {
        Some(g) => match g.path.as_deref() {
            Some(path) if path == daemon_path => format!(
                " in this shell ({}) nor the daemon's (PATH={path})",
                g.asker()
            ),
            Some(path) => format!(
                " in this shell ({}, PATH={path}) nor the daemon's (PATH={daemon_path})",
                g.asker()
            ),
            None => format!(
                " of the daemon (PATH={daemon_path}; this shell, {}, sent none)",
                g.asker()
            ),
        },
        None => format!(" of the daemon (PATH={daemon_path}; the request carried none)"),
    }
}

/// Why a session is refused: its profile's program is nowhere to be found.
pub fn program_missing(program: &str, profile: &str, looked: &str) -> String {
    format!("{program} is not on PATH{looked}: install it or set `command` in [agents.{profile}]")
}

/// How a variable the session passes was asked for: `--env NAME` (the session's own), or
/// by the settings of its driver.
pub fn env_asked(name: &str, by_session: bool, driver: &str) -> String {
    if by_session {
        format!("`--env {name}`")
    } else {
        format!("`{name}` (env of [drivers.{driver}])")
    }
}

/// Why a session is refused: variables (as [`env_asked`] words them) that neither the
/// asking process nor the daemon has.
pub fn env_missing(asked: &[String], given: Option<&ClientEnv>) -> String {
    let them = if asked.len() == 1 { "it" } else { "them" };
    let asked = asked.join(", ");
    match given {
        Some(g) => format!(
            "{asked}: not set in this shell ({}), nor in the daemon's environment: export {them} and try again",
            g.asker()
        ),
        None => format!(
            "{asked}: not in the request (its client sent no environment), nor in the daemon's environment: export {them} and ask again with `cru session new`"
        ),
    }
}

/// The kernel's OOM killer ended a process of the agent's (a command it ran) at the
/// session's memory cap.
pub fn out_of_memory(cap: u64) -> Notice {
    let mib = cap / (1024 * 1024);
    Notice::new(
        MsgType::Error,
        format!("Killed: out of memory (cap {mib} MiB)"),
        Some(format!(
            "The kernel ended a process of this session's agent (a command it ran) that \
             needed more than the {mib} MiB this session's limits allow. The agent goes on; \
             what that command was doing did not finish. Start the session again with a \
             higher `--memory` if it needs more."
        )),
    )
}

/// The agent's processes use most of the memory the session's limits allow.
pub fn memory_near_cap(used: u64, cap: u64, processes: u32) -> Notice {
    let mib = |bytes: u64| bytes / (1024 * 1024);
    Notice::new(
        MsgType::Error,
        format!("Memory near its cap: {} of {} MiB", mib(used), mib(cap)),
        Some(format!(
            "The agent's {processes} process(es) hold {} MiB of the {} MiB this session's \
             limits allow. At the cap the kernel ends what asks for more (the agent, or a \
             command it runs). Cancel the turn, or start the session again with a higher \
             `--memory`.",
            mib(used),
            mib(cap)
        )),
    )
}

pub fn started_without(names: &[String]) -> Notice {
    let it = if names.len() == 1 { "it" } else { "them" };
    let list = names.join(", ");
    Notice::new(
        MsgType::Error,
        format!("Agent started without {list}"),
        Some(format!(
            "This session passes {list} to its agent, but this daemon's environment lacks \
             {it}, and what the shell that asked for the session gave was held only by the \
             daemon then running, which has ended since: the agent runs without {it}. Start \
             a new session from a shell that has {it}, or restart the daemon from one \
             (`cru daemon stop`, then any `cru`)."
        )),
    )
}

/// The state reason of a session stopped on request, once its agent is gone.
pub fn stopped(status: &str) -> String {
    format!("stopped; the agent {status}")
}

/// The state reason of a session whose agent ended by itself, and the `error` message
/// that says so.
pub fn agent_ended(status: &str, mid_turn: bool) -> (String, Notice) {
    if !mid_turn {
        let reason = format!("the agent {status}");
        let body = format!(
            "The agent of this session {status}. Other sessions are not affected; \
             the worktree and transcript are kept."
        );
        let notice = Notice::new(MsgType::Error, format!("Agent {status}"), Some(body));
        return (reason, notice.with_stderr_tail());
    }
    let reason = format!("the turn was cut short: the agent {status} in its middle; {RESEND_HOW}");
    let body = format!(
        "The agent of this session {status} in the middle of a turn, so the turn did not \
         end. Other sessions are not affected; the worktree and transcript are kept. \
         {RESEND_HOW_BODY}"
    );
    let notice = Notice::new(
        MsgType::Error,
        format!("Agent {status} mid-turn; the turn was cut short"),
        Some(body),
    );
    (reason, notice.with_stderr_tail())
}

/// How a cut-short turn is sent again, as a session's reason says it.
const RESEND_HOW: &str = "resend it with `cru session resend` or alt-r in the workbench";
const RESEND_HOW_BODY: &str = "Send the turn again with `cru session resend <session>` \
     (alt-r on the session in the workbench, /resend), or send a new prompt.";

/// What cut a turn short, for a session whose agent is ready again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The daemon stopped (or was killed) while the turn ran.
    DaemonStopped,
    /// The session was stopped, or its agent restarted, while the turn ran.
    Restarted,
    /// The session was parked while the turn ran.
    Unparked,
}

/// The reason and the inbox notice of a session whose turn was cut short, now ready for
/// it to be sent again; `waiting` prompts queued behind it wait too.
pub fn interrupted(how: Cut, waiting: usize) -> (String, Notice) {
    let what = match how {
        Cut::DaemonStopped => "the daemon stopped while it ran",
        Cut::Restarted => "the session was stopped or restarted while it ran",
        Cut::Unparked => "the session was parked while it ran",
    };
    let (behind, until) = match waiting {
        0 => (String::new(), String::new()),
        1 => (
            "; 1 prompt waits behind it".to_string(),
            " 1 queued prompt waits until then.".to_string(),
        ),
        n => (
            format!("; {n} prompts wait behind it"),
            format!(" {n} queued prompts wait until then."),
        ),
    };
    let reason = format!("the turn was cut short: {what}{behind}; {RESEND_HOW}");
    let body = format!(
        "The turn that was running did not end: {what}. The agent is ready again.{until} \
         {RESEND_HOW_BODY}"
    );
    let notice = Notice::new(MsgType::Error, "A turn was cut short", Some(body));
    (reason, notice)
}

/// `text`, then the last lines the agent wrote to stderr (kept in `path`).
pub fn with_stderr(text: String, path: &Path, tail: &[&str]) -> String {
    format!(
        "{text}\n\nLast lines of its stderr ({}):\n{}",
        path.display(),
        tail.join("\n")
    )
}

/// The failure a turn ends with when crucible could not do `what` in the store.
pub fn store_failed(what: &str, error: impl std::fmt::Display) -> String {
    format!("crucible could not {what}: {error}")
}

/// The failure a turn ends with when a transcript entry could not be stored.
pub fn transcript_failed(error: impl std::fmt::Display) -> String {
    format!("a transcript entry could not be stored: {error}")
}

/// Why an approval for a credential is asked, above its options.
pub fn credential_reason(name: &str) -> String {
    format!(
        "The agent asks for the credential {name}. Allowing gives it the value \
         (from crucible's environment or its configured command) for the rest of \
         this session; crucible never stores or logs it."
    )
}
