//! Fleet benchmark: what counting a turn's usage costs (see `testkit/src/bench/accounting.rs`),
//! then full-text search latency over a large transcript. `Store::search`
//! (schema v15's FULLTEXT indexes, BM25-ranked, the matched words marked) on the
//! embedded surrealkv store users run, in this process: no daemon, no socket.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench fleet
//! ```
//!
//! Environment:
//! - `CRU_BENCH_SEARCH_ENTRIES`: transcript entries stored (default 1,000,000; at least
//!   10,000).
//! - `CRU_BENCH_SEARCH_SESSIONS`: sessions they are spread over (default 1,000).
//! - `CRU_BENCH_SEARCH_BATCH`: entries written a transaction (default 500).
//! - `CRU_BENCH_SEARCH_LOG`: what the engine and crucible log, to stderr, as a
//!   `tracing` filter (default `warn`: a failed index compaction shows).
//! - `CRU_BENCH_SEARCH_RUNS`: timed searches per query class (default 200), after up
//!   to [`WARMUP`] untimed ones; a class stops early once its timed runs have taken
//!   `CRU_BENCH_SEARCH_CLASS_SECS` (default 60) and there are at least [`MIN_RUNS`], so
//!   a class whose search takes seconds has fewer runs (its `n` is printed).
//! - `CRU_BENCH_SEARCH_DIR`: keep the store in this folder instead of a temporary one;
//!   a store this benchmark built there before with the same entries and sessions is
//!   reused (phases 1 and 2 are skipped), since the text is the same every time.
//! - `CRU_BENCH_SEARCH_WRITE_BUFFER_MB`: the engine's write buffer (`store.write_buffer_mb`,
//!   default its default); everything else of the store is as users run it.
//! - `CRU_BENCH_SEARCH_HANG_SECS`: how long nothing may finish (a write, a search)
//!   before the run is given up as hung (default 600): the process exits with status 3
//!   and says what it was doing. An engine whose threads block on each other cannot be
//!   interrupted otherwise. With `CRU_BENCH_SEARCH_DIR`, the next run resumes the build
//!   from what the store holds (every acknowledged write is in crucible's journal).
//! - `CRU_BENCH_SEARCH_SQL`: more statements to time in phase 5, separated by `;;`,
//!   with the variables the others have (`$query`, `$session_id`, `$limit`, `$open`,
//!   `$close`); the rows counted are those of the first statement's result.
//!
//! Phases:
//! 1. Build: the entries are made up deterministically and written with
//!    `Store::append_transcript`, [`DEFAULT_BATCH`] to a call (one transaction, fsynced in
//!    crucible's journal), session after session. The text reads like agent output:
//!    words drawn with a Zipf-like frequency from a vocabulary of about 5,000 (English,
//!    code words, made-up identifiers), some joined into `snake_case()` calls, `a::b`
//!    paths and `src/…/….rs` file names, 50 to 400 characters an entry. Needles are
//!    planted at known places (see [`Needles`]): a word in one entry, in 10, in one entry
//!    of 1,000 and in one of 10, two words that are each in one entry of 1,000 but
//!    together in 10. Printed: the time, entries/s, the store's size on disk.
//! 2. Just written: every query class (below) timed on the open store, its cache warm
//!    with what was just written (and the engine possibly still compacting the index).
//! 3. Rest and reopen: once this process has been quiet for a second (the engine's index
//!    compaction done), the store is closed, its size printed, and it is opened again.
//! 4. Reopened: the first search of each class (the engine's cache cold; the OS page
//!    cache may still hold the files), then the timed runs.
//! 5. Where the time goes: `Store::search`'s transcript statement for the common and
//!    the medium word (and the common word within a session), timed through
//!    `Store::query` beside variants of it (the limit a literal, no highlighting, no
//!    ordering, the count alone), and the engine's `EXPLAIN ANALYZE` of it.
//!
//! Each query is `Store::search(query, None, &HitKind::ALL, 20)` (one class keeps to a
//! session). Before a class is timed, its hits are checked: the engine's own count of
//! matching entries against the number planted, and the returned hits against where
//! the needles are. A class that fails the check is flagged and the run fails at the
//! end; latencies are printed beside the target (p99 <= 50 ms at 1,000,000 entries),
//! never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::accounting;
use testkit::bench::figures;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crucible::config::StoreConfig;
use crucible::protocol::{EntryKind, HitKind, SearchHit, TranscriptEntry};
use crucible::store::Store;
use figures::{Stats, env_number, load_average, ms, proc_stat};
use serde_json::json;

const DEFAULT_ENTRIES: u64 = 1_000_000;
const DEFAULT_SESSIONS: u64 = 1_000;
/// Entries a `Store::append_transcript` call writes (one transaction): the most
/// appends the daemon's transcript writer groups into one commit (512).
const DEFAULT_BATCH: u64 = 500;
const DEFAULT_RUNS: u64 = 200;
const DEFAULT_CLASS_SECS: u64 = 60;
/// Untimed searches before a class's timed ones.
const WARMUP: usize = 5;
/// The fewest timed runs of a class, however long they take.
const MIN_RUNS: usize = 3;
/// Hits asked for, as the workbench's search asks.
const LIMIT: u32 = 20;
/// The target of the issue: search p99 at 1,000,000 transcript entries.
const TARGET_P99_MS: f64 = 50.0;
const TARGET_ENTRIES: u64 = 1_000_000;
/// The most times the build reopens the store after a failed write.
const MAX_REOPENS: u32 = 50;
/// Seconds without progress (no write or search finished) before the run is given up.
const DEFAULT_HANG_SECS: u64 = 600;
/// The longest wait for this process to go quiet after the build.
const REST_LIMIT: Duration = Duration::from_secs(600);
/// Marks a folder this benchmark built a store in: `<entries> <sessions>`.
const MARKER: &str = "search-bench.txt";

