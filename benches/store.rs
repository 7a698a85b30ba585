//! Store benchmark: the embedded database at the sizes the storage limits are about, on a
//! store of its own in a temp folder (the engine's default 8 MiB write buffer).
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench store
//! ```
//!
//! Environment:
//! - `CRU_BENCH_PURGE_ENTRIES`: transcript entries of the deleted session (default 50,000).
//! - `CRU_BENCH_PURGE_WORDS`: words per entry (default 40), drawn from 20,000.
//! - `CRU_BENCH_STACK_MIB`: how far the context stack grows (default 12).
//!
//! Phases:
//! 1. Purge: a session's transcript is written (500 entries a transaction) and merged into
//!    the search index; the session is deleted, and its purge (`purge_deleted`: ranges of
//!    keys, 2,000 records a transaction) is timed, wall and CPU (the process's, so the
//!    engine's index merging on its other threads counts), then the index merging what
//!    the purge removed. Then the same with the purge before this one, for comparison: a
//!    query for the next 1,000 ids through the session's index, and a delete of those ids,
//!    per transaction.
//! 2. Context stack: 256 KiB agent messages pushed one change at a time until the stack
//!    holds `CRU_BENCH_STACK_MIB`; the first and last pushes' times, then a reset of all
//!    of it.
//! 3. Search index: 800 entries of 800 words no other entry has, 20 a transaction: how
//!    many changes wait to be merged when the last is written, and how long merging them
//!    takes (each compaction round is larger than the write buffer).
//!
//! Exits non-zero when something fails or is left behind.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failure should stop the run

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use crucible::config::StoreConfig;
use crucible::context::{ContextOp, ContextStack, Message};
use crucible::protocol::{EntryKind, TranscriptEntry};
use crucible::store::{GitLeftovers, Store, StoredContext};
use serde_json::json;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nstore benchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn env_number(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(text) => Ok(text.trim().replace('_', "").parse()?),
        Err(_) => Ok(default),
    }
}

async fn run() -> Result<()> {
    let entries = env_number("CRU_BENCH_PURGE_ENTRIES", 50_000)?;
    let words = env_number("CRU_BENCH_PURGE_WORDS", 40)? as usize;
    let stack_mib = env_number("CRU_BENCH_STACK_MIB", 12)?;
    let build = if cfg!(debug_assertions) {
        "a debug build"
    } else {
        "release"
    };
    println!("store benchmark ({build}, the engine's default 8 MiB write buffer)\n");
    println!("1. purge of a deleted session: {entries} entries of {words} words");
    let new = purge(entries, words, Purge::Ranges).await?;
    let old = purge(entries, words, Purge::Queries).await?;
    println!(
        "   purge_deleted: {}; the earlier purge: {} ({:.1}x the wall time, {:.1}x the CPU)",
        new.line(),
        old.line(),
        old.wall.as_secs_f64() / new.wall.as_secs_f64(),
        old.cpu / new.cpu
    );
    println!("\n2. context stack to {stack_mib} MiB, 256 KiB a change");
    stack(stack_mib).await?;
    println!("\n3. search index: 800 entries of 800 new words, 20 a transaction");
    index().await?;
    Ok(())
}

/// This process's CPU time so far, user and system, in seconds.
fn cpu() -> f64 {
    // SAFETY: getrusage writes the struct it is given, which is zeroed and ours.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// `count` words from a vocabulary of 20,000, from `seed`.
fn text(seed: u64, count: usize) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(count * 7);
    for _ in 0..count {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut w = x % 20_000;
        for _ in 0..6 {
            out.push((b'a' + (w % 26) as u8) as char);
            w /= 26;
        }
        out.push(' ');
    }
    out
}

fn entry(session: &str, seq: u64, text: String) -> TranscriptEntry {
    TranscriptEntry {
        session_id: session.into(),
        seq,
        at: "2026-11-27T10:00:00Z".into(),
        kind: EntryKind::Message,
        text: Some(text),
        tool_call_id: None,
        status: None,
    }
}

async fn open(dir: &std::path::Path) -> Result<Store> {
    Ok(Store::open(&StoreConfig::default(), &dir.join("db")).await?)
}

