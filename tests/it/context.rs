//! Context stacks end to end: every operation and refusal on a stored stack across
//! daemon restarts (kill -9 included), an ACP session rolled back into a fresh agent
//! session, and the internal agent against a scripted OpenAI-compatible server.

use crucible::client::Client;
use crucible::context::Message;
use crucible::openai::ChatMessage;
use crucible::protocol::methods as m;
use crucible::protocol::params::RegisterParams;
use crucible::protocol::{
    ContextNameParams, ContextPopParams, ContextReplaceParams, ContextResult,
    ContextSummarizeParams, Handle, MsgType, SessionState,
};
use crucible::sessions::PREAMBLE_HEADER;
use serde_json::{Value, json};
use testkit::daemon::call;
use testkit::model_server::{ScriptedReply, ScriptedServer};
use testkit::params::{prompt, query, respond, session_id};

use crate::common::*;
use crate::sessions::{LONG, agent_kiln, create, wait_message, wait_session};

/// The session's stack as `context.get` gives it.
async fn stack(client: &Client, id: &str) -> ContextResult {
    call::<m::ContextGet>(client, session_id(id)).await
}

/// The params of `context.checkpoint` and `context.rollback`.
fn named(id: &str, name: &str) -> ContextNameParams {
    ContextNameParams {
        session_id: id.into(),
        name: name.into(),
    }
}

/// Calls an operation that must be refused with -32602 and a message containing `says`,
/// and checks the stack did not change.
async fn refused(client: &Client, id: &str, method: &str, params: Value, says: &str) {
    let before = stack(client, id).await;
    let err = client
        .call_value(method, params.clone())
        .await
        .expect_err("the operation must be refused");
    assert_eq!(err.rpc_code(), Some(-32602), "{method} {params}: {err}");
    assert!(err.to_string().contains(says), "{method}: {err}");
    let after = stack(client, id).await;
    assert_eq!(before, after, "a refused {method} changed the stack");
}

fn kinds(r: &ContextResult) -> Vec<&'static str> {
    r.stack.entries().iter().map(|e| e.message.kind()).collect()
}

fn texts(r: &ContextResult) -> Vec<String> {
    r.stack
        .entries()
        .iter()
        .map(|e| e.message.text().to_string())
        .collect()
}

