//! The machine's parking rows: an idle sandbox, ssh or podman session's environment is
//! torn down, and the next prompt makes it again; a session that hits a usage limit is
//! parked until it resets (see `machine_tests.rs` for the runner).

use super::*;

/// An idle sandbox, ssh or podman session is parked (its environment torn down) and
/// made again by the next prompt.
pub(super) fn parking() -> Vec<Case> {
    use SessionState::*;
    let parked = wording::PARKED;
    let unparked = wording::UNPARKED;
    let parked_machine = |first: &str| machine(AgentKind::Acp, Some(Parked), Some(first));
    vec![
        case(
            "idle too long: the agent is stopped to park",
            idle(),
            SessionInput::Park,
            vec![Effect::StopAgent],
        )
        .ends("idle"),
        case(
            "a turn running is never parked",
            working("go"),
            SessionInput::Park,
            vec![],
        )
        .ends("turn"),
        case(
            "a question open is never parked",
            plus(idle(), [SessionInput::Opened("q1".into())]),
            SessionInput::Park,
            vec![],
        )
        .ends("idle"),
        case(
            "the parked agent's exit: parked, and nothing for the inbox",
            plus(idle(), [SessionInput::Park]),
            exited(),
            vec![
                Effect::RevokeHandles,
                withdraw_open(parked),
                gone(),
                set(Parked, parked),
                Effect::Finish,
            ],
        )
        .ends("ended"),
        case(
            "made again: starting, saying so",
            vec![],
            SessionInput::Start,
            vec![
                Effect::Record(RecordChange::AgentPid(PID)),
                set(Starting, wording::UNPARKING),
                Effect::OpenContext,
                Effect::ReadOpen,
            ],
        )
        .on(parked_machine("go on"))
        .ends("starting"),
        case(
            "made again and its session reloaded: the waiting prompt runs, no notice",
            started(),
            ready(true),
            cat([
                vec![acp_recorded(), set(Complete, unparked)],
                starts("go on"),
                vec![settle(Working)],
            ]),
        )
        .on(parked_machine("go on"))
        .ends("turn"),
        case(
            "made again but the agent could not reload: a fresh session seeded with the stack",
            started(),
            ready(false),
            cat([
                vec![acp_recorded(), Effect::SeedFresh, set(Complete, unparked)],
                starts("go on"),
                vec![settle(Working)],
            ]),
        )
        .on(parked_machine("go on"))
        .ends("turn"),
    ]
}

const LIMIT: &str = "You've hit your usage limit. Please retry in 2s.";

fn limited() -> SessionInput {
    SessionInput::TurnLimited {
        why: LIMIT.into(),
        wait: std::time::Duration::from_secs(2),
        resumes: "10:00:02".into(),
    }
}

/// A usage limit parks the session, with no retry meanwhile, until it resets.
pub(super) fn usage_limits() -> Vec<Case> {
    use SessionState::*;
    vec![
        case(
            "a turn failed on a usage limit: parked until it resets, saying when",
            working("go"),
            limited(),
            vec![
                Effect::RecordTurn,
                line(EntryKind::Error, LIMIT),
                set(Parked, &wording::limited("10:00:02")),
                Effect::Post(wording::limit_notice(LIMIT, "10:00:02")),
                Effect::WakeAfter(std::time::Duration::from_secs(2)),
            ],
        )
        .ends("idle"),
        case(
            "a prompt while parked on a limit waits behind the one that hit it",
            plus(working("go"), [limited()]),
            prompt("more"),
            vec![reply(Reply::Queued)],
        )
        .ends("idle"),
        case(
            "the limit resets: the prompt that hit it is sent again",
            plus(working("go"), [limited(), prompt("more")]),
            SessionInput::LimitReset,
            cat([starts("go"), vec![settle(Working)]]),
        )
        .ends("turn"),
        case(
            "a reset after the session was stopped does nothing",
            plus(working("go"), [limited(), stop(false)]),
            SessionInput::LimitReset,
            vec![],
        )
        .ends("idle"),
    ]
}
