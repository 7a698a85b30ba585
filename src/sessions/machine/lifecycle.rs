//! The agent's life in the session machine: its start (or its resumption after a
//! restart), its being ready, a start that fails, a stop or park asked for, and what its
//! exit means for the session.

use super::*;

impl Machine {
    /// The agent started: its pid on the record, `starting` (saying why, when resumed),
    /// the context stack opened, and what is open in the inbox read.
    pub(super) fn start(&mut self, fx: &mut Effects) {
        fx.push(Effect::Record(RecordChange::AgentPid(self.agent_pid)));
        self.note_prompts(fx);
        let reason = self.resumed_from.map(|from| match from {
            SessionState::Parked => wording::UNPARKING.to_string(),
            SessionState::Stopped => wording::RESTARTING.to_string(),
            _ => wording::RESUMING.to_string(),
        });
        self.set_state(fx, SessionState::Starting, reason);
        fx.push(Effect::OpenContext);
        if self
            .resumed_from
            .is_some_and(|from| !matches!(from, SessionState::Parked | SessionState::Stopped))
        {
            // Resumed after a daemon restart: the process that asked the open
            // questions is gone, so no answer to them can reach it.
            fx.push(Effect::WithdrawOpen {
                note: wording::withdrawn(wording::ASKER_GONE),
            });
        }
        fx.push(Effect::ReadOpen);
    }

    pub(super) fn ready(&mut self, fx: &mut Effects, acp_session_id: String, resumed: bool) {
        if self.phase != Phase::Starting {
            return;
        }
        self.phase = Phase::Idle;
        fx.push(Effect::Record(RecordChange::AcpSession(acp_session_id)));
        let remade = matches!(
            self.resumed_from,
            Some(SessionState::Parked | SessionState::Stopped)
        );
        if remade && !resumed && self.kind == AgentKind::Acp {
            fx.push(Effect::SeedFresh);
        }
        if self.cut.is_some() {
            self.ready_after_cut(fx);
            return;
        }
        if let Some(from @ (SessionState::Parked | SessionState::Stopped)) = self.resumed_from {
            // Made again on purpose (for the prompt waiting in the queue, or restarted by
            // the human): no news for the inbox.
            let why = if from == SessionState::Parked {
                wording::UNPARKED
            } else {
                wording::RESTARTED
            };
            self.set_state(fx, SessionState::Complete, Some(why.into()));
            self.next_turn(fx);
            return;
        }
        if resumed {
            let interrupted = self.resumed_from.is_some_and(SessionState::is_busy);
            let (reason, notice) = wording::resumed(interrupted);
            self.set_state(fx, SessionState::Complete, Some(reason));
            fx.push(Effect::Post(notice));
        }
        if !self.next_turn(fx) && !resumed {
            self.set_state(fx, SessionState::Complete, Some(wording::READY.into()));
        }
    }

    pub(super) fn stop(&mut self, fx: &mut Effects, shutdown: bool) {
        if self.stop.is_some() {
            return;
        }
        self.stop = Some(if shutdown {
            Stop::Shutdown
        } else {
            Stop::Requested
        });
        fx.push(Effect::StopAgent);
    }

    /// Idle too long: only an idle session with nothing open is parked.
    pub(super) fn park(&mut self, fx: &mut Effects) {
        if self.phase == Phase::Idle && self.blocking.is_empty() && self.stop.is_none() {
            self.stop = Some(Stop::Park);
            fx.push(Effect::StopAgent);
        }
    }

    pub(super) fn start_failed(&mut self, fx: &mut Effects, why: String) {
        // Past its start, or stopping on request: the exit says how it ended.
        if self.phase != Phase::Starting || self.stop.is_some() {
            return;
        }
        self.phase = Phase::StartFailed;
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&why)));
        if self.resumed_from.is_some() {
            let (reason, notice) = wording::lost(&why);
            self.set_state(fx, SessionState::Stopped, Some(reason));
            fx.push(Effect::Post(notice));
        } else {
            self.set_state(fx, SessionState::Error, Some(why.clone()));
            fx.push(Effect::Post(wording::start_failed(&why)));
        }
        fx.push(Effect::StopAgent);
    }

    pub(super) fn exited(&mut self, fx: &mut Effects, status: &str, code: Option<i32>) {
        let was = std::mem::replace(&mut self.phase, Phase::Ended);
        if was == Phase::Ended {
            return;
        }
        fx.push(Effect::RevokeHandles);
        let why = match self.stop {
            Some(Stop::Shutdown) => wording::SHUTTING_DOWN,
            Some(Stop::Requested) => wording::STOPPED,
            Some(Stop::Park) => wording::PARKED,
            Some(Stop::Terminated) => wording::TERMINATED,
            None => wording::AGENT_EXITED,
        };
        self.withdraw_approvals(fx, why);
        if self.stop == Some(Stop::Shutdown) {
            // Left as it is, with its agent pid: the next daemon resumes it honestly.
            fx.push(Effect::Finish);
            return;
        }
        // Questions the agent asked itself (`cru ask`) can no longer be answered.
        fx.push(Effect::WithdrawOpen {
            note: wording::withdrawn(why),
        });
        self.blocking.clear();
        fx.push(Effect::Record(RecordChange::Ended { exit_code: code }));
        if self.stop == Some(Stop::Requested) {
            self.set_state(fx, SessionState::Stopped, Some(wording::stopped(status)));
        } else if self.stop == Some(Stop::Terminated) {
            let reason = self
                .terminated
                .clone()
                .unwrap_or_else(|| wording::TERMINATED.into());
            self.set_state(fx, SessionState::Stopped, Some(reason));
        } else if self.stop == Some(Stop::Park) {
            self.set_state(fx, SessionState::Parked, Some(wording::PARKED.into()));
        } else if was == Phase::StartFailed {
            // The failure was reported already.
            fx.push(Effect::Save);
        } else {
            let cut = match was {
                Phase::Turn(turn) => Some(turn.prompt),
                _ => self.cut.take(),
            };
            match cut {
                Some(prompt) => self.cut_by_exit(fx, status, prompt),
                None => {
                    let (reason, notice) = wording::agent_ended(status, false);
                    fx.push(Effect::Append(Line::new(EntryKind::Error).text(&reason)));
                    self.set_state(fx, SessionState::Error, Some(reason));
                    fx.push(Effect::Post(notice));
                }
            }
        }
        fx.push(Effect::Finish);
    }
}
