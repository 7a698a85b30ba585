//! Crucible's own agent (`type = "internal"`): a tool loop against an OpenAI-compatible
//! chat endpoint, hosted in the daemon.
//!
//! The session's context stack *is* the conversation: each request sends the stack as it
//! is at that moment ([`messages_from_stack`]), and the model's text, tool calls and the
//! tools' results are pushed onto it as they happen. So every context operation takes
//! effect on the next request.
//!
//! A turn: ask the model (streaming its text as [`AgentEvent::Chunk`]s); if it called
//! tools, run them and ask again; the turn ends when it answers without calling any (or
//! after [`MAX_STEPS`] requests). The tokens the model's answers report are added up and
//! told once, as [`AgentEvent::TurnTokens`] before the turn's end (also of a turn that
//! failed or was cancelled: what was spent is spent); a turn none of whose answers told
//! any sends none, and its spending stays unknown. Tools work inside the session's folder
//! only, through the same [`Firewall`] as ACP agents' file requests:
//!
//! | tool               | does |
//! |--------------------|------|
//! | `read_file`        | a file's text |
//! | `write_file`       | writes a file; asks first (an `approval_required` message) unless `allow_writes` |
//! | `list_dir`         | a folder's entries, folders ending in `/` |
//! | `run_command`      | `sh -c` in the folder, stdout and stderr; asks first unless `allow_commands` |
//! | `notify`           | an `info` message |
//! | `request_decision` | a `decision_needed` message; waits for the answer |
//! | `request_approval` | an `approval_required` message; waits for approve or deny |
//!
//! With `recover_tool_errors`, a failed tool's result is replaced on the stack by the
//! error alone (the failed result is popped and the error message pushed in its place).

use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::error::AgentError;
use super::events::{AgentEvent, TurnFailure, TurnTokens};
use super::fs::Firewall;
use super::handle::{AgentHandle, Launch, Order};
use super::link::SessionLink;
use crate::config::AgentProfile;
use crate::context::Message;
use crate::openai::{ChatClient, ChatRequest, Usage, messages_from_stack};
use crate::protocol::EntryKind;
use crate::text::{clip, first_line};

mod toolbox;
mod tools;
use toolbox::Toolbox;
pub use tools::tools;

/// The most model requests one turn may make.
pub const MAX_STEPS: usize = 50;

/// The system prompt when the profile sets none.
pub fn default_system_prompt(cwd: &Path) -> String {
    format!(
        "You are a coding agent working in the folder {}. Use the tools to read, list and \
         write files and to run commands there; paths are relative to that folder. Ask the \
         human with request_decision when a choice is theirs, and use notify for news they \
         should see. Answer without calling a tool when the task is done.",
        cwd.display()
    )
}

/// The chat client of an internal profile, with its API key from `api_key_env`.
pub fn chat_client(profile: &AgentProfile) -> Result<ChatClient, AgentError> {
    chat_client_keyed(profile, None)
}

/// [`chat_client`] with the key already found, when it was (else read from the daemon's
/// environment variable `api_key_env` names).
fn chat_client_keyed(
    profile: &AgentProfile,
    key: Option<String>,
) -> Result<ChatClient, AgentError> {
    let api_key = match (&profile.api_key_env, key) {
        (None, _) => None,
        (Some(_), Some(key)) => Some(key),
        (Some(var), None) => {
            Some(std::env::var(var).map_err(|_| AgentError::NoApiKey { var: var.clone() })?)
        }
    };
    Ok(ChatClient::new(&profile.base_url, api_key)?)
}

