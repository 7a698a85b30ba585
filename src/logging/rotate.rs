//! A log file capped by size: once the next line would take `name` past its cap, `name`
//! becomes `name.1`, the older files move up one (`name.1` to `name.2`, …), the oldest
//! beyond `keep` is dropped, and writing goes on in a new, empty `name`. So the logs take
//! at most `(keep + 1) × cap` bytes however long a flood lasts. (`tracing-appender` rolls
//! by time only, which does not bound a flood.)

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub struct SizeCapped {
    path: PathBuf,
    cap: u64,
    keep: usize,
    file: File,
    /// Bytes in the current file.
    written: u64,
}

impl SizeCapped {
    /// Appends to `dir/name`, counting what it already holds.
    pub fn open(dir: &Path, name: &str, cap: u64, keep: usize) -> io::Result<Self> {
        let path = dir.join(name);
        let file = append(&path)?;
        let written = file.metadata()?.len();
        Ok(Self {
            path,
            cap,
            keep,
            file,
            written,
        })
    }

    /// `name.n`.
    fn old(&self, n: usize) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        if self.keep == 0 {
            self.file.set_len(0)?;
            self.written = 0;
            return Ok(());
        }
        for n in (1..self.keep).rev() {
            if let Err(e) = std::fs::rename(self.old(n), self.old(n + 1))
                && e.kind() != io::ErrorKind::NotFound
            {
                return Err(e);
            }
        }
        std::fs::rename(&self.path, self.old(1))?;
        self.file = append(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Write for SizeCapped {
    /// Lines arrive whole (the log writer hands over one line per write), so a file is
    /// only ever cut between lines.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        if self.written > 0 && self.written.saturating_add(len) > self.cap {
            // When the files cannot be moved (a full disk, a read-only folder), the
            // current one is emptied instead: the cap holds either way.
            if self.rotate().is_err() {
                self.file.set_len(0)?;
                self.written = 0;
            }
        }
        let n = self.file.write(buf)?;
        self.written = self
            .written
            .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    #[test]
    fn a_flood_is_held_to_the_cap_times_the_files_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SizeCapped::open(dir.path(), "daemon.log", 1000, 2).unwrap();
        // A thousand lines of 100 bytes: ten to a file.
        for i in 0..1000u32 {
            log.write_all(format!("{}{i:09}\n", "x".repeat(90)).as_bytes())
                .unwrap();
        }
        log.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["daemon.log", "daemon.log.1", "daemon.log.2"]);
        for name in &names {
            let bytes = size(&dir.path().join(name));
            assert!(bytes <= 1000, "{name} holds {bytes} bytes");
        }
        // Nothing is cut mid-line, and the newest lines are in the current file.
        let current = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap();
        assert!(current.ends_with("000000999\n"), "{current}");
        assert!(current.lines().all(|l| l.len() == 99), "{current}");
        let previous = std::fs::read_to_string(dir.path().join("daemon.log.1")).unwrap();
        assert_eq!(previous.lines().count(), 10);
        assert!(previous.ends_with("000000989\n"), "{previous}");
    }

    #[test]
    fn what_the_file_held_before_counts_towards_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tui.log"), [b'a'; 950]).unwrap();
        let mut log = SizeCapped::open(dir.path(), "tui.log", 1000, 1).unwrap();
        log.write_all(&[b'b'; 100]).unwrap();
        assert_eq!(size(&dir.path().join("tui.log.1")), 950);
        assert_eq!(size(&dir.path().join("tui.log")), 100);
        // A line longer than the cap still goes in whole, into a file of its own.
        log.write_all(&[b'c'; 1500]).unwrap();
        log.write_all(b"d\n").unwrap();
        assert_eq!(size(&dir.path().join("tui.log.1")), 1500);
        assert_eq!(size(&dir.path().join("tui.log")), 2);
    }
}
