use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::context::{ContextStack, Message};
use testkit::model_server::{ScriptedCall, ScriptedReply, ScriptedServer};

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "test-model".into(),
        messages,
        tools: Vec::new(),
    }
}

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        content: text.into(),
    }
}

async fn server(replies: Vec<ScriptedReply>) -> (ScriptedServer, ChatClient) {
    let server = ScriptedServer::start(replies).await.unwrap();
    let client = ChatClient::new(&server.base_url(), Some("sk-test".into())).unwrap();
    (server, client)
}

/// Streams `request`, returning the text deltas seen and the outcome.
async fn stream(
    client: &ChatClient,
    request: &ChatRequest,
) -> (Vec<String>, Result<Reply, ChatError>) {
    let mut deltas = Vec::new();
    let result = client.stream(request, |t| deltas.push(t.to_string())).await;
    (deltas, result)
}

#[tokio::test]
async fn text_streams_in_pieces_and_the_request_is_recorded() {
    let (server, client) = server(vec![ScriptedReply::text("Hello, streaming world!")]).await;
    let sent = request(vec![
        ChatMessage::System {
            content: "be brief".into(),
        },
        user("hi"),
    ]);
    let (deltas, reply) = stream(&client, &sent).await;
    let reply = reply.unwrap();
    assert_eq!(deltas, ["Hello, s", "treaming", " world!"]);
    assert_eq!(reply.content, "Hello, streaming world!");
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert!(reply.tool_calls.is_empty());

    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(recorded.body["stream"], json!(true));
    assert_eq!(recorded.body["model"], "test-model");
    assert!(recorded.body.get("tools").is_none(), "{}", recorded.body);
    assert_eq!(recorded.messages::<ChatMessage>().unwrap(), sent.messages);
}

