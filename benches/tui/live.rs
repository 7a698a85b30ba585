//! The end-to-end phases of the TUI benchmark: the real `cru` binary in tmux on temp
//! kilns, with the real daemon and `cru-scripted-agent` sessions; CPU use read from
//! `/proc`. Everything started here is stopped when its owner is dropped, on success
//! and on failure alike.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use crucible::kiln::Kiln;
use serde_json::Value;

use crate::procfs::{Pids, Usage, alive, children, clock_ticks, comm, kill};
use crate::table::{Stats, Table, ms};
use crate::{SESSIONS, Settings, kiln};

pub const CRU: &str = env!("CARGO_BIN_EXE_cru");
/// The scripted ACP agent, in this benchmark's profile.
fn scripted_agent() -> &'static str {
    crate::built::scripted_agent(std::path::Path::new(env!("CARGO_BIN_EXE_cru")))
}

/// The real terminal's size.
const SCREEN: (u16, u16) = (120, 30);
/// Sessions of the idle phase.
const IDLE_SESSIONS: usize = 10;
/// Characters typed into the input before it is emptied again (untimed).
const KEYS_PER_ROUND: usize = 20;
/// Alt-n presses timed end to end.
const SWITCHES: usize = 20;
/// How long one key may take to show before the run fails.
const KEY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long sessions, the daemon and the TUI may take to get ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Quiet time between the TUI showing its sessions and the idle window: longer than the
/// 10 s tokio keeps an idle blocking-pool thread, so threads left over from the last turn
/// have exited and the window sees the steady state.
const SETTLE: Duration = Duration::from_secs(12);

// ---- phase 3: typing end to end ----

pub struct Typing {
    pub typed: Stats,
    pub switched: Stats,
    pub capture_cost: Stats,
    pub send_cost: Stats,
    create: Stats,
    script_bytes: usize,
    script_lines: usize,
    still_streaming: usize,
    phase: Duration,
    usage: Vec<(String, Usage)>,
}

impl Typing {
    pub fn print(&self) {
        println!(
            "  setup: {SESSIONS} × `cru session new --agent scripted --task <script>` \
             ({} `say` + `sleep 50` lines, {} B): {}",
            self.script_lines,
            self.script_bytes,
            self.create.describe()
        );
        println!(
            "  note: each script is its session's first prompt, so the focused transcript \
             starts with a {} B prompt that the TUI wraps on every frame; the draw time \
             grows with the focused transcript (see [1])",
            self.script_bytes
        );
        println!(
            "  typed character → visible in capture-pane: {}",
            self.typed.describe()
        );
        println!(
            "  alt-n → status bar shows the next session focused: {}",
            self.switched.describe()
        );
        println!(
            "  (alt-n is seen in the first frame after the key, before the new session's \
             history has loaded: that frame draws only what streamed in since cru started)"
        );
        println!(
            "  what the figures include: spawning `tmux send-keys` (alone: median {:.3} ms), \
             tmux writing the key to the pty, cru reading it, handling it, drawing, tmux \
             parsing the output, and polling with `tmux capture-pane -p` (one capture: \
             median {:.3} ms, taken back to back, so up to about one capture of the figure \
             is polling delay)",
            ms(self.send_cost.median()),
            ms(self.capture_cost.median()),
        );
        println!(
            "  sessions still streaming when the keys were done: {} of {SESSIONS}",
            self.still_streaming
        );
        println!(
            "  CPU during the key phase ({:.1} s; the pollers are this bench):",
            self.phase.as_secs_f64()
        );
        for (name, usage) in &self.usage {
            println!(
                "    {name:<28} {:>6.0} ms CPU = {:>5.1}% of one core",
                usage.cpu_ms,
                100.0 * usage.cpu_ms / ms(self.phase)
            );
        }
    }
}

