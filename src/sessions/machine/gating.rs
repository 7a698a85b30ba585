//! The approval gate inside the session machine. What an agent asks for, or what
//! crucible runs or serves for it, is judged by the kiln's rules ([`super::super::gate`],
//! through [`Effect::Judge`]); the judgement comes back as [`SessionInput::Judged`] and
//! is decided here: the request proceeds, is refused, or is asked of the human with the
//! rule's reason, and a read outside the manifest ends the session. Here too: what
//! answering an approval grants and remembers, and the credentials an agent asks for.

use super::*;
use crate::agent::OptionKind;
use crate::rules::{Operation, OperationKind};
use crate::sessions::guard::gate::Judgement;
use crate::sessions::wording::Notice;

/// The id of the option that approves an approval crucible asks for itself.
const ALLOW: &str = "allow";

/// The rule named on a credential's approval.
const CREDENTIAL_RULE: &str = "credential";

/// What the rules are asked to judge, with the key of whoever waits for the answer.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::sessions) enum GateRequest {
    /// An operation crucible runs or serves for the agent (a file, a terminal command,
    /// a tool of its own agent): it proceeds or is refused.
    Operation { key: Key, operation: Operation },
    /// The agent asks for permission, offering these options.
    Permission {
        key: Key,
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        operation: Operation,
    },
    /// The agent asks for approval itself (`cru approve`): the rules' word, if any.
    Approval { key: Key, title: String },
    /// The agent ran it by itself: rules activate on it, and one that would ask or
    /// refuse flags it in the inbox.
    Ran(Operation),
}

impl GateRequest {
    /// The operation the rules judge.
    pub fn operation(&self) -> Operation {
        match self {
            Self::Operation { operation, .. }
            | Self::Permission { operation, .. }
            | Self::Ran(operation) => operation.clone(),
            Self::Approval { title, .. } => other(title.clone()),
        }
    }
}

/// The answer for whoever waits on a gated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sessions) enum GateReply {
    /// The operation runs.
    Proceed,
    /// It does not (or the credential is not given): why, for the agent.
    Refuse(String),
    /// The agent's permission request: the option chosen, or none (refused).
    Choose(Option<String>),
    /// The rules' word on an approval the agent asks for itself (`None`: the human's).
    Verdict(Option<bool>),
    /// The credential asked for is not given.
    Withheld,
}

/// Who waits on an approval, which decides what its answer does.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Waiter {
    /// The agent, for one of its own options.
    Agent,
    /// An operation a rule asked about: it proceeds on an option that allows.
    Operation { rule: String },
    /// The agent, for a credential: given on an option that allows, for the rest of the
    /// session.
    Credential { name: String },
}

/// What an approval's answer decides besides the option chosen.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Gated {
    pub operation: Operation,
    /// The options that approve the operation for the rest of the session: the agent's
    /// "always" options, and any approving option of a question crucible asks.
    pub remembered: Vec<String>,
    pub waiter: Waiter,
}

impl Machine {
    /// A request for the gate: refused once crucible ended the session, else judged.
    pub(super) fn gate(&mut self, fx: &mut Effects, request: GateRequest) {
        // While the agent's plan waits for review, so does what it asks for.
        if self.terminated.is_none() && self.hold_for_plan(&request) {
            return;
        }
        if let GateRequest::Permission { title, .. } = &request {
            let (title, message_id) = (title.clone(), None);
            fx.push(Effect::Audit(AuditEvent::PermissionAsked {
                title,
                message_id,
            }));
        }
        match (&request, &self.terminated) {
            (GateRequest::Operation { key, .. }, Some(reason)) => {
                let reply = GateReply::Refuse(reason.clone());
                fx.push(Effect::ReplyGate { key: *key, reply });
            }
            (GateRequest::Permission { key, .. }, Some(_)) => {
                let reply = GateReply::Choose(None);
                fx.push(Effect::ReplyGate { key: *key, reply });
            }
            _ => fx.push(Effect::Judge(request)),
        }
    }

    /// The rules' judgement of a request; `changed`: the session's security state
    /// changed (a rule activated) and is saved.
    pub(super) fn judged(
        &mut self,
        fx: &mut Effects,
        request: GateRequest,
        judgement: Judgement,
        changed: bool,
    ) {
        if changed {
            fx.push(Effect::Save);
        }
        match request {
            GateRequest::Operation { key, operation } => {
                self.judged_operation(fx, key, operation, judgement)
            }
            GateRequest::Permission {
                key,
                title,
                tool_call_id,
                options,
                operation,
            } => {
                let asked = Asked {
                    key,
                    title,
                    tool_call_id,
                    options,
                    operation,
                };
                self.judged_permission(fx, asked, judgement)
            }
            GateRequest::Approval { key, title } => judged_approval(fx, key, &title, judgement),
            GateRequest::Ran(operation) => self.ran(fx, &operation, judgement),
        }
    }

