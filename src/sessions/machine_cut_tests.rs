//! Turns cut short and the prompts a session keeps: the rows of an interrupted session
//! (resumed after a restart, restarted, its agent ended mid-turn) and of sending its turn
//! again; and, apart from the table, the record of the prompts kept before anyone is told.

use super::*;

/// A machine whose session record keeps `queued` prompts and, when `turn` is set, the
/// prompt of a turn that never ended.
fn kept(from: Option<SessionState>, queued: &[&str], turn: Option<&str>) -> Machine {
    Machine::new(MachineSetup {
        kind: AgentKind::Acp,
        agent_pid: PID,
        state: Some(SessionState::Starting),
        resumed_from: from,
        first_prompt: None,
        queued: queued.iter().map(|q| q.to_string()).collect(),
        turn_prompt: turn.map(String::from),
        skills: Vec::new(),
        usage: None,
        spent: Default::default(),
        price: None,
        plan_review: false,
    })
}

/// The effects that keep the prompts on the record, left out of the table's rows:
/// [`prompts_are_on_the_record_before_anyone_is_told`] checks them.
pub(super) fn without_kept_prompts(effects: Vec<Effect>) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut after_prompts = false;
    for effect in effects {
        match effect {
            Effect::Record(RecordChange::Prompts { .. }) => after_prompts = true,
            Effect::Save if after_prompts => after_prompts = false,
            other => {
                after_prompts = false;
                out.push(other);
            }
        }
    }
    out
}

/// The session says its turn was cut short by `how`, with `waiting` prompts behind it.
fn cut(how: wording::Cut, waiting: usize) -> Vec<Effect> {
    let (reason, notice) = wording::interrupted(how, waiting);
    vec![
        line(EntryKind::Error, &reason),
        set(SessionState::Interrupted, &reason),
        Effect::Post(notice),
    ]
}

fn resend() -> SessionInput {
    SessionInput::Resend
}

/// Interruptions: a turn cut short by a restart; prompts kept across one.
pub(super) fn interruptions() -> Vec<Case> {
    use SessionState::*;
    use wording::Cut::*;
    vec![
        case(
            "resumed, its turn never ended: interrupted, the inbox told, nothing sent",
            started(),
            ready(true),
            cat([vec![acp_recorded()], cut(DaemonStopped, 0)]),
        )
        .on(kept(Some(Working), &[], Some("fix it")))
        .ends("idle"),
        case(
            "resumed with a prompt queued behind the cut turn: it waits too",
            started(),
            ready(true),
            cat([vec![acp_recorded()], cut(DaemonStopped, 1)]),
        )
        .on(kept(Some(Waiting), &["then this"], Some("fix it")))
        .ends("idle"),
        case(
            "restarted after its agent died mid-turn: interrupted again, waiting for the word",
            started(),
            ready(false),
            cat([vec![acp_recorded(), Effect::SeedFresh], cut(Restarted, 0)]),
        )
        .on(kept(Some(Stopped), &[], Some("fix it")))
        .ends("idle"),
        case(
            "restarted after a failed start: the task it never sent runs",
            started(),
            ready(false),
            cat([
                vec![
                    acp_recorded(),
                    Effect::SeedFresh,
                    set(Complete, wording::RESTARTED),
                ],
                starts("the task"),
                vec![settle(Working)],
            ]),
        )
        .on(kept(Some(Stopped), &["the task"], None))
        .ends("turn"),
        case(
            "resumed with prompts a usage limit parked: they run",
            started(),
            ready(true),
            cat([
                vec![acp_recorded(), set(Complete, wording::UNPARKED)],
                starts("hit the limit"),
                vec![settle(Working)],
            ]),
        )
        .on(kept(Some(Parked), &["hit the limit", "after it"], None))
        .ends("turn"),
    ]
}

/// A cut turn sent again, or moved on from; the agent's end mid-turn.
pub(super) fn sending_again() -> Vec<Case> {
    use SessionState::*;
    vec![
        case(
            "resend: the cut turn runs again",
            plus(started(), [ready(true)]),
            resend(),
            cat([
                starts("fix it"),
                vec![settle(Working), reply(Reply::Started)],
            ]),
        )
        .on(kept(Some(Working), &[], Some("fix it")))
        .ends("turn"),
        case(
            "resend with a prompt queued behind: the cut turn goes first",
            plus(started(), [ready(true)]),
            resend(),
            cat([
                starts("fix it"),
                vec![settle(Working), reply(Reply::Started)],
            ]),
        )
        .on(kept(Some(Working), &["then this"], Some("fix it")))
        .ends("turn"),
        case(
            "resend before the agent is ready: it waits for the agent",
            started(),
            resend(),
            vec![reply(Reply::Queued)],
        )
        .on(kept(Some(Working), &[], Some("fix it")))
        .ends("starting"),
        case(
            "a new prompt moves on from the cut turn: what waited behind it runs first",
            plus(started(), [ready(true)]),
            prompt("something else"),
            cat([
                vec![reply(Reply::Queued)],
                starts("then this"),
                vec![settle(Working)],
            ]),
        )
        .on(kept(Some(Working), &["then this"], Some("fix it")))
        .ends("turn"),
        case(
            "resend with no turn cut short: said so, nothing sent",
            idle(),
            resend(),
            vec![reply(Reply::NothingCut)],
        )
        .ends("idle"),
        case(
            "the agent killed by a signal mid-turn: interrupted, and the signal named",
            working("go"),
            SessionInput::Agent(AgentEvent::Exited {
                status: "was killed by signal 9 (SIGKILL)".into(),
                code: None,
            }),
            {
                let (reason, notice) =
                    wording::agent_ended("was killed by signal 9 (SIGKILL)", true);
                vec![
                    Effect::RevokeHandles,
                    withdraw_open("the agent exited"),
                    Effect::Record(RecordChange::Ended { exit_code: None }),
                    line(EntryKind::Error, &reason),
                    set(Interrupted, &reason),
                    Effect::Post(notice),
                    Effect::Finish,
                ]
            },
        )
        .ends("ended"),
    ]
}

