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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::agent::{
    AgentError, AgentEvent, AgentHandle, Firewall, Launch, OptionKind, Order, PermissionChoice,
    SessionLink, TurnFailure, TurnTokens,
};
use crate::config::AgentProfile;
use crate::context::Message;
use crate::openai::{ChatClient, ChatRequest, Usage, messages_from_stack};
use crate::protocol::{EntryKind, MsgType};
use crate::rules::{Operation, OperationKind};
use crate::text::{clip, first_line};

mod tools;
pub use tools::tools;

/// The most model requests one turn may make.
pub const MAX_STEPS: usize = 50;
/// How long `run_command` may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// How much of a file or a command's output a tool result carries.
const MAX_OUTPUT: usize = 64 * 1024;

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
        (Some(var), None) => Some(std::env::var(var).map_err(|_| {
            AgentError::Start(format!(
                "the environment variable {var} (api_key_env) is not set"
            ))
        })?),
    };
    ChatClient::new(&profile.base_url, api_key).map_err(|e| AgentError::Start(e.to_string()))
}

pub(crate) fn launch(
    launch: Launch,
    events: mpsc::UnboundedSender<AgentEvent>,
) -> Result<AgentHandle, AgentError> {
    let name = &launch.profile_name;
    let link = launch.link.clone().ok_or_else(|| {
        AgentError::Start(format!(
            "agent {name:?}: an internal agent needs its session"
        ))
    })?;
    let client = chat_client_keyed(&launch.profile, launch.api_key.clone())
        .map_err(|e| AgentError::Start(format!("agent {name:?}: {e}")))?;
    let firewall = Firewall::new(&launch.cwd, &launch.denied)
        .map_err(|e| AgentError::Start(format!("cannot use {}: {e}", launch.cwd.display())))?;
    let (commands, orders) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel();
    let agent = Agent {
        launch,
        client,
        firewall,
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

struct Agent {
    launch: Launch,
    client: ChatClient,
    firewall: Firewall,
    link: Arc<dyn SessionLink>,
    events: mpsc::UnboundedSender<AgentEvent>,
}

/// A file or folder the agent named that could not be read or written.
fn io_error(path: &str, e: std::io::Error) -> AgentError {
    AgentError::Io(format!("{path}: {e}"))
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
                Err(e) => return failed(AgentError::Protocol(e.to_string())),
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
                    operation: self.operation(&name, &arguments),
                });
                let (ok, text) =
                    guard(self.run_tool(&call.id, &name, &arguments), orders, stop).await?;
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

    /// Runs one tool: whether it worked, and what to tell the model.
    /// What a tool call does, for the rules.
    fn operation(&self, name: &str, arguments: &str) -> Operation {
        let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
        let path = || {
            text("path")
                .map(|p| self.launch.cwd.join(p).display().to_string())
                .into_iter()
                .collect()
        };
        let (kind, command, paths) = match name {
            "read_file" => (OperationKind::Read, None, path()),
            "list_dir" => (OperationKind::Search, None, path()),
            "write_file" => (OperationKind::Edit, None, path()),
            "run_command" => (OperationKind::Execute, text("command"), Vec::new()),
            _ => (OperationKind::Other, None, Vec::new()),
        };
        Operation {
            kind,
            command,
            paths,
            tool: Some(name.to_string()),
        }
    }

    /// The rules' word on an operation before it runs.
    async fn ask_rules(&self, operation: Operation) -> Result<(), AgentError> {
        super::ask_gate(&self.events, operation).await
    }

    async fn run_tool(&self, call_id: &str, name: &str, arguments: &str) -> (bool, String) {
        if matches!(
            name,
            "read_file" | "write_file" | "list_dir" | "run_command"
        ) && let Err(why) = self.ask_rules(self.operation(name, arguments)).await
        {
            return (false, why.to_string());
        }
        let args: Value = match serde_json::from_str(if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        }) {
            Ok(args) => args,
            Err(e) => return (false, format!("the arguments are not JSON: {e}")),
        };
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
        let result = match name {
            "read_file" => match text("path") {
                Some(path) => self.read_file(&path).await,
                None => Err(AgentError::Tool("read_file needs a path".into())),
            },
            "write_file" => match (text("path"), text("content")) {
                (Some(path), Some(content)) => self.write_file(call_id, &path, &content).await,
                _ => Err(AgentError::Tool(
                    "write_file needs a path and a content".into(),
                )),
            },
            "list_dir" => {
                self.list_dir(&text("path").unwrap_or_else(|| ".".into()))
                    .await
            }
            "run_command" => match text("command") {
                Some(command) => self.run_command(call_id, &command).await,
                None => Err(AgentError::Tool("run_command needs a command".into())),
            },
            "notify" => {
                let title = text("title").unwrap_or_else(|| "Note from the agent".into());
                self.link
                    .ask(MsgType::Info, title, text("body"), None)
                    .await
                    .map(|_| "sent".to_string())
            }
            "request_decision" => match text("question") {
                Some(question) => {
                    let options = args.get("options").and_then(Value::as_array).map(|o| {
                        o.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect::<Vec<_>>()
                    });
                    let options = options.filter(|o| !o.is_empty());
                    self.link
                        .ask(MsgType::DecisionNeeded, question, text("details"), options)
                        .await
                        .map(|answer| format!("the human answered: {}", answer.unwrap_or_default()))
                }
                None => Err(AgentError::Tool("request_decision needs a question".into())),
            },
            "request_approval" => match text("action") {
                Some(action) => self
                    .link
                    .ask(MsgType::ApprovalRequired, action, text("details"), None)
                    .await
                    .map(|answer| format!("the human answered: {}", answer.unwrap_or_default())),
                None => Err(AgentError::Tool("request_approval needs an action".into())),
            },
            other => Err(AgentError::Tool(format!(
                "there is no tool named {other:?}"
            ))),
        };
        match result {
            Ok(text) => (true, text),
            Err(why) => (false, why.to_string()),
        }
    }

    /// The real path of `path` (relative to the session's folder), if the firewall lets
    /// the agent touch it; the attempt is recorded either way.
    fn gate(&self, op: &'static str, path: &str) -> Result<PathBuf, AgentError> {
        let full = self.launch.cwd.join(path);
        let checked = self.firewall.check(&full);
        self.send(AgentEvent::File {
            op,
            path: full.display().to_string(),
            refused: checked.as_ref().err().map(ToString::to_string),
        });
        checked
    }

    async fn read_file(&self, path: &str) -> Result<String, AgentError> {
        let real = self.gate("read", path)?;
        let text = tokio::fs::read_to_string(&real)
            .await
            .map_err(|e| io_error(path, e))?;
        Ok(clip(&text, MAX_OUTPUT))
    }

    async fn list_dir(&self, path: &str) -> Result<String, AgentError> {
        let real = self.gate("list", path)?;
        let mut dir = tokio::fs::read_dir(&real)
            .await
            .map_err(|e| io_error(path, e))?;
        let mut names = Vec::new();
        while let Some(entry) = dir.next_entry().await.map_err(|e| io_error(path, e))? {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(names.join("\n"))
    }

    async fn write_file(
        &self,
        call_id: &str,
        path: &str,
        content: &str,
    ) -> Result<String, AgentError> {
        let real = self.gate("write", path)?;
        if !self.launch.profile.allow_writes {
            let title = format!("write {path} ({} bytes)", content.len());
            self.permission(call_id, title).await?;
        }
        if let Some(parent) = real.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_error(path, e))?;
        }
        tokio::fs::write(&real, content.as_bytes())
            .await
            .map_err(|e| io_error(path, e))?;
        Ok(format!("wrote {path}"))
    }

    async fn run_command(&self, call_id: &str, command: &str) -> Result<String, AgentError> {
        if !self.launch.profile.allow_commands {
            self.permission(call_id, format!("run: {}", clip(command, 200)))
                .await?;
        }
        let args = ["-c".to_string(), command.to_string()];
        let mut sh = self
            .launch
            .environment
            .command(
                std::path::Path::new("sh"),
                &args,
                &self.launch.vars(&[]),
                &self.launch.cwd,
            )
            .map_err(|e| AgentError::Tool(format!("cannot run sh: {e}")))?;
        let run = crate::sys::user_umask(&mut sh)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(COMMAND_TIMEOUT, run)
            .await
            .map_err(|_| {
                AgentError::Tool(format!("timed out after {}s", COMMAND_TIMEOUT.as_secs()))
            })?
            .map_err(|e| AgentError::Tool(format!("cannot run sh: {e}")))?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        let text = clip(&text, MAX_OUTPUT);
        match output.status.code() {
            Some(0) => Ok(text),
            code => Err(AgentError::Tool(format!(
                "exit {}\n{text}",
                code.map_or_else(|| "by signal".to_string(), |c| c.to_string())
            ))),
        }
    }

    /// Asks the human through the session's permission path; `Err` unless allowed.
    async fn permission(&self, call_id: &str, title: String) -> Result<(), AgentError> {
        let (reply, answer) = oneshot::channel();
        self.send(AgentEvent::Permission {
            operation: Operation {
                kind: OperationKind::Other,
                tool: Some(title.clone()),
                ..Default::default()
            },
            title: title.clone(),
            tool_call_id: call_id.to_string(),
            options: vec![
                PermissionChoice {
                    id: "allow".into(),
                    name: "allow".into(),
                    kind: OptionKind::AllowOnce,
                },
                PermissionChoice {
                    id: "reject".into(),
                    name: "reject".into(),
                    kind: OptionKind::RejectOnce,
                },
            ],
            reply,
        });
        match answer.await {
            Ok(Some(choice)) if choice == "allow" => Ok(()),
            Ok(Some(_)) => Err(AgentError::Refused(format!("the human refused: {title}"))),
            _ => Err(AgentError::Refused(format!(
                "the request was withdrawn: {title}"
            ))),
        }
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
