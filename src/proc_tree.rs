//! What a session's agent costs the machine: the CPU time and resident memory of its
//! process tree (the agent and everything it started), read from `/proc` in one pass
//! when asked, never sampled in the background.

use std::collections::HashMap;

use crate::protocol::Resources;

/// Every process's parent, CPU ticks and resident pages, as `/proc` showed them once.
#[derive(Debug, Default)]
pub struct ProcTable {
    children: HashMap<u32, Vec<u32>>,
    /// pid → (user + system CPU ticks, resident pages).
    usage: HashMap<u32, (u64, u64)>,
    tick: f64,
    page: u64,
}

impl ProcTable {
    /// Reads `/proc` once.
    pub fn read() -> Self {
        let (tick, page) = units();
        let mut table = ProcTable {
            tick,
            page,
            ..ProcTable::default()
        };
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return table;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some((ppid, ticks, pages)) = parse_stat(&stat) {
                table.children.entry(ppid).or_default().push(pid);
                table.usage.insert(pid, (ticks, pages));
            }
        }
        table
    }

    /// The process tree under `root` (itself included), if it runs.
    pub fn tree(&self, root: u32) -> Option<Resources> {
        self.usage.get(&root)?;
        let (mut ticks, mut pages, mut processes) = (0u64, 0u64, 0u32);
        let mut todo = vec![root];
        while let Some(pid) = todo.pop() {
            if let Some((t, p)) = self.usage.get(&pid) {
                ticks += t;
                pages += p;
                processes += 1;
            }
            if let Some(kids) = self.children.get(&pid) {
                todo.extend(kids.iter().copied().filter(|k| *k != pid));
            }
        }
        Some(Resources {
            cpu_secs: ticks as f64 / self.tick,
            rss_bytes: pages.saturating_mul(self.page),
            processes,
        })
    }
}

/// CPU ticks per second and bytes per page, as `/proc` counts them.
fn units() -> (f64, u64) {
    // SAFETY: sysconf only reads a system constant.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    (tick, page)
}

/// The most processes [`walk`] visits.
const WALK_LIMIT: usize = 10_000;

/// The agent's own process of a session whose recorded agent pid is `pid`: none while
/// that is this daemon (it hosts a command agent between the program's runs), whose tree
/// holds every other session's agents.
pub fn agent_process(pid: Option<u32>) -> Option<u32> {
    pid.filter(|&pid| pid != std::process::id())
}

/// The process tree under `root`, found through each process's list of children
/// (`/proc/<pid>/task/<tid>/children`) without reading the rest of `/proc`: cheap enough
/// to ask for one session every few seconds while its agent works.
pub fn walk(root: u32) -> Option<Resources> {
    let (tick, page) = units();
    let (mut ticks, mut pages, mut processes) = (0u64, 0u64, 0u32);
    let mut todo = vec![root];
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) || seen.len() > WALK_LIMIT {
            continue;
        }
        let Some((_, t, p)) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_stat(&stat))
        else {
            continue;
        };
        ticks += t;
        pages += p;
        processes += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    (processes > 0).then(|| Resources {
        cpu_secs: ticks as f64 / tick,
        rss_bytes: pages.saturating_mul(page),
        processes,
    })
}

/// `(ppid, utime + stime, rss pages)` from a `/proc/<pid>/stat` line. The command name
/// may hold spaces and parentheses: the fields start after its last `)`.
fn parse_stat(stat: &str) -> Option<(u32, u64, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), … utime (14), stime (15), … rss (24).
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let rss: i64 = fields.get(21)?.parse().ok()?;
    Some((ppid, utime + stime, rss.max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_a_strange_name_is_read() {
        let line = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 500 0 0 0 \
                    120 30 0 0 20 0 3 0 99999 123456789 2048 18446744073709551615";
        assert_eq!(parse_stat(line), Some((17, 150, 2048)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_tree_counts_the_process_and_everything_under_it() {
        // This test's process and a child that uses memory.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let table = ProcTable::read();
        let me = table.tree(std::process::id()).unwrap();
        assert!(me.processes >= 2, "{me:?}");
        assert!(me.rss_bytes > 1024 * 1024, "{me:?}");
        let alone = table.tree(child.id()).unwrap();
        assert_eq!(alone.processes, 1);
        assert!(me.rss_bytes > alone.rss_bytes);
        assert!(table.tree(u32::MAX).is_none());
        // Walked through the children lists, the same tree.
        let walked = walk(std::process::id()).unwrap();
        assert!(walked.processes >= 2, "{walked:?}");
        assert_eq!(walk(child.id()).unwrap().processes, 1);
        assert!(walk(u32::MAX).is_none());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
