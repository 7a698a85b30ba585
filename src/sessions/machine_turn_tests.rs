//! The session machine's transitions from the first prompt on: turns and how they end,
//! store failures, approvals and the agent's questions in the inbox, resyncs, tool calls
//! onto the context stack, transcript entries, and the agent's exit. The table runs in
//! `machine_tests.rs`, with the helpers used here.

use super::*;
use crate::ledger::LedgerError;

/// Prompts that start a turn or wait behind the running one.
pub(super) fn turns() -> Vec<Case> {
    use SessionState::*;
    vec![
        case(
            "a prompt when idle starts a turn",
            idle(),
            prompt("go"),
            cat([starts("go"), vec![settle(Working), reply(Reply::Started)]]),
        )
        .ends("turn"),
        case(
            "a command agent's prompt never renews an agent session",
            idle(),
            prompt("go"),
            vec![
                line(EntryKind::Prompt, "go"),
                Effect::Prompt {
                    text: "go".into(),
                    renew: false,
                },
                settle(Working),
                reply(Reply::Started),
            ],
        )
        .on(machine(AgentKind::Command, None, None))
        .ends("turn"),
        case(
            "a prompt during a turn queues",
            working("one"),
            prompt("two"),
            vec![reply(Reply::Queued)],
        )
        .ends("turn"),
    ]
}

/// Turns that end: the queue runs on, or the session completes (or is cancelled).
pub(super) fn turns_that_end() -> Vec<Case> {
    use SessionState::*;
    let thought = SessionInput::Kept {
        kind: EntryKind::Thought,
        text: "hmm".into(),
    };
    vec![
        case(
            "a queued prompt starts when the turn ends, with no complete between",
            plus(working("one"), [prompt("two")]),
            ended("end_turn"),
            cat([
                vec![Effect::RecordTurn, turn_end("end_turn")],
                starts("two"),
            ]),
        )
        .ends("turn"),
        case(
            "a turn that ends: what was said onto the stack, complete, done with the reply",
            plus(working("Fix the bug\nplease"), [said("  All fixed.  ")]),
            ended("end_turn"),
            vec![
                Effect::Push(Message::Agent {
                    text: "  All fixed.  ".into(),
                }),
                Effect::RecordTurn,
                turn_end("end_turn"),
                settle(Complete),
                notice(
                    MsgType::TaskComplete,
                    "Done: Fix the bug",
                    "All fixed.",
                    false,
                ),
            ],
        )
        .ends("idle"),
        case(
            "a turn that stopped early says why; thoughts are not the reply",
            plus(working("go"), [thought, said("partial")]),
            ended("max_tokens"),
            vec![
                Effect::Push(Message::Agent {
                    text: "partial".into(),
                }),
                Effect::RecordTurn,
                turn_end("max_tokens"),
                set(Complete, "stopped: max_tokens"),
                notice(
                    MsgType::TaskComplete,
                    "Done: go",
                    "(the turn stopped: max_tokens)\n\npartial",
                    false,
                ),
            ],
        )
        .ends("idle"),
        case(
            "a cancelled turn ends as cancelled, without a done message",
            plus(working("go"), [SessionInput::Cancel]),
            ended("cancelled"),
            vec![
                Effect::RecordTurn,
                turn_end("cancelled"),
                set(Cancelled, "stopped: cancelled"),
            ],
        )
        .ends("idle"),
    ]
}

pub(super) fn cancels_and_failures() -> Vec<Case> {
    let chunk = || {
        agent(AgentEvent::Chunk {
            kind: EntryKind::Message,
            text: "hi".into(),
            message_id: Some("r1".into()),
        })
    };
    vec![
        case(
            "cancel during a turn asks the agent to end it",
            working("go"),
            SessionInput::Cancel,
            vec![Effect::CancelTurn, reply(Reply::Cancelled)],
        )
        .ends("turn"),
        case(
            "cancel when idle only answers",
            idle(),
            SessionInput::Cancel,
            vec![reply(Reply::Cancelled)],
        )
        .ends("idle"),
        case(
            "a turn the agent failed: error, and the inbox told",
            working("go"),
            failed("model overloaded"),
            cat([
                vec![Effect::RecordTurn],
                turn_failed("model overloaded", ""),
            ]),
        )
        .ends("idle"),
        case(
            "a lost turn ends quietly: the exit that follows says why",
            working("go"),
            lost(),
            vec![],
        )
        .ends("idle"),
        case(
            "a turn end outside a turn changes nothing",
            idle(),
            ended("end_turn"),
            vec![],
        )
        .ends("idle"),
        case(
            "streamed text goes to the transcript",
            working("go"),
            chunk(),
            vec![Effect::Stream {
                kind: EntryKind::Message,
                text: "hi".into(),
                message_id: Some("r1".into()),
            }],
        )
        .ends("turn"),
    ]
}

