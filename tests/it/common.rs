//! Test equipment: temp kilns, the daemon as a child process, raw socket connections, and
//! waiting on conditions with deadlines (never sleep-and-hope). The test kit
//! (`testkit/`) has them; here under the names the tests use.

pub use testkit::{
    DaemonProcess, KillOnDrop, Raw, Sshd, TestDaemon, TestKiln, assert_in_no_file, cru_on_path,
    daemon_processes, error_code, free_port, limit_descriptors, register, run_bounded,
    scripted_agent, stderr, stdout, wait_until, write_script,
};

/// The `cru` under test (the kit finds the same binary: `testkit::cru`).
pub const CRU: &str = env!("CARGO_BIN_EXE_cru");

/// Stops the person's hub whose state folder (`XDG_STATE_HOME`) is held here when the
/// test ends, however it ends.
pub struct HubGuard(pub std::path::PathBuf);

impl Drop for HubGuard {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.0.join("crucible/hub.pid")) {
            let _ = std::process::Command::new("kill")
                .args(["-9", pid.trim()])
                .status();
        }
    }
}
