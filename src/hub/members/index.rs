//! Which kiln holds which session and message, learnt from the kilns' answers and events,
//! and every kiln's conflict radar as it last sent it: how the hub routes a call naming a
//! session or a message, and sends the radar of all kilns as one.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Which kiln (by its key) holds which session and message.
#[derive(Default)]
pub(super) struct Index {
    sessions: HashMap<String, String>,
    messages: HashMap<String, String>,
    /// Each kiln's conflict radar as it last sent it (`session.conflicts`'s pairs): a
    /// kiln's report is of its own sessions only, so the hub sends them all as one.
    radar: BTreeMap<String, Vec<Value>>,
}

impl Index {
    /// The key of the kiln known to hold session `id`.
    pub(super) fn session(&self, id: &str) -> Option<String> {
        self.sessions.get(id).cloned()
    }

    /// The key of the kiln known to hold message `id`.
    pub(super) fn message(&self, id: &str) -> Option<String> {
        self.messages.get(id).cloned()
    }

    /// Remembers that kiln `held_by` holds what `value` (an answer of it) shows: its
    /// sessions and messages, wherever they are in it.
    pub(super) fn learn(&mut self, held_by: &str, value: &Value) {
        visit(value, &mut |key, object| {
            let Some(id) = object.get("id").and_then(Value::as_str) else {
                return;
            };
            match key {
                "session" | "sessions" => {
                    self.sessions.insert(id.to_string(), held_by.to_string());
                }
                "message" | "messages" => {
                    self.messages.insert(id.to_string(), held_by.to_string());
                }
                _ => {}
            }
        });
    }

    /// Remembers that kiln `held_by` holds the session or message a notification of
    /// `method` with `params` is about.
    pub(super) fn note(
        &mut self,
        held_by: &str,
        method: &str,
        params: &serde_json::Map<String, Value>,
    ) {
        let map = match method {
            "session.registered" | "session.updated" => &mut self.sessions,
            "inbox.created" | "inbox.updated" => &mut self.messages,
            _ => return,
        };
        if let Some(id) = params.get("id").and_then(Value::as_str) {
            map.insert(id.to_string(), held_by.to_string());
        }
    }

    /// Keeps kiln `key`'s radar and gives every kiln's pairs together.
    pub(super) fn radar_with(&mut self, key: &str, pairs: Vec<Value>) -> Vec<Value> {
        self.radar.insert(key.to_string(), pairs);
        self.radar.values().flatten().cloned().collect()
    }

    /// Forgets kiln `key`'s radar: a kiln that is away reports no conflicts until it is
    /// back.
    pub(super) fn forget_radar(&mut self, key: &str) {
        self.radar.remove(key);
    }
}

/// Calls `found` with every object held under a key (or in an array under a key) of
/// `value`, and that key.
fn visit(value: &Value, found: &mut impl FnMut(&str, &serde_json::Map<String, Value>)) {
    let Value::Object(fields) = value else {
        return;
    };
    for (key, held) in fields {
        match held {
            Value::Object(object) => found(key, object),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(object) = item {
                        found(key, object);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kilns_conflicts_are_sent_as_one_radar() {
        let mut index = Index::default();
        let pair = |a: &str| serde_json::json!({"a": a, "b": "x", "files": []});
        assert_eq!(index.radar_with("alpha", vec![pair("a1")]).len(), 1);
        let all = index.radar_with("beta", vec![pair("b1"), pair("b2")]);
        assert_eq!(
            all.len(),
            3,
            "beta's report does not replace alpha's: {all:?}"
        );
        // A kiln's new report replaces its own old one only.
        let all = index.radar_with("alpha", Vec::new());
        assert_eq!(all, vec![pair("b1"), pair("b2")]);
    }
}