pub(super) fn store_failures() -> Vec<Case> {
    let why = "crucible could not save the session: no space left";
    let other = "a transcript entry could not be stored: no space left";
    vec![
        case(
            "a store failure during a turn ends it in error, never complete",
            plus(working("go"), [store_failed(why)]),
            ended("end_turn"),
            cat([vec![Effect::RecordTurn], turn_failed(why, "")]),
        )
        .ends("idle"),
        case(
            "the first store failure is the one reported",
            plus(working("go"), [store_failed(why), store_failed(other)]),
            ended("end_turn"),
            cat([vec![Effect::RecordTurn], turn_failed(why, "")]),
        )
        .ends("idle"),
        case(
            "a store failure counts for its turn only",
            plus(
                working("go"),
                [store_failed(why), ended("end_turn"), prompt("again")],
            ),
            ended("end_turn"),
            vec![
                Effect::RecordTurn,
                turn_end("end_turn"),
                settle(SessionState::Complete),
                done_quietly("Done: again"),
            ],
        )
        .ends("idle"),
        case(
            "a store failure while starting fails the first turn",
            plus(started(), [store_failed(why), ready(false), prompt("go")]),
            ended("end_turn"),
            cat([vec![Effect::RecordTurn], turn_failed(why, "")]),
        )
        .ends("idle"),
        case(
            "a lost turn takes its store failure with it",
            plus(working("go"), [store_failed(why), lost(), prompt("again")]),
            ended("end_turn"),
            vec![
                Effect::RecordTurn,
                turn_end("end_turn"),
                settle(SessionState::Complete),
                done_quietly("Done: again"),
            ],
        )
        .ends("idle"),
    ]
}

pub(super) fn endings() -> Vec<Case> {
    use SessionState::*;
    let stopped = format!("stopped; the agent {EXIT}");
    vec![
        case(
            "the agent exiting mid-turn with an approval open: the turn was cut short",
            waiting(),
            exited(),
            cat([
                vec![Effect::RevokeHandles],
                withdrawn("the agent exited"),
                vec![withdraw_open("the agent exited"), gone()],
                cut_by_exit(),
            ]),
        )
        .ends("ended"),
        case(
            "the agent exiting when idle",
            idle(),
            exited(),
            cat([
                vec![
                    Effect::RevokeHandles,
                    withdraw_open("the agent exited"),
                    gone(),
                ],
                agent_ended(),
            ]),
        )
        .ends("ended"),
        case(
            "after a lost turn the exit still cuts that turn short",
            plus(working("go"), [lost()]),
            exited(),
            cat([
                vec![
                    Effect::RevokeHandles,
                    withdraw_open("the agent exited"),
                    gone(),
                ],
                cut_by_exit(),
            ]),
        )
        .ends("ended"),
        case(
            "stopped during a turn: approvals withdrawn for the stop, stopped",
            plus(waiting(), [stop(false)]),
            exited(),
            cat([
                vec![Effect::RevokeHandles],
                withdrawn("the session was stopped"),
                vec![
                    withdraw_open("the session was stopped"),
                    gone(),
                    set(Stopped, &stopped),
                    Effect::Finish,
                ],
            ]),
        )
        .ends("ended"),
        case(
            "a shutdown leaves the session as it is, for the next daemon to resume",
            plus(waiting(), [stop(true)]),
            exited(),
            cat([
                vec![Effect::RevokeHandles],
                withdrawn("the daemon is shutting down"),
                vec![Effect::Finish],
            ]),
        )
        .ends("ended"),
    ]
}

