//! The PID file, held with an exclusive lock for the daemon's whole life: the lock, not
//! the file's existence, says whether a daemon runs, so a crash leaves nothing to clean.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::error::{DaemonError, io_err};
use crate::kiln::Kiln;
use crate::sys;

pub struct PidLock {
    file: File,
    path: PathBuf,
}

impl PidLock {
    pub fn acquire(kiln: &Kiln) -> Result<Self, DaemonError> {
        let path = kiln.pid_path();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(format!("cannot open {}", path.display())))?;
        if !sys::try_lock(&file).map_err(io_err("cannot lock the pid file"))? {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            // No pid: a daemon between taking the lock and writing its pid, so alive.
            let holder: Option<u32> = text.trim().parse().ok().filter(|&pid| pid > 0);
            let Some(holder) = holder else {
                return Err(DaemonError::AlreadyRunning(None));
            };
            if sys::pid_alive(holder) {
                return Err(DaemonError::AlreadyRunning(Some(holder)));
            }
            if !wait_for_release(&file)? {
                return Err(DaemonError::LockOutlivedDaemon(holder));
            }
        }
        file.set_len(0)
            .map_err(io_err("cannot write the pid file"))?;
        file.rewind().map_err(io_err("cannot write the pid file"))?;
        writeln!(file, "{}", std::process::id()).map_err(io_err("cannot write the pid file"))?;
        file.sync_all()
            .map_err(io_err("cannot write the pid file"))?;
        Ok(Self { file, path })
    }
}

/// How long a daemon that is gone may still hold its lock.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Waits for the lock of a daemon that is gone. The kernel releases a killed process's
/// lock when it closes the process's files, which can finish after the process has
/// been reaped: a daemon started right after `kill -9` of its predecessor met the lock
/// still held for about 5 ms on a loaded machine, and refused to start.
fn wait_for_release(file: &File) -> Result<bool, DaemonError> {
    let deadline = Instant::now() + RELEASE_WAIT;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
        if sys::try_lock(file).map_err(io_err("cannot lock the pid file"))? {
            return Ok(true);
        }
    }
    Ok(false)
}

impl Drop for PidLock {
    fn drop(&mut self) {
        // Remove while still holding the lock, so nobody sees a locked-but-gone file.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid that belonged to a process which has ended.
    fn gone_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// Holds the kiln's pid lock through a file description of its own, as another
    /// process would, with `pid` written in the file.
    fn hold(kiln: &Kiln, pid: u32) -> File {
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        std::fs::write(kiln.pid_path(), format!("{pid}\n")).unwrap();
        let file = File::open(kiln.pid_path()).unwrap();
        assert!(sys::try_lock(&file).unwrap());
        file
    }

    #[test]
    fn a_live_daemon_keeps_the_kiln() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path().to_path_buf());
        let _held = hold(&kiln, std::process::id());
        let started = Instant::now();
        let err = PidLock::acquire(&kiln).err().expect("refused");
        assert!(matches!(err, DaemonError::AlreadyRunning(Some(pid)) if pid == std::process::id()));
        assert!(started.elapsed() < RELEASE_WAIT, "refused without waiting");
    }

    #[test]
    fn a_daemon_still_writing_its_pid_is_named_as_starting() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path().to_path_buf());
        std::fs::create_dir_all(kiln.state_dir()).unwrap();
        std::fs::write(kiln.pid_path(), "").unwrap();
        let file = File::open(kiln.pid_path()).unwrap();
        assert!(sys::try_lock(&file).unwrap());
        let err = PidLock::acquire(&kiln).err().expect("refused");
        assert!(matches!(err, DaemonError::AlreadyRunning(None)), "{err}");
        assert!(!err.to_string().contains("pid 0"), "{err}");
        assert!(err.to_string().contains("it is starting"), "{err}");
    }

    #[test]
    fn the_lock_of_a_daemon_that_is_gone_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path().to_path_buf());
        let held = hold(&kiln, gone_pid());
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let lock = PidLock::acquire(&kiln).expect("taken once released");
        release.join().unwrap();
        let written = std::fs::read_to_string(kiln.pid_path()).unwrap();
        assert_eq!(written.trim(), std::process::id().to_string());
        drop(lock);
        assert!(!kiln.pid_path().exists());
    }

    #[test]
    fn a_lock_that_outlives_its_daemon_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let kiln = Kiln::new(dir.path().to_path_buf());
        let pid = gone_pid();
        let _held = hold(&kiln, pid);
        let err = PidLock::acquire(&kiln).err().expect("refused");
        assert!(
            matches!(err, DaemonError::LockOutlivedDaemon(p) if p == pid),
            "{err}"
        );
        assert!(err.to_string().contains(&format!("daemon {pid} ")), "{err}");
    }
}
