//! The session machine's transitions as a table: a machine brought somewhere by `given`
//! inputs, one more input, and every effect that must come of it, in order, with the
//! phase it ends in. Here: the helpers, the table's runner, and the rows of starting up
//! and resuming after a restart. Turns, what happens in them and how the agent ends are
//! in `machine_turn_tests.rs`.

use super::*;
use crate::agent::OptionKind;
use crate::protocol::MsgType;
use crate::rules::{Operation, OperationKind};
use crate::sessions::guard::gate::Judgement;
use crate::sessions::wording::Notice;

#[path = "machine_turn_tests.rs"]
mod during_a_turn;

#[path = "machine_park_tests.rs"]
mod parking;

#[path = "machine_cut_tests.rs"]
mod cut;

#[path = "machine_gate_tests.rs"]
mod gating;

#[path = "machine_budget_tests.rs"]
mod budgeting;

#[path = "machine_plan_tests.rs"]
mod planning;

#[path = "machine_ahead_tests.rs"]
mod ahead;

const PID: u32 = 7;
const TITLE: &str = "Write a.txt";
const EXIT: &str = "exited with code 1";

fn machine(kind: AgentKind, resumed_from: Option<SessionState>, first: Option<&str>) -> Machine {
    Machine::new(setup(kind, resumed_from, first))
}

/// How the machines of the table start: `kind`, resumed from `resumed_from`, with the
/// first prompt `first`, nothing else on record.
fn setup(kind: AgentKind, resumed_from: Option<SessionState>, first: Option<&str>) -> MachineSetup {
    MachineSetup {
        kind,
        agent_pid: PID,
        state: Some(SessionState::Creating),
        resumed_from,
        first_prompt: first.map(String::from),
        queued: Vec::new(),
        turn_prompt: None,
        skills: Vec::new(),
        usage: None,
        spent: Default::default(),
        price: None,
        plan_review: false,
    }
}

fn acp() -> Machine {
    machine(AgentKind::Acp, None, None)
}

fn resuming(from: SessionState) -> Machine {
    machine(AgentKind::Acp, Some(from), None)
}

// Inputs.

fn ready(resumed: bool) -> SessionInput {
    let acp_session_id = "acp-1".into();
    SessionInput::Agent(AgentEvent::Ready {
        acp_session_id,
        resumed,
        agent_name: None,
    })
}

fn agent(event: AgentEvent) -> SessionInput {
    SessionInput::Agent(event)
}

fn prompt(text: &str) -> SessionInput {
    SessionInput::Prompt(text.into())
}

fn said(text: &str) -> SessionInput {
    let kind = EntryKind::Message;
    let text = text.into();
    SessionInput::Kept { kind, text }
}

/// The agent's permission request `key`, which no rule has a word on.
fn ask(key: Key) -> SessionInput {
    let choice = |id: &str, name: &str, kind| PermissionChoice {
        id: id.into(),
        name: name.into(),
        kind,
    };
    let request = GateRequest::Permission {
        key,
        title: TITLE.into(),
        tool_call_id: "t1".into(),
        options: vec![
            choice("allow", "Allow", OptionKind::AllowOnce),
            choice("reject", "Reject", OptionKind::RejectOnce),
        ],
        operation: Operation::default(),
    };
    let (judgement, changed) = (Judgement::Free, false);
    SessionInput::Judged {
        request,
        judgement,
        changed,
    }
}

fn posted(key: Key, message_id: &str) -> SessionInput {
    let result = Ok(message_id.into());
    SessionInput::Posted { key, result }
}

fn answered(id: &str, response: &str) -> SessionInput {
    let (id, response) = (id.into(), Some(response.into()));
    SessionInput::Answered {
        id,
        response,
        by: None,
    }
}

fn ended(reason: &str) -> SessionInput {
    SessionInput::Agent(AgentEvent::TurnEnded(Ok(reason.into())))
}

