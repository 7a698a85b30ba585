//! Which git this machine has, against the oldest one crucible can merge with: landing a
//! session's work uses `git merge-tree --write-tree`, which git has since 2.38.

use std::path::Path;

use super::{GitError, Result, git};

/// The oldest git whose `merge-tree` has `--write-tree` (major, minor).
pub const MERGE_NEEDS: (u32, u32) = (2, 38);

/// What `git --version` says, e.g. `git version 2.47.3`.
pub async fn version_text() -> Result<String> {
    git(Path::new("/"), &["--version"]).await
}

/// The major and minor numbers in what `git --version` says (`git version 2.39.5
/// (Apple Git-154)`, `git version 2.47.3.windows.1`).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let numbers = text.trim().strip_prefix("git version ")?;
    let mut parts = numbers.split(|c: char| c == '.' || c.is_whitespace());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether the git that `git --version` described can merge sessions; the error says
/// which git it is and what is needed.
pub fn merges(text: &str) -> Result<()> {
    let (major, minor) = parse_version(text).ok_or_else(|| {
        GitError::Refused(format!("cannot tell git's version from {:?}", text.trim()))
    })?;
    if (major, minor) >= MERGE_NEEDS {
        return Ok(());
    }
    Err(GitError::Refused(format!(
        "git {major}.{minor} is older than {}.{}, whose `git merge-tree --write-tree` merging needs",
        MERGE_NEEDS.0, MERGE_NEEDS.1
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_git_says() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.5 (Apple Git-154)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 2.45.1.windows.1"), Some((2, 45)));
        assert_eq!(parse_version("hub version 2.14"), None);
    }

    #[test]
    fn git_older_than_2_38_cannot_merge() {
        assert!(merges("git version 2.38.0").is_ok());
        assert!(merges("git version 3.0").is_ok());
        let old = merges("git version 2.34.1").unwrap_err().to_string();
        assert!(old.contains("2.34") && old.contains("2.38"), "{old}");
        assert!(merges("garbage").is_err());
    }
}
