//! Footprint benchmark: what crucible costs to ship and to open. The size of the shipping
//! binary and how long a cold release build takes; how soon `cru` draws its first frame,
//! with the daemon already up and when the workbench has to start it; and how much memory
//! the workbench and an idle daemon hold.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench footprint
//! ```
//!
//! Environment:
//! - `CRU_BENCH_SHIP=0`: skip the shipping build (phase 1), which takes about 12 minutes in
//!   a cold directory. Nothing else should run on the machine while it builds.
//! - `CRU_BENCH_STARTS`: workbench starts with the daemon already up (default 20).
//! - `CRU_BENCH_AUTO_STARTS`: workbench starts that start the daemon, and cold starts of
//!   the daemon alone (default 10).
//!
//! Phases:
//! 1. The shipping binary: `cargo build --release --bin cru` (opt-level s, z off the hot
//!    path, fat LTO, one codegen unit, stripped) into `<target dir>/ship`, a target
//!    directory of its own: `cargo bench` builds the bench profile (no LTO) into the
//!    same `target/release`. The size of `ship/cru` (linked with symbols, then
//!    stripped: what ships), and whether it still has a symbol table (a `.symtab`
//!    section, read from its ELF section headers).
//!    When `ship/` held no build yet, this build is the cold build: its wall time is
//!    written to `ship/cold-build-secs`, which later runs show. What the binary is made
//!    of: its symbols' bytes by family (the database engine, Matrix, TLS and crypto,
//!    crucible…) and by crate, read from the binary before it was stripped. Then the same
//!    build without the `matrix` feature (`ship-no-matrix/`, another cold build the first
//!    time; `CRU_BENCH_NO_MATRIX=0` skips it), and what Matrix adds.
//! 2. The daemon alone: `cru daemon run` spawned with no daemon running, timed until a
//!    client's handshake is answered: once on a fresh kiln (the database is created), then
//!    restarts on the kiln it made.
//! 3. First frame: the real `cru` (this bench build) in a pseudo-terminal of 120×30 on a
//!    temp git kiln, timed from spawn until the screen shows the transcript pane's border
//!    (the first frame, drawn with "connecting…" before the daemon answers) and until it
//!    shows "no sessions — /new creates one" (connected, state read). The screen is
//!    rebuilt from the output (ratatui writes only the cells that change, with cursor
//!    moves between them), so the texts are found as they show. Ctrl-Q quits each start.
//!    First with the daemon already up, the workbench's RSS read from `/proc` the moment
//!    it is filled in; then with no daemon (stopped with `cru daemon stop` before each
//!    start), so the workbench starts it as any client does.
//! 4. Daemon idle RSS: a daemon on a fresh kiln, read from `/proc` once it has answered a
//!    handshake and then been quiet for 3 s.
//!
//! The processes measured in phases 2–4 are the shipping binary of phase 1, or this bench
//! build of `cru` (optimised, no LTO, with symbols) when phase 1 is skipped. The temp kilns keep an idle daemon for 60 s
//! (`grace_period_secs`) so it does not leave between starts; every process started here
//! is stopped when the run ends, also on error. Figures are printed beside the targets,
//! never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::bench::parts;
use testkit::bench::pty;
use testkit::bench::ship;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::client::Client;
use crucible::kiln::Kiln;
use figures::{Stats, env_number, load_average, ms};
use pty::{Pty, Screen};

/// The `cru` of this build.
const CRU: &str = env!("CARGO_BIN_EXE_cru");

const DEFAULT_STARTS: u64 = 20;
const DEFAULT_AUTO_STARTS: u64 = 10;

/// The pseudo-terminal's size (columns, rows).
const COLS: u16 = 120;
const ROWS: u16 = 30;
/// The transcript pane's border title: the first frame shows it.
const FIRST_FRAME_TEXT: &str = "transcript";
/// The status bar once connected and synchronised, on a kiln with no sessions.
const FILLED_TEXT: &str = "no sessions — /new creates one";

