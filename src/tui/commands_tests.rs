//! Tests of the slash commands: parsing every table entry, arguments and their errors,
//! suggestions and Tab completion.

use super::complete::extend;
use super::*;
use crate::context::ContextOp;
use crate::protocol::{ContextCall, DriverKind, DriverOptions, Network};

#[test]
fn names_and_aliases_parse() {
    assert_eq!(parse("/next"), Ok(SlashCommand::Next));
    assert_eq!(parse("/n"), Ok(SlashCommand::Next));
    assert_eq!(parse("/p"), Ok(SlashCommand::Prev));
    assert_eq!(parse("  /goto 3 "), Ok(SlashCommand::Goto(3)));
    assert_eq!(parse("/sessions"), Ok(SlashCommand::Sessions));
    assert_eq!(parse("/answer 2"), Ok(SlashCommand::Answer("2".into())));
}

#[test]
fn goto_needs_a_positive_number() {
    for bad in ["/goto", "/goto x", "/goto 0", "/goto -1"] {
        let err = parse(bad).unwrap_err();
        assert!(err.to_string().contains("session number"), "{bad}: {err}");
    }
}

#[test]
fn commands_without_arguments_refuse_them() {
    assert_eq!(
        parse("/next 2").unwrap_err().to_string(),
        "/next: takes no arguments"
    );
}

#[test]
fn new_takes_flags_in_any_order_and_a_task() {
    assert_eq!(
        parse("/new --agent codex --worktree fix/flaky make the test pass"),
        Ok(SlashCommand::New {
            worktree: Some("fix/flaky".into()),
            agent: Some("codex".into()),
            task: Some("make the test pass".into()),
            driver: DriverOptions::default(),
            kiln: None,
        })
    );
    assert_eq!(
        parse("/new --worktree=feat/auth"),
        Ok(SlashCommand::New {
            worktree: Some("feat/auth".into()),
            agent: None,
            task: None,
            driver: DriverOptions::default(),
            kiln: None,
        })
    );
    // After the task begins, dashes are part of it.
    assert_eq!(
        parse("/new fix --verbose flag"),
        Ok(SlashCommand::New {
            worktree: None,
            agent: None,
            task: Some("fix --verbose flag".into()),
            driver: DriverOptions::default(),
            kiln: None,
        })
    );
}

#[test]
fn new_takes_the_kiln_to_start_in_before_the_task_only() {
    assert_eq!(
        parse("/new --kiln beta --agent codex fix it"),
        Ok(SlashCommand::New {
            worktree: None,
            agent: Some("codex".into()),
            task: Some("fix it".into()),
            driver: DriverOptions::default(),
            kiln: Some("beta".into()),
        })
    );
    let Ok(SlashCommand::New { kiln, task, .. }) = parse("/new --agent=codex --kiln=gamma go")
    else {
        panic!("not parsed");
    };
    assert_eq!(
        (kiln.as_deref(), task.as_deref()),
        (Some("gamma"), Some("go"))
    );
    // In the task, `--kiln` is words of the task.
    let Ok(SlashCommand::New { kiln, task, .. }) = parse("/new explain --kiln flags") else {
        panic!("not parsed");
    };
    assert_eq!(
        (kiln, task.as_deref()),
        (None, Some("explain --kiln flags"))
    );
    assert!(parse("/new --kiln").is_err());
}

#[test]
fn new_takes_the_driver_options_of_cru_session_new() {
    let Ok(SlashCommand::New { driver, task, .. }) = parse(
        "/new --driver sandbox --network host --env API_KEY --env=OTHER --memory 512 \
         --mount /data:ro --pids 64 fix it",
    ) else {
        panic!("not parsed");
    };
    assert_eq!(task.as_deref(), Some("fix it"));
    let spec = driver.resolve().unwrap();
    assert_eq!(spec.kind(), DriverKind::Sandbox);
    assert_eq!(spec.network(), Network::Host);
    assert_eq!(spec.env(), ["API_KEY", "OTHER"]);
    assert_eq!((spec.memory(), spec.pids()), (Some(512), Some(64)));
    assert!(spec.mounts()[0].read_only);
    assert!(
        parse("/new --driver vm")
            .unwrap_err()
            .to_string()
            .contains("unknown driver")
    );
    assert!(
        parse("/new --memory lots")
            .unwrap_err()
            .to_string()
            .contains("whole number")
    );
}

#[test]
fn new_rejects_a_flag_without_value_or_an_unknown_flag() {
    assert!(
        parse("/new --agent")
            .unwrap_err()
            .to_string()
            .contains("--agent needs a value")
    );
    assert!(
        parse("/new --model x")
            .unwrap_err()
            .to_string()
            .contains("unknown option --model")
    );
}

