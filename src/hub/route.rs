//! Where the hub sends each call: to the kiln that holds the session or message it
//! names, to every kiln (and the answers merged), to the kiln a new session is asked
//! for, or nowhere but the hub itself. The match is over every method of the table, so
//! a new method does not compile until it is given a way here.

use serde_json::Value;

use crate::protocol::methods::Request;

/// The way of one call through the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Way {
    /// The hub answers it itself (the handshake, events, its own status).
    Own,
    /// The kiln that holds this session.
    Session(String),
    /// The kiln that holds this inbox message.
    Message(String),
    /// Every kiln, the answers merged.
    All,
    /// The kiln named in the params (`kiln`), else the only one.
    Named(Option<String>),
    /// Not served through the hub, and why.
    No(&'static str),
}

/// The way of `request`, whose params as sent are `params`.
pub(super) fn way(request: &Request, params: &Value) -> Way {
    use Request as R;
    let session = || params.get("session_id").and_then(Value::as_str);
    let by_session = || session().map_or(Way::All, |id| Way::Session(id.to_string()));
    match request {
        R::Ping(_)
        | R::Handshake(_)
        | R::Subscribe(_)
        | R::Unsubscribe(_)
        | R::DaemonStatusOf(_)
        | R::DaemonShutdown(_)
        // The person's page and bot are the hub's own; a kiln's own are its daemon's.
        | R::WebPair(_)
        | R::WebDevicesOf(_)
        | R::WebRevoke(_)
        | R::MatrixVerify(_) => Way::Own,
        R::SessionAdopt(_) => Way::No("only the daemons of a team call it, of each other"),
        R::SessionList(_)
        | R::CronList(_)
        | R::SessionConflicts(_)
        | R::InboxMarkRead(_)
        | R::InboxClear(_)
        | R::SessionPrune(_) => Way::All,
        R::InboxList(_) | R::Search(_) => by_session(),
        R::RulesList(_) => session().map_or(
            Way::No("the rules differ by kiln: name a session (`session_id`)"),
            |id| Way::Session(id.to_string()),
        ),
        R::InboxGet(p) => Way::Message(p.id.clone()),
        R::InboxRespond(p) => Way::Message(p.id.clone()),
        R::SessionCreate(p) => Way::Named(p.kiln.clone()),
        // A channel's conversation lives in the kiln the channel names (the person's bot:
        // the kiln its room is mapped to).
        R::SessionResolve(p) => Way::Named(p.kiln.clone()),
        R::SessionGet(p)
        | R::SessionCancel(p)
        | R::SessionResend(p)
        | R::SessionStop(p)
        | R::SessionAudit(p)
        | R::SessionSecurity(p)
        | R::SessionRestart(p)
        | R::SessionClose(p)
        | R::ContextGet(p)
        | R::ContextReset(p) => Way::Session(p.session_id.clone()),
        R::SessionPrompt(_)
        | R::SessionDelete(_)
        | R::SessionExec(_)
        | R::SessionRule(_)
        | R::SessionRefine(_)
        | R::SessionReset(_)
        | R::SessionRename(_)
        | R::SessionFork(_)
        | R::SessionMove(_)
        | R::SessionHandoff(_)
        | R::SessionDiff(_)
        | R::SessionCommit(_)
        | R::SessionMerge(_)
        | R::SessionPr(_)
        | R::SessionTranscript(_)
        | R::ContextApply(_)
        | R::ContextPop(_)
        | R::ContextCheckpoint(_)
        | R::ContextRollback(_)
        | R::ContextReplaceTop(_)
        | R::ContextSummarize(_) => session()
            .map_or(Way::No("the call names no session (`session_id`)"), |id| {
                Way::Session(id.to_string())
            }),
        R::SessionRegister(_)
        | R::SessionHeartbeat(_)
        | R::SessionDeregister(_)
        | R::SecretGet(_)
        | R::InboxSend(_)
        | R::InboxWait(_) => Way::No("an agent talks to its own kiln's daemon, not to the hub"),
        R::CronRunNow(_) => {
            Way::No("this call is the kiln's own: make it to the kiln's daemon (`cru -C KILN …`)")
        }
        R::DbQuery(_) | R::DbCheck(_) => Way::No(
            "each kiln has its own database: ask the kiln's daemon (`cru -C KILN daemon …`)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn way_of(method: &str, params: Value) -> Way {
        let request = Request::read(method, params.clone()).unwrap();
        way(&request, &params)
    }

    #[test]
    fn calls_naming_a_session_or_message_go_to_its_kiln_and_lists_to_every_kiln() {
        assert_eq!(
            way_of("session.prompt", json!({"session_id": "01S", "text": "go"})),
            Way::Session("01S".into())
        );
        assert_eq!(
            way_of("inbox.respond", json!({"id": "01M", "response": "yes"})),
            Way::Message("01M".into())
        );
        assert_eq!(way_of("session.list", json!({})), Way::All);
        assert_eq!(way_of("inbox.list", json!({})), Way::All);
        assert_eq!(
            way_of("inbox.list", json!({"session_id": "01S"})),
            Way::Session("01S".into())
        );
        assert_eq!(
            way_of("session.create", json!({"agent": "a", "kiln": "beta"})),
            Way::Named(Some("beta".into()))
        );
        assert_eq!(
            way_of("handshake", json!({"protocol_version": 1})),
            Way::Own
        );
        assert!(matches!(
            way_of("db.query", json!({"sql": "x"})),
            Way::No(_)
        ));
        assert!(matches!(
            way_of(
                "inbox.send",
                json!({"session_id": "s", "msg_type": "info", "title": "t"})
            ),
            Way::No(_)
        ));
    }
}