/// How long a start may take to fill in (a daemon that starts may take a while).
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a daemon may take to answer its first handshake.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a `cru` command (`daemon stop`, `daemon status`) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Quiet time before the daemon's idle memory is read.
const IDLE_QUIET: Duration = Duration::from_secs(3);
/// How often the daemon is asked whether it answers yet.
const ANSWER_POLL: Duration = Duration::from_millis(5);

const TARGET_SIZE_MB: f64 = 40.0;
const TARGET_COLD_BUILD_MIN: f64 = 15.0;
const TARGET_FRAME_UP_MS: f64 = 10.0;
const TARGET_FRAME_AUTO_MS: f64 = 60.0;
const TARGET_TUI_RSS_MB: f64 = 20.0;
const TARGET_DAEMON_RSS_MB: f64 = 32.0;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nbenchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let starts = env_number("CRU_BENCH_STARTS", DEFAULT_STARTS)? as usize;
    let auto_starts = env_number("CRU_BENCH_AUTO_STARTS", DEFAULT_AUTO_STARTS)? as usize;
    if starts == 0 || auto_starts == 0 {
        bail!("CRU_BENCH_STARTS and CRU_BENCH_AUTO_STARTS must be at least 1");
    }
    println!("crucible footprint benchmark");
    println!("  cru           {CRU}");
    println!(
        "  build         {}",
        if cfg!(debug_assertions) {
            "unoptimised (debug assertions on: the dev profile; start-up figures are not the release's)"
        } else {
            "optimised (the bench profile: no LTO, symbols kept)"
        }
    );
    println!("  cpus          {}", cpus());
    println!("  load average  {}", load_average());
    println!(
        "  samples       {starts} starts with the daemon up, {auto_starts} with it auto-started"
    );

    println!(
        "\n[1] the shipping binary: cargo build --release \
         (opt-level s, z off the hot path, fat LTO, one codegen unit, stripped)"
    );
    let ship = if ship::skipped() {
        println!("  skipped (CRU_BENCH_SHIP=0)");
        Ship::Skipped
    } else {
        match ship() {
            Ok(ship) => ship,
            Err(e) => {
                println!("  failed: {e:#}");
                Ship::Failed
            }
        }
    };
    let without_matrix = match &ship {
        Ship::Built { unstripped, .. } => {
            print_parts("the shipping binary", unstripped);
            matrix_apart()
        }
        Ship::Skipped | Ship::Failed => None,
    };

    // One runtime for the probes that ask the daemon whether it answers.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?;

    // What ships is what is measured; without the shipping build, this bench build.
    let exe = match &ship {
        Ship::Built { exe, .. } => exe.clone(),
        Ship::Skipped | Ship::Failed => PathBuf::from(CRU),
    };
    println!("\n  measured below: {}", exe.display());
    let lab = Lab::new("starts", &exe)?;
    println!(
        "\n[2] the daemon alone: `cru daemon run` spawned with no daemon running, until a \
         handshake is answered"
    );
    let mut fresh = None;
    let mut restarts = Vec::new();
    for i in 0..=auto_starts {
        let mut daemon = lab.spawn_daemon()?;
        let answered = lab.wait_answer(&runtime, &mut daemon)?;
        if i == 0 {
            fresh = Some(answered);
        } else {
            restarts.push(answered);
        }
        lab.stop_daemon()?;
        daemon.wait_exit()?;
    }
    let fresh = fresh.context("no daemon start was timed")?;
    let restarts = Stats::new(restarts);
    println!(
        "  first start on a fresh kiln (creates the database): {:.1} ms",
        ms(fresh)
    );
    println!("  restart on that kiln: {}", restarts.describe());

    println!(
        "\n[3a] first frame, daemon already up: the real cru in a {COLS}x{ROWS} pseudo-terminal"
    );
    let mut daemon = lab.spawn_daemon()?;
    lab.wait_answer(&runtime, &mut daemon)?;
    let mut up = Starts::default();
    for _ in 0..starts {
        let start = lab.open_workbench(true)?;
        lab.check_daemon(&mut daemon)?;
        up.push(start);
    }
    up.print();
    if let (Some(median), Some(largest)) = (up.median_rss(), up.rss.last()) {
        println!("  TUI RSS when filled in, median: {}", median.describe());
        println!("  TUI RSS when filled in, largest: {}", largest.describe());
    }
    lab.stop_daemon()?;
    daemon.wait_exit()?;

    println!("\n[3b] first frame, daemon auto-started: no daemon running, the workbench starts it");
    let mut auto = Starts::default();
    for _ in 0..auto_starts {
        lab.stop_daemon()?;
        lab.check_no_daemon(&runtime)?;
        auto.push(lab.open_workbench(false)?);
    }
    lab.stop_daemon()?;
    auto.print();
    drop(lab);

    println!(
        "\n[4] daemon idle RSS: a fresh kiln, after its first answer and {IDLE_QUIET:?} quiet"
    );
    let idle = Lab::new("idle", &exe)?;
    let mut daemon = idle.spawn_daemon()?;
    let answered = idle.wait_answer(&runtime, &mut daemon)?;
    std::thread::sleep(IDLE_QUIET);
    idle.check_daemon(&mut daemon)?;
    let pid = idle.kiln.read_pid().unwrap_or(daemon.pid());
    let daemon_rss =
        Rss::read(pid).with_context(|| format!("reading the daemon's (pid {pid}) memory"))?;
    println!("  answered after {:.1} ms; pid {pid}", ms(answered));
    println!("  RSS {}", daemon_rss.describe());
    idle.stop_daemon()?;
    daemon.wait_exit()?;
    drop(idle);

    println!("\nrows of the performance table (issue: performance and footprint)");
    println!("| figure | value | target |");
    println!("| --- | --- | --- |");
    println!(
        "| `cru` stripped release binary | {} | ≤ {TARGET_SIZE_MB:.0} MB |",
        ship.size_cell()
    );
    if let (Ship::Built { size, .. }, Some(apart)) = (&ship, without_matrix) {
        println!(
            "| `cru` stripped, without the `matrix` feature | {:.1} MB (Matrix adds {:.1} MB) | ≤ {TARGET_SIZE_MB:.0} MB with Matrix |",
            apart as f64 / 1e6,
            size.saturating_sub(apart) as f64 / 1e6
        );
    }
    println!(
        "| cold `cargo build --release` | {} | ≤ {TARGET_COLD_BUILD_MIN:.0} min |",
        ship.cold_cell()
    );
    println!(
        "| first frame, daemon already up | {} | ≤ {TARGET_FRAME_UP_MS:.0} ms |",
        up.cell()
    );
    println!(
        "| first frame, daemon auto-started | {} | ≤ {TARGET_FRAME_AUTO_MS:.0} ms |",
        auto.cell()
    );
    let tui_cell = match up.median_rss() {
        Some(rss) => format!("{} (median of {})", rss.short(), up.rss.len()),
        None => "not measured".to_string(),
    };
    println!("| TUI RSS | {tui_cell} | ≤ {TARGET_TUI_RSS_MB:.0} MB |");
    println!(
        "| daemon idle RSS | {} | ≤ {TARGET_DAEMON_RSS_MB:.0} MB |",
        daemon_rss.short()
    );
    Ok(())
}

