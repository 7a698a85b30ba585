//! `cru doctor`: the real binary checks the machine and the kiln: git missing or too old
//! fails (exit 1), a broken settings file is named with its line, a running daemon's
//! components appear (a failing one fails), and no daemon is started to look.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::*;

/// `cru --kiln <kiln> doctor --json` with HOME and the XDG folders in `home`, and `PATH`
/// as given (the caller's when `None`); its output and the checks it printed.
fn doctor(tk: &TestKiln, home: &Path, path: Option<&Path>) -> (Output, Vec<Value>) {
    let mut command = Command::new(CRU);
    command
        .arg("--kiln")
        .arg(tk.root())
        .args(["doctor", "--json"]);
    with_home(&mut command, home);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let out = run_bounded(command, "cru doctor --json");
    let checks: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
        panic!(
            "doctor --json is JSON ({e}):\n{}\n{}",
            stdout(&out),
            stderr(&out)
        )
    });
    (out, checks.as_array().expect("an array of checks").clone())
}

fn with_home(command: &mut Command, home: &Path) {
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_RUNTIME_DIR", home.join("run"));
}

/// The check named `name`, whole.
fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {checks:#?}"))
}

#[test]
fn git_missing_or_too_old_fails_and_the_exit_status_says_so() {
    let tk = TestKiln::new();
    let home = tempfile::tempdir().unwrap();

    // With the PATH as it is here: git is new enough, nothing fails, no daemon starts.
    let (out, checks) = doctor(&tk, home.path(), None);
    assert_eq!(check(&checks, "git")["status"], "pass", "{checks:#?}");
    for c in &checks {
        assert!(
            ["pass", "warn"].contains(&c["status"].as_str().unwrap()),
            "{c}"
        );
        assert!(c["found"].as_str().is_some_and(|f| !f.is_empty()), "{c}");
        assert_eq!(c["fix"].is_string(), c["status"] != "pass", "{c}");
    }
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let daemon = check(&checks, "daemon");
    assert!(
        daemon["found"].as_str().unwrap().contains("no daemon runs"),
        "{daemon}"
    );
    assert!(tk.daemon_pid().is_none(), "doctor started a daemon");
    assert!(!tk.kiln.socket_path().exists(), "doctor started a daemon");

    // No git at all: the git check fails; bubblewrap and podman, absent too, only warn.
    let empty = tempfile::tempdir().unwrap();
    let (out, checks) = doctor(&tk, home.path(), Some(empty.path()));
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let git = check(&checks, "git");
    assert_eq!(git["status"], "fail", "{git}");
    assert!(
        git["found"].as_str().unwrap().contains("not on PATH"),
        "{git}"
    );
    assert!(git["fix"].as_str().unwrap().contains("2.38"), "{git}");
    for name in ["bubblewrap", "podman"] {
        assert_eq!(check(&checks, name)["status"], "warn", "{checks:#?}");
    }

    // A git older than 2.38: merging cannot work, and the check says which git it found.
    let old = tempfile::tempdir().unwrap();
    write_script(
        &old.path().join("git"),
        "#!/bin/sh\necho git version 2.34.1\n",
    );
    let (out, checks) = doctor(&tk, home.path(), Some(old.path()));
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let git = check(&checks, "git");
    assert_eq!(git["status"], "fail", "{git}");
    let found = git["found"].as_str().unwrap();
    assert!(found.contains("2.34") && found.contains("2.38"), "{git}");

    // In words: one line a check, the failure marked, its fix below it.
    let mut command = Command::new(CRU);
    command
        .arg("--kiln")
        .arg(tk.root())
        .arg("doctor")
        .env("PATH", old.path());
    with_home(&mut command, home.path());
    let out = run_bounded(command, "cru doctor");
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("FAIL  git"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("2.34.1"), "{text}");
    assert!(text.contains("fix: install git 2.38 or newer"), "{text}");
}

#[test]
fn a_broken_settings_file_is_named_with_its_line() {
    let tk =
        TestKiln::with_settings("[daemon]\ngrace_period_secs = 60\n\n[agents.x]\ncomand = \"y\"\n");
    let home = tempfile::tempdir().unwrap();
    let (out, checks) = doctor(&tk, home.path(), None);
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let settings = check(&checks, "settings");
    assert_eq!(settings["status"], "fail", "{settings}");
    let found = settings["found"].as_str().unwrap();
    let file = tk.kiln.settings_path().display().to_string();
    assert!(
        found.contains(&file) && found.contains("line 5") && found.contains("comand"),
        "{settings}"
    );
    // The checks after it still ran.
    assert!(checks.iter().any(|c| c["check"] == "agents"), "{checks:#?}");
}

#[tokio::test]
async fn a_running_daemons_components_appear_and_a_failing_one_fails() {
    // The web view is told to listen on a port something else holds.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let tk = TestKiln::builder()
        .settings(&format!("[web]\nlisten = \"127.0.0.1:{port}\"\n"))
        .build();
    let _guard = KillOnDrop(tk.kiln.clone());
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(CRU);
    with_home(&mut command, home.path());
    let daemon = tk.run_daemon(command).await;

    let (out, checks) = doctor(&tk, home.path(), None);
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let found = check(&checks, "daemon")["found"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(found.contains(&format!("pid {}", daemon.pid())), "{found}");
    assert_eq!(check(&checks, "store")["status"], "pass", "{checks:#?}");
    let web = check(&checks, "daemon: web");
    assert_eq!(web["status"], "fail", "{web}");
    assert!(
        web["found"]
            .as_str()
            .unwrap()
            .contains("cannot serve the web view"),
        "{web}"
    );
    assert!(web["fix"].as_str().unwrap().contains("daemon.log"), "{web}");
    // Every other component the daemon reports is listed, and none fails.
    let components: Vec<&Value> = checks
        .iter()
        .filter(|c| {
            c["check"]
                .as_str()
                .is_some_and(|n| n.starts_with("daemon: "))
        })
        .collect();
    assert!(components.len() >= 2, "{checks:#?}");
    for c in components.iter().filter(|c| c["check"] != "daemon: web") {
        assert_ne!(c["status"], "fail", "{c}");
    }
    drop(held);
}

#[test]
fn a_missing_bubblewrap_fails_when_a_profile_runs_in_the_sandbox() {
    let tk = TestKiln::with_settings(
        "[agents.boxed]\ntype = \"command\"\ncommand = \"sh\"\ndriver = \"sandbox\"\n",
    );
    let home = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let (out, checks) = doctor(&tk, home.path(), Some(empty.path()));
    assert_eq!(out.status.code(), Some(1), "{checks:#?}");
    let bwrap = check(&checks, "bubblewrap");
    assert_eq!(bwrap["status"], "fail", "{bwrap}");
    assert!(
        bwrap["found"].as_str().unwrap().contains("[agents.boxed]"),
        "{bwrap}"
    );
    assert!(
        bwrap["fix"].as_str().unwrap().contains("bubblewrap"),
        "{bwrap}"
    );
    // No profile runs in podman: its absence stays a warning.
    assert_eq!(check(&checks, "podman")["status"], "warn", "{checks:#?}");
    assert_eq!(check(&checks, "settings")["status"], "pass", "{checks:#?}");
}