    fn judged_operation(
        &mut self,
        fx: &mut Effects,
        key: Key,
        operation: Operation,
        judgement: Judgement,
    ) {
        let reply = match judgement {
            Judgement::Free | Judgement::Approved => GateReply::Proceed,
            Judgement::ContextMiss { path, reason } => {
                let reply = GateReply::Refuse(reason.clone());
                fx.push(Effect::ReplyGate { key, reply });
                self.context_miss(fx, path, reason);
                return;
            }
            Judgement::Allowed { rule } => {
                decided(fx, &operation.describe(), format!("allowed by rule {rule}"));
                GateReply::Proceed
            }
            Judgement::Denied { rule, reason } => {
                decided(fx, &operation.describe(), format!("denied by rule {rule}"));
                GateReply::Refuse(reason)
            }
            Judgement::Ask {
                rule,
                title,
                reason,
            } => {
                let asking = Asking {
                    title,
                    tool_call_id: String::new(),
                    reason: Some(reason),
                    flagged: None,
                };
                let waiter = Waiter::Operation { rule: rule.clone() };
                let asked = Asked {
                    key,
                    title: String::new(),
                    tool_call_id: String::new(),
                    options: allow_or_deny(),
                    operation,
                };
                self.ask(fx, asked, asking, Some(rule), waiter);
                return;
            }
        };
        fx.push(Effect::ReplyGate { key, reply });
    }

    fn judged_permission(&mut self, fx: &mut Effects, asked: Asked, judgement: Judgement) {
        let pick = |wanted: fn(OptionKind) -> bool| {
            let options = &asked.options;
            let chosen = options.iter().find(|o| wanted(o.kind));
            GateReply::Choose(chosen.map(|o| o.id.clone()))
        };
        let (key, title) = (asked.key, asked.title.clone());
        let reply = match judgement {
            Judgement::Allowed { rule } => {
                decided(fx, &title, format!("allowed by rule {rule}"));
                pick(OptionKind::allows)
            }
            Judgement::Approved => {
                let status = "allowed: approved before in this session".into();
                decided(fx, &title, status);
                pick(OptionKind::allows)
            }
            Judgement::Denied { rule, .. } => {
                decided(fx, &title, format!("denied by rule {rule}"));
                pick(OptionKind::rejects)
            }
            Judgement::ContextMiss { path, reason } => {
                fx.push(Effect::ReplyGate {
                    key,
                    reply: pick(OptionKind::rejects),
                });
                self.context_miss(fx, path, reason);
                return;
            }
            Judgement::Ask {
                rule,
                title: ruled,
                reason,
            } => {
                let asking = Asking {
                    title: ruled,
                    tool_call_id: asked.tool_call_id.clone(),
                    reason: Some(reason),
                    flagged: None,
                };
                self.ask(fx, asked, asking, Some(rule), Waiter::Agent);
                return;
            }
            Judgement::Free => {
                if let Some(step) = self.plan.covers(&asked.operation) {
                    decided(
                        fx,
                        &title,
                        format!("allowed: step {step} of the approved plan"),
                    );
                    let reply = pick(OptionKind::allows);
                    fx.push(Effect::ReplyGate { key, reply });
                    return;
                }
                let asking = Asking {
                    title,
                    tool_call_id: asked.tool_call_id.clone(),
                    reason: self.plan.unplanned(&asked.operation),
                    flagged: None,
                };
                self.ask(fx, asked, asking, None, Waiter::Agent);
                return;
            }
        };
        fx.push(Effect::ReplyGate { key, reply });
    }

    /// An approval in the inbox for a request; its answer goes to the waiter, and an
    /// approved operation is remembered (any approval of a rule's question; the
    /// agent's "always" options).
    fn ask(
        &mut self,
        fx: &mut Effects,
        asked: Asked,
        mut asking: Asking,
        rule: Option<String>,
        waiter: Waiter,
    ) {
        let from_rule = rule.is_some();
        let remembered = asked
            .options
            .iter()
            .filter(|o| o.kind == OptionKind::AllowAlways || (from_rule && o.kind.allows()))
            .map(|o| o.id.clone())
            .collect();
        asking.flagged = rule.map(|rule| Flagged {
            rule,
            operation: asked.operation.describe(),
        });
        let gated = Gated {
            operation: asked.operation,
            remembered,
            waiter,
        };
        self.permission(fx, asked.key, &asked.options, asking, gated);
    }

    /// The agent asks for a credential: given if approved before in the session, else
    /// asked of the human.
    pub(super) fn credential(&mut self, fx: &mut Effects, key: Key, name: String, approved: bool) {
        if approved {
            fx.push(Effect::Grant { key, name });
            return;
        }
        let asking = Asking {
            title: format!("Credential requested: {name}"),
            tool_call_id: String::new(),
            reason: Some(wording::credential_reason(&name)),
            flagged: None,
        };
        let asked = Asked {
            key,
            title: String::new(),
            tool_call_id: String::new(),
            options: allow_or_deny(),
            operation: other(format!("secret {name}")),
        };
        let rule = Some(CREDENTIAL_RULE.to_string());
        self.ask(fx, asked, asking, rule, Waiter::Credential { name });
    }

