//! The actor's side of the approval gate: what it does with the rules' judgement of an
//! operation (answer it, refuse it, ask the human with the rule's reason, end the session
//! on a context miss), and the approvals crucible asks for itself.

use super::*;

impl Actor {
    /// Switches a rule off (or on again) for this session.
    pub(super) async fn set_rule(
        &mut self,
        rule: String,
        enabled: bool,
        ack: oneshot::Sender<crate::protocol::SecurityState>,
    ) {
        let disabled = &mut self.session.security.disabled;
        disabled.retain(|d| d != &rule);
        if !enabled {
            disabled.push(rule);
        }
        self.save().await;
        let _ = ack.send(self.session.security.clone());
    }

    /// The rules' word on an approval the agent asks for itself.
    pub(super) async fn judge_approval(
        &mut self,
        title: String,
        ack: oneshot::Sender<Option<bool>>,
    ) {
        let operation = Operation {
            kind: "other".into(),
            tool: Some(title.clone()),
            ..Default::default()
        };
        let (judgement, changed) = self.gate.judge(&operation, &mut self.session.security);
        self.security_changed(changed).await;
        let (verdict, by) = match judgement {
            Judgement::Allowed { rule } => (Some(true), format!("allowed by rule {rule}")),
            Judgement::Approved => (Some(true), "approved before in this session".into()),
            Judgement::Denied { rule, .. } => (Some(false), format!("denied by rule {rule}")),
            _ => (None, String::new()),
        };
        if verdict.is_some() {
            self.audit.record(
                &self.session.id,
                AuditEvent::PermissionAnswered {
                    answer: format!("{title}: {by}"),
                    by: "rules".into(),
                },
            );
        }
        let _ = ack.send(verdict);
    }

    /// A credential: given if approved before in the session, else asked for.
    pub(super) fn secret(
        &mut self,
        name: String,
        ack: oneshot::Sender<Result<String, String>>,
    ) -> Option<Input> {
        if self.session.security.approved_credentials.contains(&name) {
            let settings = self.wb.kiln().settings_path();
            tokio::spawn(async move {
                let _ = ack.send(crate::sessions::security::resolve(&settings, &name).await);
            });
            return None;
        }
        let (reply, _) = oneshot::channel();
        let options = allow_or_deny();
        let operation = Operation {
            kind: "other".into(),
            tool: Some(format!("secret {name}")),
            ..Default::default()
        };
        let reason = format!(
            "The agent asks for the credential {name}. Allowing gives it the value \
             (from crucible's environment or its configured command) for the rest of \
             this session; crucible never stores or logs it."
        );
        let input = self.ask(
            format!("Credential requested: {name}"),
            String::new(),
            options,
            Some(reason),
            operation,
            Some("credential".into()),
            reply,
        );
        if let Input::Permission { key, .. } = &input {
            self.secrets.insert(*key, (name, ack));
        }
        Some(input)
    }
    /// Records the security state after the gate changed it.
    pub(super) async fn security_changed(&mut self, changed: bool) {
        if changed {
            self.save().await;
        }
    }

    /// A line in the transcript and the audit log for an operation a rule decided.
    pub(super) async fn decided(&mut self, t: &mut TranscriptWriter, what: &str, status: String) {
        t.append(
            &self.wb,
            Line::new(EntryKind::Permission)
                .text(what)
                .status(status.clone()),
        )
        .await;
        self.check(t);
        self.audit.record(
            &self.session.id,
            AuditEvent::PermissionAnswered {
                answer: status,
                by: "rules".into(),
            },
        );
    }

    /// An operation crucible runs or serves for the agent (a file, a terminal command,
    /// a tool of its own agent): the rules answer, or the human through an approval.
    pub(super) async fn gate_operation(
        &mut self,
        t: &mut TranscriptWriter,
        operation: Operation,
        reply: oneshot::Sender<Result<(), String>>,
    ) -> Option<Input> {
        if let Some(reason) = &self.ended_by {
            let _ = reply.send(Err(reason.clone()));
            return None;
        }
        let (judgement, changed) = self.gate.judge(&operation, &mut self.session.security);
        self.security_changed(changed).await;
        match judgement {
            Judgement::Free | Judgement::Approved => {
                let _ = reply.send(Ok(()));
                None
            }
            Judgement::ContextMiss { path, reason } => {
                let _ = reply.send(Err(reason.clone()));
                Some(self.context_miss(t, &path, reason).await)
            }
            Judgement::Allowed { rule } => {
                self.decided(t, &operation.describe(), format!("allowed by rule {rule}"))
                    .await;
                let _ = reply.send(Ok(()));
                None
            }
            Judgement::Denied { rule, reason } => {
                self.decided(t, &operation.describe(), format!("denied by rule {rule}"))
                    .await;
                let _ = reply.send(Err(reason));
                None
            }
            Judgement::Ask {
                rule,
                title,
                reason,
            } => {
                let options = allow_or_deny();
                let (answer_tx, answer) = oneshot::channel::<Option<String>>();
                let denied = format!("denied by the human (rule {rule})");
                tokio::spawn(async move {
                    let result = match answer.await {
                        Ok(Some(id)) if id == "allow" => Ok(()),
                        _ => Err(denied),
                    };
                    let _ = reply.send(result);
                });
                Some(self.ask(
                    title,
                    String::new(),
                    options,
                    Some(reason),
                    operation,
                    Some(rule),
                    answer_tx,
                ))
            }
        }
    }

