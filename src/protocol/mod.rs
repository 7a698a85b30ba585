//! The wire protocol between clients and the daemon: JSON-RPC 2.0, one object per line.
//! No I/O here; see `PROTOCOL.md` at the repository root for the whole contract.

pub mod audit;
pub mod check;
pub mod client_env;
pub mod context;
pub mod diff;
pub mod driver;
pub mod env;
pub mod handle;
pub mod jsonrpc;
pub mod methods;
pub mod params;
pub mod review;
pub mod types;
pub mod web;

pub use client_env::ClientEnv;
pub use context::*;
pub use diff::*;
pub use driver::{
    Confinement, DriverKind, DriverOptions, DriverSpec, Mount, Network, PodmanOptions, QemuOptions,
    SpecError, SshOptions,
};
pub use handle::Handle;
pub use jsonrpc::{ErrorObject, Id, Notification, Request, Response, code};
pub use params::*;
pub use review::*;
pub use types::*;
pub use web::*;

/// Bumped whenever a method or a type changes incompatibly. Clients and daemon must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// Caps on what agents produce (documented in PROTOCOL.md, "Limits"). Text past a cap is
/// cut, and the cut is marked with how much was left out; nothing is dropped silently.
pub mod limits {
    /// One line of a command agent's output.
    pub const AGENT_LINE_BYTES: usize = 64 * 1024;
    /// One transcript entry's text; a longer message continues in further entries.
    pub const ENTRY_BYTES: usize = 64 * 1024;
    /// One agent message (all of its entries together).
    pub const MESSAGE_BYTES: usize = 1024 * 1024;
    /// An inbox message's title and body.
    pub const TITLE_BYTES: usize = 1024;
    pub const BODY_BYTES: usize = 64 * 1024;
    /// A session's task: its words go into the search index in the same transaction as
    /// the session, several times over, so a longer one is refused (a hand-off's brief is
    /// cut to it instead).
    pub const TASK_BYTES: usize = 64 * 1024;
    /// One prompt: kept on the session record until its turn ends.
    pub const PROMPT_BYTES: usize = 256 * 1024;
}

/// The longest line the daemon reads; a longer one is answered with -32600 and skipped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Each method's params in the order PROTOCOL.md lists them (from the method table): how
/// positional (array) params are named. Struct field order never decides this.
pub fn param_order(name: &str) -> &'static [&'static str] {
    methods::row(name).map_or(&[], |row| row.params)
}

/// Params as an object: positional params are named by [`param_order`]; a `null` in a
/// position means the param is left out.
pub fn named_params(
    name: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, ErrorObject> {
    let serde_json::Value::Array(items) = params else {
        return Ok(params);
    };
    let names = param_order(name);
    if items.len() > names.len() {
        return Err(ErrorObject::invalid_params(format!(
            "{name} takes at most {} positional param(s) ({}), not {}",
            names.len(),
            names.join(", "),
            items.len()
        )));
    }
    Ok(serde_json::Value::Object(
        names
            .iter()
            .zip(items)
            .filter(|(_, v)| !v.is_null())
            .map(|(n, v)| ((*n).to_string(), v))
            .collect(),
    ))
}

#[cfg(test)]
mod param_tests {
    use super::*;
    use methods::Method;
    use serde_json::json;

    #[test]
    fn positional_params_follow_the_documented_order() {
        let named = named_params(
            methods::SessionRegister::NAME,
            json!(["claude", "alice", "feat/x"]),
        );
        assert_eq!(
            named.unwrap(),
            json!({"agent_type": "claude", "agent_name": "alice", "worktree": "feat/x"})
        );
        let named = named_params(
            methods::SessionDelete::NAME,
            json!(["S1", true, null, true]),
        );
        assert_eq!(
            named.unwrap(),
            json!({"session_id": "S1", "remove_worktree": true, "force": true})
        );
        let err = named_params(methods::SessionGet::NAME, json!(["a", "b"])).unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        let err = named_params(methods::SessionList::NAME, json!([1])).unwrap_err();
        assert_eq!(err.code, code::INVALID_PARAMS);
        assert_eq!(named_params("x", json!({"a": 1})).unwrap(), json!({"a": 1}));
    }

    #[test]
    fn a_resolution_s_decision_is_sent_from_its_reason() {
        for (reason, decision) in [
            (Resolution::Continue, "continue"),
            (Resolution::Timeout, "new"),
            (Resolution::NoSession, "new"),
        ] {
            let result = ResolveResult {
                session_id: "S1".into(),
                reason,
                previous_session_id: None,
                queued: false,
            };
            let wire = serde_json::to_value(&result).unwrap();
            assert_eq!(
                wire,
                json!({"session_id": "S1", "decision": decision,
                       "reason": reason.as_str(), "queued": false})
            );
            let back: ResolveResult = serde_json::from_value(wire).unwrap();
            assert_eq!((back.reason, back.decision()), (reason, decision));
        }
    }

    #[test]
    fn every_method_with_params_has_an_order() {
        let without = [
            methods::Ping::NAME,
            methods::SessionList::NAME,
            methods::InboxClear::NAME,
            methods::Unsubscribe::NAME,
            methods::DaemonStatusOf::NAME,
            methods::DaemonShutdown::NAME,
            methods::SessionConflicts::NAME,
            methods::CronList::NAME,
            methods::DbCheck::NAME,
            methods::WebDevicesOf::NAME,
        ];
        for name in methods::TABLE.iter().map(|row| row.name) {
            assert_eq!(
                param_order(name).is_empty(),
                without.contains(&name),
                "{name}"
            );
        }
    }
}