pub(crate) fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, AgentError> {
    let name = &launch.profile_name;
    let link = launch.link.clone().ok_or_else(|| AgentError::NoSession {
        profile: name.clone(),
    })?;
    let client = chat_client_keyed(&launch.profile, launch.api_key.clone()).map_err(|e| {
        AgentError::Profile {
            profile: name.clone(),
            source: Box::new(e),
        }
    })?;
    let firewall =
        Firewall::new(&launch.cwd, &launch.denied).map_err(|source| AgentError::Folder {
            path: launch.cwd.clone(),
            source,
        })?;
    let (commands, orders) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel();
    let launch = Arc::new(launch);
    let agent = Agent {
        tools: Toolbox {
            launch: launch.clone(),
            firewall,
            link: link.clone(),
            events: events.clone(),
        },
        launch,
        client,
        link,
        events,
    };
    tokio::spawn(agent.host(orders, stop_rx));
    Ok(AgentHandle {
        // The daemon itself hosts the agent.
        pid: std::process::id(),
        commands,
        stop: Some(stop),
    })
}

/// The internal agent of one session: its chat client, the session's context and
/// inbox, where events go, and its tools.
struct Agent {
    launch: Arc<Launch>,
    client: ChatClient,
    link: Arc<dyn SessionLink>,
    events: mpsc::UnboundedSender<AgentEvent>,
    tools: Toolbox,
}

/// Why a turn stopped early.
enum Interrupt {
    Cancel,
    Stop,
}

/// Runs `work` until it ends, a cancel comes, or the agent is stopped.
async fn guard<T>(
    work: impl Future<Output = T>,
    orders: &mut mpsc::UnboundedReceiver<Order>,
    stop: &mut oneshot::Receiver<()>,
) -> Result<T, Interrupt> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Ok(done),
            order = orders.recv() => match order {
                Some(Order::Cancel) => return Err(Interrupt::Cancel),
                // The session queues prompts while a turn runs.
                Some(Order::Prompt { .. }) => {
                    tracing::warn!("a prompt arrived during a turn of the internal agent; it was dropped");
                }
                None => return Err(Interrupt::Stop),
            },
            _ = &mut *stop => return Err(Interrupt::Stop),
        }
    }
}

impl Agent {
    fn send(&self, event: AgentEvent) {
        let _ = self.events.send(event);
    }

    async fn host(
        self,
        mut orders: mpsc::UnboundedReceiver<Order>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let session = self
            .launch
            .resume
            .clone()
            .unwrap_or_else(|| format!("internal-{}", ulid::Ulid::new()));
        self.send(AgentEvent::Ready {
            acp_session_id: session.clone(),
            resumed: self.launch.resume.is_some(),
            agent_name: Some(format!("crucible internal ({})", self.launch.profile.model)),
        });
        let mut turn = 0u64;
        loop {
            tokio::select! {
                order = orders.recv() => match order {
                    Some(Order::Prompt { .. }) => {
                        turn += 1;
                        let mut spent = None;
                        let id = format!("{session}-{turn}");
                        let ended = self.turn(&id, &mut spent, &mut orders, &mut stop).await;
                        if let Some(tokens) = spent {
                            self.send(AgentEvent::TurnTokens(tokens));
                        }
                        match ended {
                            Ok(outcome) => self.send(AgentEvent::TurnEnded(outcome)),
                            Err(Interrupt::Cancel) => {
                                self.send(AgentEvent::TurnEnded(Ok("cancelled".into())));
                            }
                            Err(Interrupt::Stop) => break,
                        }
                    }
                    Some(Order::Cancel) => {}
                    None => break,
                },
                _ = &mut stop => break,
            }
        }
        self.send(AgentEvent::Exited {
            status: "ended".into(),
            code: None,
        });
    }

