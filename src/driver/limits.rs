//! Resource limits on an agent's environment: memory, CPUs and processes. Each is put
//! in force the strongest way this machine allows, and said so: a cgroup of its own
//! (v1 controllers, or v2 where they are delegated), else a per-process rlimit or CPU
//! affinity, else reported as not enforced. Nothing is claimed that is not applied.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::protocol::Confinement;

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The limits of one environment; dropping it removes its cgroups (once empty).
#[derive(Debug, Default)]
pub struct Limits {
    /// Cgroup folders made for this environment, removed on drop.
    made: Vec<PathBuf>,
    /// Open `cgroup.procs` files: the child writes itself into each before it starts.
    procs: Vec<File>,
    /// RLIMIT_AS, in bytes.
    address_space: Option<u64>,
    /// RLIMIT_NPROC.
    nproc: Option<u64>,
    /// Run on the first N CPUs.
    affinity: Option<usize>,
    described: Vec<String>,
    /// The memory cgroup, when the memory limit is one: what the kernel's OOM killer
    /// did in it is read there.
    memory_dir: Option<PathBuf>,
}

impl Limits {
    /// Puts the spec's limits in force for processes started with [`Limits::pre_exec`];
    /// `name` names the cgroups (unique per environment).
    pub fn apply(spec: &Confinement, name: &str) -> Limits {
        let mut limits = Limits::default();
        let cgroups = Cgroups::discover();
        if let Some(mb) = spec.memory {
            let bytes = mb.saturating_mul(1024 * 1024);
            let v1 = [
                ("memory.limit_in_bytes", bytes.to_string()),
                ("memory.memsw.limit_in_bytes", bytes.to_string()),
            ];
            let v2 = [
                ("memory.max", bytes.to_string()),
                ("memory.swap.max", "0".into()),
            ];
            match limits.cgroup(&cgroups, "memory", name, &v1, &v2) {
                Some(how) => limits.described.push(format!("memory {mb} MiB ({how})")),
                None => {
                    limits.address_space = Some(bytes);
                    limits.described.push(format!(
                        "memory {mb} MiB (address-space rlimit per process)"
                    ));
                }
            }
        }
        if let Some(n) = spec.pids {
            let v1 = [("pids.max", n.to_string())];
            match limits.cgroup(&cgroups, "pids", name, &v1, &v1) {
                Some(how) => limits.described.push(format!("pids {n} ({how})")),
                // SAFETY: geteuid reads the process's effective user id; it cannot fail.
                None if unsafe { libc::geteuid() } != 0 => {
                    limits.nproc = Some(n);
                    limits
                        .described
                        .push(format!("pids {n} (rlimit: counts all of the user's processes)"));
                }
                None => limits.described.push(format!(
                    "pids {n}: NOT enforced (no writable pids cgroup, and the process rlimit does not bind root)"
                )),
            }
        }
        if let Some(n) = spec.cpus {
            let period: u64 = 100_000;
            let quota = period * u64::from(n);
            let v1 = [
                ("cpu.cfs_period_us", period.to_string()),
                ("cpu.cfs_quota_us", quota.to_string()),
            ];
            let v2 = [("cpu.max", format!("{quota} {period}"))];
            match limits.cgroup(&cgroups, "cpu", name, &v1, &v2) {
                Some(how) => limits.described.push(format!("cpus {n} ({how} quota)")),
                None => {
                    limits.affinity = Some(n as usize);
                    limits.described.push(format!("cpus {n} (CPU affinity)"));
                }
            }
        }
        limits
    }

    /// What is in force, one line per limit.
    pub fn described(&self) -> &[String] {
        &self.described
    }

    /// How many processes the kernel's OOM killer has ended in the memory cgroup
    /// (`None` without one).
    pub fn oom_kills(&self) -> Option<u64> {
        oom_kills_in(self.memory_dir.as_deref()?)
    }

