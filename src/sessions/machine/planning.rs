//! Plan review in the session machine. With `plan_review` on, the agent's plan is asked
//! in the inbox as numbered steps before the agent acts on it: meanwhile whatever it asks
//! for, or asks crucible to run, waits. Approved, the plan is a set of allowances for the
//! rest of that turn: what it asks for and a step names runs without a question, and
//! anything else is asked with the plan's current step shown. Rejected, the turn is
//! asked to end. Comments on steps go back to the agent as one prompt naming the steps,
//! and the plan it sends then is reviewed again. A plan whose steps change is reviewed
//! again; one whose statuses alone change is not.

use super::gating::{GateReply, GateRequest};
use super::*;
use crate::ledger::LedgerError;
use crate::protocol::plan_comments;
use crate::rules::{Operation, PlanScope, PlanStep, plan};

/// The options of a plan's review.
pub(in crate::sessions) const APPROVE: &str = "Approve the plan";
pub(in crate::sessions) const REJECT: &str = "Reject the plan";

const PLAN_CHANGED: &str = "the agent sent another plan";
const HELD: &str = "the agent's plan waits for review";
const REJECTED: &str = "the plan was rejected";
const REVISED: &str = "the plan is being revised after comments";
const GO_ON: &str = "Your plan is approved. Carry it out.";

/// The plan of the session, and its review.
#[derive(Debug, Default)]
pub(super) struct Planning {
    /// Whether plans are reviewed before the agent acts on them.
    pub on: bool,
    /// The plan as the agent last sent it.
    latest: Vec<PlanStep>,
    /// The plan under review: its steps, and its question once posted.
    review: Option<Review>,
    /// What the agent asked for meanwhile, in order.
    held: Vec<GateRequest>,
    /// The plan approved for the running (or next) turn.
    approved: Option<Approved>,
}

#[derive(Debug)]
struct Review {
    steps: Vec<String>,
    message: Option<String>,
}

#[derive(Debug)]
struct Approved {
    steps: Vec<String>,
    scope: PlanScope,
}

impl Planning {
    pub(super) fn new(on: bool) -> Planning {
        Planning {
            on,
            ..Default::default()
        }
    }

    /// The operation is in the approved plan: the step that names it.
    pub(super) fn covers(&self, op: &Operation) -> Option<usize> {
        self.approved.as_ref()?.scope.covers(op)
    }

    /// Why an operation outside the approved plan is asked, when a plan is approved.
    pub(super) fn unplanned(&self, op: &Operation) -> Option<String> {
        let approved = self.approved.as_ref()?;
        let at = self
            .latest
            .iter()
            .position(|s| s.status == "in_progress")
            .or_else(|| self.latest.iter().position(|s| s.status == "pending"))
            .filter(|i| *i < approved.steps.len())
            .unwrap_or(0);
        let step = approved.steps.get(at).map_or("", String::as_str);
        Some(format!(
            "Not in the approved plan: no step of it names this.\nThe plan's current \
             step {}: {step}\nOperation: {}",
            at + 1,
            op.describe()
        ))
    }

    fn steps_of(steps: &[PlanStep]) -> Vec<String> {
        steps.iter().map(|s| s.content.clone()).collect()
    }
}

impl Machine {
    /// The agent sent its plan (all of it).
    pub(super) fn plan_sent(&mut self, fx: &mut Effects, steps: Vec<PlanStep>) {
        fx.push(Effect::Append(
            Line::new(EntryKind::Plan).text(plan::render(&steps)),
        ));
        let contents = Planning::steps_of(&steps);
        self.plan.latest = steps;
        let in_turn = matches!(self.phase, Phase::Turn(_));
        if !self.plan.on || !in_turn || contents.is_empty() || self.stop.is_some() {
            return;
        }
        let known = |s: &Vec<String>| *s == contents;
        if self.plan.approved.as_ref().is_some_and(|a| known(&a.steps))
            || self.plan.review.as_ref().is_some_and(|r| known(&r.steps))
        {
            return;
        }
        self.plan.approved = None;
        self.withdraw_plan(fx, PLAN_CHANGED);
        fx.push(Effect::AskPlan {
            title: format!("Review the plan ({} steps)", contents.len()),
            body: format!(
                "{}\n\nApprove it, reject it, or comment on steps: `2: use the view`.",
                plan::numbered(&contents)
            ),
            steps: contents.len(),
        });
        self.plan.review = Some(Review {
            steps: contents,
            message: None,
        });
    }

    /// The inbox's id for the plan's review, or why it could not be asked: then the
    /// agent goes on as without review, and the transcript says why.
    pub(super) fn plan_asked(&mut self, fx: &mut Effects, result: Result<String, LedgerError>) {
        match (result, self.plan.review.as_mut()) {
            (Ok(id), Some(review)) if review.message.is_none() => {
                review.message = Some(id.clone());
                self.blocking.insert(id);
                self.settle(fx);
            }
            // Superseded before it was in the inbox.
            (Ok(id), _) => fx.push(Effect::Withdraw {
                message_id: id,
                note: wording::withdrawn(PLAN_CHANGED),
            }),
            (Err(e), _) => {
                self.plan.review = None;
                let why = format!("cannot ask for the plan's review: {e}");
                fx.push(Effect::Append(Line::new(EntryKind::Error).text(why)));
                self.release_held(fx);
            }
        }
    }

