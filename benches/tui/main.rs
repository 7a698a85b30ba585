//! Workbench benchmark: how fast the TUI draws and answers keys while 20 sessions stream
//! output, and how much CPU an idle workbench uses.
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench tui
//! ```
//!
//! Environment:
//! - `CRU_BENCH_FRAMES`: frames drawn per in-process render run (default 2000).
//! - `CRU_BENCH_KEYS`: keys typed in the real terminal (default 50).
//! - `CRU_BENCH_IDLE_SECS`: length of the idle CPU window (default 30).
//!
//! Phases:
//! 1. In process: a [`Model`] with 20 sessions fed through its public API (`sync`, then
//!    `apply` of `session.output` / `session.transcript` events shaped like the daemon's:
//!    two chunks per message, the stored message when the next one starts, a tool call
//!    every 10th line, a thought every 25th), drawn with [`render`] into a ratatui
//!    `TestBackend` at 120×30 and 200×50. One line per session is streamed between
//!    frames. The time of one `terminal.draw` (layout, widgets and the buffer diff) is
//!    measured, with transcripts growing from empty and with every transcript full.
//! 2. In process: key to frame, `Model::handle_key` (a typed character; Alt-n, the next
//!    session) plus the `terminal.draw` after it.
//! 3. End to end: the real `cru` in tmux on a temp kiln with 20 scripted-agent sessions
//!    streaming (`say` every 50 ms each); characters typed with `tmux send-keys` and
//!    `tmux capture-pane` polled until they show.
//! 4. Idle: the real `cru` in tmux and the daemon with 10 sessions whose task finished;
//!    CPU time and context switches of the TUI, the daemon and the 10 agents over the
//!    window, from `/proc`.
//!
//! Figures are printed, never asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test equipment: a failure here should stop the run
#![allow(clippy::too_many_lines)] // a benchmark's phases read in order, as the figures it prints

