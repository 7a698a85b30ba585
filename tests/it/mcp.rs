//! `cru mcp`: the real binary as an MCP server, driven over stdio by rmcp's client the way
//! an agent's MCP client drives it, against a real daemon and a registered session.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crucible::client::Client;
use crucible::protocol::methods as m;
use crucible::protocol::params::{IdParams, ListParams, RegisterParams};
use crucible::protocol::{InboxMessage, MsgType};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use testkit::daemon::call as daemon_call;
use testkit::params::respond;

use crate::common::*;

const LIMIT: Duration = Duration::from_secs(30);

type McpClient = RunningService<RoleClient, ()>;

/// Starts `cru mcp` with exactly these crucible variables (the test's own are removed)
/// and completes the MCP handshake.
async fn start_mcp(tk: &TestKiln, env: &[(&str, &str)]) -> McpClient {
    let mut command = tokio::process::Command::new(CRU);
    command
        .arg("mcp")
        .current_dir(tk.root())
        .env_remove("CRUCIBLE_HANDLE")
        .env_remove("CRUCIBLE_SOCKET")
        .envs(env.iter().copied());
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn cru mcp");
    tokio::time::timeout(LIMIT, ().serve(transport))
        .await
        .expect("the MCP handshake within the limit")
        .expect("the MCP handshake")
}

async fn call(mcp: &McpClient, tool: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("tool arguments must be an object: {arguments}");
    };
    mcp.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool}: {e}"))
}

/// The result's text content, joined.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts the four tools are listed; returns `ask`'s input schema.
async fn assert_tools(mcp: &McpClient) -> Value {
    let tools = mcp.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, ["approve", "ask", "notify", "secret"]);
    let ask = tools
        .iter()
        .find(|t| t.name == "ask")
        .expect("the ask tool");
    Value::Object(ask.input_schema.as_ref().clone())
}

