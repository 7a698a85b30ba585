//! What the store can fail with, each kind with what caused it: the engine's or the
//! server's own error, the record that did not decode, the limit a write passed.

use std::path::PathBuf;
use std::sync::Arc;

use super::schema::SCHEMA_VERSION;

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the database at {url}: {message}")]
    Open { url: String, message: String },
    /// The engine or the server refused a query.
    #[error("database error: {0}")]
    Db(#[from] surrealdb::Error),
    /// The embedded engine's key-value layer, read below SurrealQL, refused.
    #[error("database error: {0:#}")]
    Engine(Arc<anyhow::Error>),
    /// A blocking task of the store did not finish.
    #[error("database error: {0}")]
    Task(#[source] Arc<tokio::task::JoinError>),
    /// The journal could not be written; writes stop (see [`StoreError::Stopped`]).
    #[error("database error: cannot write the journal: {0}")]
    Journal(#[source] Arc<std::io::Error>),
    /// A read failed because the engine could not read a table file back as written.
    #[error("database error: {0}. {what_to_do}", what_to_do = crate::protocol::check::WHAT_TO_DO)]
    Unreadable(#[source] Box<StoreError>),
    /// Team mode on a store that is not a server.
    #[error("database error: team mode needs a SurrealDB server (store.url = \"ws://…\")")]
    NotShared,
    /// One of the ledger's writers (the inbox's, the transcripts') is gone.
    #[error("database error: the {0} writer has stopped")]
    WriterStopped(&'static str),
    #[error(
        "the database holds schema version {found}, newer than this build understands ({SCHEMA_VERSION}); upgrade crucible"
    )]
    TooNew { found: i64 },
    /// A record is not what its table holds.
    #[error("unexpected data in the database: {0}")]
    Decode(#[source] Arc<serde_json::Error>),
    /// A session's stored context stack is not what a stack holds.
    #[error("unexpected data in the database: the context stack of session {session_id}: {damage}")]
    DamagedStack {
        session_id: String,
        #[source]
        damage: StackDamage,
    },
    #[error("unexpected data in the database: a record is not an object")]
    NotAnObject,
    #[error("unexpected data in the database: {field} {text:?}: {source}")]
    NotADatetime {
        field: String,
        text: String,
        source: chrono::ParseError,
    },
    /// A storage failure (a full disk, an I/O error) stopped writes until a restart.
    /// Nothing was written.
    #[error(
        "the database stopped taking writes after a storage failure ({why}); everything \
         acknowledged before it is kept. Fix the cause (free disk space), then restart the \
         daemon (cru daemon stop)"
    )]
    Stopped { why: String },
    /// The disk is below the free-space reserve. Nothing was written.
    #[error(
        "the disk holding {} is nearly full: {} MiB free, and crucible keeps {} MiB in \
         reserve so that nothing already stored can be damaged; free some space \
         (store.reserve_mb sets the reserve)",
        .path.display(), .free / MIB, .reserve / MIB
    )]
    DiskFull {
        path: PathBuf,
        free: u64,
        reserve: u64,
    },
    /// One change is larger than the store keeps in one piece (a context entry past
    /// its cap); it alone is refused, nothing of it was written, and the store goes on.
    #[error(
        "the context entry #{seq} ({kind}) is {} KiB stored; a context stack keeps entries \
         of at most {} KiB, so it was not added (the stack is as it was)",
        .bytes.div_ceil(1024), .cap / 1024
    )]
    TooLarge {
        seq: u64,
        kind: &'static str,
        bytes: usize,
        cap: usize,
    },
    /// The database server does not answer (team mode); see `remote.rs`.
    #[error(
        "the database server at {url} is unreachable ({why}); {}. The daemon reconnects in \
         the background and takes writes again once it answers",
        outcome(.in_flight)
    )]
    Unreachable {
        url: String,
        why: String,
        in_flight: bool,
    },
    /// The server did not start the live queries in time (team mode).
    #[error("database error: the server did not start the live queries")]
    LiveNotStarted,
    /// A live query on the shared database failed (team mode).
    #[error("{0}")]
    LiveFailed(#[source] surrealdb::Error),
    /// A live query on the shared database ended (team mode).
    #[error("the live query on {table} ended ({action})")]
    LiveEnded { table: &'static str, action: String },
}

/// What became of a request the server did not answer.
fn outcome(in_flight: &bool) -> &'static str {
    if *in_flight {
        "the request may or may not have been stored"
    } else {
        "nothing was sent, so nothing was stored"
    }
}

