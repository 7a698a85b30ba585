//! How a settings file stands on disk, to tell a save from the file last read without
//! reading it: a stat costs microseconds, a read and parse much more.

use std::path::{Path, PathBuf};

/// A file's identity: where it is (device, inode), what kind, how long, and when it was
/// last written or changed; or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStamp {
    Absent,
    /// Its metadata cannot be read (not "absent"): the error's kind.
    Unreadable(std::io::ErrorKind),
    /// Device, inode, kind, size, modification and change times (with nanoseconds).
    Present([i64; 8]),
}

impl FileStamp {
    /// How `path` stands now (a symbolic link is followed to its file).
    pub fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(path) {
            Ok(m) => FileStamp::Present([
                m.dev() as i64,
                m.ino() as i64,
                i64::from(m.mode()),
                m.size() as i64,
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ]),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileStamp::Absent,
            Err(e) => FileStamp::Unreadable(e.kind()),
        }
    }

    /// How each of `files` stands now, in their order.
    pub fn all(files: &[PathBuf]) -> Vec<Self> {
        files.iter().map(|f| Self::of(f)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_changes_the_stamp_and_a_read_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        assert_eq!(FileStamp::of(&path), FileStamp::Absent);
        std::fs::write(&path, "a = 1\n").unwrap();
        let first = FileStamp::of(&path);
        assert!(matches!(first, FileStamp::Present(_)));
        std::fs::read_to_string(&path).unwrap();
        assert_eq!(FileStamp::of(&path), first);
        // A new file renamed over it, as editors save, even of the same length.
        let new = dir.path().join("a.toml.new");
        std::fs::write(&new, "a = 2\n").unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert_ne!(FileStamp::of(&path), first);
    }
}