fn failed(why: &str) -> SessionInput {
    SessionInput::Agent(AgentEvent::TurnEnded(Err(TurnFailure::Failed(why.into()))))
}

fn lost() -> SessionInput {
    SessionInput::Agent(AgentEvent::TurnEnded(Err(TurnFailure::Lost)))
}

fn exited() -> SessionInput {
    let status = EXIT.into();
    SessionInput::Agent(AgentEvent::Exited {
        status,
        code: Some(1),
    })
}

fn stop(shutdown: bool) -> SessionInput {
    SessionInput::Stop { shutdown }
}

fn store_failed(why: &str) -> SessionInput {
    SessionInput::StoreFailed(why.into())
}

fn start_failed(why: &str) -> SessionInput {
    SessionInput::Agent(AgentEvent::StartFailed(why.into()))
}

/// Where the machines of the table start from.
fn started() -> Vec<SessionInput> {
    vec![SessionInput::Start, SessionInput::Open(vec![])]
}

fn idle() -> Vec<SessionInput> {
    plus(started(), [ready(false)])
}

fn working(text: &str) -> Vec<SessionInput> {
    plus(idle(), [prompt(text)])
}

/// A turn waiting on approval `m1` (request 1).
fn waiting() -> Vec<SessionInput> {
    plus(working("go"), [ask(1), posted(1, "m1")])
}

fn plus(
    mut given: Vec<SessionInput>,
    more: impl IntoIterator<Item = SessionInput>,
) -> Vec<SessionInput> {
    given.extend(more);
    given
}

// Effects.

fn set(state: SessionState, reason: &str) -> Effect {
    let reason = Some(reason.into());
    Effect::SetState { state, reason }
}

fn settle(state: SessionState) -> Effect {
    Effect::SetState {
        state,
        reason: None,
    }
}

fn line(kind: EntryKind, text: &str) -> Effect {
    Effect::Append(Line::new(kind).text(text))
}

fn turn_end(reason: &str) -> Effect {
    Effect::Append(Line::new(EntryKind::TurnEnd).status(reason))
}

fn permission(status: &str) -> Effect {
    Effect::Append(Line::new(EntryKind::Permission).text(TITLE).status(status))
}

fn acp_recorded() -> Effect {
    Effect::Record(RecordChange::AcpSession("acp-1".into()))
}

fn gone() -> Effect {
    Effect::Record(RecordChange::Ended { exit_code: Some(1) })
}

fn reply(reply: Reply) -> Effect {
    Effect::Reply(reply)
}

/// The agent's permission request `key` answered with `option` (`None`: refused).
fn answer(key: Key, option: Option<&str>) -> Vec<Effect> {
    let option = option.map(String::from);
    let (answer, by) = match &option {
        Some(chosen) => (chosen.clone(), "human (inbox)".to_string()),
        None => ("none".into(), "nobody: withdrawn or cancelled".into()),
    };
    let reply = GateReply::Choose(option);
    vec![
        Effect::Audit(AuditEvent::PermissionAnswered { answer, by }),
        Effect::ReplyGate { key, reply },
    ]
}

fn withdraw_open(why: &str) -> Effect {
    let note = format!("withdrawn: {why}");
    Effect::WithdrawOpen { note }
}

fn starts(text: &str) -> Vec<Effect> {
    let (text, renew) = (text.to_string(), true);
    vec![
        line(EntryKind::Prompt, &text),
        Effect::Prompt { text, renew },
    ]
}

/// Approval `m1` (request 1) withdrawn for `why`.
fn withdrawn(why: &str) -> Vec<Effect> {
    let (message_id, note) = ("m1".into(), format!("withdrawn: {why}"));
    cat([
        answer(1, None),
        vec![
            Effect::Withdraw { message_id, note },
            permission("withdrawn"),
        ],
    ])
}

fn notice(msg_type: MsgType, title: &str, body: &str, stderr_tail: bool) -> Effect {
    let (title, body) = (title.into(), Some(body.into()));
    Effect::Post(Notice {
        msg_type,
        title,
        body,
        stderr_tail,
    })
}

