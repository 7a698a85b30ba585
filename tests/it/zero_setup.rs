//! A first run with nothing configured: a well-known ACP agent on `PATH` is a built-in
//! profile, `cru agents` lists it, and `/new <task>` in the workbench starts it.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::*;
use crate::sessions::git;
use crate::tmux::Tmux;

const AGENT: &str = env!("CARGO_BIN_EXE_cru-scripted-agent");

/// A folder to be the whole `PATH`: the scripted agent as `claude-agent-acp`, and the
/// programs crucible itself calls (`git`, `sh`, `cru`). Nothing else is found, so no
/// other agent installed on the machine changes what `/new` picks.
fn path_with_claude(dir: &Path) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    symlink(AGENT, bin.join("claude-agent-acp")).unwrap();
    symlink(CRU, bin.join("cru")).unwrap();
    for program in ["git", "sh"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        assert!(!path.is_empty(), "{program} is not installed");
        symlink(path, bin.join(program)).unwrap();
    }
    bin.display().to_string()
}

#[test]
fn with_no_settings_a_built_in_agent_on_path_starts_from_new() {
    let tk = TestKiln::new();
    std::fs::remove_file(tk.kiln.settings_path()).unwrap();
    git(tk.root(), &["init", "-q", "-b", "main"]);
    std::fs::write(tk.root().join("README.md"), "project\n").unwrap();
    git(tk.root(), &["add", "README.md"]);
    git(tk.root(), &["commit", "-q", "-m", "start"]);
    let _guard = KillOnDrop(tk.kiln.clone());
    let tools = tempfile::tempdir().unwrap();
    let path = path_with_claude(tools.path());

    let agents = Command::new(CRU)
        .args(["--kiln", &tk.root().display().to_string(), "agents"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(agents.status.success(), "{}", stderr(&agents));
    let text = stdout(&agents);
    let claude = text
        .lines()
        .find(|l| l.starts_with("claude "))
        .unwrap_or_else(|| panic!("claude is listed:\n{text}"));
    assert!(
        claude.contains("built-in") && claude.contains(&format!("{path}/claude-agent-acp")),
        "{text}"
    );
    assert!(text.contains("codex-acp: not found"), "{text}");
    assert!(
        text.contains("/new <task> in the workbench starts claude"),
        "{text}"
    );

    let root = tk.root().display().to_string();
    // The shell tmux starts the program with may set PATH again: `env` sets it last.
    let path_setting = format!("PATH={path}");
    let term = Tmux::start(
        "zero-setup",
        (120, 30),
        tk.root(),
        &[("CRU_KILN", &root), ("TERM", "xterm-256color")],
        "/usr/bin/env",
        &[&path_setting, CRU],
    );
    term.wait_text("/new <task> starts claude");
    term.type_text("/new fix it");
    term.keys(&["Enter"]);
    term.wait_text("unknown command: fix it");

    let out = tk.cru(&["session", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list[0]["agent_name"], "claude", "{list}");
    assert_eq!(list[0]["task"], "fix it", "{list}");
    term.keys(&["C-q"]);
    term.wait_for("cru to exit", |_| term.exited());
}
