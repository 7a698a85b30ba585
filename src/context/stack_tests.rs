use super::*;

fn human(text: &str) -> Message {
    Message::Human { text: text.into() }
}

fn agent(text: &str) -> Message {
    Message::Agent { text: text.into() }
}

fn call(id: &str) -> Message {
    Message::ToolCall {
        call_id: id.into(),
        tool: "edit_file".into(),
        arguments: r#"{"path":"src/x.rs"}"#.into(),
    }
}

fn result(id: &str, ok: bool, text: &str) -> Message {
    Message::ToolResult {
        call_id: id.into(),
        tool: "edit_file".into(),
        ok,
        text: text.into(),
    }
}

/// The seed's example stack: system, agent, human, agent, tool call, failed result.
fn seed_stack() -> ContextStack {
    let mut s = ContextStack::new("You are helpful.");
    for m in [
        agent("I found the issue"),
        human("Fix the auth bug"),
        agent("I'll edit file X"),
        call("c1"),
        result("c1", false, "Traceback ... 300 lines"),
    ] {
        s.push(m).unwrap();
    }
    s
}

fn kinds(s: &ContextStack) -> Vec<&'static str> {
    s.entries().iter().map(|e| e.message.kind()).collect()
}

fn seqs(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.seq).collect()
}

#[test]
fn new_stack_holds_only_the_system_prompt() {
    let s = ContextStack::new("be brief");
    assert_eq!(kinds(&s), ["system"]);
    assert_eq!(s.system_prompt(), "be brief");
    assert_eq!(s.poppable(), 0);
    assert_eq!(s.top().seq, 1);
}

#[test]
fn push_stamps_increasing_seqs_and_reports_the_entry() {
    let mut s = ContextStack::new("");
    let change = s.push(human("hi")).unwrap();
    assert_eq!(change.operation, StackEdit::Push);
    assert_eq!(seqs(&change.added), [2]);
    assert!(change.removed.is_empty());
    s.push(agent("hello")).unwrap();
    assert_eq!(seqs(s.entries()), [1, 2, 3]);
    assert_eq!(s.top().message, agent("hello"));
}

#[test]
fn push_refuses_a_second_system_prompt() {
    let mut s = seed_stack();
    let before = s.clone();
    let err = s.push(Message::System { text: "x".into() }).unwrap_err();
    assert_eq!(err, StackError::SecondSystemPrompt);
    assert_eq!(s, before);
}

#[test]
fn pop_removes_the_top_entries_and_carries_them() {
    let mut s = seed_stack();
    let change = s.pop(2).unwrap();
    assert_eq!(kinds(&s), ["system", "agent", "human", "agent"]);
    assert_eq!(seqs(&change.removed), [5, 6]);
    assert_eq!(
        change.removed[1].message,
        result("c1", false, "Traceback ... 300 lines")
    );
    assert_eq!(
        change.to_string(),
        "pop 2: removed #5 tool_call, #6 tool_result"
    );
}

#[test]
fn pop_can_empty_everything_above_the_system_prompt() {
    let mut s = seed_stack();
    s.pop(5).unwrap();
    assert_eq!(kinds(&s), ["system"]);
}

#[test]
fn pop_refuses_zero_and_too_many_and_changes_nothing() {
    let mut s = seed_stack();
    let before = s.clone();
    assert_eq!(s.pop(0).unwrap_err(), StackError::PopZero);
    let err = s.pop(6).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot pop 6 entries: only 5 above the system prompt"
    );
    assert_eq!(s, before);
    let mut empty = ContextStack::new("sys");
    assert_eq!(
        empty.pop(1).unwrap_err().to_string(),
        "cannot pop 1 entry: nothing is above the system prompt"
    );
}

#[test]
fn seqs_are_never_reused_after_a_pop() {
    let mut s = seed_stack();
    s.pop(1).unwrap();
    let change = s.push(human("again")).unwrap();
    assert_eq!(seqs(&change.added), [7]);
}

#[test]
fn checkpoint_marks_the_top_entry() {
    let mut s = seed_stack();
    s.pop(3).unwrap();
    let change = s.checkpoint("before-refactor").unwrap();
    let mark = change.checkpoint_added.clone().unwrap();
    assert_eq!((mark.name.as_str(), mark.seq), ("before-refactor", 3));
    assert_eq!(s.checkpoints(), [mark]);
    assert_eq!(
        change.to_string(),
        "checkpoint 'before-refactor': marked #3 as 'before-refactor'"
    );
}