    /// Makes the cgroup for `controller` and writes its settings; says which kind it
    /// used, or `None` when no writable cgroup takes them (then nothing is left made).
    fn cgroup(
        &mut self,
        cgroups: &Cgroups,
        controller: &str,
        name: &str,
        v1: &[(&str, String)],
        v2: &[(&str, String)],
    ) -> Option<&'static str> {
        let tries = [
            (
                cgroups
                    .v1
                    .iter()
                    .find(|(c, _)| c == controller)
                    .map(|(_, d)| d.clone()),
                v1,
                "cgroup v1",
            ),
            (cgroups.v2.clone(), v2, "cgroup v2"),
        ];
        for (parent, settings, how) in tries {
            let Some(parent) = parent else { continue };
            let dir = parent.join(name);
            let made = !dir.exists();
            if made && std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let written = settings.iter().enumerate().all(|(i, (file, value))| {
                let path = dir.join(file);
                // Swap accounting is optional: its file may be absent.
                (i > 0 && !path.exists()) || std::fs::write(&path, value).is_ok()
            });
            let procs = File::options().write(true).open(dir.join("cgroup.procs"));
            match (written, procs) {
                (true, Ok(procs)) => {
                    if controller == "memory" {
                        self.memory_dir = Some(dir.clone());
                    }
                    if made {
                        self.made.push(dir);
                    }
                    self.procs.push(procs);
                    return Some(how);
                }
                _ => {
                    if made {
                        let _ = std::fs::remove_dir(&dir);
                    }
                }
            }
        }
        None
    }

    /// What the child runs before it execs: joins the cgroups, sets the rlimits and
    /// the affinity. Only async-signal-safe calls.
    pub fn pre_exec(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let procs: Vec<i32> = self.procs.iter().map(|f| f.as_raw_fd()).collect();
        let address_space = self.address_space;
        let nproc = self.nproc;
        let affinity = self.affinity;
        move || {
            for fd in &procs {
                // "0" is the writing process itself.
                // SAFETY: writes one byte from a static buffer to a descriptor this
                // closure's owner keeps open; write is async-signal-safe.
                let n = unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) };
                if n != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (resource, value) in [
                (libc::RLIMIT_AS, address_space),
                (libc::RLIMIT_NPROC, nproc),
            ] {
                if let Some(value) = value {
                    let limit = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    // SAFETY: setrlimit reads the struct; it is async-signal-safe.
                    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            if let Some(n) = affinity {
                // SAFETY: cpu_set_t is a plain bit set; all zeros is the empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: as above.
                let mut current: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of::<libc::cpu_set_t>();
                // SAFETY: fills `current`, whose size is passed with it.
                if unsafe { libc::sched_getaffinity(0, size, &mut current) } == 0 {
                    let mut taken = 0;
                    for cpu in 0..libc::CPU_SETSIZE as usize {
                        if taken == n {
                            break;
                        }
                        // SAFETY: `cpu` is below CPU_SETSIZE, inside the set.
                        if unsafe { libc::CPU_ISSET(cpu, &current) } {
                            // SAFETY: as above.
                            unsafe { libc::CPU_SET(cpu, &mut set) };
                            taken += 1;
                        }
                    }
                    // SAFETY: reads `set`, whose size is passed with it.
                    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        }
    }
}

impl Drop for Limits {
    fn drop(&mut self) {
        self.procs.clear();
        if self.made.is_empty() {
            return;
        }
        // A cgroup can be removed once its last process is gone, which may be a moment
        // after the agent's own exit.
        let made = std::mem::take(&mut self.made);
        std::thread::spawn(move || {
            for _ in 0..50 {
                if made.iter().all(|d| remove_cgroup(d)) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            tracing::warn!(?made, "could not remove the environment's cgroups");
        });
    }
}

fn remove_cgroup(dir: &Path) -> bool {
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Where this process's cgroups are, so an environment's are made under them.
struct Cgroups {
    /// v1 controller → this process's folder in its hierarchy.
    v1: Vec<(String, PathBuf)>,
    /// The unified hierarchy's folder, when it has controllers.
    v2: Option<PathBuf>,
}

impl Cgroups {
    fn discover() -> Cgroups {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Self::parse(&own, Path::new(CGROUP_ROOT))
    }

    fn parse(own: &str, root: &Path) -> Cgroups {
        let mut v1 = Vec::new();
        let mut v2 = None;
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let relative = path.trim_start_matches('/');
            if controllers.is_empty() {
                let dir = root.join(relative);
                if root.join("cgroup.controllers").exists() {
                    v2 = Some(dir);
                }
                continue;
            }
            for controller in controllers.split(',') {
                for mount in [controller.to_string(), controllers.to_string()] {
                    let base = root.join(&mount);
                    if base.is_dir() {
                        v1.push((controller.to_string(), base.join(relative)));
                        break;
                    }
                }
            }
        }
        Cgroups { v1, v2 }
    }
}

/// The OOM killer's count in the memory cgroup `dir`: `oom_kill N` in `memory.events`
/// (v2) or `memory.oom_control` (v1).
pub fn oom_kills_in(dir: &Path) -> Option<u64> {
    ["memory.events", "memory.oom_control"]
        .iter()
        .find_map(|file| std::fs::read_to_string(dir.join(file)).ok())
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("oom_kill "))
                .and_then(|n| n.trim().parse().ok())
        })
}

/// The memory cgroup folder of process `pid`, as `/proc/<pid>/cgroup` names it.
pub fn memory_cgroup_of(pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let root = Path::new(CGROUP_ROOT);
    let v1 = text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| root.join("memory").join(path.trim_start_matches('/')))
    });
    v1.or_else(|| {
        let path = text.lines().find_map(|line| line.strip_prefix("0::"))?;
        Some(root.join(path.trim_start_matches('/')))
    })
    .filter(|dir| dir.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_v1_controllers_and_the_unified_folder() {
        let root = tempfile::tempdir().unwrap();
        for dir in ["memory", "pids", "cpu,cpuacct"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        let own = "9:pids:/\n4:memory:/box/1\n3:cpu,cpuacct:/x\n0::/\n";
        let found = Cgroups::parse(own, root.path());
        let get = |c: &str| {
            found
                .v1
                .iter()
                .find(|(n, _)| n == c)
                .map(|(_, d)| d.clone())
        };
        assert_eq!(get("memory"), Some(root.path().join("memory/box/1")));
        assert_eq!(get("pids"), Some(root.path().join("pids/")));
        assert_eq!(get("cpu"), Some(root.path().join("cpu,cpuacct/x")));
        assert_eq!(
            found.v2, None,
            "no cgroup.controllers: the unified tree has none"
        );
    }

    #[test]
    fn a_spec_without_limits_applies_none() {
        let limits = Limits::apply(&Confinement::default(), "crucible-test-none");
        assert!(limits.described().is_empty());
        assert!(limits.procs.is_empty());
    }
}