/// Planted words: none is in the vocabulary, none shares a stem with a word in it.
struct Needles;

impl Needles {
    /// In exactly one entry.
    const UNIQUE: &'static str = "zyxquokka";
    /// In exactly 10 entries, spread over the whole transcript.
    const RARE: &'static str = "quenchbolt";
    /// In one entry of 1,000.
    const MEDIUM: &'static str = "quillmarsh";
    /// In one entry of 10.
    const COMMON: &'static str = "quorumfold";
    /// Each in one entry of 1,000 (not the same ones), and together in 10 more.
    const PAIR: [&'static str; 2] = ["zincamber", "quaylattice"];
    /// In no entry.
    const ABSENT: &'static str = "zzyzxabsent";
}

fn main() -> ExitCode {
    let filter = std::env::var("CRU_BENCH_SEARCH_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    let scratch = std::env::temp_dir().join(format!("cru-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch folder");
    accounting::run(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    println!("\n== search ==");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(10 * 1024 * 1024)
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("\nbenchmark failed: a search did not find what was planted (see ✗ above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("\nbenchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct Settings {
    entries: u64,
    sessions: u64,
    batch: u64,
    runs: usize,
    class_budget: Duration,
    keep: Option<PathBuf>,
    /// Statements timed beside the variants of phase 5.
    extra_sql: Vec<String>,
    /// How long without progress before the run is given up as hung.
    hang_limit: Duration,
    /// The engine's write buffer, when not the default.
    write_buffer_mb: Option<u64>,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let entries = env_number("CRU_BENCH_SEARCH_ENTRIES", DEFAULT_ENTRIES)?;
        let sessions = env_number("CRU_BENCH_SEARCH_SESSIONS", DEFAULT_SESSIONS)?;
        let batch = env_number("CRU_BENCH_SEARCH_BATCH", DEFAULT_BATCH)?.max(1);
        let runs = env_number("CRU_BENCH_SEARCH_RUNS", DEFAULT_RUNS)?;
        let secs = env_number("CRU_BENCH_SEARCH_CLASS_SECS", DEFAULT_CLASS_SECS)?;
        let hang = env_number("CRU_BENCH_SEARCH_HANG_SECS", DEFAULT_HANG_SECS)?;
        if entries < 10_000 {
            bail!("CRU_BENCH_SEARCH_ENTRIES must be at least 10000, not {entries}");
        }
        if sessions == 0 || sessions > entries / 10 {
            bail!("CRU_BENCH_SEARCH_SESSIONS must be 1 to a tenth of the entries, not {sessions}");
        }
        Ok(Self {
            entries,
            sessions,
            batch,
            runs: usize::try_from(runs.max(1)).context("CRU_BENCH_SEARCH_RUNS")?,
            class_budget: Duration::from_secs(secs),
            hang_limit: Duration::from_secs(hang.max(10)),
            write_buffer_mb: match std::env::var("CRU_BENCH_SEARCH_WRITE_BUFFER_MB") {
                Ok(_) => Some(env_number("CRU_BENCH_SEARCH_WRITE_BUFFER_MB", 0)?.max(1)),
                Err(_) => None,
            },
            keep: std::env::var_os("CRU_BENCH_SEARCH_DIR").map(PathBuf::from),
            extra_sql: std::env::var("CRU_BENCH_SEARCH_SQL")
                .unwrap_or_default()
                .split(";;")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        })
    }

    fn marker(&self) -> String {
        format!("{} {}", self.entries, self.sessions)
    }
}

async fn run() -> Result<bool> {
    let settings = Settings::from_env()?;
    println!(
        "search benchmark: {} transcript entries over {} sessions, {} a transaction; load average {}",
        thousands(settings.entries),
        thousands(settings.sessions),
        thousands(settings.batch),
        load_average()
    );
    // Declared first so it is removed last.
    let tmp;
    let folder = match &settings.keep {
        Some(dir) => dir.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("cru-bench-search")
                .tempdir()
                .context("creating a temp dir")?;
            tmp.path().to_path_buf()
        }
    };
    let db = folder.join("db");
    let defaults = StoreConfig::default();
    let config = StoreConfig {
        write_buffer_mb: settings.write_buffer_mb.unwrap_or(defaults.write_buffer_mb),
        ..defaults
    };
    println!(
        "store: embedded surrealkv, cache {} MiB, write buffer {} MiB{}",
        config.cache_mb,
        config.write_buffer_mb,
        if settings.write_buffer_mb.is_some() {
            " (CRU_BENCH_SEARCH_WRITE_BUFFER_MB; not the default)"
        } else {
            " (the defaults)"
        }
    );
    let corpus = Corpus::new(&settings);
    let marker = std::fs::read_to_string(folder.join(MARKER)).unwrap_or_default();
    let built = marker == settings.marker();
    let resuming = marker == format!("building {}", settings.marker());
    let mut all_ok = true;
    watchdog(&settings, &folder);

    let written = if built {
        println!(
            "\n[1] build: reusing the store in {} (built before with the same text)",
            db.display()
        );
        let started = Instant::now();
        let expected = corpus.expected();
        println!(
            "  the text made up again to know where the needles are: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        (expected, None)
    } else {
        if settings.keep.is_some() && !resuming {
            let _ = std::fs::remove_file(folder.join(MARKER));
            for stale in [db.clone(), journal_of(&db)] {
                if stale.exists() {
                    std::fs::remove_dir_all(&stale)
                        .with_context(|| format!("removing {}", stale.display()))?;
                }
            }
        }
        if settings.keep.is_some() {
            std::fs::create_dir_all(&folder)
                .with_context(|| format!("creating {}", folder.display()))?;
            std::fs::write(
                folder.join(MARKER),
                format!("building {}", settings.marker()),
            )
            .context("writing the marker")?;
        }
        println!("\n[1] build: {}", db.display());
        alive("opening the store");
        let store = Store::open(&config, &db)
            .await
            .context("opening the store")?;
        let from = if resuming {
            alive("counting what an earlier run stored");
            let stored = stored_entries(&store).await?;
            println!(
                "  resuming the build an earlier run left: {} entries stored",
                thousands(stored)
            );
            stored
        } else {
            0
        };
        let (store, expected) = build(store, &corpus, &settings, (&config, &db), from).await?;
        print_size("  on disk, the store open", &db);
        println!(
            "\n[2] just written: the store as the build left it (cache warm, index compaction may still be running)"
        );
        let classes = classes(&corpus, &expected);
        let mut figures = Vec::new();
        for class in &classes {
            let (ok, fig) = measure(&store, class, &settings).await?;
            all_ok &= ok;
            figures.push(fig);
        }
        println!("\n[3] rest and reopen");
        rest().await;
        print_size("  on disk, the store open and rested", &db);
        alive("closing the store");
        let started = Instant::now();
        store.close().await;
        println!("  closed in {:.1} s", started.elapsed().as_secs_f64());
        drop(store);
        if settings.keep.is_some() {
            std::fs::create_dir_all(&folder)
                .with_context(|| format!("creating {}", folder.display()))?;
            std::fs::write(folder.join(MARKER), settings.marker()).context("writing the marker")?;
        }
        (expected, Some(figures))
    };
    let (expected, just_written) = written;
    print_size("  on disk, the store closed", &db);
    alive("reopening the store");
    let started = Instant::now();
    let store = Store::open(&config, &db)
        .await
        .context("reopening the store")?;
    println!("  reopened in {:.3} s", started.elapsed().as_secs_f64());

    println!("\n[4] reopened: the first search of each class, then the timed runs");
    let classes = classes(&corpus, &expected);
    let mut reopened = Vec::new();
    for class in &classes {
        let (ok, fig) = measure(&store, class, &settings).await?;
        all_ok &= ok;
        reopened.push(fig);
    }
    println!(
        "\n[5] where the time goes: the transcript statement of Store::search and variants of it"
    );
    variants(&store, Needles::COMMON, None, &settings).await?;
    variants(&store, Needles::MEDIUM, None, &settings).await?;
    variants(
        &store,
        Needles::COMMON,
        Some(&Corpus::session_id(corpus.session)),
        &settings,
    )
    .await?;
    alive("closing the store");
    store.close().await;
    drop(store);

    print_summary(&settings, just_written.as_deref(), &reopened);
    println!(
        "\npeak RSS of this process: {} (load average {})",
        peak_rss(),
        load_average()
    );
    Ok(all_ok)
}

// ---- the text ----

/// A small, fast, deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The most frequent words first: what agents write most (English and code words).
const COMMON_WORDS: &str =
    "the to a of and in is it for this that i fn let with on self file test be now error
    not will use from as an src we return if check run value string build function config
    need new type call read write add at all so can should by result data fix change line
    first then code update mut pub struct impl async await match some none ok err vec
    map path name list state event session agent task tool output input index key module
    crate cargo clippy warning failed passed tests compile import export class method
    field option handle request response server client socket thread lock channel buffer
    stream bytes json parse format print debug trace log info let's look see found seems
    looks like because which there here also only but or when after before into out up
    down one two more each other same just next last still already done make get set try
    keep without where what how why should've would could apply patch diff commit branch
    merge rebase push pull main worktree directory folder open close create delete remove
    rename move copy install version release feature flag default settings timeout retry
    limit count size length offset range start end begin finish wait sleep spawn process
    signal exit status message prompt plan step permission allow deny user";

/// Whether `word` could be mistaken for a needle (or the other way round).
fn near_a_needle(word: &str) -> bool {
    let needles = [
        Needles::UNIQUE,
        Needles::RARE,
        Needles::MEDIUM,
        Needles::COMMON,
        Needles::PAIR[0],
        Needles::PAIR[1],
        Needles::ABSENT,
    ];
    needles
        .iter()
        .any(|n| n.starts_with(&word[..word.len().min(6)]) && word.len() >= 5)
}

/// About 5,000 words, the most frequent first, and the cumulative Zipf weights to draw
/// them with.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    const SIZE: usize = 5_000;
    /// The Zipf exponent: the word of rank r is drawn with weight 1 / r^s.
    const EXPONENT: f64 = 1.0;

    fn new() -> Self {
        let mut seen = HashSet::new();
        let mut words: Vec<String> = Vec::with_capacity(Self::SIZE);
        for w in COMMON_WORDS.split_whitespace() {
            if seen.insert(w.to_string()) {
                words.push(w.to_string());
            }
        }
        // Made-up identifiers from consonant-vowel syllables; no q, x, y, z or j, so
        // none is near a needle.
        let consonants = b"bcdfghklmnprstvw";
        let vowels = b"aeiou";
        let mut rng = Rng(0x5EA5C4);
        while words.len() < Self::SIZE {
            let syllables = 2 + rng.below(3);
            let mut w = String::new();
            for _ in 0..syllables {
                w.push(consonants[rng.below(consonants.len() as u64) as usize] as char);
                w.push(vowels[rng.below(vowels.len() as u64) as usize] as char);
            }
            if rng.below(3) == 0 {
                w.push(consonants[rng.below(consonants.len() as u64) as usize] as char);
            }
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        assert!(
            !words.iter().any(|w| near_a_needle(w)),
            "a vocabulary word is near a needle"
        );
        let mut cumulative = Vec::with_capacity(words.len());
        let mut total = 0.0;
        for rank in 1..=words.len() {
            total += 1.0 / (rank as f64).powf(Self::EXPONENT);
            cumulative.push(total);
        }
        for c in &mut cumulative {
            *c /= total;
        }
        Self { words, cumulative }
    }

    /// A word's rank, drawn.
    fn draw(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cumulative
            .partition_point(|&c| c < u)
            .min(self.words.len() - 1)
    }
}

/// The transcript: which entry is where, what it says, where the needles are.
struct Corpus {
    entries: u64,
    per_session: u64,
    vocabulary: Vocabulary,
    unique_at: u64,
    rare_at: Vec<u64>,
    pair_at: Vec<u64>,
    /// The session the one-session class searches.
    session: u64,
}

/// What the made-up text holds: the entries each search must find.
#[derive(Default)]
struct Expected {
    unique: Vec<(String, u64)>,
    rare: HashSet<(String, u64)>,
    medium: u64,
    common: u64,
    common_and_rare: HashSet<(String, u64)>,
    pair_both: HashSet<(String, u64)>,
    common_in_session: u64,
    /// Entries holding the vocabulary's most frequent word.
    top_word: u64,
}

impl Corpus {
    fn new(settings: &Settings) -> Self {
        let n = settings.entries;
        let tenth = n / 10;
        Self {
            entries: n,
            per_session: n.div_ceil(settings.sessions),
            vocabulary: Vocabulary::new(),
            unique_at: n * 3 / 7,
            rare_at: (0..10).map(|k| k * tenth + 3 + k % 2).collect(),
            pair_at: (0..10).map(|k| k * tenth + 250).collect(),
            session: settings.sessions / 2,
        }
    }

    fn session_id(session: u64) -> String {
        format!("bench-session-{session:05}")
    }

    /// The session and seq of the entry at `g` (0-based, session after session).
    fn place(&self, g: u64) -> (u64, u64) {
        (g / self.per_session, g % self.per_session + 1)
    }

    /// The needles planted in the entry at `g`.
    fn needles(&self, g: u64) -> Vec<&'static str> {
        let mut planted = Vec::new();
        if g == self.unique_at {
            planted.push(Needles::UNIQUE);
        }
        if self.rare_at.contains(&g) {
            planted.push(Needles::RARE);
        }
        if g % 1000 == 7 {
            planted.push(Needles::MEDIUM);
        }
        if g % 10 == 3 {
            planted.push(Needles::COMMON);
        }
        if g % 1000 == 500 || self.pair_at.contains(&g) {
            planted.push(Needles::PAIR[0]);
        }
        if g % 1000 == 501 || self.pair_at.contains(&g) {
            planted.push(Needles::PAIR[1]);
        }
        planted
    }

    /// The entry at `g`, and whether it holds the vocabulary's most frequent word.
    fn entry(&self, g: u64) -> (TranscriptEntry, bool) {
        let mut rng = Rng(g.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xC0FFEE);
        let target = 50 + rng.below(351) as usize;
        let mut pieces: Vec<String> = Vec::new();
        let mut len = 0;
        let mut top = false;
        let mut word = |rng: &mut Rng| {
            let rank = self.vocabulary.draw(rng);
            top |= rank == 0;
            self.vocabulary.words[rank].as_str()
        };
        while len < target {
            let piece = match rng.below(100) {
                0..=4 => {
                    let (a, b) = (word(&mut rng), word(&mut rng));
                    format!("src/{a}/{b}.rs")
                }
                5..=9 => {
                    let (a, b) = (word(&mut rng), word(&mut rng));
                    format!("{a}_{b}()")
                }
                10..=11 => {
                    let (a, b) = (word(&mut rng), word(&mut rng));
                    format!("{a}::{b}")
                }
                12..=15 => {
                    let w = word(&mut rng);
                    format!("{w}.")
                }
                16..=18 => {
                    let w = word(&mut rng);
                    format!("{w},")
                }
                _ => word(&mut rng).to_string(),
            };
            len += piece.len() + 1;
            pieces.push(piece);
        }
        for needle in self.needles(g) {
            let at = rng.below(pieces.len() as u64 + 1) as usize;
            pieces.insert(at, needle.to_string());
        }
        if self.pair_at.contains(&g) {
            // The pair as a phrase: the two words side by side.
            pieces.retain(|p| p != Needles::PAIR[0] && p != Needles::PAIR[1]);
            let at = rng.below(pieces.len() as u64 + 1) as usize;
            pieces.insert(at, format!("{} {}", Needles::PAIR[0], Needles::PAIR[1]));
        }
        let kind = match rng.below(20) {
            0..=9 => EntryKind::Message,
            10..=13 => EntryKind::Thought,
            14..=16 => EntryKind::ToolCall,
            17..=18 => EntryKind::ToolUpdate,
            _ => EntryKind::Plan,
        };
        let (session, seq) = self.place(g);
        let at = chrono::DateTime::from_timestamp(1_780_000_000 + g as i64, 0)
            .expect("a time")
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let tool = matches!(kind, EntryKind::ToolCall | EntryKind::ToolUpdate);
        let entry = TranscriptEntry {
            session_id: Self::session_id(session),
            seq,
            at,
            kind,
            text: Some(pieces.join(" ")),
            tool_call_id: tool.then(|| format!("call-{g}")),
            status: None,
        };
        (entry, top)
    }

    /// What each search should find, from the text alone.
    fn expected(&self) -> Expected {
        let mut expected = Expected::default();
        for g in 0..self.entries {
            let (_, top) = self.entry(g);
            self.tally(g, top, &mut expected);
        }
        expected
    }

    fn tally(&self, g: u64, top: bool, expected: &mut Expected) {
        let needles = self.needles(g);
        let (session, seq) = self.place(g);
        let at = (Self::session_id(session), seq);
        let has = |n: &str| needles.contains(&n);
        if has(Needles::UNIQUE) {
            expected.unique.push(at.clone());
        }
        if has(Needles::RARE) {
            expected.rare.insert(at.clone());
            if has(Needles::COMMON) {
                expected.common_and_rare.insert(at.clone());
            }
        }
        if has(Needles::MEDIUM) {
            expected.medium += 1;
        }
        if has(Needles::COMMON) {
            expected.common += 1;
            if session == self.session {
                expected.common_in_session += 1;
            }
        }
        if has(Needles::PAIR[0]) && has(Needles::PAIR[1]) {
            expected.pair_both.insert(at);
        }
        if top {
            expected.top_word += 1;
        }
    }
}

/// Writes the corpus from entry `from` on (what an earlier run left stops there),
/// `settings.batch` entries a transaction; what it holds. A write the store refuses
/// (it stops taking writes after a storage error) is reported, the store closed and
/// opened again as the daemon's restart would (its journal puts back every acknowledged
/// write), and the build goes on from what it holds, at most [`MAX_REOPENS`] times.
/// Returns the store (the one opened last) and what it holds.
async fn build(
    mut store: Store,
    corpus: &Corpus,
    settings: &Settings,
    (config, db): (&StoreConfig, &Path),
    from: u64,
) -> Result<(Store, Expected)> {
    let batch_size = settings.batch;
    let mut expected = Expected::default();
    for g in 0..from {
        let (_, top) = corpus.entry(g);
        corpus.tally(g, top, &mut expected);
    }
    let started = Instant::now();
    let mut generating = Duration::ZERO;
    let mut longest = Duration::ZERO;
    let mut chars = 0u64;
    let mut reopens = 0;
    // About every twentieth of the build, on a batch's end.
    let step = (corpus.entries / 20).div_ceil(batch_size) * batch_size;
    let mut next_report = from + step;
    let mut last_report = (from, Duration::ZERO);
    let mut g = from;
    while g < corpus.entries {
        let made = Instant::now();
        let end = (g + batch_size).min(corpus.entries);
        let (batch, tops): (Vec<TranscriptEntry>, Vec<bool>) =
            (g..end).map(|i| corpus.entry(i)).unzip();
        generating += made.elapsed();
        alive(&format!("append_transcript of entries {g}..{end}"));
        let sent = Instant::now();
        if let Err(e) = store.records().append_transcript(&batch).await {
            reopens += 1;
            println!(
                "  ✗ append_transcript of entries {g}..{end} failed after {:.1} s: {e}",
                sent.elapsed().as_secs_f64()
            );
            if reopens > MAX_REOPENS {
                bail!("the store refused writes {reopens} times");
            }
            alive("reopening the store after a failed write");
            let reopening = Instant::now();
            store.close().await;
            drop(store);
            store = Store::open(config, db)
                .await
                .context("reopening the store after a failed write")?;
            let stored = stored_entries(&store).await?;
            println!(
                "    reopened in {:.1} s; it holds {} entries; going on from there",
                reopening.elapsed().as_secs_f64(),
                thousands(stored)
            );
            if stored != g {
                bail!("the store holds {stored} entries, not the {g} acknowledged");
            }
            continue;
        }
        longest = longest.max(sent.elapsed());
        for ((i, entry), top) in (g..end).zip(&batch).zip(tops) {
            chars += entry.text.as_ref().map_or(0, |t| t.len() as u64);
            corpus.tally(i, top, &mut expected);
        }
        g = end;
        if g >= next_report || g == corpus.entries {
            let now = started.elapsed();
            let (then_g, then) = last_report;
            println!(
                "  {:>9} entries  {:>7.1} s  {:>7} entries/s so far, {:>7} entries/s over the last {}",
                thousands(g),
                now.as_secs_f64(),
                thousands(rate(g - from, now)),
                thousands(rate(g - then_g, now - then)),
                thousands(g - then_g),
            );
            last_report = (g, now);
            next_report += step;
        }
    }
    if reopens > 0 {
        println!("  the store was reopened {reopens} times after a failed write");
    }
    let written = corpus.entries - from;
    let total = started.elapsed();
    let writing = total.saturating_sub(generating);
    println!(
        "  {} entries written in {:.1} s: {} entries/s ({} entries/s writing alone, the text made up in {:.1} s); \
         the longest append_transcript of {} entries {:.0} ms",
        thousands(written),
        total.as_secs_f64(),
        thousands(rate(written, total)),
        thousands(rate(written, writing)),
        generating.as_secs_f64(),
        thousands(batch_size),
        ms(longest)
    );
    println!(
        "  text: {:.1} MB written, {} characters an entry on average; {} of the entries hold the most frequent word ({:?})",
        chars as f64 / 1e6,
        chars / written.max(1),
        thousands(expected.top_word),
        corpus.vocabulary.words[0]
    );
    Ok((store, expected))
}

/// Transcript entries in the store.
async fn stored_entries(store: &Store) -> Result<u64> {
    let out = store
        .query("SELECT count() AS n FROM transcript GROUP ALL", json!({}))
        .await
        .context("counting the stored entries")?;
    Ok(out
        .first()
        .and_then(|rows| rows.get(0))
        .and_then(|row| row.get("n"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0))
}

// ---- the queries ----

/// What a class's hits must be: the engine counts `count` matching entries, and each
/// hit returned is one of `among` when given.
struct Check {
    count: u64,
    among: Option<HashSet<(String, u64)>>,
}

struct Class {
    name: &'static str,
    query: String,
    session: Option<String>,
    check: Check,
}

fn classes(corpus: &Corpus, e: &Expected) -> Vec<Class> {
    let count = |count: u64| Check { count, among: None };
    let among = |set: &HashSet<(String, u64)>| Check {
        count: set.len() as u64,
        among: Some(set.clone()),
    };
    vec![
        Class {
            name: "unique word (1 entry)",
            query: Needles::UNIQUE.into(),
            session: None,
            check: among(&e.unique.iter().cloned().collect()),
        },
        Class {
            name: "rare word (10 entries)",
            query: Needles::RARE.into(),
            session: None,
            check: among(&e.rare),
        },
        Class {
            name: "medium word (1 in 1,000)",
            query: Needles::MEDIUM.into(),
            session: None,
            check: count(e.medium),
        },
        Class {
            name: "common word (1 in 10)",
            query: Needles::COMMON.into(),
            session: None,
            check: count(e.common),
        },
        Class {
            name: "common AND rare",
            query: format!("{} {}", Needles::COMMON, Needles::RARE),
            session: None,
            check: among(&e.common_and_rare),
        },
        Class {
            name: "two medium words, 10 together",
            query: format!("{} {}", Needles::PAIR[0], Needles::PAIR[1]),
            session: None,
            check: among(&e.pair_both),
        },
        Class {
            name: "common word, one session",
            query: Needles::COMMON.into(),
            session: Some(Corpus::session_id(corpus.session)),
            check: count(e.common_in_session),
        },
        Class {
            name: "no hits",
            query: Needles::ABSENT.into(),
            session: None,
            check: count(0),
        },
        Class {
            name: "most frequent word",
            query: corpus.vocabulary.words[0].clone(),
            session: None,
            check: count(e.top_word),
        },
    ]
}

/// One class's figures.
struct Figure {
    name: &'static str,
    first: Duration,
    stats: Stats,
    matched: u64,
}

/// Checks the class's hits, then times it; whether the check passed.
async fn measure(store: &Store, class: &Class, settings: &Settings) -> Result<(bool, Figure)> {
    let search = || async {
        store
            .search(&class.query, class.session.as_deref(), &HitKind::ALL, LIMIT)
            .await
            .with_context(|| format!("searching {:?}", class.query))
    };
    alive(&format!("searching {:?} ({})", class.query, class.name));
    let started = Instant::now();
    let (hits, broad) = search().await?;
    let first = started.elapsed();
    alive(&format!("counting the matches of {:?}", class.query));
    let (matched, counted_in) = engine_count(store, class).await?;
    alive(&format!("searching {:?} ({})", class.query, class.name));
    let verdict = check(class, &hits, matched);
    let ok = verdict.is_none();
    // The first search warmed a class that takes long enough.
    let warmup = if first >= settings.class_budget / 4 {
        0
    } else {
        WARMUP - 1
    };
    let stats = timed(settings.runs, settings.class_budget, warmup, async || {
        std::hint::black_box(search().await?);
        Ok(())
    })
    .await?;
    println!(
        "  {:<31} {:<24} {} {:>7} match, {:>2} returned{}; first {:>8.1} ms; {}",
        class.name,
        format!("{:?}", class.query),
        if ok { "✓" } else { "✗" },
        thousands(matched),
        hits.len(),
        if broad {
            " (broad: not all ranked)"
        } else {
            ""
        },
        ms(first),
        stats.describe()
    );
    if let Some(why) = verdict {
        println!("      ✗ {why}");
    }
    if let Some(hit) = hits.first() {
        println!(
            "      best hit {}#{} score {:.2}: {:?} (counting the matches took {:.0} ms)",
            hit.session_id,
            hit.seq.unwrap_or(0),
            hit.score,
            hit.snippet.chars().take(90).collect::<String>(),
            ms(counted_in)
        );
    }
    Ok((
        ok,
        Figure {
            name: class.name,
            first,
            stats,
            matched,
        },
    ))
}

/// Times `op`: up to `warmup` untimed runs while they take less than a quarter of
/// `budget`, then up to `runs` timed ones, stopping once `budget` is spent and at least
/// [`MIN_RUNS`] were timed.
async fn timed(
    runs: usize,
    budget: Duration,
    warmup: usize,
    mut op: impl AsyncFnMut() -> Result<()>,
) -> Result<Stats> {
    let warming = Instant::now();
    for _ in 0..warmup {
        if warming.elapsed() >= budget / 4 {
            break;
        }
        op().await?;
        progress();
    }
    let mut samples = Vec::with_capacity(runs);
    let started = Instant::now();
    while samples.len() < runs && (samples.len() < MIN_RUNS || started.elapsed() < budget) {
        let run = Instant::now();
        op().await?;
        samples.push(run.elapsed());
        progress();
    }
    Ok(Stats::new(samples))
}

/// The entries the engine finds for the class (all of them, not `LIMIT`), and how
/// long counting took.
async fn engine_count(store: &Store, class: &Class) -> Result<(u64, Duration)> {
    let within = if class.session.is_some() {
        "AND session_id = $session_id"
    } else {
        ""
    };
    let sql =
        format!("SELECT count() AS n FROM transcript WHERE text @1@ $query {within} GROUP ALL");
    let started = Instant::now();
    let out = store
        .query(
            &sql,
            json!({"query": class.query, "session_id": class.session}),
        )
        .await
        .context("counting the matches")?;
    let n = out
        .first()
        .and_then(|rows| rows.get(0))
        .and_then(|row| row.get("n"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    Ok((n, started.elapsed()))
}

/// Why the hits are not what was planted, if they are not.
fn check(class: &Class, hits: &[SearchHit], matched: u64) -> Option<String> {
    let Check { count, among } = &class.check;
    if matched != *count {
        return Some(format!(
            "the engine matches {matched} entries; {count} were planted"
        ));
    }
    let want = (*count).min(u64::from(LIMIT)) as usize;
    if hits.len() != want {
        return Some(format!("{} hits returned, not {want}", hits.len()));
    }
    for hit in hits {
        if hit.kind != HitKind::Transcript {
            return Some(format!(
                "a {:?} hit, though only the transcript has text",
                hit.kind
            ));
        }
        if hit.marks.is_empty() {
            return Some(format!("no word marked in {:?}", hit.snippet));
        }
        if let Some(session) = &class.session
            && &hit.session_id != session
        {
            return Some(format!("a hit in {}, outside {session}", hit.session_id));
        }
        if let Some(among) = among
            && !among.contains(&(hit.session_id.clone(), hit.seq.unwrap_or(0)))
        {
            return Some(format!(
                "{}#{:?} is not where the needle was planted",
                hit.session_id, hit.seq
            ));
        }
    }
    if hits.windows(2).any(|w| w[0].score < w[1].score) {
        return Some("hits are not best first".into());
    }
    None
}

// ---- where the time goes ----

/// The transcript statement of `Store::search` (src/store/search.rs) and variants of it,
/// each timed for `word` through `Store::query`; the first as the engine plans and runs
/// it (`EXPLAIN ANALYZE`).
async fn variants(
    store: &Store,
    word: &str,
    session: Option<&str>,
    settings: &Settings,
) -> Result<()> {
    let within = if session.is_some() {
        "AND session_id = $session_id"
    } else {
        ""
    };
    let select = "SELECT session_id, seq, kind, at, search::score(1) AS score, \
                  search::highlight($open, $close, 1) AS marked FROM transcript";
    let plain = "SELECT session_id, seq, kind, at, search::score(1) AS score FROM transcript";
    let mut variants: Vec<(&str, String)> = vec![
        (
            "as Store::search runs it (ORDER BY score, LIMIT $limit)",
            format!("{select} WHERE text @1@ $query {within} ORDER BY score DESC LIMIT $limit"),
        ),
        (
            "LIMIT 20 written in the statement (a literal)",
            format!("{select} WHERE text @1@ $query {within} ORDER BY score DESC LIMIT {LIMIT}"),
        ),
        (
            "no search::highlight, LIMIT $limit",
            format!("{plain} WHERE text @1@ $query {within} ORDER BY score DESC LIMIT $limit"),
        ),
        (
            "no search::highlight, LIMIT 20 literal",
            format!("{plain} WHERE text @1@ $query {within} ORDER BY score DESC LIMIT {LIMIT}"),
        ),
        (
            "no ORDER BY: the first 20 matches, highlighted",
            format!("{select} WHERE text @1@ $query {within} LIMIT {LIMIT}"),
        ),
        (
            "count() of the matches (GROUP ALL)",
            format!("SELECT count() FROM transcript WHERE text @1@ $query {within} GROUP ALL"),
        ),
        (
            "ids of the matches only",
            format!("SELECT VALUE id FROM transcript WHERE text @1@ $query {within}"),
        ),
    ];
    for sql in &settings.extra_sql {
        variants.push(("CRU_BENCH_SEARCH_SQL", sql.clone()));
    }
    let vars = json!({
        "query": word,
        "session_id": session,
        "limit": LIMIT,
        "open": "\u{2}",
        "close": "\u{3}",
    });
    let runs = settings.runs.min(20);
    let budget = settings.class_budget / 3;
    println!(
        "  {word:?}{}: up to {runs} runs each",
        session.map_or(String::new(), |s| format!(" within {s}"))
    );
    for (what, sql) in &variants {
        alive(&format!("{what}, {word:?}"));
        let mut rows = 0;
        let stats = timed(runs, budget, 1, async || {
            let out = store.query(sql, vars.clone()).await?;
            rows = out
                .first()
                .and_then(serde_json::Value::as_array)
                .map_or(0, Vec::len);
            Ok(())
        })
        .await?;
        println!("    {what:<56} {rows:>7} rows  {}", stats.describe());
        if *what == "CRU_BENCH_SEARCH_SQL" {
            println!("      {sql}");
        }
    }
    alive(&format!("EXPLAIN ANALYZE, {word:?}"));
    let explained = store
        .query(&format!("EXPLAIN ANALYZE {}", variants[0].1), vars.clone())
        .await
        .context("EXPLAIN ANALYZE")?;
    println!("    EXPLAIN ANALYZE of the first:");
    for value in &explained {
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        for line in text.lines() {
            println!("      {line}");
        }
    }
    Ok(())
}

// ---- the summary ----

fn print_summary(settings: &Settings, just_written: Option<&[Figure]>, reopened: &[Figure]) {
    println!(
        "\nsummary: Store::search(query, …, &HitKind::ALL, {LIMIT}) over {} transcript entries (target: p99 <= {TARGET_P99_MS} ms at {})",
        thousands(settings.entries),
        thousands(TARGET_ENTRIES)
    );
    println!(
        "| class | matches | just written p50 / p99 | reopened first | reopened p50 / p90 / p99 / max | p99 <= {TARGET_P99_MS} ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (i, f) in reopened.iter().enumerate() {
        let warm = just_written
            .and_then(|w| w.get(i))
            .map_or("(reused store)".to_string(), |w| {
                format!(
                    "{:.1} / {:.1} ms",
                    ms(w.stats.median()),
                    ms(w.stats.percentile(0.99))
                )
            });
        let p99 = ms(f.stats.percentile(0.99));
        println!(
            "| {} | {} | {warm} | {:.1} ms | {:.1} / {:.1} / {:.1} / {:.1} ms (n {}) | {} |",
            f.name,
            thousands(f.matched),
            ms(f.first),
            ms(f.stats.median()),
            ms(f.stats.percentile(0.90)),
            p99,
            ms(f.stats.max()),
            f.stats.len(),
            if p99 <= TARGET_P99_MS { "yes" } else { "NO" }
        );
    }
}

// ---- the machine ----

/// What the benchmark is doing, and when it last made progress (ms since [`BEGUN`]).
static DOING: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
static PROGRESS_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static BEGUN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Notes progress, and what comes next.
fn alive(doing: &str) {
    progress();
    *DOING.lock().unwrap_or_else(|e| e.into_inner()) = doing.to_string();
}

/// Notes progress in what [`alive`] last said.
fn progress() {
    let begun = BEGUN.get_or_init(Instant::now);
    PROGRESS_MS.store(
        begun.elapsed().as_millis() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Ends the process when nothing has made progress for `CRU_BENCH_SEARCH_HANG_SECS`:
/// an engine that hangs (its threads blocked on each other's locks) cannot be
/// interrupted from the runtime it blocks. What was acknowledged is in crucible's
/// journal, so a run with the same `CRU_BENCH_SEARCH_DIR` resumes the build.
/// A temporary `folder` is removed first (the exit skips destructors).
fn watchdog(settings: &Settings, folder: &Path) {
    let limit = settings.hang_limit;
    let resumable = settings.keep.is_some();
    let temporary = (!resumable).then(|| folder.to_path_buf());
    alive("starting");
    std::thread::spawn(move || {
        let begun = *BEGUN.get_or_init(Instant::now);
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let last =
                Duration::from_millis(PROGRESS_MS.load(std::sync::atomic::Ordering::Relaxed));
            if begun.elapsed().saturating_sub(last) > limit {
                let doing = DOING.lock().unwrap_or_else(|e| e.into_inner()).clone();
                eprintln!(
                    "\nbenchmark stopped: no progress for {} s during {doing} (the process used {} ms of CPU in the last 10 s); \
                     the engine looks hung{}",
                    limit.as_secs(),
                    cpu_ms_over(Duration::from_secs(10)),
                    if resumable {
                        "; run again with the same CRU_BENCH_SEARCH_DIR to resume the build"
                    } else {
                        ""
                    }
                );
                if let Some(folder) = &temporary {
                    let _ = std::fs::remove_dir_all(folder);
                }
                std::process::exit(3);
            }
        }
    });
}

/// CPU time this process uses over `span`, in ms.
fn cpu_ms_over(span: Duration) -> u64 {
    let me = std::process::id();
    let before = proc_stat(me).unwrap_or(0);
    std::thread::sleep(span);
    proc_stat(me).unwrap_or(0).saturating_sub(before) * 10
}

/// Waits until this process has used at most 10 ms of CPU in a second: the engine has
/// finished compacting what the build wrote.
async fn rest() {
    let me = std::process::id();
    let started = Instant::now();
    let mut before = proc_stat(me).unwrap_or(0);
    alive("waiting for the process to go quiet");
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        progress();
        let now = proc_stat(me).unwrap_or(0);
        if now.saturating_sub(before) <= 1 {
            println!(
                "  quiet after {:.0} s (at most 10 ms of CPU in a second)",
                started.elapsed().as_secs_f64()
            );
            return;
        }
        if started.elapsed() > REST_LIMIT {
            println!("  still busy after {REST_LIMIT:?}; going on");
            return;
        }
        before = now;
    }
}

fn journal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(".journal");
    PathBuf::from(name)
}

/// Bytes of the files under `path` (apparent size) and the blocks they take.
fn disk_usage(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    let Ok(dir) = std::fs::read_dir(path) else {
        return total;
    };
    for entry in dir.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (bytes, blocks) = disk_usage(&entry.path());
            total.0 += bytes;
            total.1 += blocks;
        } else {
            total.0 += meta.len();
            total.1 += meta.blocks() * 512;
        }
    }
    total
}

fn print_size(what: &str, db: &Path) {
    let mut parts = Vec::new();
    if let Ok(dir) = std::fs::read_dir(db) {
        let mut names: Vec<_> = dir.flatten().collect();
        names.sort_by_key(std::fs::DirEntry::file_name);
        for entry in names {
            let (bytes, _) = if entry.path().is_dir() {
                disk_usage(&entry.path())
            } else {
                let len = entry.metadata().map_or(0, |m| m.len());
                (len, len)
            };
            if bytes >= 1_000_000 {
                parts.push(format!(
                    "{} {:.0} MB",
                    entry.file_name().to_string_lossy(),
                    bytes as f64 / 1e6
                ));
            }
        }
    }
    let (engine, engine_blocks) = disk_usage(db);
    let (journal, journal_blocks) = disk_usage(&journal_of(db));
    println!(
        "{what}: engine {:.1} MB ({:.1} MB allocated; {}), crucible's journal {:.1} MB ({:.1} MB allocated)",
        engine as f64 / 1e6,
        engine_blocks as f64 / 1e6,
        if parts.is_empty() {
            "no part over 1 MB".into()
        } else {
            parts.join(", ")
        },
        journal as f64 / 1e6,
        journal_blocks as f64 / 1e6,
    );
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn rate(count: u64, elapsed: Duration) -> u64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        (count as f64 / secs) as u64
    } else {
        0
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