/// Polls `inbox.list` until the session has an unanswered message of this type.
async fn wait_for_message(client: &Client, session_id: &str, msg_type: MsgType) -> InboxMessage {
    let deadline = Instant::now() + LIMIT;
    loop {
        let window = ListParams {
            session_id: Some(session_id.to_string()),
            limit: Some(100),
            ..Default::default()
        };
        let list = daemon_call::<m::InboxList>(client, window).await.messages;
        let found = list.iter().find(|m| m.msg_type == msg_type && !m.responded);
        if let Some(message) = found {
            return message.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no {msg_type} message for {session_id} within {LIMIT:?}: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls `tool` in a task (it blocks until answered), waits for its inbox message,
/// answers it, and returns the tool's result.
async fn call_and_answer(
    mcp: &Arc<McpClient>,
    client: &Client,
    session_id: &str,
    (tool, arguments): (&'static str, Value),
    msg_type: MsgType,
    response: &str,
) -> (InboxMessage, CallToolResult) {
    let pending = {
        let mcp = Arc::clone(mcp);
        tokio::spawn(async move { call(&mcp, tool, arguments).await })
    };
    let message = wait_for_message(client, session_id, msg_type).await;
    daemon_call::<m::InboxRespond>(client, respond(&message.id, response)).await;
    let result = tokio::time::timeout(LIMIT, pending)
        .await
        .expect("the tool returns once answered")
        .expect("the tool call task");
    (message, result)
}

#[tokio::test]
async fn mcp_tools_reach_the_session_inbox() {
    let tk = TestKiln::new();
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let register = RegisterParams {
        worktree: None,
        agent_type: "mcp".into(),
        agent_name: "tester".into(),
    };
    let registered = daemon_call::<m::SessionRegister>(&client, register).await;
    let session_id = registered.session_id.as_str();
    let handle = registered.handle.as_str();
    let socket = tk.kiln.socket_path();
    let socket = socket.to_str().expect("a UTF-8 socket path");
    let mcp = Arc::new(
        start_mcp(
            &tk,
            &[("CRUCIBLE_HANDLE", handle), ("CRUCIBLE_SOCKET", socket)],
        )
        .await,
    );

    let info = mcp.peer_info().expect("server info after the handshake");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("crucible")
    );
    assert!(
        info.instructions
            .as_deref()
            .is_some_and(|i| i.contains("block"))
    );

    let schema = assert_tools(&mcp).await;
    assert!(schema["properties"]["question"].is_object(), "{schema}");
    assert!(schema["properties"]["options"].is_object(), "{schema}");
    assert_eq!(schema["required"], json!(["question"]), "{schema}");

    // notify: returns at once with the id of an `info` message in the session's inbox.
    let sent = call(
        &mcp,
        "notify",
        json!({"title": "tests pass", "body": "all 12 of them"}),
    )
    .await;
    assert_eq!(sent.is_error, Some(false), "{sent:?}");
    let sent = text(&sent);
    let id = sent.strip_prefix("sent ").expect("\"sent <id>\"");
    let got = daemon_call::<m::InboxGet>(&client, IdParams { id: id.into() })
        .await
        .message;
    assert_eq!(got.msg_type, MsgType::Info);
    assert_eq!(got.session_id, session_id);
    assert_eq!(got.title, "tests pass");
    assert_eq!(got.body.as_deref(), Some("all 12 of them"));

    // ask: blocks until answered; the answer is matched case-insensitively and returned
    // in the option's own spelling.
    let (asked, answer) = call_and_answer(
        &mcp,
        &client,
        session_id,
        (
            "ask",
            json!({"question": "Which auth?", "options": ["JWT", "Session"]}),
        ),
        MsgType::DecisionNeeded,
        "session",
    )
    .await;
    assert_eq!(asked.title, "Which auth?");
    assert_eq!(asked.options, Some(vec!["JWT".into(), "Session".into()]));
    assert_eq!(answer.is_error, Some(false), "{answer:?}");
    assert_eq!(text(&answer), "Session");

    // approve: a denial is an answer, not a tool error.
    let (requested, verdict) = call_and_answer(
        &mcp,
        &client,
        session_id,
        ("approve", json!({"action": "git push --force"})),
        MsgType::ApprovalRequired,
        "deny",
    )
    .await;
    assert_eq!(requested.title, "git push --force");
    assert_eq!(verdict.is_error, Some(false), "{verdict:?}");
    assert_eq!(text(&verdict), "denied");

    // A question nobody answers in time is a tool error that says so.
    let unanswered = call(
        &mcp,
        "ask",
        json!({"question": "Anyone there?", "timeout_secs": 1}),
    )
    .await;
    assert_eq!(unanswered.is_error, Some(true), "{unanswered:?}");
    assert!(
        text(&unanswered).contains("no answer within 1 s"),
        "{unanswered:?}"
    );

    let mcp = Arc::into_inner(mcp).expect("no tool call still holds the client");
    mcp.cancel().await.expect("close the MCP connection");
}

#[tokio::test]
async fn mcp_outside_a_session_lists_tools_and_explains_each_call() {
    let tk = TestKiln::new();
    let mcp = start_mcp(&tk, &[]).await;

    assert_tools(&mcp).await;
    let result = call(&mcp, "notify", json!({"title": "hello"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(text(&result).contains("CRUCIBLE_HANDLE"), "{result:?}");

    mcp.cancel().await.expect("close the MCP connection");
}

/// Every ACP agent is offered `cru mcp` in `session/new`: the scripted agent says the
/// servers it got; starting that server exactly as offered gives the session's inbox.
#[tokio::test]
async fn acp_agents_are_offered_the_inbox_as_an_mcp_server() {
    use crate::sessions::{agent_kiln, create, said, wait_state};
    use crucible::protocol::SessionState;

    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("mcp")).await;
    wait_state(&client, &s.id, SessionState::Complete).await;
    let offered: Value = serde_json::from_str(said(&client, &s.id).await.trim())
        .expect("the agent says the offered servers as JSON");
    let servers = offered.as_array().expect("an array of servers");
    assert_eq!(servers.len(), 1, "{offered}");
    let server = &servers[0];
    assert_eq!(server["name"], "crucible");
    assert_eq!(server["args"], json!(["mcp"]));
    let env: Vec<(String, String)> = server["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| {
            let text = |k: &str| v[k].as_str().expect("a string").to_string();
            (text("name"), text("value"))
        })
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "CRUCIBLE_SESSION_ID" && *v == s.id)
    );
    assert!(
        env.iter()
            .any(|(k, v)| k == "CRUCIBLE_HANDLE" && v.starts_with("H-"))
    );

    let mut command = tokio::process::Command::new(server["command"].as_str().expect("command"));
    command
        .arg("mcp")
        .env_remove("CRUCIBLE_HANDLE")
        .env_remove("CRUCIBLE_SOCKET")
        .envs(env);
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the offered server");
    let mcp = Arc::new(
        tokio::time::timeout(LIMIT, ().serve(transport))
            .await
            .expect("the MCP handshake within the limit")
            .expect("the MCP handshake"),
    );
    assert_tools(&mcp).await;
    let (asked, answer) = call_and_answer(
        &mcp,
        &client,
        &s.id,
        (
            "ask",
            json!({"question": "Ship it?", "options": ["yes", "no"]}),
        ),
        MsgType::DecisionNeeded,
        "yes",
    )
    .await;
    assert_eq!(asked.session_id, s.id, "the question is the session's own");
    assert_eq!(text(&answer), "yes");
    let mcp = Arc::into_inner(mcp).expect("no tool call still holds the client");
    mcp.cancel().await.expect("close the MCP connection");
}
