//! The environment of the shell that asks for a session, not the daemon's, decides what
//! its agent gets: the values of `--env` names and the `PATH` its program is found on.
//! The daemon here is started with an environment of its own (no variable, a bare
//! `PATH`), as a daemon started long ago by another shell would be; `cru session new`
//! runs with another.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crucible::protocol::{MsgType, Session};

use crate::common::*;
use crate::sandbox::bwrap_works;
use crate::sessions::{agent_kiln, git, said, wait_message, wait_message_where};

const NAME: &str = "CRU_TEST_SHELL_ONLY_TOKEN";
const VALUE: &str = "shell-only-value-9d41c7e2-never-kept";
/// The `PATH` of a daemon started from a bare environment: no `cru` on it.
const BARE_PATH: &str = "/usr/bin:/bin";

/// `cru --kiln <kiln> args…` with `env` set (and nothing else of ours removed).
fn cru_with(tk: &TestKiln, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(CRU);
    command
        .arg("--kiln")
        .arg(tk.root())
        .args(args)
        .env("CRU_DAEMON_EXE", CRU)
        .envs(env.iter().copied());
    run_bounded(command, &format!("cru {}", args.join(" ")))
}

/// `cru daemon run` without [`NAME`], with `PATH` as given.
async fn daemon(tk: &TestKiln, path: &str) -> DaemonProcess {
    let mut cru = Command::new(CRU);
    cru.env_remove(NAME).env("PATH", path).stderr(Stdio::null());
    tk.run_daemon(cru).await
}

fn sha256(text: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..16].to_string()
}

/// A kiln whose `agent` profile runs `script` (a command agent) from a folder outside
/// it, by the bare name `program` when given (found on the asking shell's `PATH`).
fn kiln_with_agent(script: &str, program: Option<&str>) -> (TestKiln, tempfile::TempDir) {
    let tools = tempfile::tempdir().unwrap();
    let path = tools.path().join(program.unwrap_or("agent.sh"));
    write_script(&path, script);
    let command = match program {
        Some(name) => name.to_string(),
        None => path.display().to_string(),
    };
    let tk = agent_kiln(&format!(
        "[agents.agent]\ntype = \"command\"\ncommand = {command:?}\n"
    ));
    (tk, tools)
}

