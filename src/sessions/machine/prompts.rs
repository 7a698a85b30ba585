//! Prompts in the session machine: a prompt starts a turn or waits in the queue; every
//! prompt acknowledged and not yet sent, and the running turn's, are on the session
//! record before anyone is told, so a restart loses none. A turn that never ended (the
//! daemon stopped, the agent ended in its middle) leaves the session `interrupted`, its
//! prompt ready to be sent again on request; prompts queued behind it wait for that word,
//! or for a new prompt.

use super::*;

impl Machine {
    pub(super) fn prompt(&mut self, fx: &mut Effects, text: String) {
        if self.stop.is_some() || self.phase == Phase::Ended {
            fx.push(Effect::Reply(Reply::NotRunning));
            return;
        }
        // A new prompt after a turn was cut short: the person moved on from that turn,
        // and what waited behind it goes first.
        let moved_on = self.cut.take().is_some();
        if self.phase == Phase::Idle
            && self.over.is_none()
            && !self.limited
            && self.queue.is_empty()
        {
            self.start_turn(fx, text);
            fx.push(Effect::Reply(Reply::Started));
        } else {
            self.queue.push_back(text);
            // Acknowledged only once kept: a restart runs it.
            self.keep_prompts(fx);
            fx.push(Effect::Reply(Reply::Queued));
            if moved_on && self.phase == Phase::Idle {
                self.next_turn(fx);
            } else {
                self.ask_budget(fx);
            }
            self.fall_back_if_waiting(fx);
        }
    }

    pub(super) fn start_turn(&mut self, fx: &mut Effects, text: String) {
        fx.push(Effect::Append(Line::new(EntryKind::Prompt).text(&text)));
        self.unsaid.clear();
        self.phase = Phase::Turn(Turn {
            prompt: text.clone(),
            reply: String::new(),
        });
        // Kept before the agent has it: a turn cut short can be sent again.
        self.keep_prompts(fx);
        let renew = self.kind == AgentKind::Acp;
        fx.push(Effect::Prompt { text, renew });
        self.settle(fx);
    }

    /// Starts the next prompt in the queue, unless a budget is reached: whether it did.
    pub(super) fn next_turn(&mut self, fx: &mut Effects) -> bool {
        if self.limited || self.cut.is_some() {
            return false;
        }
        if self.over.is_some() {
            if !self.queue.is_empty() {
                self.ask_budget(fx);
            }
            return false;
        }
        match self.queue.pop_front() {
            Some(next) => {
                self.start_turn(fx, next);
                true
            }
            None => false,
        }
    }

    /// The record's prompts as they are now (saved with the record's next save).
    pub(super) fn note_prompts(&self, fx: &mut Effects) {
        let turn = match &self.phase {
            Phase::Turn(turn) => Some(turn.prompt.clone()),
            _ => self.cut.clone(),
        };
        fx.push(Effect::Record(RecordChange::Prompts {
            queued: self.queue.iter().cloned().collect(),
            turn,
        }));
    }

    /// The record's prompts as they are now, saved.
    pub(super) fn keep_prompts(&self, fx: &mut Effects) {
        self.note_prompts(fx);
        fx.push(Effect::Save);
    }

    /// The agent is ready again after a turn was cut short: the session says so and waits
    /// for a person to send it again (or a new prompt).
    pub(super) fn ready_after_cut(&mut self, fx: &mut Effects) {
        let how = match self.resumed_from {
            Some(SessionState::Stopped) => wording::Cut::Restarted,
            Some(SessionState::Parked) => wording::Cut::Unparked,
            _ => wording::Cut::DaemonStopped,
        };
        let (reason, notice) = wording::interrupted(how, self.queue.len());
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&reason)));
        self.set_state(fx, SessionState::Interrupted, Some(reason));
        fx.push(Effect::Post(notice));
    }

    /// The agent ended in the middle of a turn: the turn is cut short, and sent again
    /// (with a new agent) on request.
    pub(super) fn cut_by_exit(&mut self, fx: &mut Effects, status: &str, prompt: String) {
        self.cut = Some(prompt);
        self.note_prompts(fx);
        let (reason, notice) = wording::agent_ended(status, true);
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&reason)));
        self.set_state(fx, SessionState::Interrupted, Some(reason));
        fx.push(Effect::Post(notice));
    }

    /// Sends the turn that was cut short again, ahead of what waited behind it.
    pub(super) fn resend(&mut self, fx: &mut Effects) {
        if self.stop.is_some() || self.phase == Phase::Ended {
            fx.push(Effect::Reply(Reply::NotRunning));
            return;
        }
        let Some(prompt) = self.cut.take() else {
            fx.push(Effect::Reply(Reply::NothingCut));
            return;
        };
        self.queue.push_front(prompt);
        let started = self.phase == Phase::Idle && self.next_turn(fx);
        if !started {
            self.keep_prompts(fx);
        }
        fx.push(Effect::Reply(if started {
            Reply::Started
        } else {
            Reply::Queued
        }));
    }
}
