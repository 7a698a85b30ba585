//! Small `/proc` helpers the benchmarks share: the kernel's clock tick, and whether a
//! process still runs.

/// Clock ticks per second, the unit of `/proc/<pid>/stat`'s CPU times.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// Whether `pid` runs (a zombie has exited; only its entry is left).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .is_some_and(|i| !s[i + 1..].trim_start().starts_with('Z'))
    })
}
