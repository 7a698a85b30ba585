//! Tests of `git/land.rs` against real repositories.

use super::*;
use crate::git::diff::tests::{edit_line, kiln, session, sh, write};

fn read(dir: &Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

fn parents(repo: &Path) -> usize {
    sh(repo, &["log", "-1", "--format=%P"])
        .split_whitespace()
        .count()
}

fn refusal(result: Result<String>) -> String {
    match result {
        Err(GitError::Refused(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn commit_all_commits_everything_or_nothing() {
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    assert_eq!(commit_all(&wt, "nothing").await.unwrap(), None);
    edit_line(&wt, "f.txt", 1, "changed");
    write(&wt, "new.txt", "new\n");
    write(&wt, "debug.log", "ignored\n");
    let commit = commit_all(&wt, "work").await.unwrap().unwrap();
    assert_eq!(commit, head(&wt).await.unwrap());
    assert_eq!(sh(&wt, &["log", "-1", "--format=%s"]).trim(), "work");
    let files = sh(&wt, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files, "f.txt\nnew.txt\n");
    assert_eq!(sh(&wt, &["status", "--porcelain"]), "");
    assert_eq!(commit_all(&wt, "again").await.unwrap(), None);
}

#[tokio::test]
async fn branches_heads_and_bases() {
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    let start = head(&repo).await.unwrap();
    assert_eq!(
        current_branch(&repo).await.unwrap().as_deref(),
        Some("main")
    );
    assert_eq!(
        current_branch(&wt).await.unwrap().as_deref(),
        Some("feat/x")
    );
    edit_line(&wt, "f.txt", 1, "changed");
    commit_all(&wt, "work").await.unwrap();
    assert_eq!(merge_base(&repo, "main", "feat/x").await.unwrap(), start);
    assert!(!has_remote(&repo).await);
    sh(
        &repo,
        &["remote", "add", "origin", "https://example.invalid/x.git"],
    );
    assert!(has_remote(&repo).await);
    sh(&repo, &["checkout", "-q", "--detach"]);
    assert_eq!(current_branch(&repo).await.unwrap(), None);
    let message = refusal(merge(&repo, "feat/x", &wt, MergeStrategy::Merge, "m").await);
    assert!(message.contains("detached"), "{message}");
}

#[tokio::test]
async fn conflicts_are_named_without_touching_anything() {
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    edit_line(&wt, "f.txt", 4, "session");
    edit_line(&wt, "g.txt", 4, "session");
    commit_all(&wt, "session").await.unwrap();
    assert!(conflicts(&repo, "main", "feat/x").await.unwrap().is_empty());
    edit_line(&repo, "f.txt", 4, "kiln");
    sh(&repo, &["commit", "-q", "-am", "kiln"]);
    let status = sh(&repo, &["status", "--porcelain"]);
    assert_eq!(conflicts(&repo, "main", "feat/x").await.unwrap(), ["f.txt"]);
    assert_eq!(sh(&repo, &["status", "--porcelain"]), status);

    let before = head(&repo).await.unwrap();
    for strategy in [
        MergeStrategy::Merge,
        MergeStrategy::Squash,
        MergeStrategy::Rebase,
    ] {
        let message = refusal(merge(&repo, "feat/x", &wt, strategy, "m").await);
        assert!(
            message.contains("f.txt") && !message.contains("g.txt"),
            "{message}"
        );
    }
    assert_eq!(head(&repo).await.unwrap(), before);
}

#[tokio::test]
async fn uncommitted_changes_in_the_way_are_refused() {
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    edit_line(&wt, "f.txt", 4, "session");
    commit_all(&wt, "session").await.unwrap();
    edit_line(&repo, "f.txt", 18, "user's own edit");
    let before = head(&repo).await.unwrap();
    let message = refusal(merge(&repo, "feat/x", &wt, MergeStrategy::Merge, "m").await);
    assert!(
        message.contains("uncommitted") && message.contains("f.txt"),
        "{message}"
    );
    assert_eq!(head(&repo).await.unwrap(), before);
    assert!(read(&repo, "f.txt").contains("user's own edit"));

    // An uncommitted change elsewhere does not stand in the way, and is kept.
    sh(&repo, &["checkout", "--", "f.txt"]);
    edit_line(&repo, "g.txt", 18, "user's own edit");
    merge(&repo, "feat/x", &wt, MergeStrategy::Merge, "land x")
        .await
        .unwrap();
    assert!(read(&repo, "f.txt").contains("session"));
    assert!(read(&repo, "g.txt").contains("user's own edit"));
    let message = refusal(merge(&repo, "feat/x", &wt, MergeStrategy::Merge, "m").await);
    assert!(message.contains("nothing to land"), "{message}");
}

#[tokio::test]
async fn each_strategy_lands_the_session() {
    for strategy in [
        MergeStrategy::Merge,
        MergeStrategy::Squash,
        MergeStrategy::Rebase,
    ] {
        let (_dir, repo) = kiln();
        let wt = session(&repo, "x");
        edit_line(&wt, "f.txt", 2, "session one");
        commit_all(&wt, "session one").await.unwrap();
        edit_line(&wt, "f.txt", 3, "session two");
        commit_all(&wt, "session two").await.unwrap();
        edit_line(&repo, "g.txt", 2, "kiln");
        sh(&repo, &["commit", "-q", "-am", "kiln moved on"]);
        let before = head(&repo).await.unwrap();

        let landed = merge(&repo, "feat/x", &wt, strategy, "land x")
            .await
            .unwrap();

        assert_eq!(landed, head(&repo).await.unwrap(), "{strategy:?}");
        let f = read(&repo, "f.txt");
        assert!(
            f.contains("session one") && f.contains("session two"),
            "{strategy:?}"
        );
        assert!(read(&repo, "g.txt").contains("kiln"), "{strategy:?}");
        assert_eq!(sh(&repo, &["status", "--porcelain"]), "", "{strategy:?}");
        let log = sh(&repo, &["log", "--format=%s", &format!("{before}..HEAD")]);
        match strategy {
            MergeStrategy::Merge => {
                assert_eq!(parents(&repo), 2);
                assert_eq!(log, "land x\nsession two\nsession one\n");
            }
            MergeStrategy::Squash => {
                assert_eq!(parents(&repo), 1);
                assert_eq!(log, "land x\n");
            }
            MergeStrategy::Rebase => {
                assert_eq!(parents(&repo), 1);
                assert_eq!(log, "session two\nsession one\n");
                assert_eq!(landed, head(&wt).await.unwrap());
            }
        }
    }
}

#[tokio::test]
async fn a_rebase_that_stops_is_aborted_and_refused() {
    // The branch changes line 5 and changes it back, so the merge as a whole is clean,
    // but replaying its first commit onto the kiln's change to line 5 is not.
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    edit_line(&wt, "f.txt", 5, "session");
    commit_all(&wt, "change").await.unwrap();
    edit_line(&wt, "f.txt", 5, "line 5");
    edit_line(&wt, "g.txt", 1, "session");
    commit_all(&wt, "change back").await.unwrap();
    edit_line(&repo, "f.txt", 5, "kiln");
    sh(&repo, &["commit", "-q", "-am", "kiln"]);
    let (kiln_head, session_head) = (head(&repo).await.unwrap(), head(&wt).await.unwrap());
    let result = merge(&repo, "feat/x", &wt, MergeStrategy::Rebase, "m").await;
    let message = refusal(result);
    assert!(
        message.contains("rebasing") && message.contains("f.txt"),
        "{message}"
    );
    assert_eq!(head(&repo).await.unwrap(), kiln_head);
    assert_eq!(head(&wt).await.unwrap(), session_head);
    assert_eq!(
        current_branch(&wt).await.unwrap().as_deref(),
        Some("feat/x")
    );
    assert_eq!(sh(&wt, &["status", "--porcelain"]), "");
}
