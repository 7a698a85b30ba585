//! Team mode's live queries: through them each daemon sees the changes other daemons
//! make to the shared tables.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde_json::Value;

use super::conn::{Conn, Store};
use super::error::{Result, StoreError};
use super::remote::Remote;

/// The tables other daemons' changes arrive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveTable {
    Sessions,
    Inbox,
    Transcript,
    Commands,
    Daemons,
}

impl LiveTable {
    const ALL: [LiveTable; 5] = [
        LiveTable::Sessions,
        LiveTable::Inbox,
        LiveTable::Transcript,
        LiveTable::Commands,
        LiveTable::Daemons,
    ];

    fn table(self) -> &'static str {
        match self {
            LiveTable::Sessions => "sessions",
            LiveTable::Inbox => "inbox_messages",
            LiveTable::Transcript => "transcript",
            LiveTable::Commands => "commands",
            LiveTable::Daemons => "daemons",
        }
    }
}

/// One change seen by a live query: the record after it (before it, for a delete), with
/// its key as `id`.
#[derive(Debug, Clone)]
pub struct LiveChange {
    pub table: LiveTable,
    pub deleted: bool,
    pub created: bool,
    pub record: Value,
}

pub type LiveStream =
    Pin<Box<dyn Stream<Item = std::result::Result<LiveChange, StoreError>> + Send>>;

impl Store {
    fn server(&self) -> Result<&Remote> {
        match &self.conn {
            Conn::Remote(r) => Ok(r),
            Conn::Local(..) => Err(StoreError::NotShared),
        }
    }

    /// (or yields an error) when the connection to the server breaks.
    pub async fn live(&self) -> Result<LiveStream> {
        let remote = self.server()?;
        let sql: String = LiveTable::ALL
            .iter()
            .map(|t| format!("LIVE SELECT *, record::id(id) AS id FROM {};", t.table()))
            .collect();
        let mut response = tokio::time::timeout(remote.timeout(), remote.db.query(sql))
            .await
            .map_err(|_| StoreError::LiveNotStarted)?
            .map_err(|e| remote.check(e))?;
        let mut streams = Vec::with_capacity(LiveTable::ALL.len());
        for (index, table) in LiveTable::ALL.into_iter().enumerate() {
            let stream = response
                .stream::<surrealdb::types::Value>(index)
                .map_err(|e| remote.check(e))?;
            streams.push(
                stream
                    .map(move |item| match item {
                        Ok(note) => change(table, note),
                        Err(e) => Err(StoreError::LiveFailed(e)),
                    })
                    .boxed(),
            );
        }
        Ok(futures::stream::select_all(streams).boxed())
    }
}

fn change(
    table: LiveTable,
    note: surrealdb::Notification<surrealdb::types::Value>,
) -> std::result::Result<LiveChange, StoreError> {
    use surrealdb::types::Action;
    let (created, deleted) = match note.action {
        Action::Create => (true, false),
        Action::Update => (false, false),
        Action::Delete => (false, true),
        other => {
            return Err(StoreError::LiveEnded {
                table: table.table(),
                action: format!("{other:?}"),
            });
        }
    };
    let mut record = note.data.into_json_value();
    if let Some(map) = record.as_object_mut()
        && let Some(Value::String(id)) = map.get("id")
    {
        let key = record_key(id);
        map.insert("id".into(), Value::String(key));
    }
    Ok(LiveChange {
        table,
        deleted,
        created,
        record,
    })
}

/// `table:⟨key⟩` or `table:key` to `key`; a bare key as it is.
fn record_key(id: &str) -> String {
    let key = match id.split_once(':') {
        Some((table, key)) if !table.is_empty() && !table.contains(['⟨', '`']) => key,
        _ => id,
    };
    key.trim_start_matches(['⟨', '`'])
        .trim_end_matches(['⟩', '`'])
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::record_key;

    #[test]
    fn record_keys() {
        assert_eq!(record_key("sessions:⟨01ABC⟩"), "01ABC");
        assert_eq!(record_key("commands:01ABC"), "01ABC");
        assert_eq!(record_key("01ABC"), "01ABC");
        assert_eq!(
            record_key("transcript:`01A-000000000001`"),
            "01A-000000000001"
        );
    }
}
