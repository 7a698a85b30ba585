//! Answering a call through the hub: sent to the kiln it belongs to, or to every kiln
//! with the answers merged, and each session and message in an answer named with its
//! kiln (`kiln`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::members::{Member, Members};
use super::route::Way;
use crate::client::ClientError;
use crate::protocol::{ErrorObject, code};

/// Answers a call whose way is not the hub's own, for the client named `caller`.
pub(super) async fn answer(
    members: &Members,
    caller: &str,
    way: Way,
    name: &str,
    params: Value,
) -> Result<Value, ErrorObject> {
    match way {
        Way::Own => Err(ErrorObject::internal("the hub answers this itself")),
        Way::No(why) => Err(ErrorObject::new(
            code::FORBIDDEN,
            format!("{name} is not served through the hub: {why}"),
        )),
        Way::All => Ok(every(members, caller, name, params).await),
        Way::Session(id) => {
            let member = holding(members, &id, Held::Session).await?;
            one(members, &member, caller, name, params).await
        }
        Way::Message(id) => {
            let member = holding(members, &id, Held::Message).await?;
            one(members, &member, caller, name, params).await
        }
        Way::Named(which) => {
            let member = chosen(members, which.as_deref())?;
            one(members, &member, caller, name, params).await
        }
    }
}

/// The call answered by one kiln, its answer named with it.
async fn one(
    members: &Members,
    member: &Member,
    caller: &str,
    name: &str,
    params: Value,
) -> Result<Value, ErrorObject> {
    let client = member
        .client_for(caller)
        .await
        .map_err(|e| unreached(member, &e))?;
    let mut value = client.call_value(name, params).await.map_err(|e| match e {
        ClientError::Rpc(e) => e,
        other => unreached(member, &other),
    })?;
    members.learn(member, &value);
    tag(&mut value, &member.name());
    Ok(value)
}

fn unreached(member: &Member, e: &ClientError) -> ErrorObject {
    ErrorObject::new(
        code::KILN_UNREACHED,
        format!("kiln {} cannot be reached: {}", member.name(), e.words()),
    )
}

/// The kiln a new session is started in: the one named, else the only one.
fn chosen(members: &Members, which: Option<&str>) -> Result<Arc<Member>, ErrorObject> {
    let all = members.all();
    let names = || all.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
    match which {
        Some(which) => members.named(which).ok_or_else(|| {
            ErrorObject::invalid_params(format!("no kiln named {which:?}; the kilns: {}", names()))
        }),
        None if all.len() == 1 => Ok(Arc::clone(&all[0])),
        None => Err(ErrorObject::invalid_params(format!(
            "name the kiln to start it in (`kiln`): {}",
            names()
        ))),
    }
}

#[derive(Clone, Copy)]
enum Held {
    Session,
    Message,
}

/// The kiln that holds the session or message `id`: as last seen, else asked of every
/// reached kiln.
async fn holding(members: &Members, id: &str, held: Held) -> Result<Arc<Member>, ErrorObject> {
    let known = match held {
        Held::Session => members.holding_session(id),
        Held::Message => members.holding_message(id),
    };
    if let Some(member) = known {
        return Ok(member);
    }
    let (method, params) = match held {
        Held::Session => ("session.get", serde_json::json!({"session_id": id})),
        Held::Message => ("inbox.get", serde_json::json!({"id": id})),
    };
    let asking = members.all().into_iter().filter_map(|member| {
        let client = member.connected()?;
        let params = params.clone();
        Some(async move {
            let found = client.call_value(method, params).await;
            (member, found)
        })
    });
    for (member, found) in futures::future::join_all(asking).await {
        if let Ok(value) = found {
            members.learn(&member, &value);
            return Ok(member);
        }
    }
    let what = match held {
        Held::Session => "session",
        Held::Message => "inbox message",
    };
    let resting: Vec<String> = members
        .all()
        .iter()
        .filter(|m| m.connected().is_none())
        .map(|m| m.name())
        .collect();
    let besides = if resting.is_empty() {
        String::new()
    } else {
        format!(" (not reached: {})", resting.join(", "))
    };
    Err(ErrorObject::new(
        code::NOT_FOUND,
        format!("no {what} {id} in any kiln the hub reaches{besides}"),
    ))
}