/// The `task_complete` message of a turn that replied nothing.
fn done_quietly(title: &str) -> Effect {
    let (msg_type, title) = (MsgType::TaskComplete, title.into());
    let (body, stderr_tail) = (None, false);
    Effect::Post(Notice {
        msg_type,
        title,
        body,
        stderr_tail,
    })
}

fn turn_failed(why: &str, dropped: &str) -> Vec<Effect> {
    let reason = format!("the agent failed the turn: {why}");
    let body =
        format!("{reason}\n\nThe agent is still running; send a prompt to try again.{dropped}");
    vec![
        line(EntryKind::Error, why),
        set(SessionState::Error, &reason),
        notice(MsgType::Error, "Turn failed", &body, true),
    ]
}

/// The agent ended in the middle of a turn: the session is `interrupted`.
fn cut_by_exit() -> Vec<Effect> {
    let (reason, notice) = crate::sessions::wording::agent_ended(EXIT, true);
    assert!(
        reason.contains(EXIT) && reason.contains("cut short"),
        "{reason}"
    );
    vec![
        line(EntryKind::Error, &reason),
        set(SessionState::Interrupted, &reason),
        Effect::Post(notice),
        Effect::Finish,
    ]
}

/// The agent ended between turns: the session is in `error`.
fn agent_ended() -> Vec<Effect> {
    let reason = format!("the agent {EXIT}");
    let body = format!(
        "The agent of this session {EXIT}. Other sessions are not affected; \
         the worktree and transcript are kept."
    );
    vec![
        line(EntryKind::Error, &reason),
        set(SessionState::Error, &reason),
        notice(MsgType::Error, &format!("Agent {EXIT}"), &body, true),
        Effect::Finish,
    ]
}

fn cat(parts: impl IntoIterator<Item = Vec<Effect>>) -> Vec<Effect> {
    parts.into_iter().flatten().collect()
}

struct Case {
    name: &'static str,
    machine: Machine,
    given: Vec<SessionInput>,
    when: SessionInput,
    then: Vec<Effect>,
    phase: &'static str,
}

/// A transition of an ACP agent's session (see [`Case::on`] for others).
fn case(
    name: &'static str,
    given: Vec<SessionInput>,
    when: SessionInput,
    then: Vec<Effect>,
) -> Case {
    let machine = acp();
    let phase = "";
    Case {
        name,
        machine,
        given,
        when,
        then,
        phase,
    }
}

impl Case {
    fn on(mut self, machine: Machine) -> Self {
        self.machine = machine;
        self
    }

    /// The phase the machine must end in.
    fn ends(mut self, phase: &'static str) -> Self {
        self.phase = phase;
        self
    }
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::Starting => "starting",
        Phase::StartFailed => "start failed",
        Phase::Idle => "idle",
        Phase::Turn(_) => "turn",
        Phase::Ended => "ended",
    }
}

fn starting_up() -> Vec<Case> {
    use SessionState::*;
    vec![
        case(
            "start: the agent's pid, starting, the context stack, what is open",
            vec![],
            SessionInput::Start,
            vec![
                Effect::Record(RecordChange::AgentPid(PID)),
                settle(Starting),
                Effect::OpenContext,
                Effect::ReadOpen,
            ],
        )
        .ends("starting"),
        case(
            "ready without a prompt: complete, ready for a prompt",
            started(),
            ready(false),
            vec![acp_recorded(), set(Complete, "ready for a prompt")],
        )
        .ends("idle"),
        case(
            "ready with the task: the turn starts at once, never complete first",
            started(),
            ready(false),
            cat([
                vec![acp_recorded()],
                starts("fix it"),
                vec![settle(Working)],
            ]),
        )
        .on(machine(AgentKind::Acp, None, Some("fix it")))
        .ends("turn"),
        case(
            "a prompt while starting queues",
            started(),
            prompt("later"),
            vec![reply(Reply::Queued)],
        )
        .ends("starting"),
        case(
            "a cancel while starting drops the queued prompt",
            plus(started(), [prompt("later"), SessionInput::Cancel]),
            ready(false),
            vec![acp_recorded(), set(Complete, "ready for a prompt")],
        )
        .ends("idle"),
        case(
            "a fresh agent that cannot start: error, with its stderr",
            started(),
            start_failed("no such program"),
            vec![
                line(EntryKind::Error, "no such program"),
                set(Error, "no such program"),
                notice(
                    MsgType::Error,
                    "Agent failed to start",
                    "no such program",
                    true,
                ),
                Effect::StopAgent,
            ],
        )
        .ends("start failed"),
        case(
            "after a failed start the exit is only recorded",
            plus(started(), [start_failed("no such program")]),
            exited(),
            vec![
                Effect::RevokeHandles,
                withdraw_open("the agent exited"),
                gone(),
                Effect::Save,
                Effect::Finish,
            ],
        )
        .ends("ended"),
    ]
}

