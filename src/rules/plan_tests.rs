//! What an approved plan lets run: the commands and files its steps name, exactly.

use super::*;

fn execute(command: &str) -> Operation {
    Operation {
        kind: OperationKind::Execute,
        command: Some(command.into()),
        ..Default::default()
    }
}

fn on(kind: OperationKind, path: &str) -> Operation {
    Operation {
        kind,
        paths: vec![path.into()],
        ..Default::default()
    }
}

fn scope(steps: &[&str]) -> PlanScope {
    PlanScope::new(&steps.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn a_backticked_or_written_out_command_is_allowed_exactly_and_nothing_near_it() {
    let plan = scope(&[
        "Read the schema",
        "Run `cargo test -p store`",
        "Then run git status --short to check",
    ]);
    assert_eq!(plan.covers(&execute("cargo test -p store")), Some(2));
    assert_eq!(plan.covers(&execute("cargo  test   -p store")), Some(2));
    assert_eq!(plan.covers(&execute("git status --short")), Some(3));
    // Other arguments, a bare program, a prefix: not planned.
    assert_eq!(plan.covers(&execute("cargo test")), None);
    assert_eq!(plan.covers(&execute("cargo test -p store --release")), None);
    assert_eq!(plan.covers(&execute("git")), None);
    assert_eq!(plan.covers(&execute("rm -rf /")), None);
}

#[test]
fn a_named_file_is_allowed_for_what_the_step_s_verbs_say() {
    let plan = scope(&[
        "Edit src/db.rs to read from the view",
        "Delete `old/schema.sql`.",
        "Look at README.md",
    ]);
    let root = "/work/kiln/worktrees/s1";
    let edit = |p: &str| on(OperationKind::Edit, &format!("{root}/{p}"));
    assert_eq!(plan.covers(&edit("src/db.rs")), Some(1));
    assert_eq!(
        plan.covers(&on(
            OperationKind::Delete,
            &format!("{root}/old/schema.sql")
        )),
        Some(2)
    );
    // A step without a verb that allows the kind, another file, a file of that name in
    // another folder: not planned.
    assert_eq!(
        plan.covers(&on(OperationKind::Delete, &format!("{root}/src/db.rs"))),
        None
    );
    assert_eq!(plan.covers(&edit("README.md")), None);
    assert_eq!(
        plan.covers(&on(OperationKind::Read, &format!("{root}/README.md"))),
        Some(3)
    );
    assert_eq!(plan.covers(&edit("src/main.rs")), None);
    assert_eq!(plan.covers(&edit("lib/src/db.rsx")), None);
    // An operation with neither a command nor a path is never in a plan.
    assert_eq!(plan.covers(&Operation::default()), None);
}

#[test]
fn every_path_of_an_operation_must_be_named() {
    let plan = scope(&["Edit alpha.rs and beta.rs"]);
    let mut op = on(OperationKind::Edit, "/w/alpha.rs");
    op.paths.push("/w/beta.rs".into());
    assert_eq!(plan.covers(&op), Some(1));
    op.paths.push("/w/gamma.rs".into());
    assert_eq!(plan.covers(&op), None);
}

#[test]
fn words_that_are_not_files_are_not_read_as_files() {
    for word in [
        "and/or",
        "e.g",
        "v1.2",
        "https://example.org/a.rs",
        "-o",
        "tests.",
    ] {
        assert!(!looks_like_path(word), "{word}");
    }
    for word in [
        "src/db.rs",
        "README.md",
        "/etc/hosts",
        "./run.sh",
        "Cargo.toml",
    ] {
        assert!(looks_like_path(word), "{word}");
    }
}

#[test]
fn the_allowances_name_each_step_that_allows_something() {
    let plan = scope(&["Think it over", "Run `make check`", "Edit src/db.rs"]);
    assert_eq!(
        plan.allowances(),
        ["2. execute `make check`", "3. edit: src/db.rs"]
    );
}
