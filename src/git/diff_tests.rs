//! Tests of `git/diff.rs` against real repositories.

use super::*;
use std::process::Command;

/// Runs git in `dir` as a test user, and returns its stdout.
pub(crate) fn sh(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub(crate) fn lines(n: u32) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// A kiln on `main` with `f.txt` and `g.txt` (twenty numbered lines each) committed;
/// session worktrees go under `.wt/`, which git ignores.
pub(crate) fn kiln() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("kiln");
    std::fs::create_dir(&repo).unwrap();
    sh(&repo, &["init", "-q", "-b", "main"]);
    write(&repo, ".git/info/exclude", ".wt/\n");
    write(&repo, ".gitignore", "*.log\n");
    write(&repo, "f.txt", &lines(20));
    write(&repo, "g.txt", &lines(20));
    sh(&repo, &["add", "-A"]);
    sh(&repo, &["commit", "-q", "-m", "start"]);
    (dir, repo)
}

/// A session's worktree on a new branch `feat/<name>` from main, as the product makes.
pub(crate) fn session(repo: &Path, name: &str) -> PathBuf {
    let path = repo.join(".wt").join(name);
    let branch = format!("feat/{name}");
    sh(
        repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &branch,
            path.to_str().unwrap(),
            "main",
        ],
    );
    path
}

/// Replaces line `n` (1-based) of `path` in `dir`.
pub(crate) fn edit_line(dir: &Path, path: &str, n: usize, text: &str) {
    let old = std::fs::read_to_string(dir.join(path)).unwrap();
    let mut all: Vec<String> = old.lines().map(str::to_string).collect();
    all[n - 1] = text.to_string();
    write(dir, path, &(all.join("\n") + "\n"));
}

const SAMPLE: &str = "\
diff --git a/src/main.rs b/src/main.rs
index 1111111..2222222 100644
--- a/src/main.rs
+++ b/src/main.rs
@@ -1,4 +1,5 @@ fn main() {
 one
-two
+TWO
+two and a half
 three
-four
\\ No newline at end of file
+four
@@ -10 +11,0 @@
-ten
diff --git a/new file.txt b/new file.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new file.txt\t
@@ -0,0 +1,2 @@
+hello
+-- not a header
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 4444444..0000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/old.rs b/sub/new.rs
similarity index 90%
rename from old.rs
rename to sub/new.rs
index 5555555..6666666 100644
--- a/old.rs
+++ b/sub/new.rs
@@ -2,2 +2,2 @@ impl X
 keep
-x
+y
diff --git a/same.rs b/moved.rs
similarity index 100%
rename from same.rs
rename to moved.rs
diff --git a/logo.png b/logo.png
index 7777777..8888888 100644
Binary files a/logo.png and b/logo.png differ
diff --git \"a/caf\\303\\251 \\\"q\\\".txt\" \"b/caf\\303\\251 \\\"q\\\".txt\"
new file mode 100644
index 0000000..9999999
Binary files /dev/null and \"b/caf\\303\\251 \\\"q\\\".txt\" differ
";

#[test]
fn parses_a_unified_diff() {
    let diff = parse(SAMPLE, "abc");
    assert_eq!(diff.base, "abc");
    let names: Vec<_> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "src/main.rs",
            "new file.txt",
            "gone.txt",
            "sub/new.rs",
            "moved.rs",
            "logo.png",
            "café \"q\".txt"
        ]
    );

    let main = &diff.files[0];
    assert_eq!(main.status, FileStatus::Modified);
    assert_eq!((main.added, main.removed), (3, 3));
    assert_eq!(main.hunks.len(), 2);
    let h = &main.hunks[0];
    assert_eq!(
        (h.old_start, h.old_lines, h.new_start, h.new_lines),
        (1, 4, 1, 5)
    );
    assert_eq!(h.header, "fn main() {");
    let got: Vec<_> = h
        .lines
        .iter()
        .map(|l| (l.kind, l.text.as_str(), l.old_no, l.new_no))
        .collect();
    use LineKind::*;
    assert_eq!(
        got,
        [
            (Context, "one", Some(1), Some(1)),
            (Removed, "two", Some(2), None),
            (Added, "TWO", None, Some(2)),
            (Added, "two and a half", None, Some(3)),
            (Context, "three", Some(3), Some(4)),
            (Removed, "four", Some(4), None),
            (Added, "four", None, Some(5)),
        ]
    );
    let h = &main.hunks[1];
    assert_eq!(
        (h.old_start, h.old_lines, h.new_start, h.new_lines),
        (10, 1, 11, 0)
    );
    assert_eq!(h.header, "");
    assert_eq!(h.lines[0].old_no, Some(10));

    let added = &diff.files[1];
    assert_eq!(added.status, FileStatus::Added);
    assert_eq!((added.added, added.removed), (2, 0));
    assert_eq!(added.hunks[0].lines[1].text, "-- not a header");

    let gone = &diff.files[2];
    assert_eq!(gone.status, FileStatus::Deleted);
    assert_eq!((gone.added, gone.removed), (0, 1));

    let renamed = &diff.files[3];
    assert_eq!(renamed.status, FileStatus::Renamed);
    assert_eq!(renamed.old_path.as_deref(), Some("old.rs"));
    assert_eq!((renamed.added, renamed.removed), (1, 1));
    assert_eq!(renamed.hunks[0].lines[0].old_no, Some(2));

    let moved = &diff.files[4];
    assert_eq!(moved.status, FileStatus::Renamed);
    assert_eq!(moved.old_path.as_deref(), Some("same.rs"));
    assert!(moved.hunks.is_empty());

    let logo = &diff.files[5];
    assert!(logo.binary);
    assert_eq!(logo.status, FileStatus::Modified);
    assert!(logo.hunks.is_empty());

    let quoted = &diff.files[6];
    assert!(quoted.binary);
    assert_eq!(quoted.status, FileStatus::Added);
}

