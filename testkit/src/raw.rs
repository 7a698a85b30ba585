//! Raw line-level connections, for the protocol's conformance tests: what a well-behaved
//! client never would send, and the JSON-RPC replies as they are.

use std::path::Path;
use std::time::Duration;

use crucible::client::Client;
use crucible::kiln::Kiln;
use crucible::protocol::methods::SessionRegister;
use crucible::protocol::params::RegisterParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// A raw line-level connection, for sending what a well-behaved client never would.
pub struct Raw {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Raw {
    pub async fn connect(kiln: &Kiln) -> Raw {
        Raw::connect_path(&kiln.socket_path()).await
    }

    pub async fn connect_path(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket).await.expect("connect raw");
        let (read, writer) = stream.into_split();
        Raw {
            reader: BufReader::new(read),
            writer,
        }
    }

    /// Connects and performs the handshake.
    pub async fn handshaken(kiln: &Kiln) -> Raw {
        let mut raw = Raw::connect(kiln).await;
        let reply = raw
            .call(json!({"jsonrpc": "2.0", "id": 0, "method": "handshake",
                         "params": {"protocol_version": crucible::protocol::PROTOCOL_VERSION}}))
            .await;
        assert!(reply.get("result").is_some(), "handshake failed: {reply}");
        raw
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.expect("write");
    }

    pub async fn send(&mut self, value: Value) {
        let mut line = value.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes()).await;
    }

    pub async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_text().await).expect("the daemon sent JSON")
    }

    /// The next line exactly as the daemon wrote it.
    pub async fn recv_text(&mut self) -> String {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("a reply within 10 s")
            .expect("read");
        assert!(n > 0, "the daemon closed the connection");
        line
    }

    pub async fn call(&mut self, request: Value) -> Value {
        self.send(request).await;
        self.recv().await
    }
}

/// The error code of a JSON-RPC reply, or panic.
pub fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {reply}"))
}

/// Registers a session through the client and returns its id.
pub async fn register(client: &Client, agent: &str) -> String {
    let params = RegisterParams {
        worktree: None,
        agent_type: "acp".into(),
        agent_name: agent.into(),
    };
    crate::daemon::call::<SessionRegister>(client, params)
        .await
        .session_id
}