async fn wait_turns(client: &Client, id: &str, n: u64) {
    wait_session(client, id, &format!("{n} turns"), |s| {
        s.turn_count >= n && s.state == Some(SessionState::Complete)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_operation_and_refusal_survives_daemon_restarts() {
    let tk = agent_kiln("");
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.daemon().await;
    let s = create(&client, "scripted", Some("say hello")).await;
    let id = s.id.as_str();
    wait_turns(&client, id, 1).await;
    let first = wait_session(&client, id, "a summary", |s| s.context_summary.is_some()).await;
    let summary = first.context_summary.unwrap();
    assert!(summary.starts_with("GOAL: say hello\n"), "{summary}");
    assert!(summary.ends_with("TURNS: 1"), "{summary}");

    let get = json!({"session_id": id});
    let start = stack(&client, id).await;
    assert_eq!(kinds(&start), ["system", "human", "agent"]);
    assert!(texts(&start)[0].starts_with("ACP agent scripted working in "));
    assert_eq!(texts(&start)[1..], ["say hello", "hello"]);

    let marked = call::<m::ContextCheckpoint>(&client, named(id, "greeted")).await;
    let agent_seq = start.stack.top().seq;
    assert_eq!(marked.stack.checkpoints()[0].seq, agent_seq);
    assert!(!marked.fresh_start, "a checkpoint removes nothing");

    client
        .call::<m::SessionPrompt>(prompt(id, "tool t1 build it\nsay built"))
        .await;
    wait_turns(&client, id, 2).await;
    let full = stack(&client, id).await;
    assert_eq!(
        kinds(&full),
        [
            "system",
            "human",
            "agent",
            "human",
            "tool_call",
            "tool_result",
            "agent"
        ]
    );
    assert_eq!(texts(&full)[6], "built");

    // Every refusal: clear, -32602, nothing changed.
    for (method, params, says) in [
        (
            "context.checkpoint",
            json!({"session_id": id, "name": "greeted"}),
            "already exists",
        ),
        (
            "context.checkpoint",
            json!({"session_id": id, "name": "two words"}),
            "invalid checkpoint name",
        ),
        (
            "context.pop",
            json!({"session_id": id, "n": 0}),
            "at least 1",
        ),
        (
            "context.pop",
            json!({"session_id": id, "n": 7}),
            "only 6 above the system prompt",
        ),
        (
            "context.rollback",
            json!({"session_id": id, "name": "nope"}),
            "no checkpoint named 'nope' (checkpoints: greeted)",
        ),
        (
            "context.replace_top",
            json!({"session_id": id, "summary": "  "}),
            "is empty",
        ),
        ("context.pop", json!({"session_id": id}), "bad params"),
    ] {
        refused(&client, id, method, params, says).await;
    }

    // kill -9: everything acknowledged is there.
    daemon.kill9();
    daemon.wait_exit(LONG).await;
    let mut daemon = tk.spawn_daemon().await;
    let client = tk.daemon().await;
    assert_eq!(stack(&client, id).await.stack, full.stack);

    let popped = call::<m::ContextPop>(
        &client,
        ContextPopParams {
            session_id: id.into(),
            n: 1,
        },
    )
    .await;
    let change = popped.change.as_ref().expect("a change");
    assert_eq!(change.removed.len(), 1);
    assert_eq!(
        change.removed[0].message,
        Message::Agent {
            text: "built".into()
        }
    );
    assert!(
        popped.fresh_start,
        "an ACP stack that shrank needs a fresh agent session"
    );
    assert_eq!(
        popped.description.as_deref(),
        Some(format!("pop 1: removed #{} agent", full.stack.top().seq).as_str())
    );

    let replaced = call::<m::ContextReplaceTop>(
        &client,
        ContextReplaceParams {
            session_id: id.into(),
            summary: "the build ran".into(),
        },
    )
    .await;
    assert_eq!(kinds(&replaced).last(), Some(&"summary"));
    assert_eq!(
        texts(&replaced).last().map(String::as_str),
        Some("the build ran")
    );

    let back = call::<m::ContextRollback>(&client, named(id, "greeted")).await;
    assert_eq!(kinds(&back), ["system", "human", "agent"]);
    assert_eq!(back.stack.top().seq, agent_seq);

    daemon.kill9();
    daemon.wait_exit(LONG).await;
    let _daemon = tk.spawn_daemon().await;
    let client = tk.daemon().await;
    let again = stack(&client, id).await;
    assert_eq!(again.stack, back.stack);
    assert!(again.fresh_start, "the fresh-start mark is stored too");

    let summed = call::<m::ContextSummarize>(
        &client,
        ContextSummarizeParams {
            session_id: id.into(),
            summary: None,
        },
    )
    .await;
    assert_eq!(kinds(&summed), ["system", "summary"]);
    let text = &texts(&summed)[1];
    assert!(text.starts_with("GOAL: say hello\nENTITIES: "), "{text}");
    assert!(text.chars().count() <= 1000);
    assert!(
        summed.stack.checkpoints().is_empty(),
        "its entry left the stack"
    );

    let reset = call::<m::ContextReset>(&client, session_id(id)).await;
    assert_eq!(kinds(&reset), ["system"]);
    for (method, params, says) in [
        (
            "context.pop",
            json!({"session_id": id, "n": 1}),
            "nothing is above the system prompt",
        ),
        ("context.summarize", get.clone(), "only the system prompt"),
        (
            "context.replace_top",
            json!({"session_id": id, "summary": "x"}),
            "only the system prompt",
        ),
        (
            "context.rollback",
            json!({"session_id": id, "name": "greeted"}),
            "there are no checkpoints",
        ),
    ] {
        refused(&client, id, method, params, says).await;
    }

    // Popped entries stay in the history.
    let history = client
        .call::<m::DbQuery>(query(
            "SELECT VALUE change FROM context_history WHERE session_id = $id AND operation = 'pop 1'",
            json!({"id": id}),
        ))
        .await;
    let rows = history.result[0].as_array().expect("rows").clone();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].as_str().unwrap().contains("\"built\""), "{rows:?}");

    // Not for sessions crucible does not run, and never for a session handle.
    let outsider = client
        .call::<m::SessionRegister>(RegisterParams {
            worktree: None,
            agent_type: "acp".into(),
            agent_name: "outside".into(),
        })
        .await;
    let outsider_id = outsider.session_id.as_str();
    let err = client
        .try_call::<m::ContextGet>(session_id(outsider_id))
        .await
        .expect_err("a registered session has no stack here");
    assert_eq!(err.rpc_code(), Some(-32602));
    let handle = Handle::parse(&outsider.handle).unwrap();
    let agent = Client::connect_at(&tk.kiln.socket_path(), Some(&handle))
        .await
        .expect("connect with a handle");
    let asked = session_id(outsider_id);
    let refusals = [
        (
            "context.get",
            agent.call::<m::ContextGet>(&asked).await.err(),
        ),
        (
            "context.reset",
            agent.call::<m::ContextReset>(&asked).await.err(),
        ),
    ];
    for (method, err) in refusals {
        let err = err.expect("a handle may not touch context");
        assert_eq!(err.rpc_code(), Some(-32005), "{method}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_acp_rollback_opens_a_fresh_session_seeded_with_the_kept_stack() {
    let tk = agent_kiln("");
    let client = tk.daemon().await;
    let s = create(&client, "scripted", Some("session")).await;
    let id = s.id.as_str();
    wait_turns(&client, id, 1).await;
    let first = stack(&client, id).await;
    let first_acp = texts(&first)[2].clone();
    assert!(first_acp.starts_with("session scripted-1-"), "{first_acp}");
    call::<m::ContextCheckpoint>(&client, named(id, "start")).await;

    for text in ["say the wrong path", "say more of it"] {
        client.call::<m::SessionPrompt>(prompt(id, text)).await;
    }
    wait_turns(&client, id, 3).await;
    let back = call::<m::ContextRollback>(&client, named(id, "start")).await;
    assert_eq!(back.change.as_ref().unwrap().removed.len(), 4);
    assert!(back.fresh_start);

    client
        .call::<m::SessionPrompt>(prompt(id, "session\ncontext"))
        .await;
    wait_turns(&client, id, 4).await;
    let after = stack(&client, id).await;
    assert!(!after.fresh_start, "the fresh session holds the stack");
    assert_eq!(
        kinds(&after),
        ["system", "human", "agent", "human", "agent"]
    );
    let reply = &texts(&after)[4];
    // `say` streams in chunks, so the two lines arrive as one message.
    let new_acp = reply.split("context: ").next().unwrap();
    assert!(
        new_acp.starts_with("session scripted-2-"),
        "a new ACP session: {reply}"
    );
    let expected = format!("context: {PREAMBLE_HEADER}\n\nHuman: session\n\nAgent: {first_acp}");
    assert!(
        reply.contains(&expected),
        "the kept stack, exactly:\n{reply}"
    );
    assert!(
        !reply.contains("wrong path"),
        "rolled-back turns are gone: {reply}"
    );
    let s = wait_session(&client, id, "the new ACP id", |s| {
        s.acp_session_id.as_deref() == new_acp.strip_prefix("session ")
    })
    .await;
    assert_eq!(s.turn_count, 4);

    // The next prompt stays in that session.
    client
        .call::<m::SessionPrompt>(prompt(id, "session\ncontext"))
        .await;
    wait_turns(&client, id, 5).await;
    let last = stack(&client, id).await;
    let reply = texts(&last).last().unwrap().clone();
    assert_eq!(reply, format!("{new_acp}context: none"));
}

fn internal_kiln(server: &ScriptedServer, options: &str) -> TestKiln {
    agent_kiln(&format!(
        "[agents.local]\ntype = \"internal\"\nbase_url = {:?}\nmodel = \"test-model\"\n{options}\n",
        server.base_url()
    ))
}

/// The streamed chat requests (summaries are not streamed).
fn chats(server: &ScriptedServer) -> Vec<Vec<ChatMessage>> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.body["stream"] == json!(true))
        .map(|r| r.messages().expect("messages"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_internal_write_waits_for_approval_then_lands_in_the_worktree() {
    let server = ScriptedServer::start([
        ScriptedReply::tool_call(
            "call_1",
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hi there\n"}),
        ),
        ScriptedReply::text("Wrote it."),
        ScriptedReply::text(
            "GOAL: write hello\nENTITIES: notes/hello.txt\nDECISIONS: none\nPENDING: none\nTURNS: 1",
        ),
    ])
    .await
    .expect("server");
    let tk = internal_kiln(&server, "");
    let client = tk.daemon().await;
    let s = create(&client, "local", Some("write hello")).await;
    let id = s.id.as_str();
    let approval = wait_message(&client, id, MsgType::ApprovalRequired).await;
    assert!(
        approval.title.starts_with("write notes/hello.txt"),
        "{approval:?}"
    );
    let file = std::path::Path::new(s.worktree.as_deref().unwrap()).join("notes/hello.txt");
    assert!(!file.exists(), "nothing is written before the approval");
    client
        .call::<m::InboxRespond>(respond(&approval.id, "allow"))
        .await;
    wait_turns(&client, id, 1).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi there\n");

    let stack = stack(&client, id).await;
    assert_eq!(
        kinds(&stack),
        ["system", "human", "tool_call", "tool_result", "agent"]
    );
    assert_eq!(texts(&stack)[3], "wrote notes/hello.txt");
    let s = wait_session(&client, id, "the model's summary", |s| {
        s.context_summary.is_some()
    })
    .await;
    assert_eq!(
        s.context_summary.as_deref(),
        Some(
            "GOAL: write hello\nENTITIES: notes/hello.txt\nDECISIONS: none\nPENDING: none\nTURNS: 1"
        )
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "two chat requests and one summary");
    assert_eq!(requests[2].body["stream"], json!(false));
    let second = &chats(&server)[1];
    assert_eq!(
        second.last(),
        Some(&ChatMessage::Tool {
            tool_call_id: "call_1".into(),
            content: "wrote notes/hello.txt".into()
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn internal_operations_shape_the_next_request_exactly() {
    let server = ScriptedServer::start([
        ScriptedReply::text("first answer"),
        ScriptedReply::tool_call("call_r", "read_file", json!({"path": "missing.txt"})),
        ScriptedReply::text("could not read it"),
        ScriptedReply::text("third answer"),
        ScriptedReply::error(503, "model overloaded"),
    ])
    .await
    .expect("server");
    let tk = internal_kiln(
        &server,
        "model_summaries = false\nrecover_tool_errors = true\nsystem_prompt = \"be brief\"",
    );
    let client = tk.daemon().await;
    let s = create(&client, "local", Some("one")).await;
    let id = s.id.as_str();
    wait_turns(&client, id, 1).await;
    call::<m::ContextCheckpoint>(&client, named(id, "base")).await;

    client.call::<m::SessionPrompt>(prompt(id, "two")).await;
    wait_turns(&client, id, 2).await;
    // The failed read was replaced by the error alone (pop(1) + inject).
    let second = chats(&server)[2].clone();
    let Some(ChatMessage::Tool { content, .. }) = second.last() else {
        panic!("{second:?}")
    };
    assert!(
        content.starts_with("error: read_file failed: missing.txt: "),
        "{content}"
    );
    let stack = stack(&client, id).await;
    assert_eq!(
        kinds(&stack),
        [
            "system",
            "human",
            "agent",
            "human",
            "tool_call",
            "tool_result",
            "agent"
        ]
    );

    call::<m::ContextRollback>(&client, named(id, "base")).await;
    client.call::<m::SessionPrompt>(prompt(id, "three")).await;
    wait_turns(&client, id, 3).await;
    let third = chats(&server)[3].clone();
    assert_eq!(
        third,
        vec![
            ChatMessage::System {
                content: "be brief".into()
            },
            ChatMessage::User {
                content: "one".into()
            },
            ChatMessage::Assistant {
                content: Some("first answer".into()),
                tool_calls: vec![]
            },
            ChatMessage::User {
                content: "three".into()
            },
        ],
        "exactly the kept messages, then the new prompt"
    );

    // A server error fails the turn, with the server's message.
    client.call::<m::SessionPrompt>(prompt(id, "four")).await;
    let failed = wait_session(&client, id, "an error", |s| {
        s.state == Some(SessionState::Error)
    })
    .await;
    assert!(failed.state_reason.unwrap().contains("model overloaded"));
    let error = wait_message(&client, id, MsgType::Error).await;
    assert!(error.body.unwrap().contains("503"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn internal_tools_list_run_ask_and_notify_through_the_session() {
    let server = ScriptedServer::start([
        ScriptedReply::tool_call("call_1", "list_dir", json!({"path": "."})),
        ScriptedReply::tool_call(
            "call_2",
            "run_command",
            json!({"command": "echo ran in $(basename \"$PWD\")"}),
        ),
        ScriptedReply::tool_call(
            "call_3",
            "request_decision",
            json!({"question": "Which backend?", "options": ["sqlite", "postgres"]}),
        ),
        ScriptedReply::tool_call("call_4", "notify", json!({"title": "halfway there"})),
        ScriptedReply::text("All done."),
    ])
    .await
    .expect("server");
    let tk = internal_kiln(&server, "model_summaries = false");
    let client = tk.daemon().await;
    let s = create(&client, "local", Some("look around")).await;
    let id = s.id.as_str();

    // The command waits for approval; the decision waits for an answer.
    let approval = wait_message(&client, id, MsgType::ApprovalRequired).await;
    assert!(
        approval.title.starts_with("run: echo ran in"),
        "{approval:?}"
    );
    client
        .call::<m::InboxRespond>(respond(&approval.id, "allow"))
        .await;
    let question = wait_message(&client, id, MsgType::DecisionNeeded).await;
    assert_eq!(question.title, "Which backend?");
    client
        .call::<m::InboxRespond>(respond(&question.id, "postgres"))
        .await;
    wait_turns(&client, id, 1).await;
    let note = wait_message(&client, id, MsgType::Info).await;
    assert_eq!(note.title, "halfway there");

    // Each tool's result went back to the model with the next request.
    let worktree = s.worktree.as_deref().expect("a worktree");
    let worktree_name = worktree.rsplit('/').next().expect("a name");
    let results: Vec<(String, String)> = chats(&server)
        .iter()
        .skip(1)
        .filter_map(|messages| match messages.last() {
            Some(ChatMessage::Tool {
                tool_call_id,
                content,
            }) => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(results[0].0, "call_1");
    assert!(results[0].1.contains("README.md"), "{results:?}");
    assert_eq!(
        results[1],
        ("call_2".to_string(), format!("ran in {worktree_name}\n"))
    );
    assert_eq!(
        results[2],
        (
            "call_3".to_string(),
            "the human answered: postgres".to_string()
        )
    );
    assert_eq!(results[3], ("call_4".to_string(), "sent".to_string()));
}
