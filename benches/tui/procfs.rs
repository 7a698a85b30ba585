//! Process counters from `/proc` for the TUI benchmark: CPU time (utime+stime), per-thread
//! run time (schedstat) and context switches, and small process helpers.

use std::collections::HashMap;

pub use super::process::{alive, clock_ticks};

pub struct Pids {
    pub tui: u32,
    pub daemon: u32,
    pub agents: Vec<u32>,
    pub tmux: u32,
}

/// A process's counters at one moment.
pub struct ProcSample {
    ticks: u64,
    threads: HashMap<u32, ThreadSample>,
}

#[derive(Default, Clone)]
pub struct ThreadSample {
    name: String,
    run_ns: u64,
    voluntary: u64,
    involuntary: u64,
}

/// What a group of processes used between two samples.
#[derive(Debug, Default)]
pub struct Usage {
    pub processes: usize,
    pub alive: usize,
    pub threads: usize,
    pub cpu_ms: f64,
    pub run_ms: f64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub threads_exited: usize,
    /// Threads that woke during the window: their name and wakeups.
    pub woke: Vec<(String, u64)>,
}

pub type Samples = HashMap<u32, ProcSample>;

impl Pids {
    pub fn groups(&self) -> Vec<(String, Vec<u32>)> {
        vec![
            ("cru TUI".into(), vec![self.tui]),
            ("daemon".into(), vec![self.daemon]),
            (format!("{} agents", self.agents.len()), self.agents.clone()),
            ("tmux server (reference)".into(), vec![self.tmux]),
        ]
    }

    pub fn sample(&self) -> Samples {
        self.groups()
            .into_iter()
            .flat_map(|(_, pids)| pids)
            .filter_map(|pid| Some((pid, proc_sample(pid)?)))
            .collect()
    }

    pub fn usage(&self, before: &Samples, after: &Samples) -> Vec<(String, Usage)> {
        let tick_ms = 1000.0 / clock_ticks();
        self.groups()
            .into_iter()
            .map(|(name, pids)| {
                let mut u = Usage {
                    processes: pids.len(),
                    ..Usage::default()
                };
                for pid in pids {
                    let (Some(b), Some(a)) = (before.get(&pid), after.get(&pid)) else {
                        continue;
                    };
                    u.alive += 1;
                    u.threads += a.threads.len();
                    u.cpu_ms += a.ticks.saturating_sub(b.ticks) as f64 * tick_ms;
                    for (tid, t) in &a.threads {
                        let t0 = b.threads.get(tid).cloned().unwrap_or_default();
                        u.run_ms += t.run_ns.saturating_sub(t0.run_ns) as f64 / 1e6;
                        let woke = t.voluntary.saturating_sub(t0.voluntary);
                        u.voluntary += woke;
                        if woke > 0 {
                            let main = if *tid == pid {
                                "the main thread"
                            } else {
                                "tid"
                            };
                            u.woke.push((format!("{} ({main} {tid})", t.name), woke));
                        }
                        u.involuntary += t.involuntary.saturating_sub(t0.involuntary);
                    }
                    u.threads_exited += b
                        .threads
                        .keys()
                        .filter(|t| !a.threads.contains_key(t))
                        .count();
                }
                (name, u)
            })
            .collect()
    }
}

pub fn proc_sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is the first, utime
    // the 12th and stime the 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let mut threads = HashMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let run_ns = std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        threads.insert(
            tid,
            ThreadSample {
                name: std::fs::read_to_string(dir.join("comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_default(),
                run_ns,
                voluntary: field("voluntary_ctxt_switches:"),
                involuntary: field("nonvoluntary_ctxt_switches:"),
            },
        );
    }
    Some(ProcSample { ticks, threads })
}

pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The direct children of a process.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

pub fn kill(pid: u32) {
    // SAFETY: sends a signal to a process this benchmark started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}
