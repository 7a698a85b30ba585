//! Usage and rate limits in the session machine: a turn that fails on one parks the
//! session (no retry meanwhile) until the limit resets, then the prompt that hit it is
//! sent again; prompts that come meanwhile wait behind it.

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

    pub(super) fn limit_reset(&mut self, fx: &mut Effects) {
        if !self.limited || self.stop.is_some() || self.phase != Phase::Idle {
            return;
        }
        self.limited = false;
        if !self.next_turn(fx) {
            self.set_state(
                fx,
                SessionState::Complete,
                Some(wording::LIMIT_RESET.into()),
            );
        }
    }
}
