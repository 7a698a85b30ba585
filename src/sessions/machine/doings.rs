//! What the agent did, in the session machine: each of its events to the machine's part
//! for it; its tool calls and their results (onto the context stack, into the transcript
//! and the audit log), the files it touched, and the skills and usage it tells, kept on
//! the session record.

use super::*;

impl Machine {
    /// What the agent did, as it tells it.
    pub(super) fn agent(&mut self, fx: &mut Effects, event: AgentEvent) {
        match event {
            AgentEvent::Ready {
                acp_session_id,
                resumed,
                agent_name: _,
            } => self.ready(fx, acp_session_id, resumed),
            AgentEvent::Chunk {
                kind,
                text,
                message_id,
            } => fx.push(Effect::Stream {
                kind,
                text,
                message_id,
            }),
            // The actor has put the operation through the gate already.
            AgentEvent::ToolCall {
                id, title, status, ..
            } => self.tool_call(fx, id, title, status),
            AgentEvent::ToolUpdate { id, title, status } => self.tool_update(fx, id, title, status),
            AgentEvent::Plan(steps) => self.plan_sent(fx, steps),
            AgentEvent::Skills(skills) => self.skills(fx, skills),
            AgentEvent::File { op, path, refused } => file(fx, op, path, refused),
            AgentEvent::TurnEnded(ended) => self.turn_ended(fx, ended),
            AgentEvent::StartFailed(why) => self.start_failed(fx, why),
            AgentEvent::SessionRenewed { acp_session_id } => {
                fx.push(Effect::Record(RecordChange::AcpSession(acp_session_id)));
                fx.push(Effect::Save);
                fx.push(Effect::ClearFreshStart);
            }
            AgentEvent::Process(pid) => {
                let pid = pid.unwrap_or(self.agent_pid);
                fx.push(Effect::Record(RecordChange::AgentPid(pid)));
                fx.push(Effect::Save);
            }
            AgentEvent::Exited { status, code } => self.exited(fx, &status, code),
            // The actor turns these into inputs of their own: it keeps the reply channels
            // of requests for the gate ([`SessionInput::Gate`]), and dates what is spent
            // ([`SessionInput::Usage`], [`SessionInput::TurnTokens`]). Dropping a reply
            // here refuses the request.
            AgentEvent::Permission { .. }
            | AgentEvent::Gate { .. }
            | AgentEvent::Usage(_)
            | AgentEvent::LimitAhead { .. }
            | AgentEvent::TurnTokens(_) => {}
        }
    }

    pub(super) fn tool_call(
        &mut self,
        fx: &mut Effects,
        id: String,
        title: String,
        status: String,
    ) {
        fx.push(Effect::Audit(AuditEvent::ToolCall {
            tool: title.clone(),
            status: Some(status.clone()),
        }));
        if !self.feeds_itself() && !self.tool_titles.contains_key(&id) {
            self.push_said(fx);
            self.tool_titles.insert(id.clone(), title.clone());
            fx.push(Effect::Push(Message::ToolCall {
                call_id: id.clone(),
                tool: title.clone(),
                arguments: String::new(),
            }));
        }
        let line = Line::new(EntryKind::ToolCall).text(title).tool(id);
        fx.push(Effect::Append(line.status(status)));
    }

    pub(super) fn tool_update(
        &mut self,
        fx: &mut Effects,
        id: String,
        title: Option<String>,
        status: Option<String>,
    ) {
        let finished = matches!(status.as_deref(), Some("completed" | "failed"));
        if !self.feeds_itself()
            && finished
            && let Some(tool) = self.tool_titles.get(&id).cloned()
            && self.tool_results.insert(id.clone())
        {
            let ok = status.as_deref() == Some("completed");
            let text = title
                .clone()
                .unwrap_or_else(|| if ok { "completed" } else { "failed" }.to_string());
            fx.push(Effect::Push(Message::ToolResult {
                call_id: id.clone(),
                tool,
                ok,
                text,
            }));
        }
        fx.push(Effect::Append(Line {
            kind: EntryKind::ToolUpdate,
            text: title,
            tool_call_id: Some(id),
            status,
        }));
    }

    /// The agent's skills as it tells them now: recorded when they changed.
    pub(super) fn skills(&mut self, fx: &mut Effects, skills: Vec<String>) {
        if self.skills != skills {
            self.skills = skills.clone();
            fx.push(Effect::Record(RecordChange::Skills(skills)));
            fx.push(Effect::Save);
        }
    }

    /// The agent's context window use and cost: recorded when it changed; the increase
    /// of its cost is spent.
    pub(super) fn usage(&mut self, fx: &mut Effects, usage: Usage, day: &str) {
        if self.usage.as_ref() != Some(&usage) {
            let charge = crate::sessions::budget::add_reported(&mut self.spent, day, &usage);
            self.usage = Some(usage.clone());
            fx.push(Effect::Record(RecordChange::Usage(usage)));
            self.spend(fx, charge, day);
            fx.push(Effect::Save);
        }
    }
}

/// A file the agent read or wrote (or was refused): the audit log and the transcript.
pub(super) fn file(fx: &mut Effects, op: &'static str, path: String, refused: Option<String>) {
    fx.push(Effect::Audit(file_audit(op, &path, &refused)));
    let (text, status) = match refused {
        None => (path, op.to_string()),
        Some(why) => (why, format!("{op} refused")),
    };
    fx.push(Effect::Append(
        Line::new(EntryKind::File).text(text).status(status),
    ));
}

/// What a file operation of the agent adds to the audit log.
fn file_audit(op: &str, path: &str, refused: &Option<String>) -> AuditEvent {
    let (path, allowed, reason) = (path.to_string(), refused.is_none(), refused.clone());
    if op == "write" {
        AuditEvent::FileWrite {
            path,
            allowed,
            reason,
        }
    } else {
        AuditEvent::FileRead {
            path,
            allowed,
            reason,
        }
    }
}
