//! The approvals the agent waits on, asked in the inbox: how a request is posted,
//! what an answer (or its withdrawal) chooses, and the options as the inbox shows them.

use super::gating::{Asking, GateReply, Gated, Waiter};
use super::*;
use crate::agent::OptionKind;
use crate::ledger::LedgerError;

/// An option of an approval as the inbox shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Choice {
    /// Its name, unique whatever the case.
    pub shown: String,
    /// The ACP option id it stands for.
    pub id: String,
    pub kind: OptionKind,
}

/// A permission request, asked in the inbox.
#[derive(Debug)]
pub(super) struct Approval {
    key: Key,
    title: String,
    choices: Vec<Choice>,
    /// What its answer decides besides the option chosen.
    gated: Gated,
}

impl Machine {
    /// A request waits for permission: asked in the inbox, where its answer comes from.
    pub(super) fn permission(
        &mut self,
        fx: &mut Effects,
        key: Key,
        options: &[PermissionChoice],
        asking: Asking,
        gated: Gated,
    ) {
        let Asking {
            title,
            tool_call_id,
            reason,
            flagged,
        } = asking;
        let line = Line::new(EntryKind::Permission).text(&title);
        fx.push(Effect::Append(line.tool(tool_call_id)));
        let choices = inbox_choices(options);
        let body = match reason {
            Some(reason) => format!("{reason}\n\n{}", wording::approval_body(options)),
            None => wording::approval_body(options),
        };
        fx.push(Effect::Ask {
            key,
            title: title.clone(),
            body,
            options: (!choices.is_empty())
                .then(|| choices.iter().map(|c| c.shown.clone()).collect()),
            kinds: (!choices.is_empty()).then(|| {
                choices
                    .iter()
                    .map(|c| c.kind.as_str().to_string())
                    .collect()
            }),
            flagged,
        });
        let approval = Approval {
            key,
            title,
            choices,
            gated,
        };
        self.posting.insert(key, approval);
    }

    pub(super) fn posted(
        &mut self,
        fx: &mut Effects,
        key: Key,
        result: Result<String, LedgerError>,
    ) {
        let Some(approval) = self.posting.remove(&key) else {
            return;
        };
        match result {
            Ok(message_id) => {
                self.blocking.insert(message_id.clone());
                self.approvals.push((message_id, approval));
                self.settle(fx);
            }
            Err(e) => {
                answer(fx, key, approval.gated, None);
                let why = wording::approval_not_posted(&e.to_string());
                fx.push(Effect::Append(Line::new(EntryKind::Error).text(why)));
            }
        }
    }

    /// The blocking messages open now: those no longer open were answered meanwhile.
    pub(super) fn open(&mut self, fx: &mut Effects, open: Vec<String>) {
        let open: BTreeSet<String> = open.into_iter().collect();
        let closed: Vec<String> = self.blocking.difference(&open).cloned().collect();
        self.blocking = open;
        if closed.is_empty() {
            self.settle(fx);
        } else {
            fx.push(Effect::ReadAnswers(closed));
        }
    }

    /// An answer to one of this session's blocking messages.
    pub(super) fn answered(
        &mut self,
        fx: &mut Effects,
        id: &str,
        response: Option<String>,
        by: Option<&str>,
    ) {
        self.blocking.remove(id);
        if self.plan_answered(fx, id, response.as_deref(), by) {
            return;
        }
        if self.budget_answered(fx, id, response.as_deref()) {
            self.settle(fx);
            return;
        }
        if let Some(at) = self.approvals.iter().position(|(m, _)| m == id) {
            let (_, approval) = self.approvals.remove(at);
            let response = response.unwrap_or_default();
            let chosen = approval
                .choices
                .iter()
                .find(|c| c.shown == response)
                .cloned();
            let status = if chosen.is_some() {
                response
            } else {
                wording::WITHDRAWN.into()
            };
            answer(fx, approval.key, approval.gated, chosen.map(|c| (c, by)));
            let line = Line::new(EntryKind::Permission).text(approval.title);
            fx.push(Effect::Append(line.status(status)));
        }
        self.settle(fx);
    }

    /// Refuses every approval the agent waits on and closes its inbox message.
    pub(super) fn withdraw_approvals(&mut self, fx: &mut Effects, why: &str) {
        for (message_id, approval) in std::mem::take(&mut self.approvals) {
            answer(fx, approval.key, approval.gated, None);
            self.blocking.remove(&message_id);
            fx.push(Effect::Withdraw {
                message_id,
                note: wording::withdrawn(why),
            });
            let line = Line::new(EntryKind::Permission).text(approval.title);
            fx.push(Effect::Append(line.status(wording::WITHDRAWN)));
        }
    }
}

/// The answer to an approval: what the chosen option grants and remembers, the audit
/// line (who chose, when known), and the reply to whoever waits (`None`: nobody chose;
/// it is refused).
fn answer(fx: &mut Effects, key: Key, gated: Gated, chosen: Option<(Choice, Option<&str>)>) {
    let (option, allowed, chooser) = match chosen {
        Some((choice, by)) => (Some(choice.id), choice.kind.allows(), by),
        None => (None, false, None),
    };
    let Gated {
        operation,
        remembered,
        waiter,
    } = gated;
    let reply = match waiter {
        Waiter::Agent => Some(GateReply::Choose(option.clone())),
        Waiter::Operation { .. } if allowed => Some(GateReply::Proceed),
        Waiter::Operation { rule } => Some(GateReply::Refuse(format!(
            "denied by the human (rule {rule})"
        ))),
        Waiter::Credential { name } if allowed => {
            fx.push(Effect::Record(RecordChange::CredentialApproved(
                name.clone(),
            )));
            fx.push(Effect::Save);
            fx.push(Effect::Grant { key, name });
            None
        }
        Waiter::Credential { .. } => Some(GateReply::Withheld),
    };
    if option.as_ref().is_some_and(|o| remembered.contains(o)) {
        fx.push(Effect::Record(RecordChange::OperationApproved {
            fingerprint: operation.fingerprint(),
            description: operation.describe(),
        }));
        fx.push(Effect::Save);
    }
    let (answer, by) = match option {
        Some(chosen) => (chosen, chooser.unwrap_or("human (inbox)")),
        None => ("none".to_string(), "nobody: withdrawn or cancelled"),
    };
    let by = by.into();
    fx.push(Effect::Audit(AuditEvent::PermissionAnswered { answer, by }));
    if let Some(reply) = reply {
        fx.push(Effect::ReplyGate { key, reply });
    }
}

/// The options an approval shows: the agent's option names, made unique when two
/// differ only in case, each with the ACP option id it stands for and its kind.
pub(super) fn inbox_choices(options: &[PermissionChoice]) -> Vec<Choice> {
    let mut seen = HashSet::new();
    options
        .iter()
        .filter(|o| !o.name.trim().is_empty() || !o.id.is_empty())
        .map(|o| {
            let name = if o.name.trim().is_empty() {
                o.id.clone()
            } else {
                o.name.trim().to_string()
            };
            let shown = if seen.insert(name.to_lowercase()) {
                name
            } else {
                format!("{name} ({})", o.id)
            };
            seen.insert(shown.to_lowercase());
            Choice {
                shown,
                id: o.id.clone(),
                kind: o.kind,
            }
        })
        .collect()
}
