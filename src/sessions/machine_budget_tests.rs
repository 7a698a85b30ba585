//! The machine's budget rows: spending is counted, a budget reached asks the running turn
//! to end and holds every new one, the inbox asks once whether to raise it or stop, and
//! the answer applies at once (see `machine_tests.rs` for the runner).

use super::*;
use crate::agent::TurnTokens;
use crate::sessions::budget::{Charge, Raise, STOP, Scope};

const DAY: &str = "2026-11-26";

/// This session's own budget of 1 USD, spent.
fn over() -> Over {
    Over {
        scope: Scope::Session,
        what: "this session's budget: 1.20 of 1.00 USD".into(),
        raise: Raise {
            cost: 1.0,
            tokens: 0,
        },
    }
}

/// The kiln's budget for today, spent.
fn kiln_over() -> Over {
    Over {
        scope: Scope::Kiln,
        what: "the kiln's budget for today: 20 of 10 tokens".into(),
        raise: Raise {
            cost: 0.0,
            tokens: 10,
        },
    }
}

fn verdict(over: Option<Over>) -> SessionInput {
    SessionInput::Budget(over)
}

fn asked(id: &str) -> SessionInput {
    SessionInput::BudgetAsked(Ok(id.into()))
}

fn ask_budget(over: &Over) -> Effect {
    Effect::AskBudget {
        title: over.title(),
        body: over.body(),
        options: vec![over.raise_option(), STOP.into()],
    }
}

fn cost_of(usage_cost: f64) -> SessionInput {
    let usage = Usage {
        used: 10,
        size: 100,
        cost: Some(usage_cost),
        currency: Some("USD".into()),
    };
    let day = DAY.into();
    SessionInput::Usage { usage, day }
}

fn spent_with(cost: f64) -> Spent {
    let mut spent = Spent {
        cost: Some(cost),
        reported: Some(cost),
        ..Spent::default()
    };
    spent.days.insert(
        DAY.into(),
        crate::protocol::DaySpent {
            tokens: None,
            cost: Some(cost),
        },
    );
    spent
}

fn cut(over: &Over) -> Vec<Effect> {
    let line = Line::new(EntryKind::Error).text(over.title());
    vec![
        Effect::CancelTurn,
        Effect::Append(line.status("the turn is asked to end")),
    ]
}

fn raised_note(id: &str) -> Effect {
    let note = format!("withdrawn: {}", wording::BUDGET_RAISED);
    Effect::Withdraw {
        message_id: id.into(),
        note,
    }
}

/// Spending, a budget reached mid-turn, prompts held, the question and its answers.
pub(super) fn budgets() -> Vec<Case> {
    cat_cases([spending(), reaching(), answering(), the_keepers_word()])
}

fn cat_cases(parts: impl IntoIterator<Item = Vec<Case>>) -> Vec<Case> {
    parts.into_iter().flatten().collect()
}

/// What the agent reports is spent and counted.
fn spending() -> Vec<Case> {
    let usage = Usage {
        used: 10,
        size: 100,
        cost: Some(0.4),
        currency: Some("USD".into()),
    };
    let spent_then = spent_with(0.4);
    vec![
        case(
            "a reported cost: recorded, spent, counted with the keeper",
            working("go"),
            cost_of(0.4),
            vec![
                Effect::Record(RecordChange::Usage(usage)),
                Effect::Record(RecordChange::Spent(spent_then)),
                Effect::Spend {
                    charge: Charge {
                        tokens: None,
                        cost: Some(0.4),
                    },
                    day: DAY.into(),
                },
                Effect::Save,
            ],
        )
        .ends("turn"),
        case(
            "the tokens of a turn: spent (unknown cost stays unknown without a price)",
            working("go"),
            SessionInput::TurnTokens {
                tokens: TurnTokens {
                    input: 7,
                    output: 3,
                    cached: 0,
                },
                day: DAY.into(),
            },
            vec![
                Effect::Record(RecordChange::Spent(Spent {
                    tokens: Some(10),
                    days: [(
                        DAY.to_string(),
                        crate::protocol::DaySpent {
                            tokens: Some(10),
                            cost: None,
                        },
                    )]
                    .into(),
                    ..Spent::default()
                })),
                Effect::Spend {
                    charge: Charge {
                        tokens: Some(10),
                        cost: None,
                    },
                    day: DAY.into(),
                },
            ],
        )
        .ends("turn"),
    ]
}