    /// One turn; the prompt is already on the stack. Adds what each answer reports it
    /// used to `spent`.
    async fn turn(
        &self,
        message_id: &str,
        spent: &mut Option<TurnTokens>,
        orders: &mut mpsc::UnboundedReceiver<Order>,
        stop: &mut oneshot::Receiver<()>,
    ) -> Result<Result<String, TurnFailure>, Interrupt> {
        let failed = |why: AgentError| Ok(Err(TurnFailure::Failed(why.to_string())));
        for step in 0..MAX_STEPS {
            let entries = match self.link.context().await {
                Ok(entries) => entries,
                Err(why) => return failed(why),
            };
            let request = ChatRequest {
                model: self.launch.profile.model.clone(),
                messages: messages_from_stack(&entries),
                tools: tools(),
            };
            let id = format!("{message_id}-{step}");
            let events = self.events.clone();
            let streamed = self.client.stream(&request, |text| {
                let _ = events.send(AgentEvent::Chunk {
                    kind: EntryKind::Message,
                    text: text.to_string(),
                    message_id: Some(id.clone()),
                });
            });
            let reply = match guard(streamed, orders, stop).await? {
                Ok(reply) => reply,
                Err(e) => return failed(AgentError::Chat(e)),
            };
            if let Some(usage) = reply.usage {
                *spent = Some(add_usage(spent.unwrap_or_default(), usage));
            }
            let calls = reply.tool_calls.clone();
            for message in reply.into_stack_messages() {
                if let Err(why) = self.link.push(message).await {
                    return failed(why);
                }
            }
            if calls.is_empty() {
                return Ok(Ok("end_turn".into()));
            }
            for call in calls {
                let name = call.function.name.clone();
                let arguments = call.function.arguments.clone();
                self.send(AgentEvent::ToolCall {
                    id: call.id.clone(),
                    title: format!("{name} {}", clip(&arguments, 200)),
                    status: "in_progress".into(),
                    operation: self.tools.operation(&name, &arguments),
                });
                let (ok, text) =
                    guard(self.tools.run(&call.id, &name, &arguments), orders, stop).await?;
                self.send(AgentEvent::ToolUpdate {
                    id: call.id.clone(),
                    title: None,
                    status: Some(if ok { "completed" } else { "failed" }.into()),
                });
                let result = Message::ToolResult {
                    call_id: call.id.clone(),
                    tool: name.clone(),
                    ok,
                    text: text.clone(),
                };
                if let Err(why) = self.link.push(result).await {
                    return failed(why);
                }
                if !ok && self.launch.profile.recover_tool_errors {
                    let error = format!("{name} failed: {}", clip(first_line(&text), 500));
                    if let Err(why) = self.link.recover_tool_error(error).await {
                        return failed(why);
                    }
                }
            }
        }
        Ok(Ok("max_turn_requests".into()))
    }
}

/// `turn` with one answer's usage added. The prompt's cached part counts as cached, the
/// rest as input; a total above prompt and completion (a server counting more than it
/// itemises) counts as output, so the turn adds up to what the server said it used.
fn add_usage(turn: TurnTokens, usage: Usage) -> TurnTokens {
    let cached = usage.cached.min(usage.prompt);
    let output = usage
        .completion
        .max(usage.total.saturating_sub(usage.prompt));
    TurnTokens {
        input: turn
            .input
            .saturating_add(usage.prompt.saturating_sub(cached)),
        output: turn.output.saturating_add(output),
        cached: turn.cached.saturating_add(cached),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_answers_add_up_with_the_cached_prompt_apart() {
        let answer = Usage {
            prompt: 600,
            completion: 150,
            total: 750,
            cached: 200,
        };
        let turn = add_usage(add_usage(TurnTokens::default(), answer), answer);
        assert_eq!(
            turn,
            TurnTokens {
                input: 800,
                output: 300,
                cached: 400
            }
        );
        assert_eq!(turn.total(), 1500);
        // Only a total told: it all counts. Odd cache figures never count twice.
        let only_total = Usage {
            total: 90,
            ..Usage::default()
        };
        assert_eq!(add_usage(TurnTokens::default(), only_total).total(), 90);
        let over_cached = Usage {
            prompt: 10,
            completion: 1,
            total: 11,
            cached: 50,
        };
        assert_eq!(add_usage(TurnTokens::default(), over_cached).total(), 11);
    }
}