fn stopping_while_starting() -> Vec<Case> {
    use SessionState::*;
    let stopped = format!("stopped; the agent {EXIT}");
    vec![
        case(
            "a prompt after a failed start still queues until the exit (as before)",
            plus(started(), [start_failed("no such program")]),
            prompt("hello?"),
            vec![reply(Reply::Queued)],
        )
        .ends("start failed"),
        case(
            "stop during start-up stops the agent",
            started(),
            stop(false),
            vec![Effect::StopAgent],
        )
        .ends("starting"),
        case(
            "a second stop only waits for the first",
            plus(started(), [stop(false)]),
            stop(false),
            vec![],
        )
        .ends("starting"),
        case(
            "a prompt while stopping is refused: the agent is not running",
            plus(started(), [prompt("first"), stop(false)]),
            prompt("too late"),
            vec![reply(Reply::NotRunning)],
        )
        .ends("starting"),
        case(
            "a start failure while stopping is not an error: the stop is",
            plus(started(), [stop(false)]),
            start_failed("the agent was killed by signal 15"),
            vec![],
        )
        .ends("starting"),
        case(
            "a start failure after the start is ignored: the exit says how it ended",
            plus(started(), [ready(false)]),
            start_failed("the agent exited with code 1"),
            vec![],
        )
        .ends("idle"),
        case(
            "stopped during start-up: stopped once the agent is gone",
            plus(started(), [stop(false)]),
            exited(),
            vec![
                Effect::RevokeHandles,
                withdraw_open("the session was stopped"),
                gone(),
                set(Stopped, &stopped),
                Effect::Finish,
            ],
        )
        .ends("ended"),
    ]
}

fn resuming_after_a_restart() -> Vec<Case> {
    use SessionState::*;
    let resumed = |reason: &str| {
        let body = format!("{reason}. The agent reopened its session; send a prompt to continue.");
        let title = "Session resumed after a daemon restart";
        vec![
            acp_recorded(),
            set(Complete, reason),
            notice(MsgType::Info, title, &body, false),
        ]
    };
    let plain = "resumed after a daemon restart";
    let interrupted = "resumed after a daemon restart; the turn that was running was interrupted";
    let lost = "the agent was lost when the daemon restarted: no loadSession support";
    let lost_body = format!(
        "{lost}. The session is stopped; its worktree and transcript are kept. \
         Start a new session to continue the work."
    );
    vec![
        case(
            "resuming: starting, with the reason",
            vec![],
            SessionInput::Start,
            vec![
                Effect::Record(RecordChange::AgentPid(PID)),
                set(Starting, "resuming after a daemon restart"),
                Effect::OpenContext,
                withdraw_open(crate::sessions::wording::ASKER_GONE),
                Effect::ReadOpen,
            ],
        )
        .on(resuming(Complete))
        .ends("starting"),
        case(
            "resumed, no turn was running: complete, and the inbox told",
            started(),
            ready(true),
            resumed(plain),
        )
        .on(resuming(Complete))
        .ends("idle"),
        case(
            "resumed, a turn was running: it was interrupted, and the inbox told",
            started(),
            ready(true),
            resumed(interrupted),
        )
        .on(resuming(Working))
        .ends("idle"),
        case(
            "a prompt sent while resuming runs once resumed",
            plus(started(), [prompt("continue")]),
            ready(true),
            cat([
                resumed(interrupted),
                starts("continue"),
                vec![settle(Working)],
            ]),
        )
        .on(resuming(Waiting))
        .ends("turn"),
        case(
            "an agent that cannot resume is lost: stopped, and the inbox told",
            started(),
            start_failed("no loadSession support"),
            vec![
                line(EntryKind::Error, "no loadSession support"),
                set(Stopped, lost),
                notice(
                    MsgType::Error,
                    "Agent lost in a daemon restart",
                    &lost_body,
                    false,
                ),
                Effect::StopAgent,
            ],
        )
        .on(resuming(Working))
        .ends("start failed"),
    ]
}