    /// Holds a request for the gate while a plan waits for review: whether it did.
    pub(super) fn hold_for_plan(&mut self, request: &GateRequest) -> bool {
        let holds = matches!(
            request,
            GateRequest::Operation { .. } | GateRequest::Permission { .. }
        );
        if holds && self.plan.review.is_some() {
            self.plan.held.push(request.clone());
            return true;
        }
        false
    }

    /// An answer to one of this session's messages, if it is the plan's review: carried
    /// out, and true.
    pub(super) fn plan_answered(
        &mut self,
        fx: &mut Effects,
        id: &str,
        response: Option<&str>,
        by: Option<&str>,
    ) -> bool {
        let asked = |r: &mut Review| r.message.as_deref() == Some(id);
        let Some(review) = self.plan.review.take_if(asked) else {
            return false;
        };
        let by = by.unwrap_or("human (inbox)").to_string();
        let response = response.unwrap_or_default();
        let comments = plan_comments(response, review.steps.len());
        let (status, answer) = match (response, comments) {
            (APPROVE, _) => {
                self.approve_plan(fx, review.steps);
                ("approved".to_string(), "plan approved".to_string())
            }
            (REJECT, _) => {
                self.refuse_held(fx, REJECTED);
                self.end_turn_for_plan(fx);
                ("rejected".to_string(), "plan rejected".to_string())
            }
            (_, Some(comments)) => {
                self.refuse_held(fx, REVISED);
                let prompt = comments_prompt(&review.steps, &comments);
                self.plan_prompt(fx, prompt);
                let steps: Vec<String> = comments.iter().map(|(n, _)| n.to_string()).collect();
                let status = format!("comments on steps {}", steps.join(", "));
                (status.clone(), format!("plan: {status}"))
            }
            // Withdrawn, or cancelled with its turn.
            _ => {
                self.refuse_held(fx, wording::WITHDRAWN);
                (wording::WITHDRAWN.to_string(), "none".to_string())
            }
        };
        let line = Line::new(EntryKind::Plan).text("plan review");
        fx.push(Effect::Append(line.status(format!("{status} by {by}"))));
        fx.push(Effect::Audit(AuditEvent::PermissionAnswered { answer, by }));
        self.settle(fx);
        true
    }

    fn approve_plan(&mut self, fx: &mut Effects, steps: Vec<String>) {
        let scope = PlanScope::new(&steps);
        let allowances = scope.allowances();
        let text = if allowances.is_empty() {
            "the approved plan names no command or file: what the agent asks is asked".into()
        } else {
            format!("the approved plan allows:\n{}", allowances.join("\n"))
        };
        fx.push(Effect::Append(Line::new(EntryKind::Permission).text(text)));
        self.plan.approved = Some(Approved { steps, scope });
        if matches!(self.phase, Phase::Turn(_)) {
            self.release_held(fx);
        } else {
            self.plan_prompt(fx, GO_ON.to_string());
        }
    }

    /// A prompt the review sends the agent: now when it is idle, else after the turn.
    fn plan_prompt(&mut self, fx: &mut Effects, prompt: String) {
        self.end_turn_for_plan(fx);
        self.queue.push_front(prompt);
        if !(self.phase == Phase::Idle && self.next_turn(fx)) {
            self.keep_prompts(fx);
        }
    }

    /// Asks the running turn, if any, to end.
    fn end_turn_for_plan(&mut self, fx: &mut Effects) {
        if matches!(self.phase, Phase::Turn(_)) {
            fx.push(Effect::CancelTurn);
        }
    }

    /// What waited for the review goes through the gate again.
    fn release_held(&mut self, fx: &mut Effects) {
        for request in std::mem::take(&mut self.plan.held) {
            self.gate(fx, request);
        }
    }

    /// What waited for the review is refused: the agent is told why.
    fn refuse_held(&mut self, fx: &mut Effects, why: &str) {
        for request in std::mem::take(&mut self.plan.held) {
            let (key, reply) = match request {
                GateRequest::Operation { key, .. } => (key, GateReply::Refuse(why.to_string())),
                GateRequest::Permission { key, .. } => (key, GateReply::Choose(None)),
                _ => continue,
            };
            fx.push(Effect::ReplyGate { key, reply });
        }
    }

    /// Closes the plan's review (the turn was cancelled, the session stops, another plan
    /// came): what waited for it is refused.
    pub(super) fn withdraw_plan(&mut self, fx: &mut Effects, why: &str) {
        if let Some(review) = self.plan.review.take()
            && let Some(message_id) = review.message
        {
            self.blocking.remove(&message_id);
            fx.push(Effect::Withdraw {
                message_id,
                note: wording::withdrawn(why),
            });
        }
        self.refuse_held(fx, why);
    }

    /// A turn ended: the plan approved for it is spent, and nothing waits on the gate.
    pub(super) fn plan_turn_ended(&mut self, fx: &mut Effects) {
        self.plan.approved = None;
        self.refuse_held(fx, HELD);
    }
}

/// The prompt that carries a person's comments on the plan's steps back to the agent.
fn comments_prompt(steps: &[String], comments: &[(usize, String)]) -> String {
    let mut text = String::from(
        "Comments on your plan, before you act on it. Revise the plan and send it again:\n",
    );
    for (n, comment) in comments {
        let step = steps.get(n - 1).map_or("", String::as_str);
        text.push_str(&format!("- Step {n} ({step}): {comment}\n"));
    }
    text
}

/// The review's options and their ACP kinds.
pub(in crate::sessions) fn review_options() -> (Vec<String>, Vec<String>) {
    (
        vec![APPROVE.into(), REJECT.into()],
        vec!["allow_once".into(), "reject_once".into()],
    )
}
