//! What the actor hears, as its machine's inputs: the agent's events and the commands
//! of people and the daemon. A request for the approval gate keeps the channel its
//! answer goes on, under a key the machine knows it by; a turn that failed on a usage
//! limit is told apart from other failures.

use super::*;
use crate::agent::usage_limit::UsageLimit;

/// Who waits on a request for the approval gate, and the channel the answer goes on.
pub(super) enum Waiting {
    /// An operation crucible runs or serves for the agent.
    Operation(oneshot::Sender<Result<(), AgentError>>),
    /// The agent's permission request: the option chosen, or none.
    Permission(oneshot::Sender<Option<String>>),
    /// An approval the agent asks for itself: the rules' word, if any.
    Approval(oneshot::Sender<Option<bool>>),
    /// A credential.
    Credential {
        name: String,
        ack: oneshot::Sender<Result<String, CredentialError>>,
    },
}

impl Actor {
    /// Keeps the channel of a request for the gate; the key the machine knows it by.
    fn wait(&mut self, waiting: Waiting) -> Key {
        let key = self.next_key;
        self.next_key += 1;
        self.waiting.insert(key, waiting);
        key
    }

    /// The machine's input for an agent event.
    pub(super) async fn on_event(
        &mut self,
        t: &mut TranscriptWriter,
        event: AgentEvent,
    ) -> Option<SessionInput> {
        Some(match event {
            AgentEvent::Ready {
                agent_name: Some(ref name),
                ..
            } => {
                tracing::info!(agent = %name, "agent ready");
                SessionInput::Agent(event)
            }
            AgentEvent::ToolCall { ref operation, .. } => {
                // Rules still see what the agent runs by itself.
                let ran = GateRequest::Ran(operation.clone());
                self.feed(t, SessionInput::Gate(ran)).await;
                SessionInput::Agent(event)
            }
            AgentEvent::Gate { operation, reply } => {
                let key = self.wait(Waiting::Operation(reply));
                SessionInput::Gate(GateRequest::Operation { key, operation })
            }
            AgentEvent::Permission {
                title,
                tool_call_id,
                options,
                operation,
                reply,
            } => {
                let key = self.wait(Waiting::Permission(reply));
                SessionInput::Gate(GateRequest::Permission {
                    key,
                    title,
                    tool_call_id,
                    options,
                    operation,
                })
            }
            AgentEvent::Usage(usage) => SessionInput::Usage {
                usage,
                day: crate::sessions::budget::today(),
            },
            AgentEvent::TurnTokens(tokens) => SessionInput::TurnTokens {
                tokens,
                day: crate::sessions::budget::today(),
            },
            AgentEvent::TurnEnded(ended) => {
                // The message streaming in ends with the turn; the turn must know whether
                // it could be stored.
                self.flush(t).await;
                // A command the turn ran may have been ended for memory between looks.
                self.check_oom().await;
                let input = limited(ended);
                if let SessionInput::TurnLimited { wait, .. } = &input {
                    self.ahead = None;
                    let wait = chrono::Duration::from_std(*wait).unwrap_or_default();
                    self.fall_back(chrono::Utc::now() + wait);
                } else if self.ahead.is_some() {
                    // The turn ends first; then the limit announced during it parks the
                    // session before the next turn.
                    self.feed(t, input).await;
                    return self.ahead_input();
                }
                input
            }
            AgentEvent::LimitAhead { why, resets_at } => {
                let limit = UsageLimit::resetting(resets_at, chrono::Utc::now());
                self.ahead = Some((why, limit));
                return self.ahead_input();
            }
            AgentEvent::Exited { status, code } => {
                self.flush(t).await;
                let status = self.exit_status(status, code);
                SessionInput::Agent(AgentEvent::Exited { status, code })
            }
            event => SessionInput::Agent(event),
        })
    }

    /// The limit the agent announced, as the machine's input: how long until it resets.
    fn ahead_input(&mut self) -> Option<SessionInput> {
        let (why, limit) = self.ahead.clone()?;
        let wait = limit.wait(chrono::Utc::now());
        if wait.is_zero() {
            // Reset already: nothing to park for.
            self.ahead = None;
            return None;
        }
        let resumes = limit.resumes();
        Some(SessionInput::LimitAhead { why, wait, resumes })
    }

    /// The machine's input for a command, if it concerns this session.
    pub(super) fn on_command(&mut self, command: Command) -> Option<SessionInput> {
        Some(match command {
            Command::Prompt { text, ack } => {
                self.prompt_ack = Some(ack);
                SessionInput::Prompt(text)
            }
            Command::Resend { ack } => {
                self.resend_ack = Some(ack);
                SessionInput::Resend
            }
            Command::Cancel { ack } => {
                self.cancel_ack = Some(ack);
                SessionInput::Cancel
            }
            Command::Stop { ack, shutdown } => {
                self.stoppers.push(ack);
                SessionInput::Stop { shutdown }
            }
            Command::Inbox(message) => {
                if message.session_id != self.session.id {
                    return None;
                }
                if message.responded
                    && !message.withdrawn
                    && let Some(title) = self.carried.remove(&message.id)
                {
                    let by = message.answered_by.as_deref().unwrap_or("a person");
                    let answer = message.response.as_deref().unwrap_or_default();
                    return Some(SessionInput::CarriedAnswer {
                        id: message.id,
                        prompt: wording::carried_answer(&title, by, answer),
                    });
                }
                if message.responded {
                    SessionInput::Answered {
                        id: message.id,
                        response: message.response,
                        by: message.answered_by,
                    }
                } else {
                    SessionInput::Opened(message.id)
                }
            }
            Command::Resync => SessionInput::Resync,
            Command::Hold { held, ack } => {
                self.held = held;
                let _ = ack.send(());
                if held {
                    return None;
                }
                // It stays: what it has is the record again (its owner too), and what is
                // open in the inbox is read again.
                self.todo.push_back(Effect::Save);
                SessionInput::Resync
            }
            Command::Park => SessionInput::Park,
            Command::Settled { ack } => {
                let _ = ack.send(());
                return None;
            }
            Command::SetRule { rule, enabled, ack } => {
                self.rule_ack = Some(ack);
                SessionInput::SetRule { rule, enabled }
            }
            Command::JudgeApproval { title, ack } => {
                let key = self.wait(Waiting::Approval(ack));
                SessionInput::Gate(GateRequest::Approval { key, title })
            }
            Command::Secret { name, ack } => {
                let approved = self.session.security.approved_credentials.contains(&name);
                let key = self.wait(Waiting::Credential {
                    name: name.clone(),
                    ack,
                });
                SessionInput::Credential {
                    key,
                    name,
                    approved,
                }
            }
        })
    }
}

/// A turn's end, or, when it failed on a usage or rate limit, that limit.
fn limited(ended: Result<String, crate::agent::TurnFailure>) -> SessionInput {
    use crate::agent::{TurnFailure, usage_limit};
    let now = chrono::Utc::now();
    match ended {
        Err(TurnFailure::Failed(why)) => match usage_limit::recognise(&why, now) {
            Some(limit) => SessionInput::TurnLimited {
                why,
                wait: limit.wait(now),
                resumes: limit.resumes(),
            },
            None => SessionInput::Agent(AgentEvent::TurnEnded(Err(TurnFailure::Failed(why)))),
        },
        other => SessionInput::Agent(AgentEvent::TurnEnded(other)),
    }
}