#[test]
fn checkpoint_refuses_duplicate_and_invalid_names() {
    let mut s = seed_stack();
    s.checkpoint("a").unwrap();
    s.push(human("more")).unwrap();
    let before = s.clone();
    assert_eq!(
        s.checkpoint("a").unwrap_err().to_string(),
        "a checkpoint named 'a' already exists (at #6); roll back to it or choose another name"
    );
    for bad in ["", "has space", "-flag", "semi;colon", &"x".repeat(65)] {
        assert!(
            matches!(
                s.checkpoint(bad),
                Err(StackError::InvalidCheckpointName { .. })
            ),
            "{bad:?} was accepted"
        );
    }
    assert_eq!(s, before);
    assert!(s.checkpoint("v1.2_ok-Ünï").is_ok());
    assert!(s.checkpoint(&"y".repeat(64)).is_ok());
}

#[test]
fn rollback_keeps_the_marked_entry_and_drops_later_checkpoints() {
    let mut s = seed_stack();
    s.pop(3).unwrap();
    s.checkpoint("understood").unwrap();
    s.push(agent("plan A")).unwrap();
    s.checkpoint("plan-a").unwrap();
    s.push(call("c2")).unwrap();
    let change = s.rollback("understood").unwrap();
    assert_eq!(kinds(&s), ["system", "agent", "human"]);
    assert_eq!(seqs(&change.removed), [7, 8]);
    let dropped: Vec<_> = change.checkpoints_dropped.iter().map(|c| &c.name).collect();
    assert_eq!(dropped, ["plan-a"]);
    let left: Vec<_> = s.checkpoints().iter().map(|c| &c.name).collect();
    assert_eq!(left, ["understood"]);
    // The checkpoint survives its own rollback; doing it again changes nothing.
    let again = s.rollback("understood").unwrap();
    assert!(again.removed.is_empty());
    assert_eq!(
        again.to_string(),
        "rollback to 'understood': nothing changed"
    );
}

#[test]
fn rollback_to_an_unknown_checkpoint_names_the_known_ones() {
    let mut s = seed_stack();
    s.checkpoint("a").unwrap();
    s.checkpoint("b").unwrap();
    let before = s.clone();
    assert_eq!(
        s.rollback("before-refactor").unwrap_err().to_string(),
        "no checkpoint named 'before-refactor' (checkpoints: a, b)"
    );
    assert_eq!(s, before);
    assert_eq!(
        ContextStack::new("").rollback("x").unwrap_err().to_string(),
        "no checkpoint named 'x' (there are no checkpoints)"
    );
}

#[test]
fn popping_a_marked_entry_drops_its_checkpoint() {
    let mut s = seed_stack();
    s.checkpoint("top").unwrap();
    let change = s.pop(1).unwrap();
    assert_eq!(change.checkpoints_dropped.len(), 1);
    assert!(s.checkpoints().is_empty());
    assert!(change.to_string().ends_with("dropped checkpoint 'top'"));
    // A new entry at the same depth is not the marked one.
    s.push(human("different")).unwrap();
    assert!(s.rollback("top").is_err());
}

#[test]
fn replace_top_swaps_the_top_for_a_summary() {
    let mut s = seed_stack();
    let change = s.replace_top("edit failed: file X is read-only").unwrap();
    assert_eq!(
        kinds(&s),
        ["system", "agent", "human", "agent", "tool_call", "summary"]
    );
    assert_eq!(seqs(&change.removed), [6]);
    assert_eq!(seqs(&change.added), [7]);
    assert_eq!(s.top().message.text(), "edit failed: file X is read-only");
}

#[test]
fn replace_top_refuses_on_the_bare_system_prompt_and_empty_text() {
    let mut s = ContextStack::new("sys");
    assert_eq!(
        s.replace_top("x").unwrap_err().to_string(),
        "cannot replace the top entry: only the system prompt is on the stack"
    );
    let mut s = seed_stack();
    let before = s.clone();
    assert_eq!(
        s.replace_top("  \n").unwrap_err(),
        StackError::EmptyText { what: "summary" }
    );
    assert_eq!(s, before);
}