#[tokio::test]
async fn tool_calls_are_assembled_from_fragments() {
    let calls = vec![
        ScriptedCall {
            id: "call_a".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"src/main.rs"}"#.into(),
        },
        ScriptedCall {
            id: "call_b".into(),
            name: "list_dir".into(),
            arguments: r#"{"path":"src","depth":2}"#.into(),
        },
    ];
    let (server, client) = server(vec![ScriptedReply::ToolCalls {
        text: "Let me look.".into(),
        calls,
    }])
    .await;
    let mut sent = request(vec![user("look around")]);
    sent.tools = vec![Tool::function(
        "read_file",
        "Reads a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    )];
    let (deltas, reply) = stream(&client, &sent).await;
    let reply = reply.unwrap();
    assert_eq!(deltas.concat(), "Let me look.");
    assert_eq!(
        reply.tool_calls,
        [
            ToolCall::function("call_a", "read_file", r#"{"path":"src/main.rs"}"#),
            ToolCall::function("call_b", "list_dir", r#"{"path":"src","depth":2}"#),
        ]
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    let body = &server.requests()[0].body;
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");
}

#[tokio::test]
async fn a_429_says_it_is_a_rate_limit_and_when_to_retry_so_the_session_parks_until_then() {
    let (_server, client) = server(vec![ScriptedReply::Throttled { retry_after: 42 }]).await;
    let (_, reply) = stream(&client, &request(vec![user("hi")])).await;
    let err = reply.unwrap_err().to_string();
    assert!(
        err.ends_with("HTTP 429: rate limit; retry-after: 42s: Slow down"),
        "{err}"
    );
    let now = chrono::Utc::now();
    let limit = crate::agent::usage_limit::recognise(&err, now).expect("a limit");
    assert!(limit.said);
    assert_eq!(limit.wait(now), std::time::Duration::from_secs(42));
}

#[test]
fn retry_after_is_seconds_or_a_date() {
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
    let now = chrono::DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let mut headers = HeaderMap::new();
    assert_eq!(super::client::retry_after(&headers, now), None);
    headers.insert(RETRY_AFTER, HeaderValue::from_static("120"));
    assert_eq!(super::client::retry_after(&headers, now), Some(120));
    headers.insert(
        RETRY_AFTER,
        HeaderValue::from_static("Sat, 28 Nov 2026 10:01:30 GMT"),
    );
    assert_eq!(super::client::retry_after(&headers, now), Some(90));
}

#[tokio::test]
async fn an_http_error_carries_the_servers_message() {
    let (_server, client) = server(vec![ScriptedReply::error(
        401,
        "Incorrect API key provided",
    )])
    .await;
    let (deltas, reply) = stream(&client, &request(vec![user("hi")])).await;
    let err = reply.unwrap_err();
    assert!(
        matches!(&err, ChatError::Status { status: 401, message, .. } if message == "Incorrect API key provided"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .ends_with("answered HTTP 401: Incorrect API key provided")
    );
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn a_stream_that_ends_before_done_is_truncated() {
    let (_server, client) = server(vec![ScriptedReply::EndsEarly("one two three".into())]).await;
    let (deltas, reply) = stream(&client, &request(vec![user("hi")])).await;
    assert!(
        matches!(reply, Err(ChatError::Truncated { .. })),
        "{reply:?}"
    );
    // What arrived before the end was still streamed.
    assert_eq!(deltas.concat(), "one two th");
}

#[tokio::test]
async fn a_server_hanging_up_mid_stream_is_an_error() {
    let (_server, client) = server(vec![ScriptedReply::HangsUp("one two three".into())]).await;
    let (deltas, reply) = stream(&client, &request(vec![user("hi")])).await;
    assert!(
        matches!(&reply, Err(ChatError::Interrupted { message, .. }) if !message.is_empty()),
        "{reply:?}"
    );
    assert_eq!(deltas.concat(), "one two th");
}

#[tokio::test]
async fn a_malformed_chunk_is_refused_with_its_text() {
    let (_server, client) = server(vec![ScriptedReply::Malformed]).await;
    let (_, reply) = stream(&client, &request(vec![user("hi")])).await;
    match reply {
        Err(ChatError::Malformed { message, .. }) => {
            assert!(message.contains(r#"{"choices": [{"delta":"#), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let client = ChatClient::new(&format!("http://127.0.0.1:{port}/v1/"), None).unwrap();
    assert_eq!(
        client.url(),
        format!("http://127.0.0.1:{port}/v1/chat/completions")
    );
    let (_, reply) = stream(&client, &request(vec![user("hi")])).await;
    let err = reply.unwrap_err();
    assert!(matches!(err, ChatError::Connect { .. }), "{err:?}");
    assert!(
        err.to_string()
            .ends_with(": Connection refused (os error 111)"),
        "{err}"
    );
}

#[tokio::test]
async fn complete_reads_one_json_answer() {
    let (server, client) = server(vec![
        ScriptedReply::text("GOAL: x"),
        ScriptedReply::tool_call("c1", "notify", json!({"text": "done"})),
    ])
    .await;
    let reply = client
        .complete(&request(vec![user("sum up")]))
        .await
        .unwrap();
    assert_eq!(reply.content, "GOAL: x");
    assert_eq!(server.requests()[0].body["stream"], json!(false));
    let reply = client.complete(&request(vec![user("go")])).await.unwrap();
    assert_eq!(
        reply.tool_calls,
        [ToolCall::function("c1", "notify", r#"{"text":"done"}"#)]
    );
}

/// An OpenAI `usage` object: 1,500 tokens, 200 of the prompt's from the cache.
fn reported() -> Value {
    json!({
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 200},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

const REPORTED: Usage = Usage {
    prompt: 1200,
    completion: 300,
    total: 1500,
    cached: 200,
};

#[tokio::test]
async fn a_plain_answer_carries_the_usage_the_server_reported() {
    let (server, client) = server(vec![ScriptedReply::text("GOAL: x")]).await;
    server.report_usage(reported());
    let reply = client
        .complete(&request(vec![user("sum up")]))
        .await
        .unwrap();
    assert_eq!(reply.content, "GOAL: x");
    assert_eq!(reply.usage, Some(REPORTED));
    // OpenAI refuses `stream_options` on a plain request.
    let body = &server.requests()[0].body;
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[tokio::test]
async fn a_stream_asks_for_usage_and_reads_it_from_the_last_chunk() {
    let (server, client) = server(vec![
        ScriptedReply::text("Hello, streaming world!"),
        ScriptedReply::tool_call("c1", "notify", json!({"text": "done"})),
    ])
    .await;
    server.report_usage(reported());
    let (deltas, reply) = stream(&client, &request(vec![user("hi")])).await;
    let reply = reply.unwrap();
    assert_eq!(deltas.concat(), "Hello, streaming world!");
    assert_eq!(reply.usage, Some(REPORTED));
    let body = &server.requests()[0].body;
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    let (_, reply) = stream(&client, &request(vec![user("go")])).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.usage, Some(REPORTED));
}

#[tokio::test]
async fn a_server_that_reports_no_usage_leaves_it_unknown() {
    let (server, client) = server(vec![
        ScriptedReply::text("streamed"),
        ScriptedReply::text("plain"),
    ])
    .await;
    let (_, reply) = stream(&client, &request(vec![user("hi")])).await;
    assert_eq!(reply.unwrap().usage, None);
    let reply = client.complete(&request(vec![user("hi")])).await.unwrap();
    assert_eq!((reply.content.as_str(), reply.usage), ("plain", None));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_exhausted_script_answers_500_and_waiters_see_requests() {
    let (server, client) = server(vec![]).await;
    let (_, reply) = stream(&client, &request(vec![user("hi")])).await;
    match reply {
        Err(ChatError::Status {
            status: 500,
            message,
            ..
        }) => {
            assert_eq!(
                message,
                "the scripted server has no reply left for request 1"
            )
        }
        other => panic!("{other:?}"),
    }
    let seen = server
        .wait_for_requests(1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        server
            .wait_for_requests(2, Duration::from_millis(50))
            .await
            .is_none()
    );
    server.push_reply(ScriptedReply::text("late"));
    assert_eq!(
        stream(&client, &request(vec![])).await.1.unwrap().content,
        "late"
    );
}

#[test]
fn error_bodies_of_every_shape_give_a_message() {
    assert_eq!(
        error_message(r#"{"error":{"message":"bad model"}}"#, None),
        "bad model"
    );
    assert_eq!(
        error_message(r#"{"error":"model not found"}"#, None),
        "model not found"
    );
    assert_eq!(
        error_message("upstream timeout\n", None),
        "upstream timeout"
    );
    assert_eq!(error_message("", Some("Bad Gateway")), "Bad Gateway");
}

fn call(id: &str) -> Message {
    Message::ToolCall {
        call_id: id.into(),
        tool: "run_command".into(),
        arguments: format!(r#"{{"cmd":"{id}"}}"#),
    }
}

#[test]
fn a_stack_becomes_the_message_list() {
    let mut s = ContextStack::new("You are crucible's agent.");
    for m in [
        Message::Human {
            text: "fix it".into(),
        },
        Message::Agent {
            text: "Running both.".into(),
        },
        call("a"),
        call("b"),
        Message::ToolResult {
            call_id: "a".into(),
            tool: "run_command".into(),
            ok: false,
            text: "exit 1".into(),
        },
        call("c"),
        Message::Summary {
            text: "GOAL: fix".into(),
        },
        Message::Agent {
            text: "Done.".into(),
        },
    ] {
        s.push(m).unwrap();
    }
    let tool = |id: &str, content: &str| ChatMessage::Tool {
        tool_call_id: id.into(),
        content: content.into(),
    };
    assert_eq!(
        messages_from_stack(s.entries()),
        [
            ChatMessage::System {
                content: "You are crucible's agent.".into()
            },
            user("fix it"),
            ChatMessage::Assistant {
                content: Some("Running both.".into()),
                tool_calls: vec![
                    ToolCall::function("a", "run_command", r#"{"cmd":"a"}"#),
                    ToolCall::function("b", "run_command", r#"{"cmd":"b"}"#),
                ],
            },
            tool("a", "error: exit 1"),
            tool("b", MISSING_RESULT),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall::function("c", "run_command", r#"{"cmd":"c"}"#)],
            },
            tool("c", MISSING_RESULT),
            user(&format!("{SUMMARY_PREFIX}\nGOAL: fix")),
            ChatMessage::Assistant {
                content: Some("Done.".into()),
                tool_calls: vec![],
            },
        ]
    );
    assert!(messages_from_stack(ContextStack::new("").entries()).is_empty());
}

#[test]
fn a_reply_on_the_stack_turns_back_into_the_same_assistant_message() {
    let reply = Reply {
        content: "Reading.".into(),
        tool_calls: vec![ToolCall::function("r1", "read_file", r#"{"path":"a"}"#)],
        finish_reason: Some("tool_calls".into()),
        usage: None,
    };
    let mut s = ContextStack::new("sys");
    for m in reply.clone().into_stack_messages() {
        s.push(m).unwrap();
    }
    assert_eq!(
        messages_from_stack(s.entries())[1],
        ChatMessage::Assistant {
            content: Some(reply.content),
            tool_calls: reply.tool_calls,
        }
    );
    let text_only = Reply {
        content: String::new(),
        ..Reply::default()
    };
    assert!(text_only.into_stack_messages().is_empty());
}

#[test]
fn messages_serialise_in_the_wire_format() {
    let assistant = ChatMessage::Assistant {
        content: None,
        tool_calls: vec![ToolCall::function("c1", "f", "{}")],
    };
    assert_eq!(
        serde_json::to_value(&assistant).unwrap(),
        json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]})
    );
    assert_eq!(
        serde_json::to_value(ChatMessage::Tool {
            tool_call_id: "c1".into(),
            content: "ok".into()
        })
        .unwrap(),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
    );
    let back: ChatMessage =
        serde_json::from_value(json!({"role": "assistant", "content": null})).unwrap();
    assert_eq!(
        back,
        ChatMessage::Assistant {
            content: None,
            tool_calls: vec![]
        }
    );
}
