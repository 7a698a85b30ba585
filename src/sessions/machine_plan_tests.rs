//! Plan review in the session machine: a plan sent in a turn is asked and what the agent
//! asks meanwhile waits; approved, what a step names runs without a question and anything
//! else is asked with the plan's current step; comments on steps reach the agent as one
//! prompt; rejected, the turn ends; a plan whose statuses alone change is not asked again.

use super::*;
use crate::rules::PlanStep;
use crate::sessions::machine::planning::{APPROVE, REJECT};

const STEPS: [&str; 3] = [
    "Read the schema",
    "Run `cargo test -p store`",
    "Edit src/db.rs to read from the view",
];

fn reviewing() -> Machine {
    let mut m = Machine::new(MachineSetup {
        plan_review: true,
        ..setup(AgentKind::Acp, None, None)
    });
    for input in working("go") {
        m.step(input);
    }
    m
}

fn plan(statuses: &[&str], steps: &[&str]) -> SessionInput {
    agent(AgentEvent::Plan(
        steps
            .iter()
            .zip(statuses.iter().chain(std::iter::repeat(&"pending")))
            .map(|(content, status)| PlanStep {
                content: content.to_string(),
                status: status.to_string(),
            })
            .collect(),
    ))
}

fn execute(command: &str) -> Operation {
    Operation {
        kind: OperationKind::Execute,
        command: Some(command.into()),
        ..Default::default()
    }
}

fn permission(key: Key, command: &str) -> GateRequest {
    let choice = |id: &str, kind| PermissionChoice {
        id: id.into(),
        name: id.into(),
        kind,
    };
    GateRequest::Permission {
        key,
        title: format!("Run {command}"),
        tool_call_id: format!("t{key}"),
        options: vec![
            choice("allow", OptionKind::AllowOnce),
            choice("reject", OptionKind::RejectOnce),
        ],
        operation: execute(command),
    }
}

fn free(request: GateRequest) -> SessionInput {
    SessionInput::Judged {
        request,
        judgement: Judgement::Free,
        changed: false,
    }
}

/// A reviewing machine whose plan (of [`STEPS`]) is asked as `p1`, with the agent's
/// request 1 (`cargo test -p store`) waiting for the review.
fn asked() -> Machine {
    let mut m = reviewing();
    let fx = m.step(plan(&[], &STEPS));
    let ask = fx.iter().find_map(|e| match e {
        Effect::AskPlan { body, steps, .. } => Some((body.clone(), *steps)),
        _ => None,
    });
    let (body, steps) = ask.expect("the plan is asked");
    assert_eq!(steps, 3);
    assert!(
        body.starts_with(
            "1. Read the schema\n2. Run `cargo test -p store`\n3. Edit src/db.rs to read"
        ),
        "{body}"
    );
    let fx = m.step(SessionInput::PlanAsked(Ok("p1".into())));
    assert!(fx.contains(&settle(SessionState::Waiting)), "{fx:?}");
    let fx = m.step(SessionInput::Gate(permission(1, "cargo test -p store")));
    assert!(fx.is_empty(), "the request waits for the review: {fx:?}");
    m
}

fn replies(fx: &[Effect]) -> Vec<(Key, GateReply)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::ReplyGate { key, reply } => Some((*key, reply.clone())),
            _ => None,
        })
        .collect()
}