    /// A read outside the manifest ends the session; the refusal is in the transcript
    /// and the audit log, and the question of widening comes once it stopped.
    fn context_miss(&mut self, fx: &mut Effects, path: String, reason: String) {
        fx.push(Effect::Append(Line::new(EntryKind::Error).text(&reason)));
        fx.push(Effect::Audit(AuditEvent::FileRead {
            path,
            allowed: false,
            reason: Some(reason.clone()),
        }));
        // Nothing more goes through the gate, even when a stop was asked for already.
        self.terminated = Some(reason.clone());
        self.terminate(fx, reason);
    }

    /// Crucible ends the session, with the reason (unless it is stopping already).
    pub(super) fn terminate(&mut self, fx: &mut Effects, reason: String) {
        if self.stop.is_none() && self.phase != Phase::Ended {
            self.stop = Some(Stop::Terminated);
            self.terminated = Some(reason);
            fx.push(Effect::StopAgent);
        }
    }

    /// What the agent ran by itself: a rule that would ask or refuse flags it.
    fn ran(&mut self, fx: &mut Effects, operation: &Operation, judgement: Judgement) {
        let (msg_type, rule) = match judgement {
            // The agent read it by itself: it cannot be undone, the session ends.
            Judgement::ContextMiss { reason, .. } => return self.terminate(fx, reason),
            Judgement::Ask { rule, .. } => (MsgType::Info, rule),
            Judgement::Denied { rule, .. } => (MsgType::Error, rule),
            _ => return,
        };
        fx.push(Effect::Post(Notice {
            msg_type,
            title: format!("The agent ran, by itself, what rule {rule} covers"),
            body: Some(format!(
                "{}\nThe agent runs this tool itself, so crucible could not stop it.",
                operation.describe()
            )),
            stderr_tail: false,
        }));
    }
}

/// `/disable` (or enable again) of a rule for the session: recorded, and the security
/// state it leaves answered.
pub(super) fn set_rule(fx: &mut Effects, rule: String, enabled: bool) {
    fx.push(Effect::Record(RecordChange::Rule { rule, enabled }));
    fx.push(Effect::Save);
    fx.push(Effect::Reply(Reply::Security));
}

/// What a permission request asks, besides its options.
pub(super) struct Asking {
    pub title: String,
    pub tool_call_id: String,
    /// Why crucible asks (a rule's reason).
    pub reason: Option<String>,
    /// The rule that asked and the operation, when a rule asks.
    pub flagged: Option<Flagged>,
}

/// A request that may be asked in the inbox.
struct Asked {
    key: Key,
    title: String,
    tool_call_id: String,
    options: Vec<PermissionChoice>,
    operation: Operation,
}

/// The rules' word on an approval the agent asks for itself.
fn judged_approval(fx: &mut Effects, key: Key, title: &str, judgement: Judgement) {
    let (verdict, by) = match judgement {
        Judgement::Allowed { rule } => (Some(true), format!("allowed by rule {rule}")),
        Judgement::Approved => (Some(true), "approved before in this session".into()),
        Judgement::Denied { rule, .. } => (Some(false), format!("denied by rule {rule}")),
        _ => (None, String::new()),
    };
    if verdict.is_some() {
        fx.push(Effect::Audit(AuditEvent::PermissionAnswered {
            answer: format!("{title}: {by}"),
            by: "rules".into(),
        }));
    }
    let reply = GateReply::Verdict(verdict);
    fx.push(Effect::ReplyGate { key, reply });
}

/// A line in the transcript and the audit log for an operation a rule decided.
fn decided(fx: &mut Effects, what: &str, status: String) {
    let line = Line::new(EntryKind::Permission).text(what);
    fx.push(Effect::Append(line.status(status.clone())));
    fx.push(Effect::Audit(AuditEvent::PermissionAnswered {
        answer: status,
        by: "rules".into(),
    }));
}

/// An operation of kind `other` naming a tool.
fn other(tool: String) -> Operation {
    Operation {
        kind: OperationKind::Other,
        tool: Some(tool),
        ..Default::default()
    }
}

/// The options of an approval crucible asks for itself (a rule's, a credential's).
pub(super) fn allow_or_deny() -> Vec<PermissionChoice> {
    let choice = |id: &str, name: &str, kind| PermissionChoice {
        id: id.into(),
        name: name.into(),
        kind,
    };
    vec![
        choice(ALLOW, "Allow", OptionKind::AllowOnce),
        choice("deny", "Deny", OptionKind::RejectOnce),
    ]
}
