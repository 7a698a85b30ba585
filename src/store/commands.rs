//! Team mode's commands: a JSON-RPC call one daemon leaves for the daemon that runs a
//! session, and its outcome once that daemon has answered it.

use serde_json::{Value, json};

use super::conn::Store;
use super::durable::Touched;
use super::error::Result;

/// A command for the daemon that runs a session: a JSON-RPC call, and its outcome once
/// that daemon has answered it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandRecord {
    pub id: String,
    /// The daemon that is to run it.
    pub target: String,
    /// The daemon that asked (and waits for the answer).
    pub origin: String,
    pub method: String,
    /// The call's params, as JSON text.
    pub params: String,
    #[serde(default)]
    pub done: bool,
    /// The answer, as JSON text.
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
}

/// Team mode's commands, asked of the daemon that runs a session.
pub struct CommandRows<'a>(pub(super) &'a Store);

impl Store {
    /// This table's records: [`CommandRows`].
    pub fn commands(&self) -> CommandRows<'_> {
        CommandRows(self)
    }
}

impl CommandRows<'_> {
    /// Sends a command to the daemon `target`.
    pub async fn insert(&self, command: &CommandRecord) -> Result<()> {
        self.0
            .write(
                "CREATE type::record('commands', $id) CONTENT {
                target: $target, origin: $origin, method: $method, params: $params,
                at: time::now(), done: false
             } RETURN NONE",
                json!({
                    "id": command.id, "target": command.target, "origin": command.origin,
                    "method": command.method, "params": command.params,
                }),
                Touched::default(),
            )
            .await?;
        Ok(())
    }

    /// Records a command's answer (once).
    pub async fn finish(
        &self,
        id: &str,
        outcome: std::result::Result<Value, (i64, String)>,
    ) -> Result<()> {
        let (result, code, error) = match outcome {
            Ok(value) => (Some(value.to_string()), None, None),
            Err((code, message)) => (None, Some(code), Some(message)),
        };
        self.0
            .write(
                "UPDATE type::record('commands', $id)
             SET done = true, result = $result, error_code = $code, error = $error
             WHERE done = false RETURN NONE",
                json!({"id": id, "result": result, "code": code, "error": error}),
                Touched::default(),
            )
            .await?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<CommandRecord>> {
        Ok(self
            .0
            .rows(
                "SELECT *, record::id(id) AS id FROM type::record('commands', $id)",
                json!({"id": id}),
                0,
            )
            .await?
            .into_iter()
            .next())
    }

    /// Commands for `me` not yet answered (sent while it was away from the server).
    pub async fn pending(&self, me: &str) -> Result<Vec<CommandRecord>> {
        self.0
            .rows(
                "SELECT *, record::id(id) AS id FROM commands WHERE target = $me AND done = false
             ORDER BY id",
                json!({"me": me}),
                0,
            )
            .await
    }

    pub async fn delete(&self, id: &str) -> Result<()> {
        self.0
            .write(
                "DELETE type::record('commands', $id) RETURN NONE",
                json!({"id": id}),
                Touched::default(),
            )
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::CommandRecord;
    use crate::store::memory_store as memory;

    #[tokio::test]
    async fn a_command_is_answered_once() {
        let store = memory().await;
        let command = CommandRecord {
            id: "C1".into(),
            target: "A".into(),
            origin: "B".into(),
            method: "session.prompt".into(),
            params: r#"{"session_id":"S1","text":"hi"}"#.into(),
            done: false,
            result: None,
            error_code: None,
            error: None,
        };
        store.commands().insert(&command).await.unwrap();
        assert_eq!(
            store.commands().pending("A").await.unwrap(),
            vec![command.clone()]
        );
        assert!(store.commands().pending("B").await.unwrap().is_empty());
        store
            .commands()
            .finish("C1", Ok(serde_json::json!({"queued": true})))
            .await
            .unwrap();
        store
            .commands()
            .finish("C1", Err((-32003, "late".into())))
            .await
            .unwrap();
        let done = store.commands().get("C1").await.unwrap().unwrap();
        assert!(done.done);
        assert_eq!(done.result.as_deref(), Some(r#"{"queued":true}"#));
        assert_eq!(done.error, None);
        assert!(store.commands().pending("A").await.unwrap().is_empty());
        store.commands().delete("C1").await.unwrap();
        assert_eq!(store.commands().get("C1").await.unwrap(), None);
    }
}