pub fn typing(settings: &Settings) -> Result<Typing> {
    let lab = Lab::new("stream")?;
    // At least 40 s of output (a `say` every 50 ms at best), far more than setting up and
    // typing take: the run checks that every session still streams at the end. Each
    // session's transcript starts with its script, so it is kept short.
    let lines = (600 + 4 * settings.keys).min(3_000);
    let mut create = Vec::with_capacity(SESSIONS);
    let mut script_bytes = 0;
    for n in 1..=SESSIONS {
        let script: String = (1..=lines)
            .map(|l| format!("say s{n:02} l{l:04} streams\nsleep 50\n"))
            .collect();
        script_bytes = script.len();
        let start = Instant::now();
        lab.new_session(&script)?;
        create.push(start.elapsed());
    }
    lab.wait_states("every session streaming", |states| {
        states.len() == SESSIONS && states.iter().all(|s| s == "working")
    })?;

    let tmux = lab.open_tui("stream")?;
    tmux.wait_for("the workbench with session 1 focused and streaming", |s| {
        status_bar(s).contains("▸[1]") && s.contains(" streams")
    })?;
    let pids = lab.pids(&tmux)?;

    let mut capture_cost = Vec::new();
    for _ in 0..30 {
        let start = Instant::now();
        tmux.screen()?;
        capture_cost.push(start.elapsed());
    }

    let before = pids.sample();
    let phase_start = Instant::now();
    let mut typed = Vec::with_capacity(settings.keys);
    let mut send_cost = Vec::with_capacity(settings.keys);
    while typed.len() < settings.keys {
        // A marker nothing else on the screen shows, then timed characters after it.
        tmux.type_text("ZQ")?;
        tmux.wait_for("the marker in the input", |s| s.contains("ZQ"))?;
        let mut shown = String::from("ZQ");
        for i in 0..KEYS_PER_ROUND.min(settings.keys - typed.len()) {
            let c = char::from(b'a' + (i % 26) as u8);
            shown.push(c);
            let start = Instant::now();
            tmux.type_text(&c.to_string())?;
            send_cost.push(start.elapsed());
            tmux.wait_within(&format!("{shown:?} in the input"), KEY_TIMEOUT, |s| {
                s.contains(&shown)
            })?;
            typed.push(start.elapsed());
        }
        let backspaces = vec!["BSpace"; shown.len()];
        tmux.keys(&backspaces)?;
        tmux.wait_for("the input emptied", |s| !s.contains("ZQ"))?;
    }
    let mut switched = Vec::with_capacity(SWITCHES);
    for i in 0..SWITCHES {
        let next = (i + 1) % SESSIONS + 1;
        let mark = format!("▸[{next}]");
        let start = Instant::now();
        tmux.keys(&["M-n"])?;
        tmux.wait_within(&format!("{mark} in the status bar"), KEY_TIMEOUT, |s| {
            status_bar(s).contains(&mark)
        })?;
        switched.push(start.elapsed());
    }
    let phase = phase_start.elapsed();
    let after = pids.sample();
    let still_streaming = lab
        .sessions()?
        .iter()
        .filter(|s| s["state"] == "working")
        .count();
    Ok(Typing {
        typed: Stats::new(typed),
        switched: Stats::new(switched),
        capture_cost: Stats::new(capture_cost),
        send_cost: Stats::new(send_cost),
        create: Stats::new(create),
        script_bytes,
        script_lines: lines,
        still_streaming,
        phase,
        usage: pids.usage(&before, &after),
    })
}

// ---- phase 4: idle ----

pub struct Idle {
    window: Duration,
    usage: Vec<(String, Usage)>,
    screen_unchanged: bool,
}

impl Idle {
    pub fn print(&self) {
        println!(
            "  {IDLE_SESSIONS} sessions complete (agents alive, waiting for a prompt); the \
             TUI showed them, then {} s of quiet before the window (idle blocking-pool \
             threads of tokio exit after 10 s)",
            SETTLE.as_secs()
        );
        println!(
            "  screen identical before and after the window: {}",
            if self.screen_unchanged { "yes" } else { "NO" }
        );
        println!(
            "  CPU: utime+stime from /proc/<pid>/stat (clock ticks of {:.0} ms); run time: \
             the sum of the threads' /proc/<pid>/task/<tid>/schedstat (ns); wakeups: \
             voluntary context switches summed over threads (a thread that blocks and is \
             woken again counts one); threads that exited during the window are lost from \
             the per-thread figures and counted",
            1000.0 / clock_ticks()
        );
    }

