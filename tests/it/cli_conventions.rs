//! The command line's conventions, on the real binary: shell completions (subcommands,
//! and the sessions of a running daemon), the man page, `--version` with the commit,
//! and no colour with `NO_COLOR` (in `cru`'s output and the workbench), 256 colours
//! where truecolor is missing.

use std::process::{Command, Output};

use serde_json::Value;

use crate::common::*;

/// `cru args…` with HOME and the XDG folders in a temp dir, in a folder that is no kiln.
fn cru(args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(CRU);
    command
        .args(args)
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_RUNTIME_DIR", home.path().join("run"))
        .env_remove("COMPLETE")
        .env_remove("NO_COLOR");
    for (name, value) in env {
        command.env(name, value);
    }
    run_bounded(command, &format!("cru {}", args.join(" ")))
}

/// What bash's completion function gets from `cru` for `words`, the last one being
/// completed, as the script `cru completions bash` registers asks for it.
fn bash_words(words: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let index = (words.len() - 1).to_string();
    let mut asked = vec!["--", "cru"];
    asked.extend_from_slice(&words[1..]);
    let mut all_env = vec![
        ("COMPLETE", "bash"),
        ("_CLAP_IFS", "\n"),
        ("_CLAP_COMPLETE_INDEX", index.as_str()),
        ("_CLAP_COMPLETE_COMP_TYPE", "9"),
        ("_CLAP_COMPLETE_SPACE", "true"),
    ];
    all_env.extend_from_slice(env);
    let out = cru(&asked, &all_env);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out).lines().map(str::to_owned).collect()
}

