//! The few OS calls crucible makes directly: advisory file locks, process liveness, uid.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Takes an exclusive lock without waiting. `Ok(false)` when another process holds it.
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock only reads the descriptor, which `file` keeps open.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Takes an exclusive lock, waiting for it. Blocking: call from a blocking thread.
pub fn lock(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: as in `try_lock`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Whether a process with this pid exists (and we may signal it).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 performs only the existence and permission check.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Sends SIGTERM.
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: plain kill(2) on a pid we read from our own pid file.
    if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `signal` to the process group led by `pid` (agents run in their own group, so
/// whatever they started goes too).
pub fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid > 0 {
        // SAFETY: kill(2) with a negative pid signals that process group; nothing else.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// Whether process `pid` has `NAME=value` in its environment: how a restarted daemon
/// recognises an agent its predecessor left behind (and not some process that reused
/// the pid).
pub fn process_has_env(pid: u32, name: &str, value: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted = format!("{name}={value}");
    environ
        .split(|&b| b == 0)
        .any(|var| var == wanted.as_bytes())
}

pub fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// Returns freed heap memory to the system. After a burst of work glibc keeps what its
/// per-thread arenas freed, which for the daemon was more than half of its resident size.
pub fn trim_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
