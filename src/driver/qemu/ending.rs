//! How a guest's program ended, as QEMU's exit code carries it: the guest writes a
//! number to QEMU's exit device (`isa-debug-exit`) as its last act.

use std::process::ExitStatus;

use crate::driver::exit::Exit;

/// How the guest's program ended, from QEMU's status: the guest writes `w` to the exit
/// device and QEMU exits with `w * 2 + 1`; `w` is the program's code plus one (codes
/// up to 124), 126 when the guest's OOM killer ended it, 127 for any other end.
pub(super) fn guest_exit(status: ExitStatus, memory_mb: u64) -> Exit {
    let Some(code) = status.code() else {
        return Exit::ended(format!("(its QEMU) {}", Exit::of(status).status));
    };
    let said = code >> 1;
    match code {
        0 => Exit::ended(
            "ended: the microVM stopped before its program did (its console is in the session's stderr)",
        ),
        _ if code & 1 == 0 || said == 0 => Exit::ended(format!(
            "ended: QEMU failed (exit {code}); its messages are in the session's stderr"
        )),
        _ if said <= 125 => Exit::code(said - 1),
        _ if said == 126 => Exit::ended(format!("was killed: out of memory (cap {memory_mb} MiB)")),
        _ => Exit::ended(
            "was killed by a signal or exited with a code above 124 (the guest's console, in the session's stderr, says which)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn qemu_exited(code: i32) -> Exit {
        guest_exit(ExitStatus::from_raw(code << 8), 512)
    }

    #[test]
    fn the_guest_program_exit_is_read_from_qemu_status() {
        assert_eq!(qemu_exited(3), Exit::code(0));
        assert_eq!(qemu_exited((3 << 1) | 1), Exit::code(2));
        let oom = qemu_exited((126 << 1) | 1);
        assert_eq!(oom.status, "was killed: out of memory (cap 512 MiB)");
        assert!(oom.code.is_none());
        assert!(qemu_exited(1).status.contains("QEMU failed"));
        assert!(qemu_exited(0).status.contains("stopped before"));
        assert!(qemu_exited(255).code.is_none());
    }
}
