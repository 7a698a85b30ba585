//! Plain-text tables for the TUI benchmark (its statistics are `testkit/src/bench/figures.rs`).

pub use crate::figures::{Stats, ms};

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