/// The call answered by every reached kiln, the answers merged; the kilns that could not
/// answer are listed in `left_out`.
async fn every(members: &Members, caller: &str, name: &str, params: Value) -> Value {
    let asking = members.all().into_iter().map(|member| {
        let params = params.clone();
        async move {
            if member.connected().is_none() {
                return (member, None);
            }
            let answered = match member.client_for(caller).await {
                Ok(client) => client.call_value(name, params).await,
                Err(e) => Err(e),
            };
            (member, Some(answered))
        }
    });
    let mut merged = match nothing_of(name) {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    let mut left_out = Vec::new();
    for (member, answered) in futures::future::join_all(asking).await {
        match answered {
            None => {}
            Some(Ok(mut value)) => {
                members.learn(&member, &value);
                tag(&mut value, &member.name());
                merge(&mut merged, value);
            }
            Some(Err(e)) => left_out.push(serde_json::json!({
                "kiln": member.name(),
                "error": e.words(),
            })),
        }
    }
    order(name, &params, &mut merged);
    if !left_out.is_empty() {
        merged.insert("left_out".into(), Value::Array(left_out));
    }
    Value::Object(merged)
}

/// The answer of no kiln at all, which every kiln's is added to: its lists empty, its
/// counts naught.
fn nothing_of(name: &str) -> Value {
    match name {
        "session.list" => serde_json::json!({"sessions": []}),
        "inbox.list" => serde_json::json!({"messages": []}),
        "search" => serde_json::json!({"hits": [], "broad": false}),
        "cron.list" => serde_json::json!({"jobs": []}),
        "session.conflicts" => serde_json::json!({"pairs": []}),
        "inbox.mark_read" => serde_json::json!({"updated": 0}),
        "inbox.clear" => serde_json::json!({"deleted": 0}),
        "session.prune" => serde_json::json!({"deleted": [], "skipped": []}),
        _ => Value::Object(Map::new()),
    }
}

/// Adds one kiln's answer to the merged one: lists joined, counts added, the rest as
/// the first kiln said.
fn merge(merged: &mut Map<String, Value>, value: Value) {
    let Value::Object(fields) = value else {
        return;
    };
    for (key, value) in fields {
        match (merged.get_mut(&key), value) {
            (Some(Value::Array(have)), Value::Array(more)) => have.extend(more),
            (Some(Value::Number(have)), Value::Number(more)) => {
                if let (Some(a), Some(b)) = (have.as_u64(), more.as_u64()) {
                    *have = (a + b).into();
                }
            }
            (Some(Value::Bool(have)), Value::Bool(more)) => *have |= more,
            (Some(_), _) => {}
            (None, value) => {
                merged.insert(key, value);
            }
        }
    }
}

/// Orders merged lists as one kiln orders its own: the inbox newest first, search hits
/// best first; and keeps to the limit asked for.
fn order(name: &str, params: &Value, merged: &mut Map<String, Value>) {
    let limit = params
        .get("limit")
        .and_then(Value::as_u64)
        .and_then(|l| usize::try_from(l).ok());
    let (key, by): (&str, fn(&Value, &Value) -> std::cmp::Ordering) = match name {
        "inbox.list" => ("messages", |a, b| {
            text(b, "timestamp").cmp(text(a, "timestamp"))
        }),
        "search" => ("hits", |a, b| {
            number(b, "score")
                .partial_cmp(&number(a, "score"))
                .unwrap_or(std::cmp::Ordering::Equal)
        }),
        _ => return,
    };
    if let Some(Value::Array(items)) = merged.get_mut(key) {
        items.sort_by(by);
        if let Some(limit) = limit {
            items.truncate(limit);
        }
    }
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn number(value: &Value, key: &str) -> f64 {
    value.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Names every session, message and search hit of an answer with its kiln.
fn tag(value: &mut Value, kiln: &str) {
    let Value::Object(fields) = value else {
        return;
    };
    for (key, held) in fields.iter_mut() {
        if !matches!(
            key.as_str(),
            "session" | "sessions" | "message" | "messages" | "hits" | "jobs" | "conflicts"
        ) {
            continue;
        }
        match held {
            Value::Object(object) => {
                object.insert("kiln".into(), kiln.into());
            }
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(object) = item {
                        object.insert("kiln".into(), kiln.into());
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn with_no_kiln_reached_a_listing_is_empty_not_malformed() {
        for (name, result) in [
            ("session.list", "sessions"),
            ("inbox.list", "messages"),
            ("search", "hits"),
            ("cron.list", "jobs"),
            ("session.conflicts", "pairs"),
        ] {
            assert_eq!(nothing_of(name)[result], json!([]), "{name}");
        }
        let listed: crate::protocol::methods::ListedSessions =
            serde_json::from_value(nothing_of("session.list")).unwrap();
        assert!(listed.sessions.is_empty());
    }

    #[test]
    fn answers_merge_lists_add_counts_and_name_each_row_with_its_kiln() {
        let mut merged = Map::new();
        let mut a = json!({"messages": [{"id": "1", "timestamp": "2026-01-01"}], "updated": 2});
        let mut b = json!({"messages": [{"id": "2", "timestamp": "2026-02-01"}], "updated": 3});
        tag(&mut a, "alpha");
        tag(&mut b, "beta");
        merge(&mut merged, a);
        merge(&mut merged, b);
        order("inbox.list", &json!({"limit": 1}), &mut merged);
        assert_eq!(merged["updated"], json!(5));
        assert_eq!(
            merged["messages"],
            json!([{"id": "2", "timestamp": "2026-02-01", "kiln": "beta"}])
        );
    }
}