use testkit::bench::figures;
use testkit::bench::kiln;
use testkit::built;
mod live;
use testkit::bench::process;
mod procfs;
mod table;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use crucible::protocol::{EntryKind, Event, InboxMessage, OutputChunk, Session, TranscriptEntry};
use crucible::tui::{Keymap, Model, TRANSCRIPT_CAP, Theme, ViewState, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use figures::{env_number, load_average};
use table::{Stats, Table};

/// Sessions streaming in the in-process and end-to-end phases.
const SESSIONS: usize = 20;
/// Terminal sizes drawn in process.
const SIZES: [(u16, u16); 2] = [(120, 30), (200, 50)];
/// Key-to-frame samples per key and size, in process.
const KEY_SAMPLES: usize = 1_000;
/// Characters typed into the input before it is emptied again (in process).
const KEYS_PER_LINE: usize = 40;

const DEFAULT_FRAMES: usize = 2_000;
const DEFAULT_KEYS: usize = 50;
const DEFAULT_IDLE_SECS: u64 = 30;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nbenchmark failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub struct Settings {
    pub frames: usize,
    pub keys: usize,
    pub idle: Duration,
}

impl Settings {
    fn from_env() -> Result<Self> {
        let frames = env_number("CRU_BENCH_FRAMES", DEFAULT_FRAMES as u64)? as usize;
        let keys = env_number("CRU_BENCH_KEYS", DEFAULT_KEYS as u64)? as usize;
        let idle = env_number("CRU_BENCH_IDLE_SECS", DEFAULT_IDLE_SECS)?;
        if frames == 0 || keys == 0 || idle == 0 {
            bail!("CRU_BENCH_FRAMES, CRU_BENCH_KEYS and CRU_BENCH_IDLE_SECS must be at least 1");
        }
        Ok(Self {
            frames,
            keys,
            idle: Duration::from_secs(idle),
        })
    }
}

fn run() -> Result<()> {
    let settings = Settings::from_env()?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("crucible workbench (TUI) benchmark");
    println!("  cru           {}", live::CRU);
    println!(
        "  cpus          {cpus} (the TUI, the daemon, the agents, tmux and this bench share them)"
    );
    println!(
        "  build         crucible's own code {}; dependencies (ratatui) as the profile builds them",
        if cfg!(debug_assertions) {
            "unoptimised (debug assertions on: the dev profile)"
        } else {
            "optimised"
        }
    );
    println!(
        "  load average  {} (other work on the machine competes)",
        load_average()
    );
    println!(
        "  settings      {} frames per render run, {} keys end to end, idle window {} s",
        settings.frames,
        settings.keys,
        settings.idle.as_secs()
    );

    let mut summary = Table::new(["figure", "n", "median", "p90", "p99", "max"]);
    let mut draws = Vec::new();

    println!(
        "\n[1] frame render time, in process: one terminal.draw(render) into a TestBackend, \
         {SESSIONS} sessions, one line streamed into every session between frames"
    );
    for (width, height) in SIZES {
        for full in [false, true] {
            let mut bench = InProcess::new(width, height, full)?;
            let times = bench.frames(settings.frames)?;
            let label = format!(
                "draw {width}x{height}, transcripts {}",
                if full { "full" } else { "growing" }
            );
            println!(
                "  {label}: {}; focused transcript {} → {} entries; applying the events of \
                 one line: {}",
                times.describe(),
                bench.start_entries,
                bench.focused_entries(),
                bench.apply_time().describe_short(),
            );
            summary.stats_row(&label, &times);
            draws.push(((width, height), full, times.percentile(0.99)));
        }
    }

    println!(
        "\n[2a] key to frame, in process: Model::handle_key + the terminal.draw after it, \
         transcripts full, one line streamed into every session between keys"
    );
    for (width, height) in SIZES {
        let mut bench = InProcess::new(width, height, true)?;
        let typed = bench.typed_keys(KEY_SAMPLES)?;
        let switched = bench.switch_keys(KEY_SAMPLES)?;
        println!("  typed character {width}x{height}: {}", typed.describe());
        println!(
            "  alt-n (next session) {width}x{height}: {}",
            switched.describe()
        );
        summary.stats_row(&format!("key→frame typed char {width}x{height}"), &typed);
        summary.stats_row(&format!("key→frame alt-n {width}x{height}"), &switched);
    }

    println!(
        "\n[2b] key to frame, end to end: the real cru in tmux (120x30), {SESSIONS} sessions \
         of cru-scripted-agent streaming"
    );
    let typing = live::typing(&settings)?;
    typing.print();
    summary.stats_row(
        "end to end: send-keys → capture-pane shows the char",
        &typing.typed,
    );
    summary.stats_row(
        "end to end: send-keys alt-n → status bar shows it",
        &typing.switched,
    );
    summary.stats_row("  (tmux floor: one send-keys)", &typing.send_cost);
    summary.stats_row("  (tmux floor: one capture-pane)", &typing.capture_cost);

    println!(
        "\n[3] idle CPU: the real cru in tmux + the daemon, 10 sessions whose task finished, \
         over {} s",
        settings.idle.as_secs()
    );
    let idle = live::idle(&settings)?;
    idle.print();

    println!("\nload average at the end: {}", load_average());
    println!("\nSUMMARY (milliseconds)");
    summary.print();
    println!();
    idle.print_summary();

    println!("\nrows of the performance table (issue: performance and footprint)");
    println!("| figure | value | target |");
    println!("| --- | --- | --- |");
    let cells: Vec<String> = SIZES
        .iter()
        .map(|&size| {
            let p99 = |full: bool| {
                draws
                    .iter()
                    .find(|(s, f, _)| *s == size && *f == full)
                    .map_or(0.0, |(_, _, d)| table::ms(*d))
            };
            format!(
                "{}x{}: p99 {:.3} ms growing from empty, {:.3} ms with every transcript full \
                 ({TRANSCRIPT_CAP} entries)",
                size.0,
                size.1,
                p99(false),
                p99(true)
            )
        })
        .collect();
    println!(
        "| frame draw, {SESSIONS} sessions streaming | {} | p99 ≤ 2 ms, flat in transcript length |",
        cells.join("; ")
    );
    Ok(())
}

// ---- in process ----

/// A model with `SESSIONS` sessions, a stream of their output, and a test terminal.
struct InProcess {
    model: Model,
    view: ViewState,
    theme: Theme,
    terminal: Terminal<TestBackend>,
    stream: Stream,
    start_entries: usize,
    /// Time to apply one streamed line (its 2–6 events), per call.
    apply: Vec<Duration>,
}

impl InProcess {
    /// With `full`, every transcript is streamed up to its cap before measuring.
    fn new(width: u16, height: u16, full: bool) -> Result<Self> {
        let sessions: Vec<Session> = (1..=SESSIONS).map(session).collect::<Result<_>>()?;
        let ids: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
        let messages = inbox(&sessions)?;
        let mut model = Model::new(Keymap::default());
        model.sync(sessions, messages);
        let mut stream = Stream::new(ids);
        if full {
            while stream.lines[0] < (TRANSCRIPT_CAP as u64) {
                stream.step(&mut model, None);
            }
        }
        let theme = Theme::builtin("dark").context("the built-in dark theme")?;
        let terminal = Terminal::new(TestBackend::new(width, height)).context("a test terminal")?;
        let mut bench = Self {
            model,
            view: ViewState::default(),
            theme,
            terminal,
            stream,
            start_entries: 0,
            apply: Vec::new(),
        };
        bench.start_entries = bench.focused_entries();
        // One untimed frame: the first draw paints every cell.
        bench.draw();
        Ok(bench)
    }

    fn focused_entries(&self) -> usize {
        self.model
            .focused_session()
            .and_then(|s| self.model.transcript(&s.id))
            .map_or(0, |t| t.entries().len())
    }

    fn apply_time(&self) -> Stats {
        Stats::new(self.apply.clone())
    }

    fn draw(&mut self) {
        let (model, view, theme) = (&self.model, &mut self.view, &self.theme);
        self.terminal
            .draw(|frame| render(frame, model, view, theme))
            .expect("drawing into a TestBackend cannot fail");
        self.model.set_scroll_extent(self.view.scroll_extent());
    }

    fn stream_line(&mut self) {
        self.stream.step(&mut self.model, Some(&mut self.apply));
    }

    fn frames(&mut self, frames: usize) -> Result<Stats> {
        let mut times = Vec::with_capacity(frames);
        for _ in 0..frames {
            self.stream_line();
            let start = Instant::now();
            self.draw();
            times.push(start.elapsed());
        }
        check_screen(&self.terminal)?;
        Ok(Stats::new(times))
    }

    /// Typed characters; the input is emptied (untimed) every `KEYS_PER_LINE` keys.
    fn typed_keys(&mut self, samples: usize) -> Result<Stats> {
        let mut times = Vec::with_capacity(samples);
        for i in 0..samples {
            self.stream_line();
            let c = char::from(b'a' + (i % 26) as u8);
            let start = Instant::now();
            self.model
                .handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            self.draw();
            times.push(start.elapsed());
            if (i + 1) % KEYS_PER_LINE == 0 {
                for _ in 0..KEYS_PER_LINE {
                    self.model
                        .handle_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
                }
                self.draw();
            }
        }
        check_screen(&self.terminal)?;
        Ok(Stats::new(times))
    }

    /// Alt-n: focus the next session (cycling through all of them).
    fn switch_keys(&mut self, samples: usize) -> Result<Stats> {
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            self.stream_line();
            let before = self.model.focused_session().map(|s| s.id.clone());
            let start = Instant::now();
            // The transcript load it asks for is answered by the streamed events already.
            self.model
                .handle_key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::ALT));
            self.draw();
            times.push(start.elapsed());
            let after = self.model.focused_session().map(|s| s.id.clone());
            if before == after {
                bail!("alt-n did not move the focus");
            }
        }
        Ok(Stats::new(times))
    }
}

