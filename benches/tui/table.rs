//! Timing statistics and plain-text tables for the TUI benchmark.

use std::time::Duration;

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

/// A table of text cells; the first column is aligned left, the others right.
pub struct Table<const N: usize> {
    header: [String; N],
    rows: Vec<[String; N]>,
}

impl<const N: usize> Table<N> {
    pub fn new(header: [&str; N]) -> Self {
        Self {
            header: header.map(String::from),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: [String; N]) {
        self.rows.push(cells);
    }

    pub fn print(&self) {
        let mut widths = [0usize; N];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String; N]| {
            let parts: Vec<String> = cells
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            format!("| {} |", parts.join(" | "))
        };
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
        println!("{}", line(&self.header));
        println!("|{}|", rule.join("|"));
        for row in &self.rows {
            println!("{}", line(row));
        }
    }
}

impl Table<6> {
    /// A row of `name`, count, median, p90, p99 and max in milliseconds.
    pub fn stats_row(&mut self, name: &str, stats: &Stats) {
        self.row([
            name.to_string(),
            stats.len().to_string(),
            format!("{:.3}", ms(stats.median())),
            format!("{:.3}", ms(stats.percentile(0.90))),
            format!("{:.3}", ms(stats.percentile(0.99))),
            format!("{:.3}", ms(stats.max())),
        ]);
    }
}
