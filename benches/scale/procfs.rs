//! What the scale benchmark reads of its processes in `/proc`, and the signals it sends to
//! the processes it started.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};

use super::figures::ms;

pub use super::process::{alive, clock_ticks};

/// A process's memory, from `/proc/<pid>/status`, in KiB.
pub struct Memory {
    pub rss_kib: u64,
    pub anon_kib: u64,
    file_kib: u64,
    hwm_kib: u64,
    threads: u64,
}

impl Memory {
    pub fn describe(&self) -> String {
        format!(
            "VmRSS {} KiB (RssAnon {} KiB, RssFile {} KiB), VmHWM {} KiB, {} threads",
            self.rss_kib, self.anon_kib, self.file_kib, self.hwm_kib, self.threads
        )
    }
}

pub fn proc_memory(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/status has no {name}"))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        anon_kib: field("RssAnon:")?,
        file_kib: field("RssFile:")?,
        hwm_kib: field("VmHWM:")?,
        threads: field("Threads:")?,
    })
}

/// The machine's memory still available (`MemAvailable` of `/proc/meminfo`), in MiB.
pub fn available_mib() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// A process's I/O counters, from `/proc/<pid>/io`.
#[derive(Clone, Copy)]
pub struct Io {
    /// Bytes it caused to be written to storage.
    pub write_bytes: u64,
    /// Write system calls.
    pub syscw: u64,
}

impl Io {
    pub fn since(&self, earlier: &Io) -> Io {
        Io {
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            syscw: self.syscw.saturating_sub(earlier.syscw),
        }
    }
}

pub fn proc_io(pid: u32) -> Result<Io> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .with_context(|| format!("reading /proc/{pid}/io"))?;
    let field = |name: &str| -> Result<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/io has no {name}"))
    };
    Ok(Io {
        write_bytes: field("write_bytes:")?,
        syscw: field("syscw:")?,
    })
}

pub fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: sends a signal to a process this benchmark started.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

pub fn is_scripted_agent(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("cru-scripted-agent"))
}

pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub fn percent(cpu_ms: f64, over: Duration) -> f64 {
    100.0 * cpu_ms / ms(over)
}

/// Fields of a `/proc/.../stat` line after the command name, and the name.
fn stat_fields(path: &str) -> Option<(String, Vec<u64>)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // The state (a letter) is the first field; the numbers follow it.
    let numbers = stat[close + 1..]
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    Some((name, numbers))
}

/// CPU clock ticks of the children a process waited for (cutime + cstime): its git
/// commands, for the daemon.
pub fn children_ticks(pid: u32) -> u64 {
    // After the state: ppid … utime (10), stime (11), cutime (12), cstime (13).
    stat_fields(&format!("/proc/{pid}/stat")).map_or(0, |(_, f)| {
        f.get(12).copied().unwrap_or(0) + f.get(13).copied().unwrap_or(0)
    })
}

/// Each thread's name and CPU clock ticks (utime + stime), by thread id.
pub fn thread_ticks(pid: u32) -> HashMap<u32, (String, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return HashMap::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let tid: u32 = task.file_name().to_str()?.parse().ok()?;
            let (name, f) = stat_fields(&format!("/proc/{pid}/task/{tid}/stat"))?;
            Some((tid, (name, f.get(10)? + f.get(11)?)))
        })
        .collect()
}

/// Where a process's CPU went between two [`thread_ticks`] readings: ticks by thread
/// name, most first (`tokio-runtime-w 120, surrealkv 30`).
pub fn busiest_threads(
    before: &HashMap<u32, (String, u64)>,
    after: &HashMap<u32, (String, u64)>,
) -> String {
    let mut by_name: HashMap<&str, u64> = HashMap::new();
    for (tid, (name, ticks)) in after {
        let earlier = before.get(tid).map_or(0, |(_, t)| *t);
        *by_name.entry(name.as_str()).or_default() += ticks.saturating_sub(earlier);
    }
    let mut named: Vec<(&str, u64)> = by_name.into_iter().filter(|(_, t)| *t > 0).collect();
    named.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if named.is_empty() {
        return "none".into();
    }
    named
        .iter()
        .map(|(name, ticks)| format!("{name} {ticks}"))
        .collect::<Vec<_>>()
        .join(", ")
}