// ---- 1. the shipping binary ----

enum Ship {
    Skipped,
    Failed,
    Built {
        exe: PathBuf,
        /// The same binary before it was stripped.
        unstripped: PathBuf,
        size: u64,
        symbols: Option<bool>,
        /// Seconds of the cold build, if one was timed (now or in an earlier run).
        cold_secs: Option<f64>,
    },
}

impl Ship {
    fn size_cell(&self) -> String {
        match self {
            Ship::Skipped => "skipped (CRU_BENCH_SHIP=0)".into(),
            Ship::Failed => "build failed".into(),
            Ship::Built { size, symbols, .. } => format!(
                "{:.1} MB ({:.1} MiB){}",
                *size as f64 / 1e6,
                *size as f64 / MIB,
                match symbols {
                    Some(true) => ", not stripped",
                    Some(false) => "",
                    None => ", symbols unknown",
                }
            ),
        }
    }

    fn cold_cell(&self) -> String {
        match self {
            Ship::Skipped => "skipped (CRU_BENCH_SHIP=0)".into(),
            Ship::Failed => "build failed".into(),
            Ship::Built {
                cold_secs: Some(secs),
                ..
            } => format!("{:.1} min ({secs:.0} s, {} cpus)", secs / 60.0, cpus()),
            Ship::Built {
                cold_secs: None, ..
            } => "not recorded".into(),
        }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// Builds the shipping binary into `<target dir>/ship` and reads its size.
fn ship() -> Result<Ship> {
    let built = ship::build()?;
    println!("  target dir    {}", built.dir.display());
    match (built.cold_now, built.cold_secs) {
        (true, _) => println!(
            "  cold build    {:.1} min ({:.0} s), written to {}",
            built.took / 60.0,
            built.took,
            built.dir.join("cold-build-secs").display()
        ),
        (false, Some(secs)) => println!(
            "  cold build    {:.1} min ({secs:.0} s) (recorded when {} was first built)",
            secs / 60.0,
            built.dir.display()
        ),
        (false, None) => println!(
            "  cold build    not recorded ({} was not built from nothing by a benchmark; \
             remove it for a cold figure)",
            built.dir.display()
        ),
    }
    if let Some(exe) = ship::given() {
        println!(
            "  binary        {} (CRU_BENCH_BIN, not built here)",
            exe.display()
        );
    } else if !built.cold_now {
        println!("  this build    {:.1} s (incremental)", built.took);
    }
    let (exe, unstripped) = (built.exe, built.unstripped);
    let size = std::fs::metadata(&exe)
        .with_context(|| format!("reading {}", exe.display()))?
        .len();
    let symbols = has_symbol_table(&exe)
        .inspect_err(|e| println!("  symbol table  unknown: {e:#}"))
        .ok();
    println!(
        "  size          {:.2} MB ({:.2} MiB, {size} bytes)",
        size as f64 / 1e6,
        size as f64 / MIB
    );
    match symbols {
        Some(true) => println!("  symbol table  present (.symtab): not stripped"),
        Some(false) => println!("  symbol table  none: stripped"),
        None => {}
    }
    Ok(Ship::Built {
        exe,
        unstripped,
        size,
        symbols,
        cold_secs: built.cold_secs,
    })
}

/// How many crates the parts list names, largest first.
const PARTS_LISTED: usize = 20;

/// What the binary at `unstripped` is made of: its bytes by family and its largest crates.
fn print_parts(what: &str, unstripped: &Path) {
    let parts = match parts::read(unstripped) {
        Ok(parts) => parts,
        Err(e) => {
            println!("  parts         unknown: {e:#}");
            return;
        }
    };
    let mb = |bytes: u64| bytes as f64 / 1e6;
    println!(
        "  what {what} is made of (its symbols before stripping, {:.1} MB with the table):",
        mb(parts.file)
    );
    for (family, bytes) in parts.families() {
        println!("    {:>6.1} MB  {family}", mb(bytes));
    }
    println!(
        "    {:>6.1} MB  not in a symbol (unwind tables, relocations, literals, the symbol table)",
        mb(parts.unattributed())
    );
    let sections: Vec<String> = parts
        .sections
        .iter()
        .map(|(name, bytes)| format!("{name} {:.1}", mb(*bytes)))
        .collect();
    println!("  its sections, MB: {}", sections.join(", "));
    println!("  its {PARTS_LISTED} largest crates:");
    for (krate, bytes) in parts.crates.iter().take(PARTS_LISTED) {
        println!("    {:>6.2} MB  {krate}", mb(*bytes));
    }
}

/// The shipping binary without the `matrix` feature: its stripped size, and its parts.
fn matrix_apart() -> Option<u64> {
    if std::env::var("CRU_BENCH_NO_MATRIX").is_ok_and(|v| v.trim() == "0") {
        println!("\n  without Matrix: skipped (CRU_BENCH_NO_MATRIX=0)");
        return None;
    }
    println!("\n[1b] the same without the matrix feature (--no-default-features)");
    let built = match ship::build_without_matrix() {
        Ok(built) => built,
        Err(e) => {
            println!("  failed: {e:#}");
            return None;
        }
    };
    if built.cold_now {
        println!(
            "  cold build    {:.1} min ({:.0} s)",
            built.took / 60.0,
            built.took
        );
    }
    let size = std::fs::metadata(&built.exe).ok()?.len();
    println!(
        "  size          {:.2} MB ({:.2} MiB, {size} bytes)",
        size as f64 / 1e6,
        size as f64 / MIB
    );
    print_parts("the binary without Matrix", &built.unstripped);
    Some(size)
}

/// Whether a 64-bit little-endian ELF file has a symbol table section (`SHT_SYMTAB`).
fn has_symbol_table(path: &Path) -> Result<bool> {
    const SHT_SYMTAB: u32 = 2;
    let mut file = std::fs::File::open(path)?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header)?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let shoff = u64::from_le_bytes(header[0x28..0x30].try_into()?);
    let shentsize = usize::from(u16_at(&header, 0x3a));
    let shnum = usize::from(u16_at(&header, 0x3c));
    if shentsize < 8 {
        bail!("section headers of {shentsize} bytes");
    }
    let mut table = vec![0u8; shentsize * shnum];
    file.seek(SeekFrom::Start(shoff))?;
    file.read_exact(&mut table)?;
    Ok(table.chunks_exact(shentsize).any(|section| {
        u32::from_le_bytes([section[4], section[5], section[6], section[7]]) == SHT_SYMTAB
    }))
}

// ---- the kiln and its daemon ----

/// A temp git repository as the kiln, with a private user config directory. Dropping it
/// stops the kiln's daemon, then kills it if it is still there.
struct Lab {
    kiln: Kiln,
    /// The `cru` measured.
    exe: PathBuf,
    xdg: PathBuf,
    /// Removed last, after everything running in it is gone.
    _dir: tempfile::TempDir,
}

impl Lab {
    fn new(name: &str, exe: &Path) -> Result<Self> {
        let made = kiln::temp_kiln(
            &format!("cru-bench-footprint-{name}"),
            "[daemon]\ngrace_period_secs = 60\n",
        )?;
        Ok(Self {
            kiln: Kiln::new(made.root),
            exe: exe.to_path_buf(),
            xdg: made.xdg,
            _dir: made.dir,
        })
    }

