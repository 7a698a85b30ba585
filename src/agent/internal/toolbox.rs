//! The internal agent's tools at work: each call is judged by the rules (and the
//! firewall for files), may ask the human first (writes and commands, unless the profile
//! allows them), and answers the model with whether it worked and what it gave.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::agent::error::AgentError;
use crate::agent::events::{AgentEvent, OptionKind, PermissionChoice, ask_gate};
use crate::agent::fs::Firewall;
use crate::agent::handle::Launch;
use crate::agent::link::SessionLink;
use crate::protocol::MsgType;
use crate::rules::{Operation, OperationKind};
use crate::text::clip;

/// How long `run_command` may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// How much of a file or a command's output a tool result carries.
const MAX_OUTPUT: usize = 64 * 1024;

/// What the tools work with: the session's launch (its folder, profile and
/// environment), the firewall, the session's context and inbox, and where events go.
pub(super) struct Toolbox {
    pub(super) launch: Arc<Launch>,
    pub(super) firewall: Firewall,
    pub(super) link: Arc<dyn SessionLink>,
    pub(super) events: mpsc::UnboundedSender<AgentEvent>,
}

/// A file or folder the agent named that could not be read or written.
fn io_error(path: &str, source: std::io::Error) -> AgentError {
    AgentError::File {
        path: path.to_string(),
        source,
    }
}

impl Toolbox {
    fn send(&self, event: AgentEvent) {
        let _ = self.events.send(event);
    }

    /// What a tool call does, for the rules.
    pub(super) fn operation(&self, name: &str, arguments: &str) -> Operation {
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
        ask_gate(&self.events, operation).await
    }

    /// Runs one tool: whether it worked, and what to tell the model.
    pub(super) async fn run(&self, call_id: &str, name: &str, arguments: &str) -> (bool, String) {
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
            .map_err(|source| AgentError::Unrunnable {
                command: "sh".into(),
                source,
            })?;
        let run = crate::sys::user_umask(&mut sh)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(COMMAND_TIMEOUT, run)
            .await
            .map_err(|_| AgentError::TimedOut {
                secs: COMMAND_TIMEOUT.as_secs(),
            })?
            .map_err(|source| AgentError::Run {
                command: "sh".into(),
                source,
            })?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        let text = clip(&text, MAX_OUTPUT);
        match output.status.code() {
            Some(0) => Ok(text),
            code => Err(AgentError::Exit { code, output: text }),
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
