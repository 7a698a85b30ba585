//! Processes of a test: the `cru` under test, commands bounded in time, waiting on
//! conditions with deadlines (never sleep-and-hope), and what `/proc` says of daemons.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `cru` binary of this build. Cargo builds it before the tests and benchmarks it
/// runs, into the profile folder their binaries are in (`<target>/<profile>/deps/<test>`
/// next to `<target>/<profile>/cru`).
pub fn cru() -> &'static str {
    static CRU: OnceLock<String> = OnceLock::new();
    CRU.get_or_init(|| {
        let exe = std::env::current_exe().expect("the running binary's path");
        let mut folder = exe.parent().expect("the running binary's folder");
        if folder.ends_with("deps") || folder.ends_with("examples") {
            folder = folder.parent().expect("the profile folder");
        }
        let cru = folder.join("cru");
        assert!(
            cru.is_file(),
            "no cru at {}: the tests run the binary cargo builds beside them",
            cru.display()
        );
        cru.to_string_lossy().into_owned()
    })
}

/// The scripted ACP agent (test equipment, an example of crucible's package), built on
/// first use.
pub fn scripted_agent() -> &'static str {
    crate::built::scripted_agent(Path::new(cru()))
}

/// The longest a `cru` command of a test may take.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(180);

/// Runs `command` (stdin closed, output captured) and returns its output; kills it and
/// panics if it has not ended within [`COMMAND_LIMIT`].
pub fn run_bounded(mut command: Command, what: &str) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let pid = child.id();
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match result.recv_timeout(COMMAND_LIMIT) {
        Ok(output) => output.expect("run the command"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("{what} did not end within {COMMAND_LIMIT:?}; it was killed");
        }
    }
}

/// Waits until `check` is true, polling, or panics with `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Pids of running `cru … daemon run` processes for this kiln (from /proc).
pub fn daemon_processes(kiln: &Path) -> Vec<u32> {
    let kiln = kiln.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_daemon = args.windows(2).any(|w| w[0] == "daemon" && w[1] == "run");
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state.split_whitespace().nth(2) == Some("Z");
        if is_daemon && !zombie && args.iter().any(|a| a == &kiln) {
            pids.push(pid);
        }
    }
    pids
}

/// A loopback port free at the moment of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes an executable script.
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `cru` with its own folder first on `PATH`, as agents' scripts call it by name.
pub fn cru_on_path() -> Command {
    let folder = Path::new(cru()).parent().expect("the binary's folder");
    let path = std::env::var("PATH").unwrap_or_default();
    let mut cru = Command::new(cru());
    cru.env("PATH", format!("{}:{path}", folder.display()))
        .stderr(Stdio::null());
    cru
}

/// Fails if any file under `dir` holds `value` (a secret that must not be kept).
pub fn assert_in_no_file(dir: &Path, value: &str) {
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => found.extend(files(&path)),
                Ok(t) if t.is_file() => found.push(path),
                _ => {}
            }
        }
        found
    }
    for file in files(dir) {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "the value is in {}",
            file.display()
        );
    }
}

/// Runs `command` with at most `limit` open descriptors (soft and hard), as a stock
/// system gives a process.
pub fn limit_descriptors(command: &mut Command, limit: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit only, between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