    /// `cru` pointed at this kiln.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.exe);
        command
            .env("CRU_KILN", self.kiln.root())
            .env("XDG_CONFIG_HOME", &self.xdg)
            .current_dir(self.kiln.root());
        command
    }

    /// Runs `cru args…` to completion (killed after [`COMMAND_TIMEOUT`]).
    fn cru(&self, args: &[&str]) -> Result<Output> {
        let child = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running cru {}", args.join(" ")))?;
        let mut child = Reaped::new(child, Instant::now());
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while child.get().try_wait()?.is_none() {
            if Instant::now() > deadline {
                bail!(
                    "cru {} did not end within {COMMAND_TIMEOUT:?}",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(child.take().wait_with_output()?)
    }

    /// Spawns `cru daemon run` as our child.
    fn spawn_daemon(&self) -> Result<Reaped> {
        let spawned = Instant::now();
        let child = self
            .command()
            .args(["daemon", "run"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning cru daemon run")?;
        Ok(Reaped::new(child, spawned))
    }

    /// Waits until the daemon answers a handshake; the time since it was spawned.
    fn wait_answer(
        &self,
        runtime: &tokio::runtime::Runtime,
        daemon: &mut Reaped,
    ) -> Result<Duration> {
        let spawned = daemon.spawned;
        loop {
            if runtime.block_on(async { Client::connect(&self.kiln).await.is_ok() }) {
                return Ok(spawned.elapsed());
            }
            if let Some(status) = daemon.get().try_wait()? {
                bail!("the daemon exited ({status}) before answering");
            }
            if spawned.elapsed() > ANSWER_TIMEOUT {
                bail!("the daemon did not answer within {ANSWER_TIMEOUT:?}");
            }
            std::thread::sleep(ANSWER_POLL);
        }
    }

    fn check_daemon(&self, daemon: &mut Reaped) -> Result<()> {
        match daemon.get().try_wait()? {
            Some(status) => bail!("the daemon exited ({status}) while it was measured"),
            None => Ok(()),
        }
    }

    /// `cru daemon stop`, then waits until the daemon of the pid file is gone.
    fn stop_daemon(&self) -> Result<()> {
        let pid = self.kiln.read_pid();
        let out = self.cru(&["daemon", "stop"])?;
        if !out.status.success() {
            bail!(
                "cru daemon stop failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if let Some(pid) = pid {
            let deadline = Instant::now() + COMMAND_TIMEOUT;
            while alive(pid) {
                if Instant::now() > deadline {
                    bail!("the daemon (pid {pid}) is still there after cru daemon stop");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }

    /// Fails unless no daemon runs for the kiln.
    fn check_no_daemon(&self, runtime: &tokio::runtime::Runtime) -> Result<()> {
        if let Some(pid) = self.kiln.read_pid().filter(|&p| alive(p)) {
            bail!("a daemon (pid {pid}) still runs for the kiln");
        }
        if runtime.block_on(async { Client::connect(&self.kiln).await.is_ok() }) {
            bail!("a daemon still answers for the kiln");
        }
        Ok(())
    }

    /// Runs the workbench in a pseudo-terminal until it is filled in, then quits it.
    fn open_workbench(&self, read_rss: bool) -> Result<Start> {
        let (pty, slave) = Pty::open(COLS, ROWS)?;
        let mut command = self.command();
        command.env("TERM", "xterm-256color");
        Pty::give(&mut command, &slave)?;
        let spawned = Instant::now();
        let child = command.spawn().context("spawning cru")?;
        let mut tui = Reaped::new(child, spawned);
        // Only the child holds the terminal's side now.
        drop(command);
        drop(slave);
        let pid = tui.pid();
        let mut screen = Screen::new(COLS, ROWS);
        let mut first = None;
        let mut filled = None;
        let mut rss = None;
        while filled.is_none() {
            let left = FRAME_TIMEOUT.saturating_sub(spawned.elapsed());
            if left.is_zero() {
                bail!(
                    "the workbench did not fill in within {FRAME_TIMEOUT:?}; its screen:\n{}",
                    screen.text()
                );
            }
            let Some(bytes) = pty.read(left)? else {
                if let Some(status) = tui.get().try_wait()? {
                    bail!(
                        "the workbench exited ({status}); its screen:\n{}",
                        screen.text()
                    );
                }
                continue;
            };
            let at = spawned.elapsed();
            screen.feed(&bytes);
            if first.is_none() && screen.shows(FIRST_FRAME_TEXT) {
                first = Some(at);
            }
            if screen.shows(FILLED_TEXT) {
                filled = Some(at);
                if read_rss {
                    rss = Some(Rss::read(pid).context("reading the workbench's memory")?);
                }
            }
        }
        pty.quit(tui.get())?;
        Ok(Start {
            first: first.context("the filled-in frame came without the first")?,
            filled: filled.context("no filled-in frame")?,
            rss,
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let Some(pid) = self.kiln.read_pid().filter(|&p| alive(p)) else {
            return;
        };
        if let Err(e) = self.stop_daemon() {
            eprintln!("stopping the daemon (pid {pid}): {e:#}");
        }
        if alive(pid) && comm(pid).as_deref() == Some("cru") {
            eprintln!("the daemon (pid {pid}) did not stop; killing it");
            // SAFETY: sends a signal to the daemon this benchmark started.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// A child process that is killed and reaped if it is still running when dropped.
struct Reaped {
    child: Option<Child>,
    /// When it was spawned.
    spawned: Instant,
}

impl Reaped {
    fn new(child: Child, spawned: Instant) -> Self {
        Self {
            child: Some(child),
            spawned,
        }
    }

    fn get(&mut self) -> &mut Child {
        self.child.as_mut().expect("the child is still held")
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn take(&mut self) -> Child {
        self.child.take().expect("the child is still held")
    }

    /// Waits for the child to exit by itself (after `cru daemon stop`).
    fn wait_exit(&mut self) -> Result<()> {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while self.get().try_wait()?.is_none() {
            if Instant::now() > deadline {
                bail!("pid {} did not exit within {COMMAND_TIMEOUT:?}", self.pid());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && let Ok(None) = child.try_wait()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Whether a process runs (a zombie has exited; only its entry is left).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .is_some_and(|i| !s[i + 1..].trim_start().starts_with('Z'))
    })
}

fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

// ---- figures ----

/// One start of the workbench: from spawn to the first frame and to the filled-in one.
struct Start {
    first: Duration,
    filled: Duration,
    rss: Option<Rss>,
}

#[derive(Default)]
struct Starts {
    first: Vec<Duration>,
    filled: Vec<Duration>,
    /// Sorted by VmRSS.
    rss: Vec<Rss>,
}

impl Starts {
    fn push(&mut self, start: Start) {
        self.first.push(start.first);
        self.filled.push(start.filled);
        if let Some(rss) = start.rss {
            self.rss.push(rss);
            self.rss.sort_by_key(|r| r.vm_kb);
        }
    }

    /// The median by VmRSS (nearest rank).
    fn median_rss(&self) -> Option<&Rss> {
        self.rss.get(self.rss.len().checked_sub(1)? / 2)
    }

    fn print(&self) {
        println!(
            "  (a) first frame (transcript border): {}",
            Stats::new(self.first.clone()).describe()
        );
        println!(
            "  (b) filled in ({FILLED_TEXT:?}): {}",
            Stats::new(self.filled.clone()).describe()
        );
    }

    fn cell(&self) -> String {
        let first = Stats::new(self.first.clone());
        let filled = Stats::new(self.filled.clone());
        format!(
            "first frame {:.1} ms median (p90 {:.1}, max {:.1}); filled in {:.1} ms median \
             (p90 {:.1}, max {:.1}); n {}",
            ms(first.median()),
            ms(first.percentile(0.9)),
            ms(first.max()),
            ms(filled.median()),
            ms(filled.percentile(0.9)),
            ms(filled.max()),
            first.len()
        )
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// Resident memory of a process, from `/proc/<pid>/status` (kB).
struct Rss {
    vm_kb: u64,
    anon_kb: u64,
    file_kb: u64,
    shmem_kb: u64,
}

impl Rss {
    fn read(pid: u32) -> Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
        };
        Ok(Self {
            vm_kb: field("VmRSS:")?,
            anon_kb: field("RssAnon:")?,
            file_kb: field("RssFile:")?,
            shmem_kb: field("RssShmem:")?,
        })
    }

    fn mib(kb: u64) -> f64 {
        kb as f64 * 1024.0 / MIB
    }

    fn describe(&self) -> String {
        format!(
            "VmRSS {:.1} MiB ({:.1} MB): RssAnon {:.1} MiB, RssFile {:.1} MiB, RssShmem {:.1} MiB",
            Self::mib(self.vm_kb),
            self.vm_kb as f64 * 1024.0 / 1e6,
            Self::mib(self.anon_kb),
            Self::mib(self.file_kb),
            Self::mib(self.shmem_kb),
        )
    }

    fn short(&self) -> String {
        format!(
            "{:.1} MB ({:.1} MiB; anon {:.1} MiB, file {:.1} MiB)",
            self.vm_kb as f64 * 1024.0 / 1e6,
            Self::mib(self.vm_kb),
            Self::mib(self.anon_kb),
            Self::mib(self.file_kb),
        )
    }
}
