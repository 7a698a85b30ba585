//! Records between JSON and SurrealDB values: `null` as absent, RFC 3339 text as
//! datetimes, and rows decoded into their types.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{Result, StoreError};

/// JSON to a SurrealDB value, with `null` as `NONE`.
pub(super) fn absent_for_null(value: Value) -> surrealdb::types::Value {
    use surrealdb::types::{Array, Object, SurrealValue, Value as Surreal};
    match value {
        Value::Null => Surreal::None,
        Value::Array(items) => {
            Surreal::Array(items.into_iter().map(absent_for_null).collect::<Array>())
        }
        Value::Object(map) => Surreal::Object(
            map.into_iter()
                .map(|(k, v)| (k, absent_for_null(v)))
                .collect::<Object>(),
        ),
        leaf => leaf.into_value(),
    }
}

/// A record as a SurrealDB object: `null` fields absent, and the named RFC 3339 fields as
/// datetimes (a string would not pass a `datetime` field).
pub(super) fn typed_row<T: serde::Serialize>(
    value: &T,
    datetime_fields: &[&str],
) -> Result<surrealdb::types::Object> {
    use surrealdb::types::{Datetime, Value as Surreal};
    let surrealdb::types::Value::Object(mut row) = absent_for_null(serde_json::to_value(value)?)
    else {
        return Err(StoreError::NotAnObject);
    };
    for field in datetime_fields {
        let Some(Surreal::String(text)) = row.get(*field) else {
            continue;
        };
        let at = chrono::DateTime::parse_from_rfc3339(text)
            .map_err(|source| StoreError::NotADatetime {
                field: field.to_string(),
                text: text.to_string(),
                source,
            })?
            .with_timezone(&chrono::Utc);
        row.insert(*field, Surreal::Datetime(Datetime::from(at)));
    }
    Ok(row)
}

pub(super) fn decode_rows<T: DeserializeOwned>(rows: Value) -> Result<Vec<T>> {
    let rows = match rows {
        Value::Null => return Ok(Vec::new()),
        Value::Array(rows) => rows,
        single => vec![single],
    };
    rows.into_iter()
        .map(|row| serde_json::from_value(row).map_err(StoreError::from))
        .collect()
}