    pub fn print_summary(&self) {
        let secs = self.window.as_secs_f64();
        println!("IDLE over {secs:.0} s ({IDLE_SESSIONS} idle sessions; goal: near zero)");
        let mut table = Table::new([
            "process group",
            "procs",
            "threads",
            "CPU ms (utime+stime)",
            "run ms (schedstat)",
            "wakeups",
            "wakeups/s",
            "involuntary",
            "threads exited",
        ]);
        for (name, u) in &self.usage {
            table.row([
                name.clone(),
                format!("{}/{}", u.alive, u.processes),
                u.threads.to_string(),
                format!("{:.0}", u.cpu_ms),
                format!("{:.2}", u.run_ms),
                u.voluntary.to_string(),
                format!("{:.2}", u.voluntary as f64 / secs),
                u.involuntary.to_string(),
                u.threads_exited.to_string(),
            ]);
        }
        table.print();
        for (name, u) in &self.usage {
            if !u.woke.is_empty() {
                let threads: Vec<String> = u
                    .woke
                    .iter()
                    .map(|(thread, n)| format!("{thread} ×{n}"))
                    .collect();
                println!("  {name}: threads that woke: {}", threads.join(", "));
            }
        }
    }
}

pub fn idle(settings: &Settings) -> Result<Idle> {
    let lab = Lab::new("idle")?;
    for n in 1..=IDLE_SESSIONS {
        lab.new_session(&format!("say idle session {n} is ready"))?;
    }
    lab.wait_states("every session complete", |states| {
        states.len() == IDLE_SESSIONS && states.iter().all(|s| s == "complete")
    })?;
    let tmux = lab.open_tui("idle")?;
    tmux.wait_for("the workbench showing the sessions", |s| {
        status_bar(s).contains("▸[1]") && s.contains("is ready")
    })?;
    let pids = lab.pids(&tmux)?;
    if pids.agents.len() != IDLE_SESSIONS {
        bail!(
            "expected {IDLE_SESSIONS} agent processes, found {}",
            pids.agents.len()
        );
    }
    std::thread::sleep(SETTLE);
    let screen_before = tmux.screen()?;
    let before = pids.sample();
    // The measurement window itself: nothing to wait for, by design.
    std::thread::sleep(settings.idle);
    let after = pids.sample();
    let screen_after = tmux.screen()?;
    Ok(Idle {
        window: settings.idle,
        usage: pids.usage(&before, &after),
        screen_unchanged: screen_before == screen_after,
    })
}

// ---- a temp kiln with its daemon and agents ----

/// A temp git repository as the kiln, with a scripted-agent profile. Dropping it stops
/// the daemon (and with it the agents), then kills whatever is left.
struct Lab {
    kiln: Kiln,
    xdg: PathBuf,
    name: String,
    /// Removed last, after everything running in it is gone.
    _dir: tempfile::TempDir,
}

impl Lab {
    fn new(name: &str) -> Result<Self> {
        let made = kiln::temp_kiln(
            "cru-bench-tui",
            &format!(
                "[daemon]\ngrace_period_secs = 600\n\n[agents.scripted]\ncommand = {:?}\n",
                scripted_agent()
            ),
        )?;
        Ok(Self {
            kiln: Kiln::new(made.root),
            xdg: made.xdg,
            name: name.to_string(),
            _dir: made.dir,
        })
    }

    fn command(&self) -> Command {
        let mut command = Command::new(CRU);
        command
            .arg("--kiln")
            .arg(self.kiln.root())
            .env("CRU_DAEMON_EXE", CRU)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .stdin(Stdio::null());
        command
    }

