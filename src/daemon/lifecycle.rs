//! The PID file, held with an exclusive lock for the daemon's whole life: the lock, not
//! the file's existence, says whether a daemon runs, so a crash leaves nothing to clean.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;

use super::{DaemonError, io_err};
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
            return Err(DaemonError::AlreadyRunning(
                text.trim().parse().unwrap_or(0),
            ));
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

impl Drop for PidLock {
    fn drop(&mut self) {
        // Remove while still holding the lock, so nobody sees a locked-but-gone file.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.flush();
    }
}
