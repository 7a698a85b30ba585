//! What a session changed: its worktree against the commit it started from, read without
//! touching the worktree's own index or files, and the lines two sessions both change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{GitError, Result, git, git_env};
use crate::protocol::{Diff, DiffLine, FileDiff, FileStatus, Hunk, LineKind, Overlap};

/// Every change of the session's worktree against commit `base`: what was committed on its
/// branch since `base`, uncommitted changes to tracked files, and untracked files (those
/// `.gitignore` leaves out are left out here too), with `context` lines around each hunk.
///
/// The worktree is staged into a temporary index, never its own, so the agent's index and
/// files are as they were.
pub async fn diff(worktree: &Path, base: &str, context: u32) -> Result<Diff> {
    let base = git(
        worktree,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{base}^{{commit}}"),
        ],
    )
    .await
    .map_err(|_| GitError::Refused(format!("{base} is not a commit of the session's worktree")))?;
    let tree = snapshot(worktree).await?;
    let text = git_env(
        worktree,
        &[
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "-M",
            &format!("-U{context}"),
            &base,
            &tree,
            "--",
        ],
        &[],
    )
    .await?;
    Ok(parse(&text, &base))
}

/// For each file the session changes against `base`, the lines of `base` it touches (1-based,
/// inclusive). A file is listed under its name at `base` (a renamed file under its old
/// name), so two sessions' maps compare line for line. An insertion touches the line it
/// follows (line 1 at the top), so two insertions at the same place overlap. Files changed
/// without changing lines (binary files, mode changes, pure renames) have no ranges.
pub async fn changed_lines(
    worktree: &Path,
    base: &str,
) -> Result<BTreeMap<String, Vec<(u32, u32)>>> {
    Ok(touched(&diff(worktree, base, 0).await?))
}

fn touched(diff: &Diff) -> BTreeMap<String, Vec<(u32, u32)>> {
    let mut map: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for file in &diff.files {
        let path = file.old_path.as_ref().unwrap_or(&file.path);
        let ranges = map.entry(path.clone()).or_default();
        ranges.extend(file.hunks.iter().map(|h| {
            if h.old_lines == 0 {
                let line = h.old_start.max(1);
                (line, line)
            } else {
                (h.old_start, h.old_start.saturating_add(h.old_lines - 1))
            }
        }));
    }
    map
}

/// The files two sessions both change ([`changed_lines`] of each), with the line ranges of
/// the base both change; an empty list of ranges means the same file, different lines.
pub fn overlaps(
    a: &BTreeMap<String, Vec<(u32, u32)>>,
    b: &BTreeMap<String, Vec<(u32, u32)>>,
) -> Vec<Overlap> {
    a.iter()
        .filter_map(|(path, ours)| {
            let theirs = b.get(path)?;
            let mut both: Vec<(u32, u32)> = ours
                .iter()
                .flat_map(|&(s1, e1)| {
                    theirs.iter().filter_map(move |&(s2, e2)| {
                        let (start, end) = (s1.max(s2), e1.min(e2));
                        (start <= end).then_some((start, end))
                    })
                })
                .collect();
            both.sort_unstable();
            let mut lines: Vec<(u32, u32)> = Vec::with_capacity(both.len());
            for (start, end) in both {
                match lines.last_mut() {
                    Some(last) if start <= last.1.saturating_add(1) => last.1 = last.1.max(end),
                    _ => lines.push((start, end)),
                }
            }
            Some(Overlap {
                path: path.clone(),
                lines,
            })
        })
        .collect()
}