    fn cru(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()
            .args(args)
            .output()
            .with_context(|| format!("running cru {}", args.first().unwrap_or(&"")))?;
        if !out.status.success() {
            bail!(
                "cru {} failed ({}): {}",
                args.first().unwrap_or(&""),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn new_session(&self, task: &str) -> Result<String> {
        let out = self.cru(&[
            "session", "new", "--agent", "scripted", "--json", "--task", task,
        ])?;
        let session: Value = serde_json::from_str(&out).context("session new --json")?;
        session["id"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| anyhow!("session new printed no id: {out}"))
    }

    fn sessions(&self) -> Result<Vec<Value>> {
        let out = self.cru(&["session", "list", "--json"])?;
        let list: Value = serde_json::from_str(&out).context("session list --json")?;
        match list {
            Value::Array(items) => Ok(items),
            other => bail!("session list --json printed no array: {other}"),
        }
    }

    /// Waits until the sessions' states satisfy `check`.
    fn wait_states(&self, what: &str, check: impl Fn(&[String]) -> bool) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let states: Vec<String> = self
                .sessions()?
                .iter()
                .map(|s| s["state"].as_str().unwrap_or("?").to_string())
                .collect();
            if check(&states) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("timed out waiting for {what}; states: {states:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn open_tui(&self, name: &str) -> Result<Tmux> {
        let root = self.kiln.root().display().to_string();
        let xdg = self.xdg.display().to_string();
        Tmux::start(
            &format!("cru-bench-{name}-{}", std::process::id()),
            self.kiln.root(),
            &[
                ("CRU_KILN", root.as_str()),
                ("CRU_DAEMON_EXE", CRU),
                ("XDG_CONFIG_HOME", xdg.as_str()),
                ("TERM", "xterm-256color"),
            ],
        )
    }

    /// The processes to watch: the TUI, the daemon, the agents and the tmux server.
    fn pids(&self, tmux: &Tmux) -> Result<Pids> {
        let tui = tmux.pid("#{pane_pid}")?;
        if comm(tui).as_deref() != Some("cru") {
            bail!("the tmux pane runs {:?}, not cru", comm(tui));
        }
        let daemon = self
            .kiln
            .read_pid()
            .filter(|&pid| alive(pid))
            .ok_or_else(|| anyhow!("no daemon runs for the {} kiln", self.name))?;
        let agents: Vec<u32> = self
            .sessions()?
            .iter()
            .filter_map(|s| s["agent_pid"].as_u64().map(|p| p as u32))
            .collect();
        Ok(Pids {
            tui,
            daemon,
            agents,
            tmux: tmux.pid("#{pid}")?,
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let daemon = self.kiln.read_pid().filter(|&pid| alive(pid));
        let agents: Vec<u32> = daemon.map(children).unwrap_or_default();
        if daemon.is_some()
            && let Ok(mut child) = self
                .command()
                .args(["daemon", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        {
            let deadline = Instant::now() + Duration::from_secs(15);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(pid) = daemon {
            let deadline = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if alive(pid) && comm(pid).as_deref() == Some("cru") {
                eprintln!(
                    "the {} daemon (pid {pid}) did not stop; killing it",
                    self.name
                );
                kill(pid);
            }
        }
        for pid in agents {
            if alive(pid)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("cru-scripted-agent"))
            {
                kill(pid);
            }
        }
    }
}

// ---- tmux ----

/// A private tmux server (its own socket) running `cru` in one window.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(socket: &str, cwd: &Path, env: &[(&str, &str)]) -> Result<Self> {
        let tmux = Tmux {
            socket: socket.to_string(),
        };
        let mut args = vec![
            "new-session".to_string(),
            "-d".into(),
            "-x".into(),
            SCREEN.0.to_string(),
            "-y".into(),
            SCREEN.1.to_string(),
            "-c".into(),
            cwd.display().to_string(),
        ];
        for (key, value) in env {
            args.push("-e".into());
            args.push(format!("{key}={value}"));
        }
        // `exec`, so that the pane's process is cru itself.
        args.push(format!("exec '{}'", CRU.replace('\'', r"'\''")));
        tmux.run(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
        tmux.run(&["set-option", "-g", "remain-on-exit", "on"])?;
        Ok(tmux)
    }

    fn run(&self, args: &[&str]) -> Result<Output> {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .context("running tmux")?;
        if !out.status.success() {
            bail!(
                "tmux {}: {}",
                args.first().unwrap_or(&""),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    fn keys(&self, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.run(&args).map(drop)
    }

    fn type_text(&self, text: &str) -> Result<()> {
        self.run(&["send-keys", "-t", "0", "-l", text]).map(drop)
    }

    fn screen(&self) -> Result<String> {
        let out = self.run(&["capture-pane", "-p", "-t", "0"])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn pid(&self, format: &str) -> Result<u32> {
        let out = self.run(&["display-message", "-p", "-t", "0", format])?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .with_context(|| format!("tmux {format} is {text:?}"))
    }

    fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> Result<String> {
        self.wait_within(what, READY_TIMEOUT, check)
    }

    /// Polls `capture-pane` back to back until `check` holds.
    fn wait_within(
        &self,
        what: &str,
        limit: Duration,
        check: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen()?;
            if check(&screen) {
                return Ok(screen);
            }
            if Instant::now() > deadline {
                bail!("timed out after {limit:?} waiting for {what}; the screen is:\n{screen}");
            }
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The status bar: the screen's last non-empty line.
fn status_bar(screen: &str) -> &str {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}
