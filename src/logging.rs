//! Logs go through `tracing`: to a file under the kiln's state directory for long-running
//! processes (never to stdout while a full-screen program owns the terminal), to stderr
//! for one-shot commands. A long-running process run by systemd (`JOURNAL_STREAM`) or in
//! a terminal (`cru daemon run` by hand) logs to stderr as well, so `journalctl` and the
//! person watching see what the file gets. `CRU_LOG` filters (e.g. `CRU_LOG=debug`). Without it, the
//! libraries under the Matrix channel keep quiet ([`QUIET`]). A log file is capped by
//! size ([`rotate`]), so no flood of requests can fill the disk with it.

mod rotate;

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// The libraries under the Matrix channel (targets are matched as prefixes: `matrix_sdk`
/// is every `matrix_sdk_*` crate, `ruma` every `ruma_*`). Their errors and warnings are
/// benign as a rule (a secret storage never set up at each login, key backups, a
/// homeserver away), and what matters the channel says itself; they are logged only when
/// `CRU_LOG` asks (`CRU_LOG=debug`).
const QUIET: &[&str] = &["matrix_sdk", "ruma", "vodozemac"];

/// `CRU_LOG`, or `default` for crucible with the quiet libraries off.
fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env("CRU_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter(default)))
}

fn default_filter(level: &str) -> String {
    let mut filter = level.to_string();
    for target in QUIET {
        filter.push_str(&format!(",{target}=off"));
    }
    filter
}

/// Log lines waiting for the log writer thread.
const LOG_QUEUE_LINES: usize = 4096;

/// A log file is set aside (`daemon.log` → `daemon.log.1`) at this size…
const LOG_FILE_CAP: u64 = 10 * 1024 * 1024;
/// …and this many set-aside files are kept: at most 40 MB of logs per file name.
const LOG_FILES_KEPT: usize = 3;

/// Appends to `dir/file`, rotated by size. Keep the guard alive for as long as logs should
/// be written. For the full-screen workbench: nothing else is written to the terminal.
pub fn to_file(dir: &Path, file: &str) -> std::io::Result<WorkerGuard> {
    init_file(dir, file, None)
}

/// As [`to_file`], for a service (the daemon, the hub): its log goes to stderr as well
/// under systemd (the journal) or on a terminal ([`mirrored_to_stderr`]).
pub fn to_file_and_journal(dir: &Path, file: &str) -> std::io::Result<WorkerGuard> {
    init_file(dir, file, mirrored_to_stderr())
}

/// Logs to `dir/file`, and to stderr when `mirror` says so (in colour when `Some(true)`).
fn init_file(dir: &Path, file: &str, mirror: Option<bool>) -> std::io::Result<WorkerGuard> {
    std::fs::create_dir_all(dir)?;
    let capped = rotate::SizeCapped::open(dir, file, LOG_FILE_CAP, LOG_FILES_KEPT)?;
    // The writer's queue is allocated whole up front: the default (128,000 lines) was
    // 4 MB of every process's memory. A burst past this many lines drops lines, never
    // blocks the program.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .finish(capped);
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let file = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false);
    let mirror = mirror.map(|ansi| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
    });
    let _ = tracing_subscriber::registry()
        .with(filter("info"))
        .with(file)
        .with(mirror)
        .try_init();
    Ok(guard)
}

/// Whether a long-running process's log goes to stderr too, and in colour: under systemd
/// (its stderr is the journal: plain) or on a terminal (coloured unless `NO_COLOR`).
/// Started by a client, its stderr is a file the client reads when the start fails: not
/// mirrored there.
fn mirrored_to_stderr() -> Option<bool> {
    use std::io::IsTerminal as _;
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        return Some(false);
    }
    std::io::stderr()
        .is_terminal()
        .then(|| std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()))
}

/// Warnings and errors to stderr.
pub fn to_stderr() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter("warn"))
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}

/// Records panics in the log as well as on stderr, so a background task that dies leaves
/// a trace where the daemon's other messages are.
pub fn log_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!("panic: {info}");
        default(info);
    }));
}

/// The span of work on one session: what is logged inside it carries the session's id.
pub fn session_span(id: &str) -> tracing::Span {
    tracing::info_span!("session", session = %id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What `emit` logs through the default filter at `level`.
    fn logged(level: &str, emit: impl FnOnce()) -> String {
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&lines);
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(default_filter(level)))
            .with_writer(move || Writer(Arc::clone(&sink)))
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(lines.lock().unwrap().clone()).unwrap()
    }

    struct Writer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_matrix_libraries_keep_quiet_and_crucible_does_not() {
        let log = logged("info", || {
            tracing::error!(target: "matrix_sdk::encryption", "secret storage is not set up");
            tracing::warn!(target: "matrix_sdk_crypto::backups", "no backup");
            tracing::warn!(target: "ruma_common::serde", "odd field");
            tracing::info!(target: "crucible::daemon::matrix", "the bot is logged in");
            tracing::warn!(target: "crucible::daemon::matrix", "sync failed");
        });
        assert!(!log.contains("secret storage"), "{log}");
        assert!(!log.contains("no backup"), "{log}");
        assert!(!log.contains("odd field"), "{log}");
        assert!(log.contains("the bot is logged in"), "{log}");
        assert!(log.contains("sync failed"), "{log}");
    }
}
