//! Logs go through `tracing`: to a file under the kiln's state directory for long-running
//! processes (never to stdout while a full-screen program owns the terminal), to stderr
//! for one-shot commands. `CRU_LOG` filters (e.g. `CRU_LOG=debug`). A log file is capped
//! by size ([`rotate`]), so no flood of requests can fill the disk with it.

mod rotate;

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env("CRU_LOG").unwrap_or_else(|_| EnvFilter::new(default))
}

/// Log lines waiting for the log writer thread.
const LOG_QUEUE_LINES: usize = 4096;

/// A log file is set aside (`daemon.log` → `daemon.log.1`) at this size…
const LOG_FILE_CAP: u64 = 10 * 1024 * 1024;
/// …and this many set-aside files are kept: at most 40 MB of logs per file name.
const LOG_FILES_KEPT: usize = 3;

/// Appends to `dir/file`, rotated by size. Keep the guard alive for as long as logs should
/// be written.
pub fn to_file(dir: &Path, file: &str) -> std::io::Result<WorkerGuard> {
    std::fs::create_dir_all(dir)?;
    let capped = rotate::SizeCapped::open(dir, file, LOG_FILE_CAP, LOG_FILES_KEPT)?;
    // The writer's queue is allocated whole up front: the default (128,000 lines) was
    // 4 MB of every process's memory. A burst past this many lines drops lines, never
    // blocks the program.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .finish(capped);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter("info"))
        .with_writer(writer)
        .with_ansi(false)
        .try_init();
    Ok(guard)
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