#[test]
fn completion_scripts_register_and_complete_subcommands() {
    let out = cru(&["completions", "bash"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = stdout(&out);
    assert!(script.contains("complete -o nospace"), "{script}");
    assert!(script.contains("-F _clap_complete_cru cru"), "{script}");
    assert!(script.contains("COMPLETE=\"bash\""), "{script}");
    let zsh = stdout(&cru(&["completions", "zsh"], &[]));
    assert!(zsh.starts_with("#compdef cru"), "{zsh}");
    let fish = stdout(&cru(&["completions", "fish"], &[]));
    assert!(
        fish.contains("complete --keep-order --exclusive --command cru"),
        "{fish}"
    );

    // The Tab the script asks for: `cru session <Tab>` lists session's subcommands.
    let words = bash_words(&["cru", "session", ""], &[]);
    for sub in ["new", "list", "status", "merge", "prune"] {
        assert!(words.iter().any(|w| w == sub), "{sub} in {words:?}");
    }
    assert!(!words.iter().any(|w| w == "doctor"), "{words:?}");
    let words = bash_words(&["cru", "sess"], &[]);
    assert_eq!(words, ["session"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_argument_completes_to_the_running_daemons_sessions() {
    let t = TestKiln::new();
    let _cleanup = KillOnDrop(t.kiln.clone());
    let c = t.client().await;
    register(&c, "claude").await;
    let listed: Value =
        serde_json::from_str(&stdout(&t.cru(&["session", "list", "--json"]))).unwrap();
    let name = listed[0]["display_name"].as_str().unwrap().to_owned();

    let kiln = t.root().to_string_lossy().into_owned();
    let words = bash_words(&["cru", "session", "status", ""], &[("CRU_KILN", &kiln)]);
    assert!(words.iter().any(|w| w == "1"), "{words:?}");
    assert!(words.contains(&name), "{name} in {words:?}");
    // The kiln named on the line being completed is the one asked.
    let words = bash_words(&["cru", "--kiln", &kiln, "session", "stop", ""], &[]);
    assert!(words.iter().any(|w| w == "1"), "{words:?}");

    // With no daemon there, none is started for a Tab: flags only.
    let empty = tempfile::tempdir().unwrap();
    let elsewhere = empty.path().to_string_lossy().into_owned();
    let words = bash_words(
        &["cru", "session", "status", ""],
        &[("CRU_KILN", &elsewhere)],
    );
    assert!(!words.iter().any(|w| w == "1"), "{words:?}");
    assert!(!empty.path().join(".crucible").exists());
}

#[test]
fn the_man_page_is_roff_and_covers_the_subcommands() {
    let out = cru(&["man"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = stdout(&out);
    // The page opens with the title macro (after roff's apostrophe set-up, which the
    // roff crate always writes first).
    let first = page
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
        .unwrap();
    assert!(first.starts_with(".TH cru 1 "), "{page}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    assert!(page.contains("cru\\-session"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let out = cru(&["man", "--out", &dir.path().to_string_lossy()], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    for page in [
        "cru.1",
        "cru-session.1",
        "cru-session-new.1",
        "cru-doctor.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".TH "), "{page}: {text}");
    }
}

#[test]
fn version_names_the_commit() {
    let out = cru(&["--version"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let version = stdout(&out);
    let commit = version
        .trim()
        .strip_prefix(&format!("cru {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.split_once(", built "))
        .map(|(commit, _)| commit.to_owned())
        .unwrap_or_else(|| panic!("{version}"));
    // In a checkout, a commit of its history (HEAD may have moved since the build).
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
    };
    let in_checkout = git(&["rev-parse", "HEAD"]).is_some_and(|o| o.status.success());
    if in_checkout {
        let ancestor = git(&["merge-base", "--is-ancestor", &commit, "HEAD"]);
        assert!(
            ancestor.is_some_and(|o| o.status.success()),
            "{version}: {commit} is not in this checkout's history"
        );
    } else {
        assert_eq!(commit, "unknown");
    }
}

#[test]
fn no_color_and_color_never_write_no_escape_codes() {
    // Help and errors are where clap colours: forced, they carry escape codes.
    let forced = ("CLICOLOR_FORCE", "1");
    for (args, env) in [
        (vec!["--color", "always", "session", "--help"], vec![]),
        (vec!["session", "--help"], vec![forced]),
    ] {
        let out = cru(&args, &env);
        assert!(stdout(&out).contains('\x1b'), "{args:?}: {}", stdout(&out));
    }
    // NO_COLOR (set, not empty) and --color never win over that.
    for (args, env) in [
        (vec!["session", "--help"], vec![forced, ("NO_COLOR", "1")]),
        (vec!["--color", "never", "session", "--help"], vec![forced]),
        (vec!["--color=never", "session", "--nope"], vec![forced]),
    ] {
        let out = cru(&args, &env);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains("session"), "{args:?}: {text}");
        assert!(!text.contains('\x1b'), "{args:?} {env:?}: {text:?}");
    }
}

/// The colour escape codes (SGR 30–49, 90–107, `38;…`, `48;…`) in the screen of the
/// workbench run in tmux with `env`, once it has drawn its panes.
fn workbench_colours(name: &str, env: &[(&str, &str)]) -> Vec<String> {
    let tk = TestKiln::new();
    let _cleanup = KillOnDrop(tk.kiln.clone());
    let home = tempfile::tempdir().unwrap();
    let socket = format!("cru-test-colours-{name}-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    };
    let root = tk.root().to_string_lossy().into_owned();
    let home_dir = home.path().to_string_lossy().into_owned();
    let mut vars = vec![
        format!("CRU_KILN={root}"),
        "TERM=xterm-256color".into(),
        "COLORTERM=".into(),
        "NO_COLOR=".into(),
        format!("HOME={home_dir}"),
        format!("XDG_STATE_HOME={home_dir}/state"),
        format!("XDG_CONFIG_HOME={home_dir}/config"),
        format!("XDG_RUNTIME_DIR={home_dir}/run"),
    ];
    vars.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    let mut args = vec!["new-session", "-d", "-x", "100", "-y", "30", "-c", &root];
    for var in &vars {
        args.extend(["-e", var.as_str()]);
    }
    args.extend([CRU, "--embedded"]);
    assert!(tmux(&args).status.success(), "tmux new-session");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let screen = tmux(&["capture-pane", "-p", "-t", "0"]).stdout;
        if String::from_utf8_lossy(&screen).contains("inbox ·") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the workbench never drew its panes:\n{}",
            String::from_utf8_lossy(&screen)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let screen = String::from_utf8_lossy(&tmux(&["capture-pane", "-e", "-p", "-t", "0"]).stdout)
        .into_owned();
    tmux(&["kill-server"]);
    let mut colours = Vec::new();
    for code in screen.split('\x1b').skip(1) {
        let Some(params) = code.strip_prefix('[').and_then(|c| c.split('m').next()) else {
            continue;
        };
        let first: u32 = params.split(';').next().unwrap_or("").parse().unwrap_or(0);
        let default_colour = first == 39 || first == 49;
        if !default_colour && matches!(first, 30..=49 | 90..=107) {
            colours.push(params.to_owned());
        }
    }
    colours
}

#[test]
fn the_workbench_draws_no_colour_with_no_color_and_256_without_truecolor() {
    let plain = workbench_colours("none", &[("NO_COLOR", "1")]);
    assert!(plain.is_empty(), "{plain:?}");
    let palette = workbench_colours("256", &[]);
    assert!(!palette.is_empty());
    assert!(
        palette
            .iter()
            .all(|c| c.starts_with("38;5;") || c.starts_with("48;5;")),
        "{palette:?}"
    );
    let truecolor = workbench_colours("24bit", &[("COLORTERM", "truecolor")]);
    assert!(
        truecolor.iter().any(|c| c.starts_with("38;2;")),
        "{truecolor:?}"
    );
}

#[test]
fn tables_fit_the_terminals_width_and_a_pipe_gets_whole_cells() {
    let wide = cru(&["agents"], &[]);
    assert!(wide.status.success(), "{}", stderr(&wide));
    let widest = |text: &str| {
        text.lines()
            .take_while(|l| !l.is_empty())
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    };
    assert!(widest(&stdout(&wide)) > 50, "{}", stdout(&wide));
    let narrow = cru(&["agents"], &[("COLUMNS", "50")]);
    assert!(narrow.status.success(), "{}", stderr(&narrow));
    let table = stdout(&narrow);
    assert!(widest(&table) <= 50, "{table}");
    assert!(table.contains('…'), "{table}");
    assert!(table.lines().next().unwrap().starts_with("NAME"), "{table}");
}
