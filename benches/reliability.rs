//! Reliability benchmark: a real `cru daemon run` killed with `kill -9` again and again
//! while concurrent writers send durable `inbox.send`s (every acknowledged message must
//! survive), then fuzzed with malformed and hostile protocol lines (every reply must be a
//! well-formed JSON-RPC 2.0 response as PROTOCOL.md documents, and the daemon must live).
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench reliability
//! ```
//!
//! Environment:
//! - `CRU_RELIABILITY_SECS`: seconds for each of the two phases (default 60).
//! - `CRU_RELIABILITY_WRITERS`: concurrent writers in the kill loop (default 8).
//! - `CRU_RELIABILITY_EXE`: the `cru` binary to test (default: the one this build made),
//!   e.g. an older build to compare with.
//!
//! Exits non-zero if an acknowledged send was lost (or altered), if the fuzz found a
//! protocol violation, or if either phase could not run. The equipment is
//! testkit/src/reliability.rs, shared with tests/it/durability.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::reliability;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use reliability::{FuzzReport, KillOptions, KillReport, fuzz, kill_loop};

const DEFAULT_SECS: f64 = 60.0;
const DEFAULT_WRITERS: usize = 8;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("\nreliability benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .ok()
            .with_context(|| format!("{name}={text:?} is not a number")),
        Err(_) => Ok(default),
    }
}

async fn run() -> Result<bool> {
    let secs: f64 = env_number("CRU_RELIABILITY_SECS", DEFAULT_SECS)?;
    let writers: usize = env_number("CRU_RELIABILITY_WRITERS", DEFAULT_WRITERS)?;
    if !(secs > 0.0 && secs <= 24.0 * 3600.0) {
        bail!("CRU_RELIABILITY_SECS must be above 0 and at most a day, not {secs}");
    }
    if writers == 0 {
        bail!("CRU_RELIABILITY_WRITERS must be at least 1");
    }
    let cru = std::env::var_os("CRU_RELIABILITY_EXE")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cru")), PathBuf::from);
    let cru = cru.as_path();
    let phase = Duration::from_secs_f64(secs);
    println!("crucible reliability benchmark");
    println!("  daemon   {}", cru.display());
    println!("  phases   {secs:.0} s each; {writers} writers in the kill loop\n");

    println!("[1] kill -9 loop ({secs:.0} s, {writers} writers)");
    let kill = kill_loop(cru, &KillOptions::duration(phase, writers)).await;
    match &kill {
        Ok(report) => println!("{report}\n"),
        Err(e) => println!("  the kill loop could not run to the end: {e:#}\n"),
    }

    println!("[2] fuzz ({secs:.0} s)");
    let fuzzed = fuzz(cru, phase).await;
    match &fuzzed {
        Ok(report) => println!("{report}\n"),
        Err(e) => println!("  the fuzz could not run: {e:#}\n"),
    }

    Ok(summary(&kill, &fuzzed))
}

/// Prints the table; true when nothing was lost or violated and both phases ran.
fn summary(kill: &Result<KillReport>, fuzzed: &Result<FuzzReport>) -> bool {
    let failed = "FAILED (see above)".to_string();
    let (cycles, acked, lost) = match kill {
        Ok(r) => (
            r.cycles.to_string(),
            r.acknowledged.to_string(),
            lost_cell(r),
        ),
        Err(_) => (failed.clone(), failed.clone(), failed.clone()),
    };
    let (replies, violations) = match fuzzed {
        Ok(r) => (r.replies.to_string(), r.violations.to_string()),
        Err(_) => (failed.clone(), failed),
    };
    let kill_ok = kill.as_ref().is_ok_and(KillReport::ok);
    let fuzz_ok = fuzzed.as_ref().is_ok_and(FuzzReport::ok);
    let rows = [
        ("kill -9 cycles", cycles, ""),
        ("acknowledged sends", acked, ""),
        ("lost acknowledged sends", lost, verdict(kill_ok)),
        ("fuzz replies", replies, ""),
        ("protocol violations", violations, verdict(fuzz_ok)),
    ];
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    println!("SUMMARY");
    println!("| {:<w0$} | {:>w1$} | {:<4} |", "figure", "value", "");
    println!("|{}|{}|------|", "-".repeat(w0 + 2), "-".repeat(w1 + 2));
    for (name, value, verdict) in &rows {
        println!("| {name:<w0$} | {value:>w1$} | {verdict:<4} |");
    }
    kill_ok && fuzz_ok
}

fn lost_cell(report: &KillReport) -> String {
    match report.altered.len() + report.duplicate_ids {
        0 => report.lost.to_string(),
        other => format!("{} (+{other} altered or duplicated)", report.lost),
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "FAIL" }
}