fn prompts(fx: &[Effect]) -> Vec<String> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Prompt { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_approved_plan_lets_its_command_run_and_asks_what_it_does_not_name() {
    let mut m = asked();
    let fx = m.step(answered("p1", APPROVE));
    // The waiting request goes through the gate again, and the plan allows it.
    assert!(
        fx.contains(&Effect::Judge(permission(1, "cargo test -p store"))),
        "{fx:?}"
    );
    let fx = m.step(free(permission(1, "cargo test -p store")));
    assert_eq!(
        replies(&fx),
        [(1, GateReply::Choose(Some("allow".into())))],
        "{fx:?}"
    );
    let allowed = Line::new(EntryKind::Permission)
        .text("Run cargo test -p store")
        .status("allowed: step 2 of the approved plan");
    assert!(fx.contains(&Effect::Append(allowed)), "{fx:?}");

    // Something no step names is asked, with the plan's current step shown.
    m.step(plan(&["completed", "in_progress"], &STEPS));
    let fx = m.step(free(permission(2, "rm -rf target")));
    assert!(replies(&fx).is_empty(), "{fx:?}");
    let body = fx.iter().find_map(|e| match e {
        Effect::Ask { body, .. } => Some(body.clone()),
        _ => None,
    });
    let body = body.expect("asked");
    assert!(body.contains("Not in the approved plan"), "{body}");
    assert!(
        body.contains("current step 2: Run `cargo test -p store`"),
        "{body}"
    );
    assert!(body.contains("execute: rm -rf target"), "{body}");

    // The approval is for this turn: in the next, the same command is asked again.
    m.step(ended("end_turn"));
    m.step(prompt("again"));
    let fx = m.step(free(permission(3, "cargo test -p store")));
    assert!(replies(&fx).is_empty(), "{fx:?}");
    assert!(fx.iter().any(|e| matches!(e, Effect::Ask { .. })), "{fx:?}");
}

#[test]
fn comments_on_two_steps_go_back_as_one_prompt_after_the_turn_ends() {
    let mut m = asked();
    let fx = m.step(answered(
        "p1",
        "2: use cargo nextest\n3: not this file; use src/view.rs",
    ));
    assert!(fx.contains(&Effect::CancelTurn), "{fx:?}");
    assert_eq!(replies(&fx), [(1, GateReply::Choose(None))], "{fx:?}");
    assert!(prompts(&fx).is_empty(), "{fx:?}");
    let fx = m.step(ended("cancelled"));
    let sent = prompts(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert!(
        sent[0].contains("Step 2 (Run `cargo test -p store`): use cargo nextest"),
        "{}",
        sent[0]
    );
    assert!(
        sent[0].contains(
            "Step 3 (Edit src/db.rs to read from the view): not this file; use src/view.rs"
        ),
        "{}",
        sent[0]
    );
    // The revised plan is reviewed again.
    let fx = m.step(plan(&[], &["Read the schema", "Edit src/view.rs"]));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::AskPlan { steps: 2, .. }))
    );
}

#[test]
fn a_rejected_plan_ends_the_turn_and_sends_nothing() {
    let mut m = asked();
    let fx = m.step(answered("p1", REJECT));
    assert!(fx.contains(&Effect::CancelTurn), "{fx:?}");
    assert_eq!(replies(&fx), [(1, GateReply::Choose(None))], "{fx:?}");
    let fx = m.step(ended("cancelled"));
    assert!(prompts(&fx).is_empty(), "{fx:?}");
}

#[test]
fn a_plan_whose_statuses_change_is_not_asked_again_and_a_changed_one_is() {
    let mut m = asked();
    let fx = m.step(plan(&["in_progress"], &STEPS));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::AskPlan { .. })),
        "{fx:?}"
    );
    let mut changed = STEPS.to_vec();
    changed.push("Run `git push`");
    let fx = m.step(plan(&[], &changed));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Withdraw { message_id, .. } if message_id == "p1")),
        "the old question is withdrawn: {fx:?}"
    );
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::AskPlan { steps: 4, .. }))
    );
    // What waited on the old plan is refused, not left hanging.
    assert_eq!(replies(&fx), [(1, GateReply::Choose(None))], "{fx:?}");
}

#[test]
fn a_plan_approved_after_its_turn_ended_is_carried_out_in_a_new_turn() {
    let mut m = reviewing();
    m.step(plan(&[], &STEPS));
    m.step(SessionInput::PlanAsked(Ok("p1".into())));
    m.step(ended("end_turn"));
    let fx = m.step(answered("p1", APPROVE));
    assert_eq!(prompts(&fx), ["Your plan is approved. Carry it out."]);
    let fx = m.step(free(permission(1, "cargo test -p store")));
    assert_eq!(replies(&fx), [(1, GateReply::Choose(Some("allow".into())))]);
}

#[test]
fn without_plan_review_a_plan_is_only_shown() {
    let mut m = acp();
    for input in working("go") {
        m.step(input);
    }
    let fx = m.step(plan(&[], &STEPS));
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::AskPlan { .. })),
        "{fx:?}"
    );
    let fx = m.step(SessionInput::Gate(permission(1, "cargo test -p store")));
    assert!(fx.iter().any(|e| matches!(e, Effect::Judge(_))), "{fx:?}");
}
