//! The figures of each size, and the table that sets them beside the targets (issue
//! "Scale"). Printed, never asserted.

use std::time::Duration;

use super::figures::{Stats, ms};

/// What the run measured.
#[derive(Default)]
pub struct Figures {
    /// `cru session list --json` with no session: its fixed cost.
    pub empty_list: Option<Stats>,
    pub sizes: Vec<SizeFigures>,
}

/// What one size measured.
pub struct SizeFigures {
    pub size: usize,
    /// `cru session list --json`, spawn to exit.
    pub list: Stats,
    /// The real workbench: spawn to the populated frame.
    pub populated: Stats,
    pub rss_kib_per_idle_session: f64,
    /// Daemon clock ticks over the idle window, and its length.
    pub idle_ticks: u64,
    pub idle_window: Duration,
    /// From every session idle to the daemon quiet (or the limit).
    pub settled: Duration,
    pub idle_ms_per_sec_per_session: f64,
    pub streaming: usize,
    pub stream_ms_per_sec_per_session: f64,
    pub event_to_frame_p99_ms: f64,
    /// `session.create` → ready, of the sessions created to reach this size.
    pub to_ready: Stats,
    pub created: usize,
    pub create_rate: f64,
    /// Creating the sessions (to ready and idle).
    pub creating: Duration,
    /// The whole size, creating included.
    pub took: Duration,
}

/// A target of the table at a size it names, `—` at others.
fn target(row: usize, size: usize) -> &'static str {
    const TARGETS: [[&str; 4]; 4] = [
        ["≤ 10 ms", "≤ 15 ms", "≤ 40 ms", "≤ 80 ms"],
        ["≤ 15 ms", "≤ 25 ms", "≤ 60 ms", "≤ 100 ms"],
        ["—", "≤ 512 KiB", "≤ 512 KiB", "≤ 512 KiB"],
        ["0", "0", "0", "0"],
    ];
    match [10, 100, 500, 1000].iter().position(|&s| s == size) {
        Some(column) => TARGETS[row][column],
        None => "—",
    }
}

/// `1,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn print(figures: &Figures, load: &str) {
    let sizes = &figures.sizes;
    println!("\nthe table (issue \"Scale\"): measured (target); load average {load}");
    if let Some(empty) = &figures.empty_list {
        println!(
            "(`cru session list --json` with no session, its fixed cost: p50 {:.1} ms, p99 \
             {:.1} ms)",
            ms(empty.median()),
            ms(empty.percentile(0.99))
        );
    }
    let header: Vec<String> = sizes.iter().map(|f| thousands(f.size)).collect();
    println!("| figure | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(sizes.len()));
    let row = |name: &str, cell: &dyn Fn(&SizeFigures) -> String| {
        let cells: Vec<String> = sizes.iter().map(cell).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    row("`cru session list --json` p50", &|f| {
        format!("{:.1} ms ({})", ms(f.list.median()), target(0, f.size))
    });
    row("`cru session list --json` p99", &|f| {
        format!("{:.1} ms", ms(f.list.percentile(0.99)))
    });
    row("first populated frame p50", &|f| {
        format!("{:.1} ms ({})", ms(f.populated.median()), target(1, f.size))
    });
    row("first populated frame p99", &|f| {
        format!("{:.1} ms", ms(f.populated.percentile(0.99)))
    });
    row("daemon RSS per idle session", &|f| {
        format!(
            "{:.0} KiB ({})",
            f.rss_kib_per_idle_session,
            target(2, f.size)
        )
    });
    row("daemon CPU with all idle", &|f| {
        format!(
            "{} ticks in {} s = {:.3} ms/s per session, settled after {:.0} s ({})",
            f.idle_ticks,
            f.idle_window.as_secs(),
            f.idle_ms_per_sec_per_session,
            f.settled.as_secs_f64(),
            target(3, f.size)
        )
    });
    row("daemon CPU per streaming session", &|f| {
        format!(
            "{:.2} ms/s ({} streaming)",
            f.stream_ms_per_sec_per_session, f.streaming
        )
    });
    row("event-to-frame p99 while streaming", &|f| {
        format!(
            "{:.1} ms ({} streaming; ≤ 20 ms)",
            f.event_to_frame_p99_ms, f.streaming
        )
    });
    row("`session.create` → ready p50 / p99", &|f| {
        format!(
            "{:.0} / {:.0} ms ({} created at {:.1}/s answered)",
            ms(f.to_ready.median()),
            ms(f.to_ready.percentile(0.99)),
            f.created,
            f.create_rate
        )
    });
    row("time taken (creating)", &|f| {
        format!(
            "{:.0} s ({:.0} s)",
            f.took.as_secs_f64(),
            f.creating.as_secs_f64()
        )
    });
}