#[test]
fn transitions() {
    let tables = [
        starting_up(),
        stopping_while_starting(),
        resuming_after_a_restart(),
        parking::parking(),
        parking::usage_limits(),
        during_a_turn::turns(),
        during_a_turn::turns_that_end(),
        during_a_turn::cancels_and_failures(),
        during_a_turn::store_failures(),
        during_a_turn::approvals(),
        during_a_turn::questions(),
        during_a_turn::the_context_stack(),
        during_a_turn::an_agent_feeding_its_own_stack(),
        during_a_turn::the_transcript(),
        during_a_turn::endings(),
        gating::rule_outcomes(),
        gating::human_answers(),
        gating::permissions(),
        gating::permissions_answered(),
        gating::credentials_and_rules(),
        gating::the_agents_own_doings(),
        gating::the_agents_own_approvals(),
        gating::skills_told(),
        budgeting::budgets(),
        cut::interruptions(),
        cut::sending_again(),
    ];
    let mut wrong = Vec::new();
    let mut count = 0;
    for case in tables.into_iter().flatten() {
        count += 1;
        let mut machine = case.machine;
        for input in case.given {
            machine.step(input);
        }
        let effects = cut::without_kept_prompts(machine.step(case.when));
        if effects != case.then {
            wrong.push(format!(
                "{}:\n  got  {effects:#?}\n  want {:#?}",
                case.name, case.then
            ));
        }
        let phase = phase_name(&machine.phase);
        if phase != case.phase {
            wrong.push(format!("{}: ends {phase}, not {}", case.name, case.phase));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(count > 60, "{count} cases");
}

#[test]
fn replies_are_kept_for_the_done_message_up_to_a_bound() {
    let mut m = acp();
    for input in working("go") {
        m.step(input);
    }
    let chunk = "x".repeat(REPLY_BYTES / 2 + 1);
    for _ in 0..3 {
        m.step(said(&chunk));
    }
    let Phase::Turn(turn) = &m.phase else {
        panic!("not in a turn");
    };
    // Text is added while less than the bound is kept.
    assert_eq!(turn.reply.len(), 2 * chunk.len());
}

#[test]
fn inbox_choices_are_unique_and_map_back() {
    let choice = |id: &str, name: &str| PermissionChoice {
        id: id.into(),
        name: name.into(),
        kind: OptionKind::AllowOnce,
    };
    let choices = inbox_choices(&[
        choice("a", "Allow"),
        choice("b", "allow"),
        choice("r", "Reject"),
        choice("x", " "),
    ]);
    let shown = |shown: &str, id: &str| approvals::Choice {
        shown: shown.into(),
        id: id.into(),
        kind: OptionKind::AllowOnce,
    };
    assert_eq!(
        choices,
        vec![
            shown("Allow", "a"),
            shown("allow (b)", "b"),
            shown("Reject", "r"),
            shown("x", "x"),
        ]
    );
}