/// Fails if the last frame is not the workbench (a "too small" notice, an empty screen).
fn check_screen(terminal: &Terminal<TestBackend>) -> Result<()> {
    let buffer = terminal.backend().buffer();
    let text: String = buffer.content().iter().map(|c| c.symbol()).collect();
    if !text.contains("@ scripted") || text.contains("too small") {
        bail!("the test terminal does not show the workbench");
    }
    Ok(())
}

fn session(n: usize) -> Result<Session> {
    serde_json::from_value(json!({
        "id": format!("01JS{n:022}"),
        "worktree": format!("/kiln/.crucible/worktrees/cru-bench{n:02}"),
        "agent_type": "acp",
        "agent_name": "scripted",
        "status": "active",
        "started_at": format!("2026-01-01T09:{n:02}:00Z"),
        "last_heartbeat": "2026-01-01T10:00:00Z",
        "display_name": format!("cru/bench{n:02} @ scripted"),
        "state": "working",
        "task": format!("Stream the output of part {n} of the benchmark"),
        "branch": format!("cru/bench{n:02}"),
        "worktree_owned": true,
    }))
    .context("building a session")
}

/// Thirty messages: mostly read reports, one open decision and one open approval.
fn inbox(sessions: &[Session]) -> Result<Vec<InboxMessage>> {
    (1..=30)
        .map(|n: usize| {
            let s = &sessions[n % sessions.len()];
            let (kind, read, options) = match n {
                7 => (
                    "decision_needed",
                    false,
                    Some(vec!["JWT", "Session cookies"]),
                ),
                13 => ("approval_required", false, Some(vec!["Allow", "Reject"])),
                _ if n.is_multiple_of(5) => ("task_complete", true, None),
                _ => ("info", !n.is_multiple_of(3), None),
            };
            serde_json::from_value(json!({
                "id": format!("01JM{n:022}"),
                "session_id": s.id,
                "session_name": s.display_name,
                "timestamp": format!("2026-01-01T10:{n:02}:00Z"),
                "msg_type": kind,
                "title": format!("Message {n} from {}", s.display_name),
                "body": "A body long enough to wrap in the inbox pane when it is opened.",
                "options": options,
                "read": read,
            }))
            .context("building an inbox message")
        })
        .collect()
}