#[test]
fn the_wire_form_is_snake_case() {
    let json = serde_json::to_value(parse(SAMPLE, "abc")).unwrap();
    assert_eq!(json["files"][0]["status"], "modified");
    assert_eq!(json["files"][0]["hunks"][0]["lines"][1]["kind"], "removed");
}

#[tokio::test]
async fn diff_sees_committed_uncommitted_and_untracked_changes_without_staging() {
    let (_dir, repo) = kiln();
    let wt = session(&repo, "x");
    edit_line(&wt, "f.txt", 3, "committed");
    sh(&wt, &["commit", "-q", "-am", "work"]);
    edit_line(&wt, "g.txt", 5, "uncommitted");
    write(&wt, "new/untracked.txt", "fresh\n");
    write(&wt, "noise.log", "ignored\n");
    let status = sh(&wt, &["status", "--porcelain"]);
    let stage = sh(&wt, &["ls-files", "--stage"]);
    let git_dir = PathBuf::from(sh(&wt, &["rev-parse", "--absolute-git-dir"]).trim());
    let before = std::fs::read_dir(&git_dir).unwrap().count();

    let diff = diff(&wt, "main", 3).await.unwrap();

    assert_eq!(diff.base, sh(&repo, &["rev-parse", "main"]).trim());
    let files: Vec<_> = diff
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.added, f.removed))
        .collect();
    assert_eq!(
        files,
        [
            ("f.txt", FileStatus::Modified, 1, 1),
            ("g.txt", FileStatus::Modified, 1, 1),
            ("new/untracked.txt", FileStatus::Added, 1, 0),
        ]
    );
    let removed = &diff.files[1].hunks[0].lines[3];
    assert_eq!(
        (removed.kind, removed.text.as_str()),
        (LineKind::Removed, "line 5")
    );
    assert_eq!(removed.old_no, Some(5));

    assert_eq!(sh(&wt, &["status", "--porcelain"]), status);
    assert_eq!(sh(&wt, &["ls-files", "--stage"]), stage);
    assert_eq!(std::fs::read_dir(&git_dir).unwrap().count(), before);

    let err = super::diff(&wt, "no-such-commit", 3).await.unwrap_err();
    assert!(matches!(err, GitError::Refused(_)), "{err}");
}

/// An edit in the same clock tick as the worktree's index was written (an agent's first
/// edit right after its worktree was made, same size) is in the diff: the temporary index
/// keeps the index's time, so git does not trust the file's unchanged-looking stat.
#[tokio::test]
async fn an_edit_right_after_the_worktree_was_made_is_seen() {
    let (_dir, repo) = kiln();
    for i in 0..40 {
        let wt = session(&repo, &format!("quick{i}"));
        edit_line(&wt, "f.txt", 3, "line X");
        let lines = changed_lines(&wt, "main").await.unwrap();
        assert_eq!(lines.get("f.txt"), Some(&vec![(3, 3)]), "attempt {i}");
    }
}

#[tokio::test]
async fn overlapping_sessions_are_found_line_by_line() {
    let (_dir, repo) = kiln();
    let a = session(&repo, "a");
    let b = session(&repo, "b");
    edit_line(&a, "f.txt", 2, "from a");
    edit_line(&b, "f.txt", 2, "from b");
    edit_line(&a, "g.txt", 1, "from a");
    edit_line(&b, "g.txt", 10, "from b");
    sh(&b, &["commit", "-q", "-am", "b's work"]);
    write(&a, "only-a.txt", "mine\n");
    write(&b, "shared-new.txt", "b\n");
    write(&a, "shared-new.txt", "a\n");

    let la = changed_lines(&a, "main").await.unwrap();
    let lb = changed_lines(&b, "main").await.unwrap();
    assert_eq!(la["f.txt"], [(2, 2)]);
    assert_eq!(lb["g.txt"], [(10, 10)]);
    assert_eq!(
        overlaps(&la, &lb),
        [
            Overlap {
                path: "f.txt".into(),
                lines: vec![(2, 2)]
            },
            Overlap {
                path: "g.txt".into(),
                lines: vec![]
            },
            Overlap {
                path: "shared-new.txt".into(),
                lines: vec![(1, 1)]
            },
        ]
    );
}

#[test]
fn insertions_at_the_same_place_overlap_and_ranges_merge() {
    let text = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4,0 +5,2 @@\n+x\n+y\n\
                @@ -8,3 +9,1 @@\n-a\n-b\n-c\n+d\n";
    let ours = touched(&parse(text, "base"));
    assert_eq!(ours["f"], [(4, 4), (8, 10)]);
    let theirs = BTreeMap::from([("f".to_string(), vec![(1, 4), (9, 9), (10, 12)])]);
    assert_eq!(overlaps(&ours, &theirs)[0].lines, [(4, 4), (9, 10)]);
}