/// The prompts on the record as the machine keeps them.
fn prompts(queued: &[&str], turn: Option<&str>) -> Effect {
    Effect::Record(RecordChange::Prompts {
        queued: queued.iter().map(|q| q.to_string()).collect(),
        turn: turn.map(String::from),
    })
}

/// Where `wanted` effects appear in `effects`, in order; panics when one is missing.
fn positions(effects: &[Effect], wanted: &[&Effect]) -> Vec<usize> {
    wanted
        .iter()
        .map(|w| {
            effects
                .iter()
                .position(|e| e == *w)
                .unwrap_or_else(|| panic!("no {w:?} in {effects:#?}"))
        })
        .collect()
}

#[test]
fn prompts_are_on_the_record_before_anyone_is_told() {
    // The task a session is made with is on its record from the start.
    let mut machine = machine(AgentKind::Acp, None, Some("the task"));
    let fx = machine.step(SessionInput::Start);
    let [record, starting] = positions(
        &fx,
        &[
            &prompts(&["the task"], None),
            &settle(SessionState::Starting),
        ],
    )[..] else {
        unreachable!()
    };
    assert!(record < starting, "{fx:#?}");

    // A turn's prompt is saved before the agent has it.
    machine.step(SessionInput::Open(vec![]));
    let fx = machine.step(ready(false));
    let sent = Effect::Prompt {
        text: "the task".into(),
        renew: true,
    };
    let at = positions(
        &fx,
        &[&prompts(&[], Some("the task")), &Effect::Save, &sent],
    );
    assert!(at[0] < at[1] && at[1] < at[2], "{fx:#?}");

    // A prompt that queues is saved before it is answered `queued`.
    let fx = machine.step(prompt("then this"));
    let at = positions(
        &fx,
        &[
            &prompts(&["then this"], Some("the task")),
            &Effect::Save,
            &reply(Reply::Queued),
        ],
    );
    assert!(at[0] < at[1] && at[1] < at[2], "{fx:#?}");

    // The turn's end takes its prompt off the record, in the save that counts the turn.
    let fx = machine.step(ended("end_turn"));
    let at = positions(&fx, &[&prompts(&["then this"], None), &Effect::RecordTurn]);
    assert!(at[0] < at[1], "{fx:#?}");
    // ... and the next prompt goes on it as it starts.
    assert!(fx.contains(&prompts(&[], Some("then this"))), "{fx:#?}");

    // A cancel drops what was queued, on the record too.
    machine.step(prompt("one more"));
    let fx = machine.step(SessionInput::Cancel);
    assert!(fx.contains(&prompts(&[], Some("then this"))), "{fx:#?}");
}

#[test]
fn a_turn_a_usage_limit_parked_is_kept_as_queued() {
    let mut machine = acp();
    for input in working("go") {
        machine.step(input);
    }
    let fx = machine.step(SessionInput::TurnLimited {
        why: "usage limit".into(),
        wait: std::time::Duration::from_secs(60),
        resumes: "13:32:53".into(),
    });
    let at = positions(&fx, &[&prompts(&["go"], None), &Effect::RecordTurn]);
    assert!(at[0] < at[1], "{fx:#?}");
}

#[test]
fn an_agent_that_ends_mid_turn_leaves_its_prompt_for_a_resend() {
    let mut machine = acp();
    for input in working("go") {
        machine.step(input);
    }
    let fx = machine.step(exited());
    assert!(fx.contains(&prompts(&[], Some("go"))), "{fx:#?}");
    let reason = fx.iter().find_map(|e| match e {
        Effect::SetState {
            state: SessionState::Interrupted,
            reason,
        } => reason.clone(),
        _ => None,
    });
    let reason = reason.unwrap_or_else(|| panic!("not interrupted: {fx:#?}"));
    assert!(reason.contains("exited with code 1"), "{reason}");
    assert!(reason.contains("resend"), "{reason}");
}