#[test]
fn context_operations_parse() {
    let ctx = |s| {
        parse(s).map(|c| match c {
            SlashCommand::Context(op) => op,
            other => panic!("{other:?}"),
        })
    };
    assert_eq!(ctx("/context"), Ok(ContextCall::Get));
    assert_eq!(
        ctx("/context pop"),
        Ok(ContextCall::Apply(ContextOp::Pop(1)))
    );
    assert_eq!(
        ctx("/context pop 3"),
        Ok(ContextCall::Apply(ContextOp::Pop(3)))
    );
    assert_eq!(
        ctx("/context rollback before-refactor"),
        Ok(ContextCall::Apply(ContextOp::Rollback(
            "before-refactor".into()
        )))
    );
    assert_eq!(
        ctx("/context reset"),
        Ok(ContextCall::Apply(ContextOp::Reset))
    );
    assert_eq!(
        ctx("/context replace-top  the tests pass now"),
        Ok(ContextCall::Apply(ContextOp::ReplaceTop(
            "the tests pass now".into()
        )))
    );
    assert!(parse("/context replace-top").is_err());
    assert!(parse("/context pop 0").is_err());
    assert!(parse("/context checkpoint").is_err());
    assert!(
        parse("/context explode")
            .unwrap_err()
            .to_string()
            .contains("unknown operation explode")
    );
}

#[test]
fn a_typo_gets_a_suggestion() {
    assert_eq!(
        parse("/nxt").unwrap_err().to_string(),
        "unknown command /nxt — did you mean /next?"
    );
    assert_eq!(suggest("sesions"), Some("sessions"));
    assert_eq!(suggest("hepl"), Some("help"));
    // Two neighbours swapped is one slip of the fingers.
    assert_eq!(suggest("nwe"), Some("new"));
    assert_eq!(suggest("enw"), Some("new"));
    assert_eq!(
        parse("/frobnicate").unwrap_err().to_string(),
        "unknown command /frobnicate — /help lists the commands"
    );
}

#[test]
fn tab_completes_a_unique_prefix_and_lists_ambiguous_ones() {
    assert_eq!(complete("/inb").line.as_deref(), Some("/inbox "));
    // `/session` (the security state) and `/sessions`: the common prefix, then both.
    let both = complete("/ses");
    assert_eq!(both.line.as_deref(), Some("/session"));
    assert_eq!(both.candidates, vec!["/sessions", "/session"]);
    let ambiguous = complete("/n");
    assert_eq!(ambiguous.line.as_deref(), Some("/ne"));
    assert_eq!(ambiguous.candidates, vec!["/next", "/new"]);
    let stuck = complete("/ne");
    assert_eq!(stuck.line, None);
    assert_eq!(stuck.candidates, vec!["/next", "/new"]);
    assert_eq!(complete("/nex").line.as_deref(), Some("/next "));
    assert_eq!(
        complete("/context ro").line.as_deref(),
        Some("/context rollback ")
    );
    assert_eq!(complete("/zzz").line, None);
}

#[test]
fn common_prefix_extends_ambiguous_completion() {
    assert_eq!(complete("/context ").line, None);
    assert_eq!(complete("/context ").candidates.len(), 6);
    assert_eq!(
        extend("/", "c", &["checkpoint", "check"], " ")
            .line
            .as_deref(),
        Some("/check")
    );
}

#[test]
fn handoff_takes_one_agent_profile() {
    assert_eq!(
        parse("/handoff codex").unwrap(),
        SlashCommand::Handoff("codex".into())
    );
    assert!(parse("/handoff").is_err());
    assert!(parse("/handoff codex claude").is_err());
}

#[test]
fn search_takes_the_words_to_find() {
    assert_eq!(
        parse("/search flaky  test").unwrap(),
        SlashCommand::Search("flaky  test".into())
    );
    assert_eq!(
        parse("/find zeppelin").unwrap(),
        SlashCommand::Search("zeppelin".into())
    );
    assert!(parse("/search").is_err());
    assert!(parse("/search -- ?").is_err());
}

#[test]
fn every_table_entry_parses() {
    for spec in COMMANDS {
        let line = match spec.name {
            "goto" => "/goto 1".to_string(),
            "answer" => "/answer yes".to_string(),
            "disable" | "enable" => format!("/{} ask-before-push", spec.name),
            "rename" => "/rename the auth work".to_string(),
            "handoff" => "/handoff codex".to_string(),
            "move" => "/move build-server".to_string(),
            "search" => "/search flaky test".to_string(),
            name => format!("/{name}"),
        };
        assert!(parse(&line).is_ok(), "{line}");
    }
}
