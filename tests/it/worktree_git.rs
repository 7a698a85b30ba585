//! A session's worktree as git leaves it awkward: a repository with submodules (checked
//! out in the worktree, not left as empty folders) and one with no commit yet (refused
//! with what to do, not git's own words).

use std::process::Stdio;

use crucible::protocol::MsgType;
use crucible::protocol::jsonrpc::code;
use crucible::protocol::methods as m;
use crucible::protocol::params::CreateSessionParams;
use crucible::protocol::review::CommitParams;
use testkit::sessions::{agent_kiln, git};

use crate::common::*;

#[tokio::test]
async fn a_sessions_worktree_has_the_repositorys_submodules_checked_out() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    let outside = tempfile::tempdir().unwrap();
    let lib = outside.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.rs"), "pub fn lib() {}\n").unwrap();
    git(&lib, &["add", "lib.rs"]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    let url = lib.to_str().unwrap();
    git(
        tk.root(),
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            url,
            "vendor/lib",
        ],
    );
    git(tk.root(), &["commit", "-q", "-m", "a submodule"]);
    // The person's git allows submodules from local paths (its default refuses them);
    // remote submodules need nothing.
    let mut cru = std::process::Command::new(testkit::process::cru());
    cru.stderr(Stdio::piped())
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "protocol.file.allow")
        .env("GIT_CONFIG_VALUE_0", "always");
    let _daemon = tk.run_daemon(cru).await;
    let client = tk.client().await;
    let s = client
        .call::<m::SessionCreate>(&CreateSessionParams {
            agent: "scripted".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .session;
    let worktree = std::path::PathBuf::from(s.worktree.expect("a worktree"));
    assert_eq!(
        std::fs::read_to_string(worktree.join("vendor/lib/lib.rs")).unwrap(),
        "pub fn lib() {}\n",
        "the submodule is checked out in the session's worktree"
    );
    assert_eq!(git(&worktree, &["status", "--porcelain"]), "");
}

#[tokio::test]
async fn a_repository_with_no_commit_is_refused_with_what_to_do() {
    let tk = testkit::TestKiln::builder().scripted_agents().build();
    let _guard = KillOnDrop(tk.kiln.clone());
    git(tk.root(), &["init", "-q", "-b", "main"]);
    let client = tk.daemon().await;
    let err = client
        .try_call::<m::SessionCreate>(CreateSessionParams {
            agent: "scripted".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.rpc_code(), Some(code::CONFLICT), "{err}");
    let said = err.to_string();
    assert!(said.contains("no commit yet"), "{said}");
    assert!(said.contains("git commit --allow-empty"), "{said}");
    assert!(!said.contains("invalid reference"), "{said}");
    let listed = client
        .call::<m::SessionList>(Default::default())
        .await
        .sessions;
    assert!(listed.is_empty(), "nothing is created: {listed:?}");
}

#[tokio::test]
async fn a_session_made_on_a_detached_head_commits_its_work() {
    let tk = agent_kiln("");
    let _guard = KillOnDrop(tk.kiln.clone());
    git(tk.root(), &["checkout", "-q", "--detach"]);
    let client = tk.daemon().await;
    let s = testkit::sessions::create(&client, "scripted", Some("write notes.txt hello")).await;
    assert_eq!(
        s.base_branch, None,
        "made on a detached HEAD: no branch to land on"
    );
    testkit::sessions::wait_message(&client, &s.id, MsgType::TaskComplete).await;
    let committed = client
        .call::<m::SessionCommit>(CommitParams {
            session_id: s.id.clone(),
            message: Some("notes".into()),
        })
        .await;
    let commit = committed.commit.expect("a commit");
    let worktree = std::path::PathBuf::from(s.worktree.expect("a worktree"));
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), commit);
    assert_eq!(git(&worktree, &["log", "-1", "--format=%s"]), "notes");
    assert_eq!(
        git(&worktree, &["show", "--name-only", "--format=", "HEAD"]),
        "notes.txt"
    );
}
