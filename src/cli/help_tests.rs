//! Every argument of every command says what it is for in `--help`, the man page and the
//! shells' completions.

use clap::CommandFactory;

use super::Cli;

/// `cru session new --agent`-style names of the arguments under `cmd` with no help text.
fn without_help(cmd: &clap::Command, path: &str, found: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        if arg.get_help().is_none() && arg.get_long_help().is_none() {
            let name = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => format!("<{id}>"),
            };
            found.push(format!("{path} {name}"));
        }
    }
    for sub in cmd.get_subcommands() {
        without_help(sub, &format!("{path} {}", sub.get_name()), found);
    }
}

#[test]
fn every_argument_has_help() {
    let mut cmd = Cli::command();
    cmd.build();
    let mut found = Vec::new();
    without_help(&cmd, "cru", &mut found);
    assert!(
        found.is_empty(),
        "{} arguments have no help text (give each a doc comment):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_walk_finds_an_argument_without_help() {
    let cmd = clap::Command::new("x")
        .arg(clap::Arg::new("json").long("json").help("print JSON"))
        .subcommand(clap::Command::new("y").arg(clap::Arg::new("quiet").long("quiet")));
    let mut found = Vec::new();
    without_help(&cmd, "x", &mut found);
    assert_eq!(found, ["x y --quiet"]);
}

#[test]
fn version_names_the_commit_and_the_build_day() {
    let version = Cli::command().render_version();
    let (commit, day) = version
        .trim()
        .strip_prefix(&format!("cru {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|rest| rest.split_once(", built "))
        .unwrap_or_else(|| panic!("{version}"));
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );
    assert_eq!(day.len(), "2026-01-01".len(), "{version}");
}