/// A temporary index file, removed when dropped.
struct TempIndex(PathBuf);

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The tree `git add -A` would make of the worktree, written through a temporary index in
/// the worktree's git folder. The temporary index starts as a copy of the worktree's own
/// (so git rehashes only the files that changed since it was last refreshed), or from
/// HEAD when there is none.
async fn snapshot(worktree: &Path) -> Result<String> {
    let git_dir = git(worktree, &["rev-parse", "--absolute-git-dir"]).await?;
    let own = git(
        worktree,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    )
    .await?;
    let index = TempIndex(PathBuf::from(git_dir).join(format!(
        "crucible-diff-{}.index",
        uuid::Uuid::new_v4().simple()
    )));
    let envs = [("GIT_INDEX_FILE", index.0.as_os_str())];
    // The copy keeps the index's own modification time: git trusts an entry whose file
    // looks unchanged only if the file is older than the index, and a file changed in the
    // same clock tick as the index was written (an agent's first edit right after its
    // worktree was made) looks unchanged. A copy dated now would hide that edit.
    let copied = tokio::fs::copy(&own, &index.0).await.is_ok() && same_time(&own, &index.0);
    if !copied {
        let _ = std::fs::remove_file(&index.0);
        git_env(worktree, &["read-tree", "HEAD"], &envs).await?;
    }
    git_env(worktree, &["add", "-A"], &envs).await?;
    let tree = git_env(worktree, &["write-tree"], &envs).await?;
    Ok(tree.trim().to_string())
}

/// Gives `copy` the modification time of `original`.
fn same_time(original: &str, copy: &Path) -> bool {
    let Ok(modified) = std::fs::metadata(original).and_then(|m| m.modified()) else {
        return false;
    };
    std::fs::File::options()
        .write(true)
        .open(copy)
        .and_then(|f| f.set_modified(modified))
        .is_ok()
}

