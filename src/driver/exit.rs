//! How a program a driver started ended, in words: the driver knows better than the
//! bare status when the program crucible waits for is a carrier (an ssh client, a QEMU)
//! rather than the agent itself.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// How a started program ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// `exited with code 2`, `was killed by signal 9 (SIGKILL)`,
    /// `was killed: out of memory (cap 512 MiB)`.
    pub status: String,
    /// The agent's own exit code, when it exited rather than was ended.
    pub code: Option<i32>,
}

impl Exit {
    /// The program's own status, as the process table gives it.
    pub fn of(status: ExitStatus) -> Exit {
        Exit {
            status: describe(status),
            code: status.code(),
        }
    }

    /// An exit with `code`, described as such.
    pub fn code(code: i32) -> Exit {
        Exit {
            status: format!("exited with code {code}"),
            code: Some(code),
        }
    }

    /// An end that was not an exit of the agent's own: `status` says what.
    pub fn ended(status: impl Into<String>) -> Exit {
        Exit {
            status: status.into(),
            code: None,
        }
    }

    /// Whether the agent exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => match signal_name(signal) {
            Some(name) => format!("was killed by signal {signal} ({name})"),
            None => format!("was killed by signal {signal}"),
        },
        (None, None) => format!("ended ({status})"),
    }
}

/// The name of a signal that ends a process.
fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_described_by_its_code_or_signal() {
        assert_eq!(Exit::of(ExitStatus::from_raw(2 << 8)), Exit::code(2));
        let killed = Exit::of(ExitStatus::from_raw(libc::SIGKILL));
        assert_eq!(killed.status, "was killed by signal 9 (SIGKILL)");
        assert!(killed.code.is_none() && !killed.success());
        assert!(Exit::of(ExitStatus::from_raw(0)).success());
    }
}
