//! The file firewall: an agent reads and writes through crucible only inside its
//! session's worktree. Everything else is refused (default deny), including paths that
//! reach out through `..` or a symlink, and crucible's own state directory.

use std::path::{Component, Path, PathBuf};

use super::error::AgentError;

#[derive(Debug, Clone)]
pub struct Firewall {
    root: PathBuf,
    denied: Vec<PathBuf>,
    /// The files are on another machine: paths are checked as written (that machine's
    /// links are its own).
    remote: bool,
    /// The agent names its folder differently (a container's `/workspace`): paths under
    /// the first stand for the same paths under the second.
    seen_as: Option<(PathBuf, PathBuf)>,
}

impl Firewall {
    /// Allows `root` and what is under it, except the `denied` folders inside it (a
    /// denied folder that holds the root, as crucible's state folder holds the worktrees
    /// it makes, denies nothing).
    pub fn new(root: &Path, denied: &[PathBuf]) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let denied = denied
            .iter()
            .map(|d| d.canonicalize().unwrap_or_else(|_| lexical(d)))
            .filter(|d| !root.starts_with(d))
            .collect();
        Ok(Self {
            root,
            denied,
            remote: false,
            seen_as: None,
        })
    }

    /// Paths the agent gives under `inside` stand for the same under the root.
    pub fn seen_as(mut self, inside: &Path) -> Self {
        self.seen_as = Some((inside.to_path_buf(), self.root.clone()));
        self
    }

    /// Allows `root` on another machine and what is under it, by the paths alone.
    pub fn remote(root: &Path) -> Self {
        Self {
            root: lexical(root),
            denied: Vec::new(),
            remote: true,
            seen_as: None,
        }
    }

    /// The real path `path` stands for, if the agent may touch it; otherwise why not.
    pub fn check(&self, path: &Path) -> Result<PathBuf, AgentError> {
        let mapped = match &self.seen_as {
            Some((inside, host)) => match lexical(path).strip_prefix(inside) {
                Ok(rest) => host.join(rest),
                Err(_) => path.to_path_buf(),
            },
            None => path.to_path_buf(),
        };
        let path = mapped.as_path();
        if !path.is_absolute() {
            return Err(AgentError::Refused(format!(
                "{} is not an absolute path",
                path.display()
            )));
        }
        let resolved = if self.remote {
            lexical(path)
        } else {
            resolve(&lexical(path))
        };
        if !resolved.starts_with(&self.root) {
            return Err(AgentError::Refused(format!(
                "{} is outside the session's worktree {}",
                path.display(),
                self.root.display()
            )));
        }
        if self.denied.iter().any(|d| resolved.starts_with(d)) {
            return Err(AgentError::Refused(format!(
                "{} is crucible's own state",
                path.display()
            )));
        }
        Ok(resolved)
    }
}

/// Removes `.` and resolves `..` without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Follows symlinks through the deepest part of `path` that exists; the rest (a file or
/// folders about to be created) is kept as written.
fn resolve(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The lines `line` (1-based) onwards, at most `limit` of them.
pub fn slice_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_string();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_worktree_is_open() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("wt");
        let state = root.join(".crucible");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(tmp.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), root.join("link")).unwrap();
        let fw = Firewall::new(&root, std::slice::from_ref(&state)).unwrap();
        let real_root = root.canonicalize().unwrap();

        assert_eq!(
            fw.check(&root.join("src/new/file.rs")).unwrap(),
            real_root.join("src/new/file.rs")
        );
        for refused in [
            tmp.path().join("secret"),
            root.join("../secret"),
            root.join("src/../../secret"),
            root.join("link"),
            state.join("db"),
            PathBuf::from("relative.txt"),
            PathBuf::from("/etc/passwd"),
        ] {
            assert!(
                fw.check(&refused).is_err(),
                "{} was allowed",
                refused.display()
            );
        }
    }

    #[test]
    fn a_denied_folder_around_the_root_denies_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join(".crucible");
        let root = state.join("worktrees/cru/x");
        std::fs::create_dir_all(&root).unwrap();
        let fw = Firewall::new(&root, std::slice::from_ref(&state)).unwrap();
        assert!(fw.check(&root.join("notes.txt")).is_ok());
        assert!(fw.check(&state.join("db")).is_err());
    }

    #[test]
    fn line_windows() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(slice_lines(text, None, None), text);
        assert_eq!(slice_lines(text, Some(2), Some(2)), "b\nc\n");
        assert_eq!(slice_lines(text, Some(4), None), "d\n");
        assert_eq!(slice_lines(text, None, Some(1)), "a\n");
        assert_eq!(slice_lines(text, Some(9), None), "");
    }
}