/// A budget reached: the running turn asked to end, new turns held, asked once.
fn reaching() -> Vec<Case> {
    use SessionState::*;
    let o = over();
    vec![
        case(
            "a budget reached mid-turn: the turn is asked to end, the inbox asked",
            working("go"),
            verdict(Some(o.clone())),
            cat([cut(&o), vec![ask_budget(&o)]]),
        )
        .ends("turn"),
        case(
            "the turn the budget cut ends: cancelled, saying which budget",
            plus(working("go"), [verdict(Some(o.clone())), asked("b1")]),
            ended("cancelled"),
            vec![
                Effect::RecordTurn,
                turn_end("cancelled"),
                set(Cancelled, &o.title()),
            ],
        )
        .ends("idle"),
        case(
            "reached while idle: nothing to ask until something waits",
            idle(),
            verdict(Some(o.clone())),
            vec![],
        )
        .ends("idle"),
        case(
            "a prompt while over: queued, and the inbox asked once",
            plus(idle(), [verdict(Some(o.clone()))]),
            prompt("more"),
            vec![reply(Reply::Queued), ask_budget(&o)],
        )
        .ends("idle"),
        case(
            "a second prompt while over: queued, not asked again",
            plus(
                idle(),
                [verdict(Some(o.clone())), prompt("more"), asked("b1")],
            ),
            prompt("and more"),
            vec![reply(Reply::Queued)],
        )
        .ends("idle"),
    ]
}

/// The person's answers to the inbox's question.
fn answering() -> Vec<Case> {
    let o = over();
    let raised = Spent {
        raised_cost: 1.0,
        ..Spent::default()
    };
    vec![
        case(
            "raise: on the record, audited, raised with the keeper",
            plus(
                idle(),
                [verdict(Some(o.clone())), prompt("more"), asked("b1")],
            ),
            answered("b1", &o.raise_option()),
            vec![
                Effect::Record(RecordChange::Spent(raised)),
                Effect::Save,
                Effect::Audit(AuditEvent::BudgetRaised {
                    budget: o.what.clone(),
                    by: o.raise_option(),
                }),
                Effect::RaiseBudget {
                    scope: Scope::Session,
                    raise: o.raise,
                },
            ],
        )
        .ends("idle"),
        case(
            "stop: the session is stopped",
            plus(
                idle(),
                [verdict(Some(o.clone())), prompt("more"), asked("b1")],
            ),
            answered("b1", STOP),
            vec![Effect::StopAgent],
        )
        .ends("idle"),
    ]
}

/// The keeper's verdicts after a question: a raise lets the session go on, another
/// budget is asked anew; and word that a budget is near its end.
fn the_keepers_word() -> Vec<Case> {
    use SessionState::*;
    let o = over();
    vec![
        case(
            "the keeper's word after a raise: the queued prompt starts",
            plus(
                idle(),
                [
                    verdict(Some(o.clone())),
                    prompt("more"),
                    asked("b1"),
                    answered("b1", &o.raise_option()),
                ],
            ),
            verdict(None),
            cat([starts("more"), vec![settle(Working)]]),
        )
        .ends("turn"),
        case(
            "raised with nothing queued after a cut turn: it goes on where it stopped",
            plus(
                working("go"),
                [verdict(Some(o.clone())), asked("b1"), ended("cancelled")],
            ),
            verdict(None),
            cat([
                vec![raised_note("b1")],
                starts(wording::BUDGET_RAISED_GO_ON),
                vec![settle(Working)],
            ]),
        )
        .ends("turn"),
        case(
            "raised in the settings: the open question is withdrawn, the queue runs",
            plus(
                idle(),
                [verdict(Some(o.clone())), prompt("more"), asked("b1")],
            ),
            verdict(None),
            cat([
                vec![raised_note("b1")],
                starts("more"),
                vec![settle(Working)],
            ]),
        )
        .ends("turn"),
        case(
            "another budget reached: the question about the old one is withdrawn, asked anew",
            plus(
                idle(),
                [verdict(Some(o.clone())), prompt("more"), asked("b1")],
            ),
            verdict(Some(kiln_over())),
            vec![
                Effect::Withdraw {
                    message_id: "b1".into(),
                    note: format!("withdrawn: {}", wording::BUDGET_OTHER),
                },
                ask_budget(&kiln_over()),
            ],
        )
        .ends("idle"),
        case(
            "near a budget: an info message for each",
            idle(),
            SessionInput::BudgetNear(vec!["the kiln's budget for today is 85% spent".into()]),
            vec![Effect::Post(wording::budget_near(
                "the kiln's budget for today is 85% spent",
            ))],
        )
        .ends("idle"),
    ]
}