#[test]
fn reset_keeps_only_the_system_prompt_and_clears_checkpoints() {
    let mut s = seed_stack();
    let mut bare = ContextStack::new("sys");
    bare.checkpoint("start").unwrap();
    s.checkpoint("start").unwrap();
    let change = s.reset();
    assert_eq!(kinds(&s), ["system"]);
    assert_eq!(s.system_prompt(), "You are helpful.");
    assert_eq!(change.removed.len(), 5);
    assert!(s.checkpoints().is_empty());
    // Even a checkpoint on the system prompt goes: reset is a fresh start.
    assert_eq!(bare.reset().checkpoints_dropped.len(), 1);
    assert!(bare.checkpoints().is_empty());
}

#[test]
fn summarize_collapses_everything_above_the_system_prompt() {
    let mut s = seed_stack();
    s.pop(5).unwrap();
    s.checkpoint("origin").unwrap();
    s.push(human("task")).unwrap();
    s.checkpoint("later").unwrap();
    s.push(agent("work")).unwrap();
    let change = s.summarize("GOAL: task").unwrap();
    assert_eq!(kinds(&s), ["system", "summary"]);
    assert_eq!(change.removed.len(), 2);
    assert_eq!(change.added[0].message.text(), "GOAL: task");
    // The checkpoint on the system prompt still marks a kept entry.
    let left: Vec<_> = s.checkpoints().iter().map(|c| &c.name).collect();
    assert_eq!(left, ["origin"]);
    assert_eq!(
        ContextStack::new("sys")
            .summarize("x")
            .unwrap_err()
            .to_string(),
        "cannot summarize: only the system prompt is on the stack"
    );
}

#[test]
fn tool_error_policy_replaces_the_failed_result_with_the_error() {
    let mut s = seed_stack();
    let change = s.recover_tool_error("permission denied: src/x.rs").unwrap();
    assert_eq!(change.operation, StackEdit::ToolError);
    assert_eq!(seqs(&change.removed), [6]);
    assert_eq!(
        s.top().message,
        result("c1", false, "permission denied: src/x.rs")
    );
    // The call and the reasoning before it stay.
    assert_eq!(kinds(&s)[3..5], ["agent", "tool_call"]);
}

#[test]
fn tool_error_policy_refuses_when_the_top_is_not_a_tool_result() {
    let mut s = seed_stack();
    s.pop(1).unwrap();
    let before = s.clone();
    assert_eq!(
        s.recover_tool_error("boom").unwrap_err().to_string(),
        "the top entry is a tool_call entry, not a tool result"
    );
    assert_eq!(s, before);
}

#[test]
fn serde_round_trip_keeps_everything() {
    let mut s = seed_stack();
    s.checkpoint("cp").unwrap();
    s.pop(1).unwrap();
    s.push(human("ünïcödé ✓")).unwrap();
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["entries"][1]["kind"], "agent");
    assert_eq!(json["entries"][4]["call_id"], "c1");
    let back: ContextStack = serde_json::from_value(json).unwrap();
    assert_eq!(back, s);
    // next_seq survives: the next push does not reuse a seq.
    let mut back = back;
    assert_eq!(back.push(human("x")).unwrap().added[0].seq, 8);
}

#[test]
fn change_round_trips_for_the_audit_history() {
    let mut s = seed_stack();
    let change = s.pop(2).unwrap();
    let json = serde_json::to_string(&change).unwrap();
    assert!(json.contains(r#""op":"pop","n":2"#), "{json}");
    let back: Change = serde_json::from_str(&json).unwrap();
    assert_eq!(back, change);
}

#[test]
fn deserialising_refuses_broken_stacks() {
    let good = serde_json::to_value(seed_stack()).unwrap();
    let broken = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        edit(&mut v);
        serde_json::from_value::<ContextStack>(v)
            .unwrap_err()
            .to_string()
    };
    assert!(
        broken(&|v| {
            v["entries"].as_array_mut().unwrap().remove(0);
        })
        .contains("must start with its system prompt")
    );
    assert!(
        broken(&|v| v["entries"][2]["kind"] = "system".into()).contains("second system prompt")
    );
    assert!(broken(&|v| v["next_seq"] = 3.into()).contains("out of sequence"));
    assert!(
        broken(&|v| {
            v["checkpoints"] = serde_json::json!([{"name": "x", "seq": 99, "created_at": ""}]);
        })
        .contains("not on the stack")
    );
}
