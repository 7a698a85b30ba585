//! Rules and the approval gate with the scripted ACP agent: commands through the ACP
//! terminal capability, file requests and permission requests are judged by the rules
//! (built-in and `<kiln>/.crucible/rules.toml`) against the session's security state.

use crucible::client::Client;
use crucible::protocol::{InboxMessage, MsgType, Purpose, Session};

use crate::common::*;
use crate::sessions::wait_said;
use crate::sessions::{
    agent_kiln, create, messages, said, session, wait_message, wait_message_where,
};

/// A command `no-exfil-after-sensitive` covers, which leaves a file if it runs.
const CURL: &str = "curl -s -o curl-ran.txt file:///etc/hostname";

async fn approvals(client: &Client, id: &str) -> Vec<InboxMessage> {
    messages(client, id)
        .await
        .into_iter()
        .filter(|m| m.msg_type == MsgType::ApprovalRequired)
        .collect()
}

fn worktree(s: &Session) -> std::path::PathBuf {
    std::path::PathBuf::from(s.worktree.clone().unwrap())
}

#[tokio::test]
async fn a_secret_read_then_curl_asks_with_the_reason_and_a_denial_runs_nothing() {
    if which("curl").is_none() {
        eprintln!("NOT RUN: curl is not installed");
        return;
    }
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let task = format!("write .env TOKEN=abc\nread .env\nrun {CURL}\nsay after");
    let s = create(&client, "scripted", Some(&task)).await;
    let approval = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    assert_eq!(
        approval.title,
        "Approval required [rule: no-exfil-after-sensitive]"
    );
    assert_eq!(approval.purpose, Some(Purpose::Approval));
    let body = approval.body.clone().unwrap_or_default();
    assert!(body.contains(".env"), "the reason names the read: {body}");
    assert!(body.contains("curl"), "the operation is shown: {body}");
    let out = tk.cru(&["inbox", "respond", &approval.id, "Deny"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(
        text.contains("run refused:") && text.contains("denied by the human"),
        "{text}"
    );
    assert!(!worktree(&s).join("curl-ran.txt").exists(), "nothing ran");
    let security = session(&client, &s.id).await.security;
    assert!(
        security.activated.contains_key("no-exfil-after-sensitive"),
        "{security:?}"
    );

    // Without the earlier read, the same command runs without asking.
    let fresh = create(&client, "scripted", Some(&format!("run {CURL}"))).await;
    wait_message(&client, &fresh.id, MsgType::TaskComplete).await;
    let text = said(&client, &fresh.id).await;
    assert!(
        text.contains("ran curl") && text.contains("exit 0"),
        "{text}"
    );
    assert!(worktree(&fresh).join("curl-ran.txt").exists());
    assert!(approvals(&client, &fresh.id).await.is_empty());
}

#[tokio::test]
async fn allow_and_deny_rules_answer_without_the_human_and_an_approval_holds_for_the_same_operation()
 {
    if which("curl").is_none() {
        eprintln!("NOT RUN: curl is not installed");
        return;
    }
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    std::fs::create_dir_all(tk.root().join(".crucible")).unwrap();
    std::fs::write(
        tk.root().join(".crucible/rules.toml"),
        r#"
[[rules]]
id = "allow-deploy"
description = "deploys are fine"
action = "allow"
when = { tool = "^Deploy" }

[[rules]]
id = "deny-drop"
description = "never drop the database"
action = "deny"
when = { tool = "^Drop" }
"#,
    )
    .unwrap();
    let client = tk.client().await;
    let task = format!(
        "permit p1 Deploy the site\nwrite .env A=1\nread .env\nrun {CURL}\nrun {CURL}\npermit p2 Drop the database\nsay unreachable"
    );
    let s = create(&client, "scripted", Some(&task)).await;
    // The deploy is allowed by its rule; the curl after the .env read asks once.
    let approval = wait_message_where(&client, &s.id, "the curl approval", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.response.is_none()
    })
    .await;
    assert!(
        approval.title.contains("no-exfil-after-sensitive"),
        "{approval:?}"
    );
    let out = tk.cru(&["inbox", "respond", &approval.id, "Allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(text.contains("granted: Deploy the site"), "{text}");
    assert_eq!(text.matches("ran curl").count(), 2, "{text}");
    assert!(text.contains("denied: Drop the database"), "{text}");
    assert!(!text.contains("unreachable"), "{text}");
    let asked = approvals(&client, &s.id).await;
    assert_eq!(asked.len(), 1, "only the first curl asked: {asked:?}");
    let security = session(&client, &s.id).await.security;
    assert_eq!(security.approved_operations.len(), 1, "{security:?}");

    // The transcript and the audit say which rule answered.
    let log =
        std::fs::read_to_string(tk.root().join(format!(".crucible/audit/{}.jsonl", s.id))).unwrap();
    assert!(log.contains("allowed by rule allow-deploy"), "{log}");
    assert!(log.contains("denied by rule deny-drop"), "{log}");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[tokio::test]
async fn a_rule_switched_off_for_a_session_stops_asking_at_the_next_operation() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", None).await;
    crate::sessions::wait_state(&client, &s.id, crucible::protocol::SessionState::Complete).await;
    let out = tk.cru(&["rules", "disable", "ask-before-push", "--session", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("is off"), "{}", stdout(&out));
    let listed = stdout(&tk.cru(&["rules", "--session", &s.id]));
    assert!(
        listed.contains("ask-before-push") && listed.contains("off (session)"),
        "{listed}"
    );
    let out = tk.cru(&["session", "send", &s.id, "run git push nowhere main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    assert!(said(&client, &s.id).await.contains("ran git push"));
    assert!(approvals(&client, &s.id).await.is_empty());

    // On again: the next push asks.
    let out = tk.cru(&["rules", "enable", "ask-before-push", "--session", &s.id]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = tk.cru(&["session", "send", &s.id, "run git push nowhere main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let asked = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    assert_eq!(asked.title, "Approval required [rule: ask-before-push]");
    let out = tk.cru(&["rules", "disable", "no-such-rule", "--session", &s.id]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no rule"), "{}", stderr(&out));
}

#[tokio::test]
async fn a_credential_is_asked_for_once_per_session_and_never_kept() {
    const VALUE: &str = "tok-3f9a-never-in-a-file";
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.sh");
    write_script(
        &script,
        &format!(
            "#!/bin/sh\nread -r _\n\
             v=$(cru secret get API_TOKEN) && [ \"$v\" = \"{VALUE}\" ] && echo first ok\n\
             v=$(cru secret get API_TOKEN) && [ \"$v\" = \"{VALUE}\" ] && echo second ok\n\
             cru secret get OTHER_TOKEN >/dev/null 2>&1 || echo other refused\n"
        ),
    );
    let tk = agent_kiln(&format!(
        "[agents.asker]\ntype = \"command\"\ncommand = {:?}\n",
        script.display().to_string()
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let mut cru = cru_on_path();
    cru.env("API_TOKEN", VALUE);
    let _daemon = tk.run_daemon(cru).await;
    let client = tk.client().await;
    let s = create(&client, "asker", Some("go")).await;
    let asked = wait_message(&client, &s.id, MsgType::ApprovalRequired).await;
    assert_eq!(asked.title, "Credential requested: API_TOKEN");
    let out = tk.cru(&["inbox", "respond", &asked.id, "Allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other = wait_message_where(&client, &s.id, "the second credential", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.title.contains("OTHER_TOKEN")
    })
    .await;
    let out = tk.cru(&["inbox", "respond", &other.id, "Deny"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(
        text.contains("first ok") && text.contains("second ok"),
        "{text}"
    );
    assert!(text.contains("other refused"), "{text}");
    assert_eq!(
        approvals(&client, &s.id).await.len(),
        2,
        "API_TOKEN asked once"
    );
    let security = session(&client, &s.id).await.security;
    assert_eq!(security.approved_credentials, ["API_TOKEN"]);

    // After a reset the new session asks again; the old one ended as reset and keeps
    // its transcript.
    let out = tk.cru(&["session", "reset", &s.id, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let fresh: Session = serde_json::from_str(&stdout(&out)).unwrap();
    assert_ne!(fresh.id, s.id);
    assert_eq!(fresh.worktree, s.worktree, "the same worktree");
    assert!(fresh.security.is_empty(), "{:?}", fresh.security);
    let old = session(&client, &s.id).await;
    assert_eq!(old.state, Some(crucible::protocol::SessionState::Stopped));
    assert_eq!(old.state_reason.as_deref(), Some("reset"));
    assert!(
        said(&client, &s.id).await.contains("first ok"),
        "the old transcript stays"
    );
    let out = tk.cru(&["session", "send", &fresh.id, "go"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = wait_message(&client, &fresh.id, MsgType::ApprovalRequired).await;
    assert_eq!(again.title, "Credential requested: API_TOKEN");
    let out = tk.cru(&["inbox", "respond", &again.id, "Allow"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other = wait_message_where(&client, &fresh.id, "the second credential", |m| {
        m.msg_type == MsgType::ApprovalRequired && m.title.contains("OTHER_TOKEN")
    })
    .await;
    tk.cru(&["inbox", "respond", &other.id, "Deny"]);
    wait_message(&client, &fresh.id, MsgType::TaskComplete).await;
    // Deleting the old session cannot take the worktree the new one works in.
    let out = tk.cru(&["session", "delete", &s.id, "--worktree"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("also the worktree of session"),
        "{}",
        stderr(&out)
    );

    assert_in_no_file(&tk.root().join(".crucible"), VALUE);
}

#[tokio::test]
async fn a_read_outside_the_manifest_ends_the_session_and_refinements_are_bounded() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "scripted",
        "--allow-read",
        "src/**",
        "--task",
        "read README.md\nwrite after.txt not allowed",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Session = serde_json::from_str(&stdout(&out)).unwrap();
    let stopped =
        crate::sessions::wait_state(&client, &s.id, crucible::protocol::SessionState::Stopped)
            .await;
    let reason = stopped.state_reason.unwrap_or_default();
    assert!(reason.starts_with("CONTEXT_MISS: "), "{reason}");
    assert!(
        reason.contains("README.md") && reason.contains("src/**"),
        "{reason}"
    );
    let question = wait_message(&client, &s.id, MsgType::DecisionNeeded).await;
    assert!(question.title.starts_with("Context miss"), "{question:?}");
    let Some(Purpose::ContextMiss { path }) = &question.purpose else {
        panic!("the question is a context miss's: {question:?}");
    };
    assert!(path.ends_with("/README.md"), "{path}");
    let worktree = std::path::PathBuf::from(s.worktree.clone().unwrap());
    assert!(
        !worktree.join("after.txt").exists(),
        "nothing goes through after a miss"
    );

    // Ten refinements that do not cover the read: each restarts, misses again, stops.
    for n in 1..=10 {
        let out = tk.cru(&[
            "session",
            "refine",
            &s.id,
            "--allow-read",
            &format!("docs/{n}/**"),
            "--prompt",
            "read README.md",
        ]);
        assert!(out.status.success(), "refinement {n}: {}", stderr(&out));
        crate::sessions::wait_session(&client, &s.id, "stopped again", |s| {
            s.state == Some(crucible::protocol::SessionState::Stopped)
                && s.security.refinements == n
        })
        .await;
    }
    let out = tk.cru(&["session", "refine", &s.id, "--allow-read", "README.md"]);
    assert!(!out.status.success(), "the 11th refinement is refused");
    assert!(
        stderr(&out).contains("MAX_REFINEMENT_ATTEMPTS"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn answering_the_context_miss_widens_the_manifest_and_the_read_goes_through() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let out = tk.cru(&[
        "session",
        "new",
        "--agent",
        "loader",
        "--allow-read",
        "src/**",
        "--task",
        "read README.md",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s: Session = serde_json::from_str(&stdout(&out)).unwrap();
    let question = wait_message(&client, &s.id, MsgType::DecisionNeeded).await;
    let out = tk.cru(&["inbox", "respond", &question.id, "Widen and restart"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let refined = crate::sessions::wait_session(&client, &s.id, "refined and complete", |s| {
        s.security.refinements == 1 && s.state == Some(crucible::protocol::SessionState::Complete)
    })
    .await;
    let manifest = refined.security.read_manifest.unwrap_or_default();
    assert!(
        manifest.iter().any(|g| g.ends_with("README.md")),
        "{manifest:?}"
    );
    let out = tk.cru(&["session", "send", &s.id, "read README.md"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = said(&client, &s.id).await;
        if text.contains("read README.md: project") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the read never went through: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn the_agents_own_commands_are_kept_with_the_session() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let client = tk.client().await;
    let s = create(&client, "scripted", Some("skills build test\nsay listed")).await;
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let skills = session(&client, &s.id).await.skills;
    assert_eq!(
        skills,
        ["/build — the build command", "/test — the test command"]
    );
}

#[tokio::test]
async fn approvals_an_agent_asks_for_itself_go_through_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.sh");
    write_script(
        &script,
        "#!/bin/sh\nread -r _\n\
         if cru approve 'Deploy to staging'; then echo deploy approved; else echo deploy denied; fi\n\
         if cru approve 'Drop the cache'; then echo drop approved; else echo drop denied; fi\n",
    );
    let tk = agent_kiln(&format!(
        "[agents.asker]\ntype = \"command\"\ncommand = {:?}\n\n\
         [[rules]]\nid = \"deploys-ok\"\naction = \"allow\"\nwhen = {{ tool = \"^Deploy\" }}\n\n\
         [[rules]]\nid = \"no-drops\"\naction = \"deny\"\nwhen = {{ tool = \"^Drop\" }}\n",
        script.display().to_string()
    ));
    let _guard = KillOnDrop(tk.kiln.clone());
    let _daemon = tk.run_daemon(cru_on_path()).await;
    let client = tk.client().await;
    let s = create(&client, "asker", Some("go")).await;
    wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let text = said(&client, &s.id).await;
    assert!(
        text.contains("deploy approved") && text.contains("drop denied"),
        "{text}"
    );
    let asked = approvals(&client, &s.id).await;
    assert_eq!(asked.len(), 2);
    assert!(
        asked.iter().all(|m| m.response.is_some()),
        "answered by the rules: {asked:?}"
    );
}

const DENY_DROP: &str = "[[rules]]\nid = \"deny-drop\"\ndescription = \"never drop\"\n\
                         action = \"deny\"\nwhen = { tool = \"^Drop\" }\n";

fn rules_list(tk: &TestKiln) -> crucible::protocol::RulesReply {
    let out = tk.cru(&["rules", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// `rules.toml` broken three ways while a session runs: the deny rule of the last good
/// set still refuses, in that session and in one created while the file is bad;
/// `rules.list` names the file and why, and the log says it once per fault.
#[tokio::test]
async fn a_broken_rules_file_keeps_the_last_good_deny_rule_for_running_and_new_sessions() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let path = tk.root().join(".crucible/rules.toml");
    std::fs::create_dir_all(tk.root().join(".crucible")).unwrap();
    std::fs::write(&path, DENY_DROP).unwrap();
    let client = tk.client().await;
    let running = create(&client, "scripted", Some("permit p0 Drop table 0")).await;
    wait_said(&client, &running.id, "denied: Drop table 0").await;

    let mut not_utf8 = DENY_DROP.as_bytes().to_vec();
    not_utf8.extend_from_slice(b"# caf\xe9\n");
    let bad_regex = DENY_DROP.replace("^Drop", "^Drop(");
    let breakages: [(&str, &dyn Fn()); 3] = [
        ("not UTF-8", &|| std::fs::write(&path, &not_utf8).unwrap()),
        ("Is a directory", &|| {
            std::fs::remove_file(&path).unwrap();
            std::fs::create_dir(&path).unwrap();
        }),
        ("bad tool regex", &|| {
            std::fs::write(&path, &bad_regex).unwrap()
        }),
    ];
    for (n, (why, break_it)) in breakages.iter().enumerate() {
        break_it();
        let listed = rules_list(&tk);
        let error = listed
            .error
            .unwrap_or_else(|| panic!("{why}: no error listed"));
        assert_eq!(error.file, path.display().to_string(), "{why}");
        assert!(error.reason.contains(why), "{why}: {error:?}");
        assert!(error.last_good, "{why}");
        assert!(listed.rules.iter().any(|r| r.id == "deny-drop"), "{why}");
        let shown = stderr(&tk.cru(&["rules"]));
        assert!(
            shown.contains(&path.display().to_string()) && shown.contains("last good"),
            "{shown}"
        );

        let prompt = format!("permit p{} Drop table {}", n + 1, n + 1);
        let out = tk.cru(&["session", "send", &running.id, &prompt]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = format!("denied: Drop table {}", n + 1);
        wait_said(&client, &running.id, &text).await;
        let fresh = create(&client, "scripted", Some(&prompt)).await;
        wait_said(&client, &fresh.id, &text).await;
        assert!(approvals(&client, &fresh.id).await.is_empty(), "{why}");

        if path.is_dir() {
            std::fs::remove_dir(&path).unwrap();
        }
        std::fs::write(&path, DENY_DROP).unwrap();
        assert!(rules_list(&tk).error.is_none(), "{why}: fixed again");
    }

    // The log says each fault once, though each was met by several operations.
    let log_path = tk.kiln.log_dir().join("daemon.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    for (why, _) in &breakages {
        let times = log
            .lines()
            .filter(|l| l.contains("rules not in force") && l.contains(why))
            .count();
        assert_eq!(times, 1, "{why} logged {times} times:\n{log}");
    }
}

/// A daemon that never read a good rule set refuses what the rules judge, naming the
/// file; once the file is fixed, the rules judge again.
#[tokio::test]
async fn a_daemon_whose_first_read_of_the_rules_fails_refuses_gated_operations() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let path = tk.root().join(".crucible/rules.toml");
    std::fs::create_dir_all(tk.root().join(".crucible")).unwrap();
    let mut not_utf8 = DENY_DROP.as_bytes().to_vec();
    not_utf8.extend_from_slice(b"# caf\xe9\n");
    std::fs::write(&path, &not_utf8).unwrap();
    let client = tk.client().await;
    let listed = rules_list(&tk);
    let error = listed.error.expect("the fault is listed");
    assert_eq!(error.file, path.display().to_string());
    assert!(!error.last_good);
    assert!(listed.rules.is_empty(), "{:?}", listed.rules);

    let s = create(&client, "scripted", Some("write made.txt hello\nsay after")).await;
    let text = wait_said(&client, &s.id, "after").await;
    assert!(
        text.contains("write failed:") && text.contains("no rules are in force"),
        "{text}"
    );
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        !worktree(&s).join("made.txt").exists(),
        "nothing was written"
    );

    std::fs::write(&path, DENY_DROP).unwrap();
    let out = tk.cru(&["session", "send", &s.id, "write made.txt hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_said(&client, &s.id, "wrote").await;
    assert!(worktree(&s).join("made.txt").exists());
    assert!(rules_list(&tk).error.is_none());
}
