//! Tests of the method table: against PROTOCOL.md, and its columns against each other.

use super::*;

/// The methods PROTOCOL.md's table lists: its rows start with "| `name` |".
fn documented() -> Vec<String> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("PROTOCOL.md"),
    )
    .unwrap();
    // The method tables open "## Methods" and "## Context stack"; subsections
    // (types, notifications) list other things.
    let mut in_methods = false;
    doc.lines()
        .filter(|l| {
            if l.starts_with("## ") {
                in_methods = l.starts_with("## Methods") || l.starts_with("## Context stack");
            } else if l.starts_with("### ") {
                in_methods = false;
            }
            in_methods
        })
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|name| {
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_')
        })
        .filter(|name| !name.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn the_table_and_protocol_md_list_the_same_methods() {
    let mut documented = documented();
    documented.sort();
    documented.dedup();
    let mut table: Vec<String> = TABLE.iter().map(|r| r.name.to_string()).collect();
    table.sort();
    assert_eq!(table, documented);
}

/// A call goes to the daemon that runs the session it names: a row routed to the
/// owner must name one, and a handle's refusal words are for owner-only rows.
#[test]
fn routes_and_refusals_fit_their_rows() {
    for row in TABLE {
        if row.route == Route::Owner {
            assert!(row.params.contains(&"session_id"), "{}", row.name);
        }
        if row.refusal.is_some() {
            assert_eq!(row.access, Access::Owner, "{}", row.name);
        }
    }
    assert!(row(SessionPrompt::NAME).is_some_and(|r| r.route == Route::Owner));
    assert!(row(InboxList::NAME).is_some_and(|r| r.route == Route::Local));
}

/// Every row reads its calls into a [`Request`] of its own name, which sends under
/// that name again (generated from the table, so a row cannot lack one).
#[test]
fn every_row_has_a_request_of_its_name() {
    for row in TABLE {
        match Request::read(row.name, serde_json::json!({})) {
            Ok(request) => assert_eq!(request.method(), row.name),
            Err(e) => assert_eq!(
                e.code,
                crate::protocol::code::INVALID_PARAMS,
                "{}",
                row.name
            ),
        }
    }
    let raw = serde_json::json!({"session_id": "s1", "op": {"pop": 2}});
    let request = Request::read(ContextApply::NAME, raw.clone()).unwrap();
    assert_eq!(request.params().unwrap(), raw);
    assert!(Request::read("context.nothing", raw).is_err());
}

/// `context.apply`'s `op` on the wire: `"get"`, or the operation as `ContextOp` writes it.
#[test]
fn context_apply_reads_get_and_every_operation() {
    use crate::context::ContextOp;
    let op = |v: serde_json::Value| serde_json::from_value::<ContextCall>(v).unwrap();
    assert_eq!(op(serde_json::json!("get")), ContextCall::Get);
    assert_eq!(
        op(serde_json::json!("reset")),
        ContextCall::Apply(ContextOp::Reset)
    );
    assert_eq!(
        op(serde_json::json!({"pop": 2})),
        ContextCall::Apply(ContextOp::Pop(2))
    );
    assert_eq!(
        op(serde_json::json!({"summarize": null})),
        ContextCall::Apply(ContextOp::Summarize(None))
    );
    assert_eq!(
        serde_json::to_value(ContextCall::Apply(ContextOp::Checkpoint("a".into()))).unwrap(),
        serde_json::json!({"checkpoint": "a"})
    );
    assert_eq!(
        serde_json::to_value(ContextCall::Get).unwrap(),
        serde_json::json!("get")
    );
}

#[test]
fn names_are_unique_and_params_named_once() {
    let mut names: Vec<&str> = TABLE.iter().map(|r| r.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), TABLE.len());
    for row in TABLE {
        let mut params = row.params.to_vec();
        params.sort_unstable();
        params.dedup();
        assert_eq!(params.len(), row.params.len(), "{}", row.name);
    }
}

/// The web view offers its reads to every paired browser and its changes to one paired
/// with full access: the table's `web` column says which methods those are.
#[test]
fn the_web_column_names_what_the_web_view_offers() {
    let offered = |web: Web| -> Vec<&str> {
        TABLE
            .iter()
            .filter(|r| r.web == web)
            .map(|r| r.name)
            .collect()
    };
    assert_eq!(
        offered(Web::Read),
        [
            SessionList::NAME,
            SessionGet::NAME,
            SessionDiff::NAME,
            SessionTranscript::NAME,
            InboxList::NAME,
            InboxGet::NAME,
        ]
    );
    assert_eq!(
        offered(Web::Change),
        [
            SessionCreate::NAME,
            SessionPrompt::NAME,
            SessionCancel::NAME,
            SessionStop::NAME,
            SessionCommit::NAME,
            SessionMerge::NAME,
            InboxMarkRead::NAME,
            InboxRespond::NAME,
        ]
    );
    assert!(row(DbQuery::NAME).is_some_and(|r| r.web == Web::No));
}

/// A failed call is reported by what it was doing: the row's words, else its name.
#[test]
fn a_call_says_what_it_does_from_its_row() {
    let session_id = "s1".to_string();
    let prompt = Request::SessionPrompt(PromptParams {
        session_id: session_id.clone(),
        text: "hi".into(),
    });
    assert_eq!(prompt.doing(), "sending the prompt");
    let resend = Request::SessionResend(SessionIdParams { session_id });
    assert_eq!(resend.doing(), SessionResend::NAME);
    assert!(
        TABLE
            .iter()
            .filter_map(|r| r.doing)
            .all(|d| !d.trim().is_empty())
    );
}

/// Every row says what its method does, in a `///` line above it.
#[test]
fn every_row_has_a_doc_line() {
    let bare: Vec<&str> = TABLE
        .iter()
        .filter(|r| r.doc.trim().is_empty())
        .map(|r| r.name)
        .collect();
    assert!(bare.is_empty(), "rows without a /// line: {bare:?}");
    assert!(row(ContextGet::NAME).is_some_and(|r| r.doc.contains("`get`")));
}