#[tokio::test]
async fn a_variable_only_the_asking_shell_has_reaches_the_sandboxed_agent_and_is_kept_nowhere() {
    if !bwrap_works() {
        return;
    }
    let (tk, _tools) = kiln_with_agent(
        &format!(
            "#!/bin/sh\nread -r prompt\n\
             if [ -n \"${NAME}\" ]; then echo \"token sha $(printf %s \"${NAME}\" | sha256sum | cut -c1-16)\"; \
             else echo 'token unset'; fi\n\
             cru notify \"reached cru at $(command -v cru)\"\n"
        ),
        None,
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut first = daemon(&tk, &std::env::var("PATH").unwrap()).await;
    let client = tk.client().await;

    let out = cru_with(
        &tk,
        &[
            "session", "new", "--agent", "agent", "--driver", "sandbox", "--env", NAME, "--task",
            "go", "--json",
        ],
        &[(NAME, VALUE)],
    );
    assert!(out.status.success(), "session new: {}", stderr(&out));
    let s: Session = serde_json::from_str(&stdout(&out)).unwrap();
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(
        text.contains(&format!("token sha {}", sha256(VALUE))),
        "the agent has the shell's value: {text}"
    );
    let note = wait_message_where(&client, &s.id, "the agent's notice", |m| {
        m.msg_type == MsgType::Info && m.title.starts_with("reached cru at")
    })
    .await;
    assert_eq!(note.title, "reached cru at /run/crucible/bin/cru");
    let shown = tk.cru(&["session", "status", &s.id]);
    assert!(stdout(&shown).contains(NAME), "{}", stdout(&shown));

    // The value is in no file: not the database, the transcript, the audit log, nor the
    // daemon's log.
    assert_in_no_file(&tk.kiln.state_dir(), VALUE);
    let log = std::fs::read_to_string(tk.kiln.log_dir().join("daemon.log")).unwrap();
    assert!(!log.contains(VALUE));

    // A new daemon never had it: the agent is started again without it, and says so.
    drop(client);
    first.kill9();
    let _second = daemon(&tk, &std::env::var("PATH").unwrap()).await;
    let client = tk.client().await;
    let notice = wait_message_where(&client, &s.id, "the start notice", |m| {
        m.msg_type == MsgType::Error && m.title == format!("Agent started without {NAME}")
    })
    .await;
    let body = notice.body.unwrap_or_default();
    assert!(
        body.contains("this daemon's environment lacks it"),
        "{body}"
    );
    assert_in_no_file(&tk.kiln.state_dir(), VALUE);
}

#[tokio::test]
async fn a_command_agent_reaches_cru_and_its_program_by_name_when_the_daemons_path_lacks_them() {
    let (tk, tools) = kiln_with_agent(
        "#!/bin/sh\nread -r prompt\n\
         echo \"cru is $(command -v cru)\"\n\
         choice=$(cru ask 'Which one?' --option A --option B)\n\
         echo \"ask exited $? with $choice\"\n\
         cru notify 'notified by name'\n",
        Some("cru-test-shell-agent"),
    );
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = daemon(&tk, BARE_PATH).await;
    let client = tk.client().await;
    let shell_path = format!("{}:{BARE_PATH}", tools.path().display());

    let out = cru_with(
        &tk,
        &[
            "session", "new", "--agent", "agent", "--task", "go", "--json",
        ],
        &[("PATH", &shell_path)],
    );
    assert!(out.status.success(), "session new: {}", stderr(&out));
    let s: Session = serde_json::from_str(&stdout(&out)).unwrap();
    let question = wait_message(&client, &s.id, MsgType::DecisionNeeded).await;
    assert_eq!(question.title, "Which one?");
    let answered = tk.cru(&["inbox", "respond", &question.id, "B"]);
    assert!(answered.status.success(), "{}", stderr(&answered));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    let link = tk.kiln.state_dir().join("bin").join("cru");
    assert!(
        text.contains(&format!("cru is {}", link.display())),
        "{text}"
    );
    assert!(text.contains("ask exited 0 with B"), "{text}");
    wait_message_where(&client, &s.id, "the agent's notice", |m| {
        m.msg_type == MsgType::Info && m.title == "notified by name"
    })
    .await;
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new(CRU).canonicalize().unwrap(),
        "the link is the daemon's own binary"
    );

    // Where neither PATH has the program, the error says where it looked.
    let out = cru_with(
        &tk,
        &["session", "new", "--agent", "agent", "--task", "go"],
        &[("PATH", BARE_PATH)],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cru-test-shell-agent is not on PATH in this shell (the one running `cru session new`) nor the daemon's (PATH={BARE_PATH}): install it or set `command` in [agents.agent]"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_variable_nobody_has_is_refused_with_where_it_was_looked_for_and_nothing_is_made() {
    let (tk, _tools) = kiln_with_agent("#!/bin/sh\necho hi\n", None);
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = daemon(&tk, &std::env::var("PATH").unwrap()).await;
    let out = cru_with(
        &tk,
        &[
            "session", "new", "--agent", "agent", "--driver", "sandbox", "--env", NAME, "--task",
            "go",
        ],
        &[],
    );
    assert!(!out.status.success(), "a session was made");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "`--env {NAME}`: not set in this shell (the one running `cru session new`), nor in the daemon's environment: export it and try again"
        )),
        "{err}"
    );

    // On the wire: invalid params, with the words.
    let client = tk.client().await;
    let refused = testkit::daemon::try_call::<crucible::protocol::methods::SessionCreate>(
        &client,
        crucible::protocol::CreateSessionParams {
            agent: "agent".into(),
            driver: crucible::protocol::DriverOptions {
                driver: Some(crucible::protocol::DriverKind::Sandbox),
                env: vec![NAME.into()],
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect_err("refused");
    assert_eq!(
        refused.rpc_code(),
        Some(crucible::protocol::code::INVALID_PARAMS)
    );
    assert!(
        refused
            .to_string()
            .contains("nor in the daemon's environment")
    );

    let out = tk.cru(&["session", "list", "--json"]);
    assert_eq!(stdout(&out).trim(), "[]", "nothing was created");
    let worktrees = git(tk.root(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "no worktree: {worktrees}");
}
