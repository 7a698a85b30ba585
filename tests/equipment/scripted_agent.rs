//! `cru-scripted-agent`: test equipment, not part of crucible itself.
//!
//! A small, deterministic ACP (Agent Client Protocol, v1) agent that speaks the
//! real protocol over stdio (newline-delimited JSON-RPC 2.0) through the
//! `agent-client-protocol` crate's agent side. Integration tests start it in
//! place of a real agent and steer it with the prompts they send: the last text
//! block of a `session/prompt` is run as a SCRIPT (text blocks before it are
//! CONTEXT, e.g. what crucible carries into a fresh session; they are not run), one
//! command per line (surrounding whitespace is trimmed, blank lines are
//! skipped). When the script ends the prompt is answered with `end_turn`; a
//! `session/cancel` for the session makes it answer with `cancelled` instead.
//!
//! Script commands:
//!
//! | command                  | effect |
//! |--------------------------|--------|
//! | `say <text>`             | `agent_message_chunk` with the text (`\n` in it is a newline), split into two chunks (one if shorter than two chars) |
//! | `think <text>`           | one `agent_thought_chunk` with the text |
//! | `stamp`                  | one `agent_message_chunk` saying `stamp <ns>`: the time it was sent, in nanoseconds since the Unix epoch (for latency benchmarks) |
//! | `plan <a> \| <b> \| ...` | a `plan` update, every entry medium priority and pending |
//! | `tool <id> <title...>`   | a pending `tool_call` (kind other), then a `tool_call_update` to completed |
//! | `permit <id> <title...>` | `session/request_permission` with options `allow` (allow once) and `reject` (reject once); `allow` says `granted: <title>`, any other option says `denied: <title>` and ends the turn, a cancelled outcome ends the turn as cancelled |
//! | `permit-run <id> <command...>` | as `permit`, asked the way claude-agent-acp asks for a shell command: kind `execute`, the command in `raw_input.command`, titled `` `<command>` ``; says `granted: <command>` or `denied: <command>` |
//! | `limit-ahead <secs>` | a `usage_update` carrying claude-agent-acp's rate-limit event in `_meta["_claude/rateLimit"]`: status `rejected`, `rateLimitType` `five_hour`, `resetsAt` now + `<secs>` (Unix seconds); the turn goes on |
//! | `codex-permit <id> <title...>` | `session/request_permission` with codex-acp's options: `approved` "Yes, proceed" (allow once), `approved-always` "Yes, and don't ask again for this command" (allow always), `abort` "No, and tell Codex what to do differently" (reject once); says `chose <option id>: <title>` |
//! | `write <path> <content>` | `fs/write_text_file` (`\n` in the content is a newline); says `wrote <path>` or `write failed: <path>: <error>` |
//! | `read <path>`            | `fs/read_text_file`; says `read <path>: <content>` or `read failed: <path>: <error>` |
//! | `usage <used> <size> [<cost> <currency>]` | `usage_update`: tokens in context, the window, and the session's cost so far |
//! | `limit-once <secs>`      | the first time in the session: the prompt fails with a usage-limit error, `You've hit your usage limit. Please retry in <secs>s.`; afterwards nothing |
//! | `limit-while <path> <secs>` | while the file `<path>` exists: the prompt fails with that usage-limit error (a limit that outlives the agent's process) |
//! | `tokens <input> <output> [<cached>]` | the turn's end reports these tokens (`PromptResponse.usage`) |
//! | `skills <name…>`         | `available_commands_update` with these commands (description `the <name> command`) |
//! | `run <program> <args…>`  | `terminal/create` (words split on spaces), `terminal/wait_for_exit`, `terminal/output`, `terminal/release`; says `ran <line>: exit <code>: <output>` or `run refused: <line>: <error>` |
//! | `spawn <program> <args…>` | runs the program as the agent's own child (in whatever sandbox or container the agent is in, with its environment; words split on spaces); says `spawned <line>: exit <code>: <stdout and stderr>` |
//! | `sleep <ms>`             | waits; a cancel ends the turn as cancelled |
//! | `hang`                   | waits for `session/cancel`, then ends the turn as cancelled |
//! | `log <text>`             | writes the text as a line to stderr |
//! | `hog <MiB>`              | the agent itself takes that much memory (every page written) and keeps it for the rest of its life; says `holding <MiB> MiB` |
//! | `crash [code]`           | flushes every frame sent so far and exits the process with the code (default 101) |
//! | `mcp`                    | says the MCP servers the client offered for the session, as a JSON array of `session/new`'s `mcpServers` |
//! | `session`                | says `session <id>`: the ACP session the prompt came in |
//! | `context`                | says `context: <the prompt's CONTEXT blocks, joined with a blank line>`, or `context: none` |
//!
//! Relative `read`/`write` paths are joined onto the session's cwd before they
//! are sent; absolute paths are sent as they are. Results of `permit`, `write`
//! and `read` are said as one chunk. Any other or malformed line says
//! `unknown command: <line>` and the script continues.
//!
//! Other behaviour: `initialize` echoes the requested protocol version and
//! advertises `loadSession` only when the binary is started with `--load`;
//! `session/new` hands out `scripted-<n>-<pid>` ids; `session/load` (with
//! `--load` only, method-not-found otherwise) accepts any id, sends one
//! `resumed <id>` message chunk and succeeds. The process exits with 0 when
//! stdin reaches EOF. Only protocol frames go to stdout; diagnostics go to
//! stderr.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // test equipment: one match over the script's commands is its language

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandsUpdate, CancelNotification, ContentBlock,
    ContentChunk, CreateTerminalRequest, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, MessageId, NewSessionRequest, NewSessionResponse,
    PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    PromptRequest, PromptResponse, ReadTextFileRequest, ReleaseTerminalRequest,
    RequestPermissionOutcome, RequestPermissionRequest, SessionId, SessionNotification,
    SessionUpdate, StopReason, TerminalOutputRequest, ToolCall, ToolCallId, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, WaitForTerminalExitRequest,
    WriteTextFileRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, Lines, UntypedMessage};
