//! Usage and rate limits in the session machine: a turn that fails on one parks the
//! session (no retry meanwhile) until the limit resets, then the prompt that hit it is
//! sent again; prompts that come meanwhile wait behind it. A limit the agent announces
//! ahead parks the session once its turn is over, before the next turn can fail on it:
//! the task moves along the fallback chain as soon as there is a next turn to run.

use super::*;

impl Machine {
    pub(super) fn turn_limited(
        &mut self,
        fx: &mut Effects,
        why: String,
        wait: std::time::Duration,
        resumes: &str,
    ) {
        if !matches!(self.phase, Phase::Turn(_)) {
            return;
        }
        let Phase::Turn(turn) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        // The prompt is sent again: what the turn could not store is moot.
        self.failure = None;
        self.cut_by_budget = false;
        self.queue.push_front(turn.prompt);
        self.note_prompts(fx);
        self.after_turn(fx);
        self.withdraw_approvals(fx, wording::TURN_FAILED);
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&why)));
        self.limited = true;
        self.set_state(fx, SessionState::Parked, Some(wording::limited(resumes)));
        fx.push(Effect::Post(wording::limit_notice(&why, resumes)));
        fx.push(Effect::WakeAfter(wait));
    }

    /// The agent announced a limit reached, resetting in `wait`: parked now when no turn
    /// runs (a running turn's end brings the announcement again).
    pub(super) fn limit_ahead(
        &mut self,
        fx: &mut Effects,
        why: String,
        wait: std::time::Duration,
        resumes: &str,
    ) {
        if self.limited || wait.is_zero() || self.stop.is_some() || self.phase != Phase::Idle {
            return;
        }
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&why)));
        self.limited = true;
        self.set_state(fx, SessionState::Parked, Some(wording::limited(resumes)));
        fx.push(Effect::Post(wording::limit_ahead_notice(&why, resumes)));
        fx.push(Effect::WakeAfter(wait));
        // A prompt waiting is the next turn: it goes to the fallback now, or with the
        // first prompt that comes.
        self.fall_back_ahead = true;
        self.fall_back_if_waiting(fx);
    }

    /// Parked on an announced limit with a prompt to run: the fallback chain takes it.
    pub(super) fn fall_back_if_waiting(&mut self, fx: &mut Effects) {
        if self.fall_back_ahead && !self.queue.is_empty() {
            self.fall_back_ahead = false;
            fx.push(Effect::FallBack);
        }
    }

    pub(super) fn limit_reset(&mut self, fx: &mut Effects) {
        if !self.limited || self.stop.is_some() || self.phase != Phase::Idle {
            return;
        }
        self.limited = false;
        self.fall_back_ahead = false;
        if !self.next_turn(fx) {
            self.set_state(
                fx,
                SessionState::Complete,
                Some(wording::LIMIT_RESET.into()),
            );
        }
    }
}