/// Parses `git diff` output (unified, with `a/` and `b/` prefixes) into files, hunks and
/// numbered lines; `base` is recorded as the commit compared against. Lines it does not
/// know are skipped.
pub fn parse(text: &str, base: &str) -> Diff {
    let mut files: Vec<FileDiff> = Vec::new();
    // Lines still to come in the current hunk, at base and in the worktree, and the
    // numbers the next ones have.
    let (mut old_left, mut new_left) = (0u32, 0u32);
    let (mut old_no, mut new_no) = (0u32, 0u32);
    for line in text.lines() {
        if old_left > 0 || new_left > 0 {
            if line.starts_with('\\') {
                continue; // "\ No newline at end of file"
            }
            if let Some((kind, text)) = hunk_line(line)
                && let Some(file) = files.last_mut()
                && let Some(hunk) = file.hunks.last_mut()
            {
                let (old, new) = match kind {
                    LineKind::Context => (Some(old_no), Some(new_no)),
                    LineKind::Added => (None, Some(new_no)),
                    LineKind::Removed => (Some(old_no), None),
                };
                if old.is_some() {
                    old_no += 1;
                    old_left = old_left.saturating_sub(1);
                }
                if new.is_some() {
                    new_no += 1;
                    new_left = new_left.saturating_sub(1);
                }
                match kind {
                    LineKind::Added => file.added += 1,
                    LineKind::Removed => file.removed += 1,
                    LineKind::Context => {}
                }
                hunk.lines.push(DiffLine {
                    kind,
                    text: text.to_string(),
                    old_no: old,
                    new_no: new,
                });
                continue;
            }
            // Not a hunk line after all: the hunk is over.
            (old_left, new_left) = (0, 0);
        }
        if let Some(rest) = line.strip_prefix("diff --git ") {
            files.push(FileDiff {
                path: git_line_path(rest),
                old_path: None,
                status: FileStatus::Modified,
                binary: false,
                added: 0,
                removed: 0,
                hunks: Vec::new(),
            });
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if line.starts_with("new file mode ") {
            file.status = FileStatus::Added;
        } else if line.starts_with("deleted file mode ") {
            file.status = FileStatus::Deleted;
        } else if let Some(from) = line.strip_prefix("rename from ") {
            file.old_path = Some(unquote(from).0);
            file.status = FileStatus::Renamed;
        } else if let Some(to) = line.strip_prefix("rename to ") {
            file.path = unquote(to).0;
            file.status = FileStatus::Renamed;
        } else if line.starts_with("Binary files ") && line.ends_with(" differ") {
            file.binary = true;
        } else if let Some(old) = line.strip_prefix("--- ") {
            if file.status == FileStatus::Deleted
                && let Some(path) = side_path(old, "a/")
            {
                file.path = path;
            }
        } else if let Some(new) = line.strip_prefix("+++ ") {
            if let Some(path) = side_path(new, "b/") {
                file.path = path;
            }
        } else if let Some(hunk) = hunk_header(line) {
            (old_left, new_left) = (hunk.old_lines, hunk.new_lines);
            (old_no, new_no) = (hunk.old_start, hunk.new_start);
            file.hunks.push(hunk);
        }
    }
    Diff {
        base: base.to_string(),
        files,
    }
}

/// A hunk line's kind and text. `diff.suppressBlankEmpty` writes an empty context line as
/// nothing at all.
fn hunk_line(line: &str) -> Option<(LineKind, &str)> {
    match line.as_bytes().first() {
        None => Some((LineKind::Context, "")),
        Some(b' ') => Some((LineKind::Context, &line[1..])),
        Some(b'+') => Some((LineKind::Added, &line[1..])),
        Some(b'-') => Some((LineKind::Removed, &line[1..])),
        Some(_) => None,
    }
}

/// The path on a `---`/`+++` line, without its prefix; `None` for `/dev/null`. Git ends
/// the line with a tab when the name has a space in it.
fn side_path(rest: &str, prefix: &str) -> Option<String> {
    let rest = rest.strip_suffix('\t').unwrap_or(rest);
    if rest == "/dev/null" {
        return None;
    }
    let path = unquote(rest).0;
    Some(
        path.strip_prefix(prefix)
            .map_or(path.clone(), str::to_string),
    )
}

/// The new path named on a `diff --git a/… b/…` line. Both names are the same unless the
/// file was renamed (and then `rename to` names it), so an unquoted line is cut in half.
fn git_line_path(rest: &str) -> String {
    let new = if rest.starts_with('"') {
        let (_, after) = unquote(rest);
        unquote(after.trim_start()).0
    } else {
        let half = rest.len() / 2;
        match (rest.get(..half), rest.get(half..)) {
            (Some(a), Some(b)) if rest.len() % 2 == 1 && b.starts_with(' ') => {
                let b = &b[1..];
                if a.strip_prefix("a/") == b.strip_prefix("b/") {
                    b.to_string()
                } else {
                    last_side(rest)
                }
            }
            _ => last_side(rest),
        }
    };
    new.strip_prefix("b/").map_or(new.clone(), str::to_string)
}

fn last_side(rest: &str) -> String {
    match rest.rfind(" b/").or_else(|| rest.rfind(" \"b/")) {
        Some(at) => unquote(&rest[at + 1..]).0,
        None => rest.to_string(),
    }
}

/// A name as git writes it: as it is, or in double quotes with C escapes (octal bytes for
/// what is not plain ASCII). Returns the name and what follows a quoted one.
fn unquote(text: &str) -> (String, &str) {
    let Some(quoted) = text.strip_prefix('"') else {
        return (text.to_string(), "");
    };
    let mut bytes = Vec::new();
    let mut chars = quoted.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => {
                return (
                    String::from_utf8_lossy(&bytes).into_owned(),
                    &quoted[at + 1..],
                );
            }
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                let byte = match e {
                    'a' => 7,
                    'b' => 8,
                    'f' => 12,
                    'n' => b'\n',
                    'r' => b'\r',
                    't' => b'\t',
                    'v' => 11,
                    '0'..='7' => {
                        let mut value = u32::from(e) - u32::from('0');
                        for _ in 0..2 {
                            match chars.clone().next() {
                                Some((_, d @ '0'..='7')) => {
                                    value = value * 8 + (u32::from(d) - u32::from('0'));
                                    chars.next();
                                }
                                _ => break,
                            }
                        }
                        u8::try_from(value).unwrap_or(b'?')
                    }
                    other => {
                        let mut buf = [0; 4];
                        bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                        continue;
                    }
                };
                bytes.push(byte);
            }
            other => {
                let mut buf = [0; 4];
                bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), "")
}

/// `@@ -a,b +c,d @@ header`; a count left out is 1.
fn hunk_header(line: &str) -> Option<Hunk> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, header) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |s: &str| -> Option<(u32, u32)> {
        match s.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (old_start, old_lines) = range(old)?;
    let (new_start, new_lines) = range(new)?;
    Some(Hunk {
        old_start,
        old_lines,
        new_start,
        new_lines,
        header: header.strip_prefix(' ').unwrap_or(header).to_string(),
        lines: Vec::new(),
    })
}

#[cfg(test)]
#[path = "diff_tests.rs"]
pub(crate) mod tests;