pub(super) fn approvals() -> Vec<Case> {
    use SessionState::*;
    let body = "The agent asks for permission and waits for your answer.\n\
                Options: Allow (allow once), Reject (reject once)";
    let not_posted = "could not ask for permission (disk full); refused it";
    vec![
        case(
            "a permission request is asked in the inbox",
            working("go"),
            ask(1),
            vec![
                Effect::Append(Line::new(EntryKind::Permission).text(TITLE).tool("t1")),
                Effect::Ask {
                    key: 1,
                    title: TITLE.into(),
                    body: body.into(),
                    options: Some(vec!["Allow".into(), "Reject".into()]),
                    kinds: Some(vec!["allow_once".into(), "reject_once".into()]),
                    flagged: None,
                },
            ],
        )
        .ends("turn"),
        case(
            "a posted approval makes the session wait",
            plus(working("go"), [ask(1)]),
            posted(1, "m1"),
            vec![settle(Waiting)],
        )
        .ends("turn"),
        case(
            "an approval that cannot be posted is refused",
            plus(working("go"), [ask(1)]),
            SessionInput::Posted {
                key: 1,
                result: Err(LedgerError::Invalid("disk full".into())),
            },
            cat([answer(1, None), vec![line(EntryKind::Error, not_posted)]]),
        )
        .ends("turn"),
        case(
            "an answered approval gives the agent the option chosen",
            waiting(),
            answered("m1", "Allow"),
            cat([
                answer(1, Some("allow")),
                vec![permission("Allow"), settle(Working)],
            ]),
        )
        .ends("turn"),
        case(
            "an answer that is no option refuses",
            waiting(),
            answered("m1", "maybe"),
            cat([
                answer(1, None),
                vec![permission("withdrawn"), settle(Working)],
            ]),
        )
        .ends("turn"),
        case(
            "cancel while waiting: approvals withdrawn, working until the turn ends",
            waiting(),
            SessionInput::Cancel,
            cat([
                vec![Effect::CancelTurn],
                withdrawn("the turn was cancelled"),
                vec![settle(Working), reply(Reply::Cancelled)],
            ]),
        )
        .ends("turn"),
        case(
            "a turn that ends withdraws the approvals left open",
            waiting(),
            ended("end_turn"),
            cat([
                vec![Effect::RecordTurn, turn_end("end_turn")],
                withdrawn("the turn ended"),
                vec![settle(Complete), done_quietly("Done: go")],
            ]),
        )
        .ends("idle"),
        case(
            "a turn failing while an approval is open: withdrawn, queue dropped, error",
            plus(waiting(), [prompt("next")]),
            failed("model overloaded"),
            cat([
                vec![Effect::RecordTurn],
                withdrawn("the turn failed"),
                turn_failed("model overloaded", " 1 queued prompt(s) were dropped."),
            ]),
        )
        .ends("idle"),
    ]
}

pub(super) fn questions() -> Vec<Case> {
    use SessionState::*;
    let opened = |id: &str| SessionInput::Opened(id.into());
    let open = |ids: &[&str]| SessionInput::Open(ids.iter().map(|id| id.to_string()).collect());
    vec![
        case(
            "a question the agent asked makes the session wait",
            working("go"),
            opened("q1"),
            vec![settle(Waiting)],
        )
        .ends("turn"),
        case(
            "its answer makes it work again",
            plus(working("go"), [opened("q1")]),
            answered("q1", "yes"),
            vec![settle(Working)],
        )
        .ends("turn"),
        case(
            "a question opened when idle changes no state",
            idle(),
            opened("q1"),
            vec![],
        )
        .ends("idle"),
        case(
            "a resync reads what is open",
            waiting(),
            SessionInput::Resync,
            vec![Effect::ReadOpen],
        )
        .ends("turn"),
        case(
            "a resync reads the answers of what closed meanwhile",
            plus(waiting(), [opened("q1")]),
            open(&["q1"]),
            vec![Effect::ReadAnswers(vec!["m1".into()])],
        )
        .ends("turn"),
        case(
            "answers read on a resync are handled as answers",
            plus(waiting(), [opened("q1"), open(&["q1"])]),
            SessionInput::Closed(vec![("m1".into(), Some("Allow".into()), None)]),
            cat([answer(1, Some("allow")), vec![permission("Allow")]]),
        )
        .ends("turn"),
        case(
            "a resync that finds a question open makes the session wait",
            working("go"),
            open(&["q2"]),
            vec![settle(Waiting)],
        )
        .ends("turn"),
    ]
}

/// The agent's tool call `id` reading a.txt, in `status`.
fn tool_call(id: &str, status: &str) -> SessionInput {
    agent(AgentEvent::ToolCall {
        id: id.into(),
        title: "Read a.txt".into(),
        status: status.into(),
        operation: Operation::default(),
    })
}

/// The agent's tool call `id` completed.
fn tool_done(id: &str) -> SessionInput {
    agent(AgentEvent::ToolUpdate {
        id: id.into(),
        title: None,
        status: Some("completed".into()),
    })
}

/// The transcript's line for tool call c1 in `status`.
fn call_line(status: &str) -> Effect {
    let line = Line::new(EntryKind::ToolCall).text("Read a.txt").tool("c1");
    Effect::Append(line.status(status))
}

/// The audit log's entry for the tool call in `status`.
fn audited(status: &str) -> Effect {
    let (tool, status) = ("Read a.txt".into(), Some(status.into()));
    Effect::Audit(AuditEvent::ToolCall { tool, status })
}