/// The daemon's events for sessions that each say one line per step: two
/// `session.output` chunks, the stored message when the next one starts, a tool call
/// and its completion every 10th line, a thought every 25th.
struct Stream {
    ids: Vec<String>,
    seq: Vec<u64>,
    lines: Vec<u64>,
    pending: Vec<Option<String>>,
}

const WORDS: [&str; 12] = [
    "the",
    "agent",
    "reads",
    "src/tui/view.rs",
    "and",
    "streams",
    "output",
    "while",
    "it",
    "works,",
    "line",
    "wrapping",
];

impl Stream {
    fn new(ids: Vec<String>) -> Self {
        let n = ids.len();
        Self {
            ids,
            seq: vec![0; n],
            lines: vec![0; n],
            pending: vec![None; n],
        }
    }

    /// One line for every session, applied to the model; with `times`, the time of each
    /// session's line is recorded.
    fn step(&mut self, model: &mut Model, mut times: Option<&mut Vec<Duration>>) {
        for i in 0..self.ids.len() {
            let events = self.line(i);
            let start = Instant::now();
            for event in events {
                model.apply(event);
            }
            if let Some(times) = times.as_deref_mut() {
                times.push(start.elapsed());
            }
        }
    }

    fn line(&mut self, i: usize) -> Vec<Event> {
        self.lines[i] += 1;
        let n = self.lines[i];
        let id = self.ids[i].clone();
        let mut events = Vec::with_capacity(6);
        if let Some(text) = self.pending[i].take() {
            events.push(self.entry(i, EntryKind::Message, text, None, None));
        }
        if n.is_multiple_of(10) {
            let call = Some(format!("call-{n}"));
            let title = format!("Run cargo test --package part{n}");
            events.push(self.entry(i, EntryKind::ToolCall, title, call.clone(), Some("pending")));
            events.push(self.entry(
                i,
                EntryKind::ToolUpdate,
                String::new(),
                call,
                Some("completed"),
            ));
        }
        if n.is_multiple_of(25) {
            let thought = format!("Line {n} is a good moment to check the plan again.");
            events.push(Event::Output(OutputChunk {
                session_id: id.clone(),
                kind: EntryKind::Thought,
                text: thought.clone(),
            }));
            events.push(self.entry(i, EntryKind::Thought, thought, None, None));
        }
        // 20 to 200 characters: some lines wrap.
        let len = 20 + (n as usize * 37) % 181;
        let mut text = format!("s{:02} line {n}:", i + 1);
        let mut w = n as usize;
        while text.len() < len {
            text.push(' ');
            text.push_str(WORDS[w % WORDS.len()]);
            w += 7;
        }
        let half = text.len() / 2;
        let half = (half..text.len())
            .find(|&k| text.is_char_boundary(k))
            .unwrap_or(half);
        for part in [&text[..half], &text[half..]] {
            events.push(Event::Output(OutputChunk {
                session_id: id.clone(),
                kind: EntryKind::Message,
                text: part.to_string(),
            }));
        }
        self.pending[i] = Some(text);
        events
    }

    fn entry(
        &mut self,
        i: usize,
        kind: EntryKind,
        text: String,
        tool_call_id: Option<String>,
        status: Option<&str>,
    ) -> Event {
        self.seq[i] += 1;
        Event::Transcript(TranscriptEntry {
            session_id: self.ids[i].clone(),
            seq: self.seq[i],
            at: "2026-01-01T10:00:00Z".into(),
            kind,
            text: (!text.is_empty()).then_some(text),
            tool_call_id,
            status: status.map(String::from),
        })
    }
}
