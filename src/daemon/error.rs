//! Why the daemon cannot start or run on: another daemon holds the kiln, a file or socket
//! it needs, the database.

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The pid is `None` while the other daemon is starting (it holds the lock and has
    /// not written its pid yet).
    #[error("a daemon is already running for this kiln ({})", match .0 {
        Some(pid) => format!("pid {pid}"),
        None => "it is starting".to_string(),
    })]
    AlreadyRunning(Option<u32>),
    #[error(
        "the kiln's pid file is still locked, but daemon {0} that wrote it is gone: a process it started may hold the file open"
    )]
    LockOutlivedDaemon(u32),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
}

/// An I/O failure as a [`DaemonError`] saying what could not be done.
pub(super) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}
