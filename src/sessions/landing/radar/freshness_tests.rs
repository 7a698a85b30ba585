use super::*;
use crate::git::test_repos::{kiln, session, sh};

/// A kiln with session worktrees `names`, under a temp dir.
fn repo_with_worktrees(names: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let (dir, repo) = kiln();
    let worktrees = names.iter().map(|name| session(&repo, name)).collect();
    (dir, worktrees)
}

/// Collects what the watcher saw until `id` is no longer clean (at most 10 s).
async fn until_touched(fresh: &mut Freshness, id: &str) {
    for _ in 0..200 {
        fresh.collect();
        if !fresh.is_clean(id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} was never seen changed");
}

#[tokio::test]
async fn a_read_worktree_stays_clean_until_a_file_in_it_changes() {
    let (_dir, trees) = repo_with_worktrees(&["one"]);
    let mut fresh = Freshness::start();
    assert!(!fresh.is_clean("s1"), "never read: not clean");
    fresh.reading("s1", &trees[0]).await;
    assert!(fresh.is_clean("s1"));
    assert_eq!(fresh.next_due(), None);

    // A person edits a file in a new folder of the worktree.
    std::fs::create_dir(trees[0].join("src")).unwrap();
    std::fs::write(trees[0].join("src/b.txt"), "b\n").unwrap();
    until_touched(&mut fresh, "s1").await;
    let due = fresh.next_due().expect("pending");
    assert!(
        fresh.take_due(due - Duration::from_millis(1)).is_empty(),
        "not before the quiet time"
    );
    assert_eq!(fresh.take_due(due), vec!["s1".to_string()]);
    assert_eq!(fresh.next_due(), None);

    // Read again: clean, and a file in the folder made after the watch began is seen.
    fresh.reading("s1", &trees[0]).await;
    assert!(fresh.is_clean("s1"));
    std::fs::write(trees[0].join("src/b.txt"), "b2\n").unwrap();
    until_touched(&mut fresh, "s1").await;
}

#[tokio::test]
async fn a_commit_by_hand_changes_the_worktree_even_with_no_file_changed() {
    let (_dir, trees) = repo_with_worktrees(&["one"]);
    let mut fresh = Freshness::start();
    fresh.reading("s1", &trees[0]).await;
    assert!(fresh.is_clean("s1"));
    sh(
        &trees[0],
        &["commit", "-q", "--allow-empty", "-m", "by hand"],
    );
    until_touched(&mut fresh, "s1").await;
}

#[tokio::test]
async fn the_daemons_own_temporary_index_is_not_a_change_and_one_worktree_is_not_another() {
    let (_dir, trees) = repo_with_worktrees(&["one", "two"]);
    let mut fresh = Freshness::start();
    fresh.reading("s1", &trees[0]).await;
    fresh.reading("s2", &trees[1]).await;
    let git_dir = linked_git_dir(&trees[0]).unwrap();
    let own = git_dir.join("crucible-diff-0123.index");
    std::fs::write(&own, "x").unwrap();
    std::fs::remove_file(&own).unwrap();
    // Events come in order: once two's change is seen, one's would have been.
    std::fs::write(trees[1].join("f.txt"), "changed\n").unwrap();
    until_touched(&mut fresh, "s2").await;
    assert!(
        fresh.is_clean("s1"),
        "the daemon's own files are not changes"
    );
}

#[tokio::test]
async fn a_folder_that_is_no_linked_worktree_is_never_clean_and_a_forgotten_one_is_not_watched() {
    let (dir, trees) = repo_with_worktrees(&["one"]);
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let mut fresh = Freshness::start();
    fresh.reading("plain", &plain).await;
    assert!(!fresh.is_clean("plain"));
    fresh.reading("plain", &plain).await;
    assert!(!fresh.is_clean("plain"), "not tried again, still not clean");

    fresh.reading("s1", &trees[0]).await;
    fresh.forget("s1").await;
    assert!(!fresh.is_clean("s1"));
    assert!(lock(&fresh.seen).roots.is_empty(), "no folder left watched");
    std::fs::write(trees[0].join("f.txt"), "changed\n").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    fresh.collect();
    assert_eq!(fresh.next_due(), None, "a forgotten session is not pending");
}

#[tokio::test]
async fn a_folder_the_watch_limit_left_unwatched_or_lost_events_make_worktrees_read_again() {
    let (_dir, trees) = repo_with_worktrees(&["one", "two"]);
    let mut fresh = Freshness::start();
    fresh.reading("s1", &trees[0]).await;
    fresh.reading("s2", &trees[1]).await;
    let now = Instant::now();

    // A new folder of one's worktree could not be watched: one is read at every rest
    // from now on, even right after a read; two is untouched.
    let limit = notify::Error::new(notify::ErrorKind::MaxFilesWatch).add_path(trees[0].join("new"));
    assert!(lock(&fresh.seen).note(Err(limit), now));
    fresh.collect();
    assert!(!fresh.is_clean("s1"));
    assert!(fresh.is_clean("s2"));
    fresh.reading("s1", &trees[0]).await;
    assert!(!fresh.is_clean("s1"), "never clean again");

    // The kernel's queue overflowed: every watched worktree is pending, none clean.
    let overflow =
        notify::Event::new(notify::EventKind::Other).set_flag(notify::event::Flag::Rescan);
    assert!(lock(&fresh.seen).note(Ok(overflow), now));
    fresh.collect();
    assert!(!fresh.is_clean("s2"));
    let mut due = fresh.take_due(Instant::now() + QUIET);
    due.sort();
    assert_eq!(due, vec!["s1".to_string(), "s2".to_string()]);

    // Reads are not changes, and a path in no watched folder is nobody's.
    let read = notify::Event::new(notify::EventKind::Access(notify::event::AccessKind::Any))
        .add_path(trees[1].join("f.txt"));
    fresh.reading("s2", &trees[1]).await;
    assert!(!lock(&fresh.seen).note(Ok(read), now));
    let elsewhere =
        notify::Event::new(notify::EventKind::Any).add_path(PathBuf::from("/elsewhere/f.txt"));
    assert!(!lock(&fresh.seen).note(Ok(elsewhere), now));
    fresh.collect();
    assert!(fresh.is_clean("s2"));
}