/// Waits until the search indexes hold no change left to merge (at most `limit`).
async fn merged(store: &Store, limit: Duration) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let backlog = store.search_backlog().await?;
        if backlog.iter().all(|(_, n)| *n == 0) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            bail!("the search index still has changes to merge after {limit:?}: {backlog:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(Clone, Copy)]
enum Purge {
    /// `purge_deleted`.
    Ranges,
    /// What it replaced: ids through the session's index, then a delete of those.
    Queries,
}

struct Timed {
    wall: Duration,
    cpu: f64,
    merge: Duration,
}

impl Timed {
    fn line(&self) -> String {
        format!(
            "{:.1} s ({:.1} s CPU), merged {:.1} s after",
            self.wall.as_secs_f64(),
            self.cpu,
            self.merge.as_secs_f64()
        )
    }
}

async fn purge(entries: u64, words: usize, how: Purge) -> Result<Timed> {
    let tmp = tempfile::tempdir()?;
    let store = open(tmp.path()).await?;
    let started = Instant::now();
    for first in (1..=entries).step_by(500) {
        let batch: Vec<TranscriptEntry> = (first..(first + 500).min(entries + 1))
            .map(|seq| entry("gone", seq, text(seq, words)))
            .collect();
        store.records().append_transcript(&batch).await?;
    }
    store
        .records()
        .append_transcript(&[entry("kept", 1, text(0, words))])
        .await?;
    let written = started.elapsed();
    let merge = merged(&store, Duration::from_secs(600)).await?;
    if matches!(how, Purge::Ranges) {
        println!(
            "   written in {:.1} s, merged into the index {:.1} s after",
            written.as_secs_f64(),
            merge.as_secs_f64()
        );
    }
    store
        .records()
        .delete_session("gone", &GitLeftovers::default())
        .await?;
    let (wall, cpu_before) = (Instant::now(), cpu());
    match how {
        Purge::Ranges => store.records().purge_deleted("gone").await?,
        Purge::Queries => loop {
            let out = store
                .query(
                    "LET $ids = (SELECT VALUE id FROM transcript WHERE session_id = $id LIMIT 1000);
                     DELETE $ids RETURN NONE;
                     RETURN array::len($ids);",
                    json!({"id": "gone"}),
                )
                .await?;
            if out.last().and_then(serde_json::Value::as_u64).unwrap_or(0) < 1000 {
                break;
            }
        },
    }
    let (wall, cpu) = (wall.elapsed(), cpu() - cpu_before);
    let merge = merged(&store, Duration::from_secs(600)).await?;
    let left = store.records().transcript("gone", 0, 10).await?;
    let kept = store.records().transcript("kept", 0, 10).await?;
    if !left.is_empty() || kept.len() != 1 {
        bail!(
            "the purge left {} entries and kept {} of 1",
            left.len(),
            kept.len()
        );
    }
    store.close().await;
    Ok(Timed { wall, cpu, merge })
}

async fn stack(mib: u64) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = open(tmp.path()).await?;
    let mut context = StoredContext {
        stack: ContextStack::new("system"),
        fresh_start: false,
        history_len: 0,
    };
    store.contexts().save("s", &context).await?;
    let message = "abcdefgh".repeat(32 * 1024);
    let pushes = mib * 4;
    let mut times = Vec::new();
    for i in 0..pushes {
        let text = format!("{i}: {message}");
        let change = context
            .stack
            .apply(ContextOp::Push(Message::Agent { text }))?;
        let started = Instant::now();
        context.history_len = store.contexts().save_change("s", &context, &change).await?;
        times.push(started.elapsed());
    }
    let ms = |d: &[Duration]| {
        d.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / d.len().max(1) as f64
    };
    let ten = times.len().min(10);
    println!(
        "   {pushes} pushes: the first ten {:.1} ms each, the last ten {:.1} ms each",
        ms(&times[..ten]),
        ms(&times[times.len() - ten..])
    );
    let started = Instant::now();
    let reset = context.stack.apply(ContextOp::Reset)?;
    context.history_len = store.contexts().save_change("s", &context, &reset).await?;
    let reset_took = started.elapsed();
    let started = Instant::now();
    let back = store.contexts().load("s").await?;
    println!(
        "   reset of {} entries: {:.0} ms ({} history records in all); read back in {:.0} ms",
        reset.removed.len(),
        reset_took.as_secs_f64() * 1000.0,
        context.history_len,
        started.elapsed().as_secs_f64() * 1000.0
    );
    if back.as_ref() != Some(&context) {
        bail!("the stack did not read back as stored");
    }
    if let Some(why) = store.writes_refused() {
        bail!("the store stopped taking writes: {why}");
    }
    store.close().await;
    Ok(())
}

async fn index() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let store = open(tmp.path()).await?;
    let started = Instant::now();
    let mut seq = 0;
    for batch in 0..40u64 {
        let entries: Vec<TranscriptEntry> = (0..20u64)
            .map(|i| {
                seq += 1;
                // Words of seven letters, from far more than the vocabulary above.
                let mut x = (batch * 1000 + i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut words = String::new();
                for _ in 0..800 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let mut w = x;
                    for _ in 0..7 {
                        words.push((b'a' + (w % 26) as u8) as char);
                        w /= 26;
                    }
                    words.push(' ');
                }
                entry("s", seq, words)
            })
            .collect();
        store.records().append_transcript(&entries).await?;
    }
    let written = started.elapsed();
    let pending: usize = store.search_backlog().await?.iter().map(|(_, n)| n).sum();
    let merge = merged(&store, Duration::from_secs(600)).await?;
    println!(
        "   written in {:.1} s with {pending} changes waiting; all merged {:.1} s after",
        written.as_secs_f64(),
        merge.as_secs_f64()
    );
    store.close().await;
    Ok(())
}