    /// The agent asks for permission: the rules may answer it, or add their reason.
    pub(super) async fn gate_permission(
        &mut self,
        t: &mut TranscriptWriter,
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        operation: Operation,
        reply: oneshot::Sender<Option<String>>,
    ) -> Option<Input> {
        if self.ended_by.is_some() {
            let _ = reply.send(None);
            return None;
        }
        let (judgement, changed) = self.gate.judge(&operation, &mut self.session.security);
        self.security_changed(changed).await;
        let pick = |prefix: &str| {
            options
                .iter()
                .find(|o| o.kind.starts_with(prefix))
                .map(|o| o.id.clone())
        };
        match judgement {
            Judgement::Allowed { rule } => {
                self.decided(t, &title, format!("allowed by rule {rule}"))
                    .await;
                let _ = reply.send(pick("allow"));
                None
            }
            Judgement::Approved => {
                self.decided(t, &title, "allowed: approved before in this session".into())
                    .await;
                let _ = reply.send(pick("allow"));
                None
            }
            Judgement::Denied { rule, .. } => {
                self.decided(t, &title, format!("denied by rule {rule}"))
                    .await;
                let _ = reply.send(pick("reject"));
                None
            }
            Judgement::Ask {
                rule,
                title: ruled,
                reason,
            } => Some(self.ask(
                ruled,
                tool_call_id,
                options,
                Some(reason),
                operation,
                Some(rule),
                reply,
            )),
            Judgement::ContextMiss { path, reason } => {
                let _ = reply.send(pick("reject"));
                Some(self.context_miss(t, &path, reason).await)
            }
            Judgement::Free => {
                Some(self.ask(title, tool_call_id, options, None, operation, None, reply))
            }
        }
    }

    /// Seed 002: a read outside the manifest ends the session; the refusal is in the
    /// transcript and the audit log, and the question of widening comes once it stopped.
    pub(super) async fn context_miss(
        &mut self,
        t: &mut TranscriptWriter,
        path: &str,
        reason: String,
    ) -> Input {
        t.append(&self.wb, Line::new(EntryKind::Error).text(&reason))
            .await;
        self.check(t);
        self.audit.record(
            &self.session.id,
            AuditEvent::FileRead {
                path: path.to_string(),
                allowed: false,
                reason: Some(reason.clone()),
            },
        );
        self.ended_by = Some(reason.clone());
        Input::Terminate(reason)
    }

    /// An approval in the inbox; its answer goes to `reply`, and an approved operation
    /// is remembered (any approval of a rule's question; the agent's "always" options).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ask(
        &mut self,
        title: String,
        tool_call_id: String,
        options: Vec<PermissionChoice>,
        reason: Option<String>,
        operation: Operation,
        rule: Option<String>,
        reply: oneshot::Sender<Option<String>>,
    ) -> Input {
        let key = self.next_key;
        self.next_key += 1;
        self.permissions.insert(key, reply);
        let from_rule = rule.is_some();
        let remembered: Vec<String> = options
            .iter()
            .filter(|o| o.kind == "allow_always" || (from_rule && o.kind.starts_with("allow")))
            .map(|o| o.id.clone())
            .collect();
        let flagged = rule.map(|rule| crate::protocol::Flagged {
            rule,
            operation: operation.describe(),
        });
        self.gated.insert(key, (operation, remembered));
        Input::Permission {
            key,
            title,
            tool_call_id,
            options,
            reason,
            flagged,
        }
    }

    /// Rules still see what the agent runs by itself: they activate on it, and one that
    /// would ask or refuse flags it in the inbox.
    pub(super) async fn flag(&mut self, operation: &Operation) {
        let (judgement, changed) = self.gate.judge(operation, &mut self.session.security);
        self.security_changed(changed).await;
        let (msg_type, rule) = match judgement {
            Judgement::ContextMiss { reason, .. } => {
                // The agent read it by itself: it cannot be undone, the session ends.
                self.step(Input::Terminate(reason));
                return;
            }
            Judgement::Ask { rule, .. } => (MsgType::Info, rule),
            Judgement::Denied { rule, .. } => (MsgType::Error, rule),
            _ => return,
        };
        self.post(Notice {
            msg_type,
            title: format!("The agent ran, by itself, what rule {rule} covers"),
            body: Some(format!(
                "{}\nThe agent runs this tool itself, so crucible could not stop it.",
                operation.describe()
            )),
            stderr_tail: false,
        })
        .await;
    }
}

/// The options of an approval crucible asks for itself (a rule's, a credential's).
fn allow_or_deny() -> Vec<PermissionChoice> {
    let choice = |id: &str, name: &str, kind: &str| PermissionChoice {
        id: id.into(),
        name: name.into(),
        kind: kind.into(),
    };
    vec![
        choice("allow", "Allow", "allow_once"),
        choice("deny", "Deny", "reject_once"),
    ]
}
