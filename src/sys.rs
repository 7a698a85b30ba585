//! The few OS calls crucible makes directly: advisory file locks, process liveness, uid,
//! descriptor limits, free disk space and finding programs on `PATH`.

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

/// Whether the process is stopped by a signal (SIGSTOP, SIGTSTP, a debugger): state `T`
/// or `t` in `/proc/<pid>/stat`.
pub fn is_suspended(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T" || state == "t")
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

/// Sends SIGCONT: a process stopped by a signal runs again.
pub fn resume(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    // SAFETY: plain kill(2) on a pid we read from our own pid file.
    if unsafe { libc::kill(pid, libc::SIGCONT) } == 0 {
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

/// Caps glibc's heap arenas at two. By default every thread that meets contention gets an
/// arena of its own (up to eight per core), and what each arena frees stays with it: the
/// daemon's resident size after a burst was mostly such memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_heap_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; called before the runtime's
    // threads start allocating in earnest.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Does nothing: `mallopt` is glibc's. Other C libraries keep their own allocator's arena
/// policy, so the daemon there may hold more freed memory after a burst.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_heap_arenas() {}

/// Returns freed heap memory to the system. After a burst of work glibc keeps what its
/// per-thread arenas freed, which for the daemon was more than half of its resident size.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Does nothing: `malloc_trim` is glibc's. Elsewhere freed heap memory goes back to the
/// system only as that C library's allocator decides.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim_heap() {}

/// Once `activity` has paused for `quiet`, returns the memory the burst freed to the
/// system ([`trim_heap`]). Armed only by activity: an idle process never wakes for this.
pub async fn trim_after_bursts(activity: &tokio::sync::Notify, quiet: std::time::Duration) {
    loop {
        activity.notified().await;
        while tokio::time::timeout(quiet, activity.notified())
            .await
            .is_ok()
        {}
        trim_heap();
    }
}

/// Tells systemd the service is ready (`READY=1` to `$NOTIFY_SOCKET`, a `Type=notify`
/// unit's socket; a name starting with `@` is an abstract one). Nothing without it.
pub fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sent = (|| -> io::Result<()> {
        let socket = std::os::unix::net::UnixDatagram::unbound()?;
        let bytes = path.as_encoded_bytes();
        #[cfg(target_os = "linux")]
        if let Some(name) = bytes.strip_prefix(b"@") {
            use std::os::linux::net::SocketAddrExt as _;
            let at = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(b"READY=1", &at)?;
            return Ok(());
        }
        let _ = bytes;
        socket.send_to(b"READY=1", &path)?;
        Ok(())
    })();
    if let Err(e) = sent {
        tracing::warn!("cannot tell systemd the daemon is ready: {e}");
    }
}

/// Raises the soft limit on open descriptors to the hard limit, so a flood of clients
/// meets the limit as late as the system allows. Returns the (soft) limit now in force.
pub fn raise_fd_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        }
    }
    Ok(limit.rlim_cur)
}

/// The database engine samples the process's CPU and memory through `sysinfo`, which by
/// default keeps a `/proc/<pid>/stat` file open for every process on the machine (up to
/// half the descriptor limit). Crucible needs its descriptors for clients and agents.
pub fn quiet_process_metrics() {
    sysinfo::set_open_files_limit(0);
}

/// How many descriptors this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// Bytes available to this user on the filesystem holding `path`.
#[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
pub fn free_bytes(path: &std::path::Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("path holds a NUL byte"))?;
    // SAFETY: statvfs is a plain struct of numbers; all zeros is a valid value.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct; the path is a valid C string.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let blocks = u64::try_from(stat.f_bavail).unwrap_or(0);
    Ok(blocks.saturating_mul(u64::try_from(stat.f_frsize).unwrap_or(0)))
}

/// Makes `dir` and its missing parents, owner-only (`0700`).
pub fn private_dir(dir: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Replaces `path` with `bytes`, owner-only (`0600`), durably: written to a file beside
/// it, synced, renamed over it and the rename synced, so a crash leaves the old content
/// or the new, never a part.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut temp = path.as_os_str().to_owned();
    temp.push(".new");
    let temp = std::path::PathBuf::from(temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// The file-creation mask the process started with, before [`private_umask`].
static USER_UMASK: std::sync::OnceLock<libc::mode_t> = std::sync::OnceLock::new();

/// Makes everything this process creates owner-only from now on (the daemon's state:
/// database files, logs, sockets), remembering the user's own mask for the programs it
/// starts ([`user_umask`]).
pub fn private_umask() {
    // SAFETY: umask only swaps the process's file-creation mask.
    let previous = unsafe { libc::umask(0o077) };
    let _ = USER_UMASK.set(previous);
}

/// Gives a program crucible starts (an agent, git) the user's own file-creation mask, so
/// the files it makes in a worktree are as the user would make them.
pub fn user_umask(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    if let Some(&mask) = USER_UMASK.get() {
        // SAFETY: umask is async-signal-safe, so it may run between fork and exec.
        unsafe {
            command.pre_exec(move || {
                libc::umask(mask);
                Ok(())
            });
        }
    }
    command
}

/// The first executable file named `program` in the directories of `PATH`.
pub fn on_path(program: &str) -> Option<std::path::PathBuf> {
    on_path_in(program, &std::env::var_os("PATH")?)
}

/// The first executable called `program` in the folders of `path` (a `PATH` value).
pub fn on_path_in(program: &str, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|path| is_executable(path))
}

/// Whether `path` is a file someone may execute.
pub fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// This machine's host name (`gethostname`), or `localhost` if it has none.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match String::from_utf8_lossy(&buf[..end]).trim() {
        "" => "localhost".into(),
        name => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stopped_process_reads_as_suspended_and_a_running_one_does_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let stat = |p| super::is_suspended(p);
        assert!(!stat(pid), "sleeping is not suspended");
        // SAFETY: signals to our own child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !stat(pid) {
            assert!(std::time::Instant::now() < deadline, "never seen stopped");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
        while stat(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "never seen running again"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!stat(u32::MAX), "no such process");
    }
}