/// The transcript's line for tool call c1 completed.
fn done_line() -> Effect {
    Effect::Append(
        Line::new(EntryKind::ToolUpdate)
            .tool("c1")
            .status("completed"),
    )
}

/// The agent's tool calls and their results onto the context stack, each once.
pub(super) fn the_context_stack() -> Vec<Case> {
    vec![
        case(
            "what the agent said goes onto the stack before its tool call",
            plus(working("go"), [said("Let me look.")]),
            tool_call("c1", "pending"),
            vec![
                audited("pending"),
                Effect::Push(Message::Agent {
                    text: "Let me look.".into(),
                }),
                Effect::Push(Message::ToolCall {
                    call_id: "c1".into(),
                    tool: "Read a.txt".into(),
                    arguments: String::new(),
                }),
                call_line("pending"),
            ],
        )
        .ends("turn"),
        case(
            "a tool call seen again is not pushed again",
            plus(working("go"), [tool_call("c1", "pending")]),
            tool_call("c1", "in_progress"),
            vec![audited("in_progress"), call_line("in_progress")],
        )
        .ends("turn"),
        case(
            "a finished tool call's result is pushed",
            plus(working("go"), [tool_call("c1", "pending")]),
            tool_done("c1"),
            vec![
                Effect::Push(Message::ToolResult {
                    call_id: "c1".into(),
                    tool: "Read a.txt".into(),
                    ok: true,
                    text: "completed".into(),
                }),
                done_line(),
            ],
        )
        .ends("turn"),
        case(
            "a tool result is pushed once",
            plus(working("go"), [tool_call("c1", "pending"), tool_done("c1")]),
            tool_done("c1"),
            vec![done_line()],
        )
        .ends("turn"),
    ]
}

/// The internal agent feeds its own context stack; a renewed agent session is recorded.
pub(super) fn an_agent_feeding_its_own_stack() -> Vec<Case> {
    vec![
        case(
            "the internal agent feeds its own stack",
            plus(working("go"), [said("Let me look.")]),
            tool_call("c1", "pending"),
            vec![audited("pending"), call_line("pending")],
        )
        .on(machine(AgentKind::Internal, None, None))
        .ends("turn"),
        case(
            "the internal agent's reply is not pushed for it either",
            plus(working("go"), [said("Done.")]),
            ended("end_turn"),
            vec![
                Effect::RecordTurn,
                turn_end("end_turn"),
                settle(SessionState::Complete),
                notice(MsgType::TaskComplete, "Done: go", "Done.", false),
            ],
        )
        .on(machine(AgentKind::Internal, None, None))
        .ends("idle"),
        case(
            "a renewed agent session is recorded and the fresh start cleared",
            working("go"),
            agent(AgentEvent::SessionRenewed {
                acp_session_id: "acp-2".into(),
            }),
            vec![
                Effect::Record(RecordChange::AcpSession("acp-2".into())),
                Effect::Save,
                Effect::ClearFreshStart,
            ],
        )
        .ends("turn"),
    ]
}

pub(super) fn the_transcript() -> Vec<Case> {
    let refused = agent(AgentEvent::File {
        op: "write",
        path: "/etc/passwd".into(),
        refused: Some("outside the session's folder".into()),
    });
    let refused_line = Line::new(EntryKind::File)
        .text("outside the session's folder")
        .status("write refused");
    vec![
        case(
            "a plan goes to the transcript",
            working("go"),
            agent(AgentEvent::Plan(vec![crate::rules::PlanStep {
                content: "read".into(),
                status: "pending".into(),
            }])),
            vec![line(EntryKind::Plan, "[pending] read")],
        )
        .ends("turn"),
        case(
            "a file the firewall refused",
            working("go"),
            refused,
            vec![
                Effect::Audit(AuditEvent::FileWrite {
                    path: "/etc/passwd".into(),
                    allowed: false,
                    reason: Some("outside the session's folder".into()),
                }),
                Effect::Append(refused_line),
            ],
        )
        .ends("turn"),
        case(
            "the process doing the work is recorded",
            working("go"),
            agent(AgentEvent::Process(Some(42))),
            vec![Effect::Record(RecordChange::AgentPid(42)), Effect::Save],
        )
        .ends("turn"),
        case(
            "when it ends, the agent's own pid again",
            working("go"),
            agent(AgentEvent::Process(None)),
            vec![Effect::Record(RecordChange::AgentPid(PID)), Effect::Save],
        )
        .ends("turn"),
    ]
}