use futures::{AsyncBufReadExt, Sink};
use tokio::io::AsyncWriteExt;
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::sync::CancellationToken;

const AGENT_NAME: &str = "cru-scripted-agent";

/// Message ids, one per message the agent says.
static MESSAGE_IDS: AtomicU64 = AtomicU64::new(1);

/// Exit code of `crash` without an argument.
const DEFAULT_CRASH_CODE: i32 = 101;

/// What `hog` took, held until the agent ends.
static HELD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Internal marker frame used by `crash`. It travels through the SDK's
/// outgoing queue like any other frame, so when the stdout writer reaches it
/// every earlier frame has been written and flushed; the writer then exits
/// the process instead of writing it.
const EXIT_METHOD: &str = "_cru-scripted-agent/exit";

#[tokio::main]
async fn main() {
    let load_supported = std::env::args().skip(1).any(|arg| arg == "--load");
    let agent = Arc::new(ScriptedAgent::new(load_supported));
    let code = match serve(agent).await {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("{AGENT_NAME}: connection failed: {error}");
            1
        }
    };
    // Exit explicitly: dropping the runtime could wait on a blocked stdin read.
    std::process::exit(code);
}

/// Serves the ACP connection on stdin/stdout until stdin reaches EOF.
async fn serve(agent: Arc<ScriptedAgent>) -> Result<(), Error> {
    let incoming = futures::io::BufReader::new(tokio::io::stdin().compat()).lines();
    let transport = Lines::new(Box::pin(stdout_sink()), incoming);

    let on_initialize = agent.clone();
    let on_new = agent.clone();
    let on_load = agent.clone();
    let on_prompt = agent.clone();
    let on_cancel = agent;

    Agent
        .v1()
        .name(AGENT_NAME)
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                on_initialize.initialize(&request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, _cx| {
                on_new.new_session(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                on_load.load_session(request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                on_prompt.prompt(request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                on_cancel.cancel(&notification.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

/// The outgoing half of the transport: writes each frame as one line to
/// stdout and flushes it, and acts on the `crash` marker frame.
fn stdout_sink() -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures::sink::unfold(tokio::io::stdout(), |mut stdout, line: String| async move {
        if let Some(code) = exit_code_of(&line) {
            stdout.flush().await?;
            std::process::exit(code);
        }
        let mut frame = line.into_bytes();
        frame.push(b'\n');
        stdout.write_all(&frame).await?;
        stdout.flush().await?;
        Ok(stdout)
    })
}

/// The exit code carried by a `crash` marker frame, if `line` is one.
fn exit_code_of(line: &str) -> Option<i32> {
    if !line.contains(EXIT_METHOD) {
        return None;
    }
    let frame: serde_json::Value = serde_json::from_str(line).ok()?;
    if frame.get("method")?.as_str()? != EXIT_METHOD {
        return None;
    }
    let code = frame.get("params")?.get("code")?.as_i64()?;
    Some(i32::try_from(code).unwrap_or(DEFAULT_CRASH_CODE))
}

/// Connection-wide state shared by the handlers.
struct ScriptedAgent {
    load_supported: bool,
    session_counter: AtomicU64,
    sessions: Mutex<HashMap<SessionId, SessionState>>,
}

struct SessionState {
    cwd: PathBuf,
    /// The `mcpServers` the client offered, as JSON.
    mcp_servers: String,
    /// Cancelled by `session/cancel`; replaced at the start of every turn.
    turn: CancellationToken,
}

impl ScriptedAgent {
    fn new(load_supported: bool) -> Self {
        Self {
            load_supported,
            session_counter: AtomicU64::new(0),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionState>> {
        // The map stays consistent even if a holder panicked.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember_session(&self, session_id: SessionId, cwd: PathBuf, mcp_servers: String) {
        let state = SessionState {
            cwd,
            mcp_servers,
            turn: CancellationToken::new(),
        };
        self.sessions().insert(session_id, state);
    }

    fn initialize(
        &self,
        request: &InitializeRequest,
        responder: Responder<InitializeResponse>,
    ) -> Result<(), Error> {
        let capabilities = AgentCapabilities::new().load_session(self.load_supported);
        responder.respond(
            InitializeResponse::new(request.protocol_version)
                .agent_capabilities(capabilities)
                .agent_info(Implementation::new(AGENT_NAME, env!("CARGO_PKG_VERSION"))),
        )
    }

    fn new_session(
        &self,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
    ) -> Result<(), Error> {
        let counter = self.session_counter.fetch_add(1, Ordering::Relaxed) + 1;
        let session_id = SessionId::new(format!("scripted-{counter}-{}", std::process::id()));
        let mcp = serde_json::to_string(&request.mcp_servers).unwrap_or_default();
        self.remember_session(session_id.clone(), request.cwd, mcp);
        responder.respond(NewSessionResponse::new(session_id))
    }

    fn load_session(
        &self,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if !self.load_supported {
            return responder.respond_with_error(Error::method_not_found());
        }
        let session_id = request.session_id;
        let mcp = serde_json::to_string(&request.mcp_servers).unwrap_or_default();
        self.remember_session(session_id.clone(), request.cwd, mcp);
        cx.send_notification(message_chunk(&session_id, format!("resumed {session_id}")))?;
        responder.respond(LoadSessionResponse::new())
    }

    /// Starts the prompt's script in a spawned task and returns at once: the
    /// script sends requests to the client, whose responses can only arrive
    /// while the dispatch loop is free. The task answers the prompt.
    fn prompt(
        &self,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let Some((cwd, cancel, mcp_servers)) = self.start_turn(&request.session_id) else {
            let error =
                agent_client_protocol::v1::schema::Error::session_not_found(request.session_id);
            return responder.respond_with_error(error.into());
        };
        let (script, context) = script_of(&request.prompt);
        let turn = Turn {
            cx: cx.clone(),
            context,
            session_id: request.session_id,
            cwd,
            cancel,
            mcp_servers,
            tokens: std::sync::Mutex::new(None),
        };
        cx.spawn(async move {
            let result = turn.run(&script).await;
            let tokens = turn.tokens.lock().ok().and_then(|t| t.clone());
            responder.respond_with_result(result.map(|reason| match tokens {
                Some(tokens) => PromptResponse::new(reason).usage(tokens),
                None => PromptResponse::new(reason),
            }))
        })
    }

    /// Gives the session a fresh cancellation token for a new turn; returns
    /// the session's cwd, that token and its MCP servers, or `None` for an
    /// unknown session.
    fn start_turn(&self, session_id: &SessionId) -> Option<(PathBuf, CancellationToken, String)> {
        let mut sessions = self.sessions();
        let session = sessions.get_mut(session_id)?;
        session.turn = CancellationToken::new();
        Some((
            session.cwd.clone(),
            session.turn.clone(),
            session.mcp_servers.clone(),
        ))
    }

    fn cancel(&self, session_id: &SessionId) {
        match self.sessions().get(session_id) {
            Some(session) => session.turn.cancel(),
            None => eprintln!("{AGENT_NAME}: session/cancel for unknown session {session_id}"),
        }
    }
}

/// The script carried by a prompt (its last text block) and its context (the text
/// blocks before it, joined with a blank line).
fn script_of(prompt: &[ContentBlock]) -> (String, String) {
    let mut texts: Vec<&str> = prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect();
    let script = texts.pop().unwrap_or_default().to_string();
    (script, texts.join("\n\n"))
}

/// One script command, parsed from a trimmed, non-empty line.
enum Command<'a> {
    Say(&'a str),
    Think(&'a str),
    Stamp,
    Plan(Vec<&'a str>),
    Tool {
        id: &'a str,
        title: &'a str,
    },
    Permit {
        id: &'a str,
        title: &'a str,
    },
    /// A permission request for a shell command, as claude-agent-acp asks: kind
    /// `execute`, the command in `raw_input`.
    PermitRun {
        id: &'a str,
        command: &'a str,
    },
    CodexPermit {
        id: &'a str,
        title: &'a str,
    },
    Write {
        path: &'a str,
        content: String,
    },
    Read {
        path: &'a str,
    },
    Run(&'a str),
    Spawn(&'a str),
    Skills(&'a str),
    Usage(&'a str),
    Tokens(&'a str),
    LimitOnce(u64),
    LimitAhead(u64),
    LimitWhile(&'a str, u64),
    Sleep(Duration),
    Hang,
    Log(&'a str),
    Crash(i32),
    Hog(usize),
    Mcp,
    Session,
    Context,
}

impl<'a> Command<'a> {
    /// `None` for unknown commands and malformed arguments.
    fn parse(line: &'a str) -> Option<Self> {
        let (word, rest) = split_word(line);
        let command = match word {
            "say" => Self::Say(rest),
            "think" => Self::Think(rest),
            "stamp" if rest.is_empty() => Self::Stamp,
            "session" => Self::Session,
            "context" => Self::Context,
            "plan" => Self::Plan(
                rest.split('|')
                    .map(str::trim)
                    .filter(|entry| !entry.is_empty())
                    .collect(),
            ),
            "permit-run" => {
                let (id, command) = split_word(rest);
                if id.is_empty() || command.is_empty() {
                    return None;
                }
                Self::PermitRun { id, command }
            }
            "tool" | "permit" | "codex-permit" => {
                let (id, title) = split_word(rest);
                if id.is_empty() {
                    return None;
                }
                match word {
                    "tool" => Self::Tool { id, title },
                    "permit" => Self::Permit { id, title },
                    _ => Self::CodexPermit { id, title },
                }
            }
            "write" => {
                let (path, content) = split_word(rest);
                if path.is_empty() {
                    return None;
                }
                let content = content.replace("\\n", "\n");
                Self::Write { path, content }
            }
            "read" if !rest.is_empty() => Self::Read { path: rest },
            "run" if !rest.is_empty() => Self::Run(rest),
            "spawn" if !rest.is_empty() => Self::Spawn(rest),
            "skills" => Self::Skills(rest),
            "usage" => Self::Usage(rest),
            "tokens" => Self::Tokens(rest),
            "limit-once" => Self::LimitOnce(rest.parse().ok()?),
            "limit-ahead" => Self::LimitAhead(rest.parse().ok()?),
            "limit-while" => {
                let (path, secs) = split_word(rest);
                Self::LimitWhile(path, secs.parse().ok()?)
            }
            "sleep" => Self::Sleep(Duration::from_millis(rest.parse().ok()?)),
            "hang" if rest.is_empty() => Self::Hang,
            "log" => Self::Log(rest),
            "hog" => Self::Hog(rest.parse().ok()?),
            "crash" if rest.is_empty() => Self::Crash(DEFAULT_CRASH_CODE),
            "crash" => Self::Crash(rest.parse().ok()?),
            "mcp" if rest.is_empty() => Self::Mcp,
            _ => return None,
        };
        Some(command)
    }
}

/// Splits off the first whitespace-separated word; the rest is trimmed.
fn split_word(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (text, ""),
    }
}

/// What the script does after a command.
enum Flow {
    Continue,
    End(StopReason),
}

/// One prompt turn: runs its script against the client.
struct Turn {
    cx: ConnectionTo<Client>,
    /// The prompt's text blocks before its script.
    context: String,
    session_id: SessionId,
    cwd: PathBuf,
    cancel: CancellationToken,
    mcp_servers: String,
    /// The tokens the turn's end reports, if a `tokens` line said.
    tokens: std::sync::Mutex<Option<agent_client_protocol::v1::schema::Usage>>,
}

impl Turn {
    /// Runs the script and returns the prompt's stop reason. Errors only when
    /// the connection itself fails.
    async fn run(&self, script: &str) -> Result<StopReason, Error> {
        let lines = script
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty());
        for line in lines {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            if let Flow::End(reason) = self.execute(line).await? {
                return Ok(reason);
            }
        }
        Ok(StopReason::EndTurn)
    }

    async fn execute(&self, line: &str) -> Result<Flow, Error> {
        let Some(command) = Command::parse(line) else {
            self.say(format!("unknown command: {line}"))?;
            return Ok(Flow::Continue);
        };
        match command {
            Command::Say(text) => {
                let text = text.replace("\\n", "\n");
                let (first, second) = split_in_half(&text);
                self.say_parts(&[first, second])?;
            }
            Command::Stamp => self.say(format!("stamp {}", unix_nanos()))?,
            Command::Mcp => self.say(self.mcp_servers.clone())?,
            Command::Session => self.say(format!("session {}", self.session_id))?,
            Command::Context => {
                let context = if self.context.is_empty() {
                    "none"
                } else {
                    self.context.as_str()
                };
                self.say(format!("context: {context}"))?;
            }
            Command::Think(text) => {
                let chunk = ContentChunk::new(ContentBlock::from(text));
                self.update(SessionUpdate::AgentThoughtChunk(chunk))?;
            }
            Command::Plan(entries) => {
                let entries = entries
                    .into_iter()
                    .map(|entry| {
                        PlanEntry::new(entry, PlanEntryPriority::Medium, PlanEntryStatus::Pending)
                    })
                    .collect();
                self.update(SessionUpdate::Plan(Plan::new(entries)))?;
            }
            Command::Tool { id, title } => {
                let call = ToolCall::new(ToolCallId::new(id), title)
                    .status(ToolCallStatus::Pending)
                    .kind(ToolKind::Other);
                self.update(SessionUpdate::ToolCall(call))?;
                let done = ToolCallUpdateFields::new().status(ToolCallStatus::Completed);
                let update = ToolCallUpdate::new(ToolCallId::new(id), done);
                self.update(SessionUpdate::ToolCallUpdate(update))?;
            }
            Command::Permit { id, title } => return self.permit(id, title).await,
            Command::PermitRun { id, command } => {
                let fields = ToolCallUpdateFields::new()
                    .title(format!("`{command}`"))
                    .kind(ToolKind::Execute)
                    .raw_input(serde_json::json!({ "command": command }));
                return self.ask_permission(id, fields, command).await;
            }
            Command::CodexPermit { id, title } => return self.codex_permit(id, title).await,
            Command::Write { path, content } => {
                let request =
                    WriteTextFileRequest::new(self.session_id.clone(), self.resolve(path), content);
                match self.cx.send_request(request).block_task().await {
                    Ok(_) => self.say(format!("wrote {path}"))?,
                    Err(error) => {
                        self.say(format!("write failed: {path}: {}", describe(&error)))?;
                    }
                }
            }
            Command::Read { path } => {
                let request = ReadTextFileRequest::new(self.session_id.clone(), self.resolve(path));
                match self.cx.send_request(request).block_task().await {
                    Ok(response) => self.say(format!("read {path}: {}", response.content))?,
                    Err(error) => {
                        self.say(format!("read failed: {path}: {}", describe(&error)))?;
                    }
                }
            }
            Command::Skills(names) => {
                let commands = names
                    .split_whitespace()
                    .map(|n| AvailableCommand::new(n, format!("the {n} command")))
                    .collect();
                self.update(SessionUpdate::AvailableCommandsUpdate(
                    AvailableCommandsUpdate::new(commands),
                ))?;
            }
            Command::Usage(numbers) => {
                let words: Vec<&str> = numbers.split_whitespace().collect();
                let (Some(used), Some(size)) = (
                    words.first().and_then(|w| w.parse().ok()),
                    words.get(1).and_then(|w| w.parse().ok()),
                ) else {
                    self.say(format!("unknown command: usage {numbers}"))?;
                    return Ok(Flow::Continue);
                };
                let mut usage = agent_client_protocol::v1::schema::UsageUpdate::new(used, size);
                if let (Some(amount), Some(currency)) =
                    (words.get(2).and_then(|w| w.parse().ok()), words.get(3))
                {
                    usage = usage.cost(agent_client_protocol::v1::schema::Cost::new(
                        amount,
                        currency.to_string(),
                    ));
                }
                self.update(SessionUpdate::UsageUpdate(usage))?;
            }
            Command::LimitAhead(secs) => {
                let resets_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
                    + secs;
                let info = serde_json::json!({
                    "status": "rejected",
                    "resetsAt": resets_at,
                    "rateLimitType": "five_hour",
                });
                let mut meta = serde_json::Map::new();
                meta.insert("_claude/rateLimit".into(), info);
                let usage =
                    agent_client_protocol::v1::schema::UsageUpdate::new(1000, 200_000).meta(meta);
                self.update(SessionUpdate::UsageUpdate(usage))?;
            }
            Command::LimitOnce(secs) => {
                // Sessions that already hit their limit once.
                static HIT: Mutex<Vec<String>> = Mutex::new(Vec::new());
                let mut hit = HIT.lock().unwrap_or_else(PoisonError::into_inner);
                let id = self.session_id.to_string();
                if !hit.contains(&id) {
                    hit.push(id);
                    return Err(Error::new(
                        agent_client_protocol::ErrorCode::INTERNAL_ERROR,
                        format!("You've hit your usage limit. Please retry in {secs}s."),
                    ));
                }
            }
            Command::LimitWhile(path, secs) => {
                if std::path::Path::new(path).exists() {
                    return Err(Error::new(
                        agent_client_protocol::ErrorCode::INTERNAL_ERROR,
                        format!("You've hit your usage limit. Please retry in {secs}s."),
                    ));
                }
            }
            Command::Tokens(numbers) => {
                let n: Vec<u64> = numbers
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                let (Some(&input), Some(&output)) = (n.first(), n.get(1)) else {
                    self.say(format!("unknown command: tokens {numbers}"))?;
                    return Ok(Flow::Continue);
                };
                let cached = n.get(2).copied().unwrap_or(0);
                let usage = agent_client_protocol::v1::schema::Usage::new(
                    input + output + cached,
                    input,
                    output,
                )
                .cached_read_tokens(cached);
                if let Ok(mut tokens) = self.tokens.lock() {
                    *tokens = Some(usage);
                }
            }
            Command::Run(line) => {
                let mut words = line.split_whitespace().map(str::to_string);
                let program = words.next().unwrap_or_default();
                let request = CreateTerminalRequest::new(self.session_id.clone(), program)
                    .args(words.collect());
                let id = match self.cx.send_request(request).block_task().await {
                    Ok(created) => created.terminal_id,
                    Err(error) => {
                        self.say(format!("run refused: {line}: {}", describe(&error)))?;
                        return Ok(Flow::Continue);
                    }
                };
                let waited = WaitForTerminalExitRequest::new(self.session_id.clone(), id.clone());
                let exit = self.cx.send_request(waited).block_task().await?;
                let output = TerminalOutputRequest::new(self.session_id.clone(), id.clone());
                let output = self.cx.send_request(output).block_task().await?;
                let release = ReleaseTerminalRequest::new(self.session_id.clone(), id);
                self.cx.send_request(release).block_task().await?;
                let code = exit
                    .exit_status
                    .exit_code
                    .map_or_else(|| "none".to_string(), |c| c.to_string());
                self.say(format!("ran {line}: exit {code}: {}", output.output.trim()))?;
            }
            Command::Sleep(duration) => {
                tokio::select! {
                    () = tokio::time::sleep(duration) => {}
                    () = self.cancel.cancelled() => return Ok(Flow::End(StopReason::Cancelled)),
                }
            }
            Command::Hang => {
                self.cancel.cancelled().await;
                return Ok(Flow::End(StopReason::Cancelled));
            }
            Command::Spawn(line) => {
                let mut words = line.split_whitespace();
                let program = words.next().unwrap_or_default();
                let ran = tokio::process::Command::new(program)
                    .args(words)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .await;
                let said = match ran {
                    Ok(out) => format!(
                        "exit {}: {}{}",
                        out.status
                            .code()
                            .map_or_else(|| "none".to_string(), |c| c.to_string()),
                        String::from_utf8_lossy(&out.stdout).trim(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ),
                    Err(e) => format!("cannot start: {e}"),
                };
                self.say(format!("spawned {line}: {said}"))?;
            }
            Command::Log(text) => eprintln!("{text}"),
            Command::Crash(code) => self.crash(code).await,
            Command::Hog(mib) => {
                // In MiB pieces: the kernel refuses one allocation larger than memory
                // outright, where growing past it meets the OOM killer.
                let mut held = HELD.lock().unwrap();
                for _ in 0..mib {
                    held.push(vec![1u8; 1 << 20]);
                }
                self.say(format!("holding {mib} MiB"))?;
            }
        }
        Ok(Flow::Continue)
    }

    async fn permit(&self, id: &str, title: &str) -> Result<Flow, Error> {
        let fields = ToolCallUpdateFields::new().title(title.to_string());
        self.ask_permission(id, fields, title).await
    }

    /// Asks permission for the tool call `id` (Allow / Reject) and says the outcome.
    async fn ask_permission(
        &self,
        id: &str,
        fields: ToolCallUpdateFields,
        title: &str,
    ) -> Result<Flow, Error> {
        let tool_call = ToolCallUpdate::new(ToolCallId::new(id), fields);
        let options = vec![
            PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let request = RequestPermissionRequest::new(self.session_id.clone(), tool_call, options);
        let outcome = match self.cx.send_request(request).block_task().await {
            Ok(response) => response.outcome,
            Err(error) => {
                self.say(format!("permission failed: {title}: {}", describe(&error)))?;
                return Ok(Flow::End(StopReason::EndTurn));
            }
        };
        match outcome {
            RequestPermissionOutcome::Selected(selected) if &*selected.option_id.0 == "allow" => {
                self.say(format!("granted: {title}"))?;
                Ok(Flow::Continue)
            }
            RequestPermissionOutcome::Cancelled => Ok(Flow::End(StopReason::Cancelled)),
            // Any other option, or an outcome this schema version does not know.
            _ => {
                self.say(format!("denied: {title}"))?;
                Ok(Flow::End(StopReason::EndTurn))
            }
        }
    }

    /// A permission request with codex-acp's option names and kinds; says which option
    /// the client chose.
    async fn codex_permit(&self, id: &str, title: &str) -> Result<Flow, Error> {
        let tool_call = ToolCallUpdate::new(
            ToolCallId::new(id),
            ToolCallUpdateFields::new().title(title.to_string()),
        );
        let options = vec![
            PermissionOption::new("approved", "Yes, proceed", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "approved-always",
                "Yes, and don't ask again for this command",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(
                "abort",
                "No, and tell Codex what to do differently",
                PermissionOptionKind::RejectOnce,
            ),
        ];
        let request = RequestPermissionRequest::new(self.session_id.clone(), tool_call, options);
        match self.cx.send_request(request).block_task().await {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => {
                    self.say(format!("chose {}: {title}", selected.option_id.0))?;
                    Ok(Flow::Continue)
                }
                _ => Ok(Flow::End(StopReason::Cancelled)),
            },
            Err(error) => {
                self.say(format!("permission failed: {title}: {}", describe(&error)))?;
                Ok(Flow::End(StopReason::EndTurn))
            }
        }
    }

    /// Exits the process once every frame queued so far is on stdout; see
    /// [`EXIT_METHOD`].
    async fn crash(&self, code: i32) -> ! {
        let marker = UntypedMessage::new(EXIT_METHOD, serde_json::json!({ "code": code }))
            .and_then(|marker| self.cx.send_notification(marker));
        if let Err(error) = marker {
            eprintln!("{AGENT_NAME}: could not queue the crash, exiting now: {error}");
            std::process::exit(code);
        }
        // The stdout writer exits the process when it reaches the marker.
        std::future::pending().await
    }

    fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        }
    }

    /// Sends one message in one `agent_message_chunk`.
    fn say(&self, text: impl Into<String>) -> Result<(), Error> {
        self.say_parts(&[&text.into()])
    }

    /// Sends one message as several `agent_message_chunk`s sharing a message id
    /// (empty parts are skipped).
    fn say_parts(&self, parts: &[&str]) -> Result<(), Error> {
        let id = format!("m{}", MESSAGE_IDS.fetch_add(1, Ordering::Relaxed));
        for part in parts.iter().filter(|p| !p.is_empty()) {
            let chunk = ContentChunk::new(ContentBlock::from(part.to_string()))
                .message_id(MessageId::new(id.as_str()));
            self.cx.send_notification(SessionNotification::new(
                self.session_id.clone(),
                SessionUpdate::AgentMessageChunk(chunk),
            ))?;
        }
        Ok(())
    }

    fn update(&self, update: SessionUpdate) -> Result<(), Error> {
        self.cx
            .send_notification(SessionNotification::new(self.session_id.clone(), update))
    }
}

fn message_chunk(session_id: &SessionId, text: String) -> SessionNotification {
    let chunk = ContentChunk::new(ContentBlock::from(text));
    SessionNotification::new(session_id.clone(), SessionUpdate::AgentMessageChunk(chunk))
}

/// Now, in nanoseconds since the Unix epoch (0 if the clock is before it).
fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

/// Splits `text` roughly in half, at a char boundary.
fn split_in_half(text: &str) -> (&str, &str) {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    text.split_at(middle)
}

/// A client error as one line: its message, plus its data when present.
fn describe(error: &Error) -> String {
    match &error.data {
        None | Some(serde_json::Value::Null) => error.message.clone(),
        Some(serde_json::Value::String(data)) => format!("{}: {data}", error.message),
        Some(data) => format!("{}: {data}", error.message),
    }
}
