//! What the benchmarks share for their figures: timing statistics, numbers from the
//! environment, and the machine's load.

use std::time::Duration;

use anyhow::{Context, Result, anyhow};

/// Samples, sorted.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    sorted: Vec<Duration>,
}

impl Stats {
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self { sorted: samples }
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Nearest-rank percentile.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (p * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    pub fn median(&self) -> Duration {
        self.percentile(0.50)
    }

    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    pub fn describe(&self) -> String {
        format!(
            "n {}  median {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            self.len(),
            ms(self.median()),
            ms(self.percentile(0.90)),
            ms(self.percentile(0.99)),
            ms(self.max()),
        )
    }

    pub fn describe_short(&self) -> String {
        format!(
            "median {:.1} µs, p99 {:.1} µs",
            self.median().as_secs_f64() * 1e6,
            self.percentile(0.99).as_secs_f64() * 1e6,
        )
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A whole number from the environment variable `name`, or `default` when it is unset.
pub fn env_number(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .with_context(|| format!("{name}={text:?} is not a whole number")),
        Err(_) => Ok(default),
    }
}

/// The first three fields of `/proc/loadavg`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// utime + stime of a process, in clock ticks.
pub fn proc_stat(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces): state is the first, utime
    // the 12th and stime the 13th.
    let rest = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| anyhow!("/proc/{pid}/stat has no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/stat has no field {i}"))
    };
    Ok(field(11)? + field(12)?)
}
