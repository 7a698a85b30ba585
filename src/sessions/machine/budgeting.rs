//! Budgets in the session machine: what the session spent is counted, and while it is
//! over a budget no turn starts. A turn running when the budget is reached is asked to
//! end (the agent ends it at its next stop point); a prompt that comes meanwhile waits
//! in the queue, and the inbox asks once whether to raise the budget or stop. The
//! keeper's next verdict says when it may go on: the queue runs, or a turn cut short goes
//! on where it stopped.

use super::*;
use crate::agent::TurnTokens;
use crate::ledger::LedgerError;
use crate::sessions::budget::{self, Charge, STOP, Scope};

impl Machine {
    /// What the agent's report added: on the record, and counted with the keeper.
    pub(super) fn spend(&mut self, fx: &mut Effects, charge: Charge, day: &str) {
        if charge == Charge::default() {
            return;
        }
        fx.push(Effect::Record(RecordChange::Spent(self.spent.clone())));
        fx.push(Effect::Spend {
            charge,
            day: day.to_string(),
        });
    }

    pub(super) fn turn_tokens(&mut self, fx: &mut Effects, tokens: TurnTokens, day: String) {
        let charge = budget::add_tokens(&mut self.spent, &day, tokens, self.price);
        self.spend(fx, charge, &day);
    }

    /// The keeper's verdict.
    pub(super) fn budget(&mut self, fx: &mut Effects, over: Option<Over>) {
        if self.over == over {
            return;
        }
        let was = std::mem::replace(&mut self.over, over);
        let Some(over) = self.over.clone() else {
            self.budget_raised(fx);
            return;
        };
        if matches!(self.phase, Phase::Turn(_)) && !self.cut_by_budget && self.stop.is_none() {
            self.cut_by_budget = true;
            fx.push(Effect::CancelTurn);
            let line = Line::new(EntryKind::Error).text(over.title());
            fx.push(Effect::Append(line.status("the turn is asked to end")));
        }
        let same_budget = was.is_some_and(|w| w.scope == over.scope);
        if !same_budget {
            // A question about another budget no longer says what to raise.
            self.withdraw_budget_question(fx, wording::BUDGET_OTHER);
        }
        if self.cut_by_budget || !self.queue.is_empty() {
            self.ask_budget(fx);
        }
    }

    /// No budget is reached any more: what waited goes on.
    fn budget_raised(&mut self, fx: &mut Effects) {
        self.withdraw_budget_question(fx, wording::BUDGET_RAISED);
        let cut = std::mem::take(&mut self.cut_by_budget);
        if self.phase != Phase::Idle || self.stop.is_some() {
            return;
        }
        if !self.next_turn(fx) && cut {
            self.start_turn(fx, wording::BUDGET_RAISED_GO_ON.to_string());
        }
    }

    /// Asks whether to raise the budget reached or stop, unless it is asked already.
    pub(super) fn ask_budget(&mut self, fx: &mut Effects) {
        let Some(over) = &self.over else {
            return;
        };
        if self.budget_question.is_some() {
            return;
        }
        self.budget_question = Some(None);
        fx.push(Effect::AskBudget {
            title: over.title(),
            body: over.body(),
            options: vec![over.raise_option(), STOP.to_string()],
        });
    }

    pub(super) fn budget_asked(&mut self, fx: &mut Effects, result: Result<String, LedgerError>) {
        match result {
            Ok(id) if self.over.is_some() && self.budget_question == Some(None) => {
                self.blocking.insert(id.clone());
                self.budget_question = Some(Some(id));
            }
            // Raised before the question was in the inbox.
            Ok(id) => fx.push(Effect::Withdraw {
                message_id: id,
                note: wording::withdrawn(wording::BUDGET_RAISED),
            }),
            Err(e) => {
                self.budget_question = None;
                let why = format!("cannot ask whether to raise the budget: {e}");
                fx.push(Effect::Append(Line::new(EntryKind::Error).text(why)));
            }
        }
    }

    pub(super) fn withdraw_budget_question(&mut self, fx: &mut Effects, why: &str) {
        if let Some(Some(id)) = self.budget_question.take() {
            self.blocking.remove(&id);
            fx.push(Effect::Withdraw {
                message_id: id,
                note: wording::withdrawn(why),
            });
        }
    }

    /// Whether `id` is the budget's question; if so, its answer is carried out.
    pub(super) fn budget_answered(
        &mut self,
        fx: &mut Effects,
        id: &str,
        response: Option<&str>,
    ) -> bool {
        if self.budget_question.as_ref().and_then(Option::as_deref) != Some(id) {
            return false;
        }
        self.budget_question = None;
        let Some(over) = self.over.clone() else {
            return true;
        };
        match response {
            Some(answer) if answer == over.raise_option() => {
                if over.scope == Scope::Session {
                    self.spent.raised_cost += over.raise.cost;
                    self.spent.raised_tokens =
                        self.spent.raised_tokens.saturating_add(over.raise.tokens);
                    fx.push(Effect::Record(RecordChange::Spent(self.spent.clone())));
                    fx.push(Effect::Save);
                }
                fx.push(Effect::Audit(AuditEvent::BudgetRaised {
                    budget: over.what.clone(),
                    by: over.raise_option(),
                }));
                // The keeper's next verdict lets the session go on.
                fx.push(Effect::RaiseBudget {
                    scope: over.scope,
                    raise: over.raise,
                });
            }
            Some(STOP) => self.stop(fx, false),
            // Withdrawn: the budget stays reached; the next prompt asks again.
            _ => {}
        }
        true
    }
}