/// What is wrong with a stored context stack.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StackDamage {
    /// Its header (the stack, or its skeleton) does not decode.
    #[error("{0}")]
    Header(#[source] Arc<serde_json::Error>),
    #[error("entry #{0} is missing")]
    Missing(u64),
    #[error("entry #{seq}: {source}")]
    Entry {
        seq: u64,
        source: Arc<serde_json::Error>,
    },
    /// Its entries and checkpoints do not hold together.
    #[error("{0}")]
    Parts(#[source] crate::context::StackError),
}

impl StackDamage {
    pub(super) fn entry(seq: u64, e: serde_json::Error) -> Self {
        StackDamage::Entry {
            seq,
            source: Arc::new(e),
        }
    }
}

impl From<serde_json::Error> for StackDamage {
    fn from(e: serde_json::Error) -> Self {
        StackDamage::Header(Arc::new(e))
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Decode(Arc::new(e))
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Why the database could not be opened; [`StoreError::Open`] joins it with the URL.
#[derive(Debug, thiserror::Error)]
pub enum OpenFailure {
    /// The embedded engine refused: its files, its version, its bootstrap.
    #[error("{0:#}")]
    Engine(anyhow::Error),
    /// The embedded engine would not take the datastore it built.
    #[error("{0}")]
    Attach(#[source] surrealdb::Error),
    /// The disk holding the database: its folder.
    #[error("{0}")]
    Disk(#[source] std::io::Error),
    /// Too little free space on the disk holding the database to open it safely.
    #[error(
        "only {} MiB free on the disk holding the database; crucible needs {} MiB in \
         reserve to open it safely (store.reserve_mb)",
        .free / MIB, .reserve / MIB
    )]
    NoRoom { free: u64, reserve: u64 },
    /// The database server: no answer, another version, a refused sign-in, or the TLS
    /// settings to reach it.
    #[error("{0}")]
    Server(String),
}

/// Whether an engine error says a table file could not be read back as written.
pub fn is_unreadable(e: &StoreError) -> bool {
    says_unreadable(&e.to_string())
}

/// Whether an engine's message says a table file could not be read back as written.
pub(super) fn says_unreadable(text: &str) -> bool {
    let text = text.to_lowercase();
    text.contains("checksum") || text.contains("corrupt") || text.contains("sstable error")
}

/// Whether the engine refused a transaction because another wrote the same keys first
/// (it rolled back, and may be run again).
pub(super) fn is_conflict(error: &StoreError) -> bool {
    matches!(error, StoreError::Db(e) if says_conflict(&e.to_string()))
}

fn says_conflict(text: &str) -> bool {
    text.contains("Transaction conflict") || text.contains("can be retried")
}

/// Runs `attempt` again while the engine refuses it as a conflict, `tries` times in all,
/// pausing `pause` after the first refusal and twice as long after each next one.
pub(super) async fn again_on_conflict<T, F>(
    tries: u32,
    mut pause: std::time::Duration,
    mut attempt: impl FnMut() -> F,
) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut tried = 1;
    loop {
        match attempt().await {
            Err(e) if tried < tries && is_conflict(&e) => {
                tracing::debug!(error = %e, "a conflicting write; again");
                tokio::time::sleep(pause).await;
                pause *= 2;
                tried += 1;
            }
            done => return done,
        }
    }
}
