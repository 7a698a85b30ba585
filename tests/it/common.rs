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
