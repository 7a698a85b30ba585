//! The versioned schema. Each migration moves a kiln's database up one version, inside a
//! transaction with the version bump, so an interrupted upgrade leaves the old version.

/// The version this build writes. A database newer than this is refused, not guessed at.
pub const SCHEMA_VERSION: i64 = 21;

/// Every table crucible keeps, in the order a rebuild writes them.
pub const TABLES: &[&str] = &[
    "crucible_meta",
    "sessions",
    "inbox_messages",
    "transcript",
    "handles",
    "context_stacks",
    "context_entries",
    "context_history",
    "deleted_sessions",
    "daemons",
    "commands",
];

/// `MIGRATIONS[n]` takes a database from version `n` to `n + 1`.
pub const MIGRATIONS: &[&str] = &[
    // v1: the session registry and the inbox. Record keys are ULID strings (each
    // record's `id`); ULIDs sort by creation time.
    r#"
    DEFINE TABLE sessions SCHEMAFULL;
    DEFINE FIELD worktree ON sessions TYPE option<string>;
    DEFINE FIELD agent_type ON sessions TYPE string;
    DEFINE FIELD agent_name ON sessions TYPE string;
    DEFINE FIELD status ON sessions TYPE string;
    DEFINE FIELD started_at ON sessions TYPE datetime;
    DEFINE FIELD last_heartbeat ON sessions TYPE datetime;
    DEFINE FIELD display_name ON sessions TYPE string;
    DEFINE INDEX idx_sessions_status ON sessions FIELDS status;

    DEFINE TABLE inbox_messages SCHEMAFULL;
    DEFINE FIELD session_id ON inbox_messages TYPE string;
    DEFINE FIELD session_name ON inbox_messages TYPE string;
    DEFINE FIELD timestamp ON inbox_messages TYPE datetime;
    DEFINE FIELD msg_type ON inbox_messages TYPE string;
    DEFINE FIELD title ON inbox_messages TYPE string;
    DEFINE FIELD body ON inbox_messages TYPE option<string>;
    DEFINE FIELD options ON inbox_messages TYPE option<array<string>>;
    DEFINE FIELD read ON inbox_messages TYPE bool DEFAULT false;
    DEFINE FIELD responded ON inbox_messages TYPE bool DEFAULT false;
    DEFINE FIELD response ON inbox_messages TYPE option<string>;
    DEFINE INDEX idx_inbox_unread ON inbox_messages FIELDS read, timestamp;
    DEFINE INDEX idx_inbox_session ON inbox_messages FIELDS session_id;
    "#,
    // v2: sessions whose agent crucible runs (lifecycle state, worktree, resumable
    // conversation) and their transcripts.
    r#"
    DEFINE FIELD state ON sessions TYPE option<string>;
    DEFINE FIELD state_reason ON sessions TYPE option<string>;
    DEFINE FIELD task ON sessions TYPE option<string>;
    DEFINE FIELD branch ON sessions TYPE option<string>;
    DEFINE FIELD worktree_owned ON sessions TYPE bool DEFAULT false;
    DEFINE FIELD acp_session_id ON sessions TYPE option<string>;
    DEFINE FIELD agent_pid ON sessions TYPE option<int>;
    DEFINE FIELD updated_at ON sessions TYPE option<datetime>;

    DEFINE TABLE transcript SCHEMAFULL;
    DEFINE FIELD session_id ON transcript TYPE string;
    DEFINE FIELD seq ON transcript TYPE int;
    DEFINE FIELD at ON transcript TYPE datetime;
    DEFINE FIELD kind ON transcript TYPE string;
    DEFINE FIELD text ON transcript TYPE option<string>;
    DEFINE FIELD tool_call_id ON transcript TYPE option<string>;
    DEFINE FIELD status ON transcript TYPE option<string>;
    DEFINE INDEX idx_transcript_session ON transcript FIELDS session_id, seq UNIQUE;
    "#,
    // v3: session handles, kept as SHA-256 digests (the record key), and
    // termination records; questions withdrawn without an answer.
    r#"
    DEFINE TABLE handles SCHEMAFULL;
    DEFINE FIELD session_id ON handles TYPE string;
    DEFINE INDEX idx_handles_session ON handles FIELDS session_id;

    DEFINE FIELD ended_at ON sessions TYPE option<datetime>;
    DEFINE FIELD exit_code ON sessions TYPE option<int>;

    DEFINE FIELD withdrawn ON inbox_messages TYPE bool DEFAULT false;
    "#,
    // v4: context stacks (one record per session, keyed by its id; the stack is kept as
    // its checked JSON form) and the audit history of every change to them, so entries
    // that leave the stack are never lost; sessions' bounded context summaries.
    r#"
    DEFINE TABLE context_stacks SCHEMAFULL;
    DEFINE FIELD stack ON context_stacks TYPE string;
    DEFINE FIELD fresh_start ON context_stacks TYPE bool DEFAULT false;
    DEFINE FIELD history_len ON context_stacks TYPE int DEFAULT 0;
    DEFINE FIELD updated_at ON context_stacks TYPE datetime;

    DEFINE TABLE context_history SCHEMAFULL;
    DEFINE FIELD session_id ON context_history TYPE string;
    DEFINE FIELD seq ON context_history TYPE int;
    DEFINE FIELD at ON context_history TYPE datetime;
    DEFINE FIELD operation ON context_history TYPE string;
    DEFINE FIELD change ON context_history TYPE string;
    DEFINE INDEX idx_context_history ON context_history FIELDS session_id, seq UNIQUE;

    DEFINE FIELD context_summary ON sessions TYPE option<string>;
    DEFINE FIELD turn_count ON sessions TYPE int DEFAULT 0;
    "#,
    // v5: deleted sessions whose transcript and context history are still being removed
    // (in bounded batches); finished at the next start if the daemon ends first.
    r#"
    DEFINE TABLE deleted_sessions SCHEMAFULL;
    DEFINE FIELD at ON deleted_sessions TYPE datetime;
    "#,
    // v6: where a session's agent runs (its driver spec as JSON text: names, never
    // values) and the limits in force on it.
    r#"
    DEFINE FIELD driver ON sessions TYPE option<string>;
    DEFINE FIELD limits ON sessions TYPE array<string> DEFAULT [];
    "#,
    // v7: a session's security state (what the rules know of it), as JSON text.
    r#"
    DEFINE FIELD security ON sessions TYPE option<string>;
    "#,
    // v8: the agent's own commands (ACP available_commands_update).
    r#"
    DEFINE FIELD skills ON sessions TYPE array<string> DEFAULT [];
    "#,
    // v9: the branch a session's branch was made from (what it is diffed against and
    // merged into), the ACP kinds of an approval's options, and a session's usage (JSON
    // text).
    r#"
    DEFINE FIELD base_branch ON sessions TYPE option<string>;
    DEFINE FIELD option_kinds ON inbox_messages TYPE option<array<string>>;
    DEFINE FIELD usage ON sessions TYPE option<string>;
    "#,
    // v10: the channel and conversation of a session started from outside (JSON text).
    r#"
    DEFINE FIELD channel ON sessions TYPE option<string>;
    "#,
    // v11: team mode. The daemon that runs a session (its owner) and the host it runs
    // on; who last wrote a record other daemons watch (`origin`); the daemons sharing the
    // database, each holding its sessions under a lease; and the commands one daemon
    // sends another for a session the other runs.
    r#"
    DEFINE FIELD owner ON sessions TYPE option<string>;
    DEFINE FIELD host ON sessions TYPE option<string>;
    DEFINE FIELD origin ON sessions TYPE option<string>;
    DEFINE FIELD origin ON inbox_messages TYPE option<string>;
    DEFINE FIELD origin ON transcript TYPE option<string>;
    DEFINE INDEX idx_sessions_owner ON sessions FIELDS owner;

    DEFINE TABLE daemons SCHEMAFULL;
    DEFINE FIELD host ON daemons TYPE string;
    DEFINE FIELD kiln ON daemons TYPE string;
    DEFINE FIELD pid ON daemons TYPE int;
    DEFINE FIELD started_at ON daemons TYPE datetime;
    DEFINE FIELD lease_until ON daemons TYPE datetime;
    DEFINE FIELD taken_by ON daemons TYPE option<string>;

    DEFINE TABLE commands SCHEMAFULL;
    DEFINE FIELD target ON commands TYPE string;
    DEFINE FIELD origin ON commands TYPE string;
    DEFINE FIELD method ON commands TYPE string;
    DEFINE FIELD params ON commands TYPE string;
    DEFINE FIELD at ON commands TYPE datetime;
    DEFINE FIELD done ON commands TYPE bool DEFAULT false;
    DEFINE FIELD result ON commands TYPE option<string>;
    DEFINE FIELD error_code ON commands TYPE option<int>;
    DEFINE FIELD error ON commands TYPE option<string>;
    DEFINE INDEX idx_commands_target ON commands FIELDS target, done;
    "#,
    // v12: for an approval a rule asked for, the rule and the operation it covers (named on
    // screen, and confirmed by name before it is approved).
    r#"
    DEFINE FIELD rule ON inbox_messages TYPE option<string>;
    DEFINE FIELD operation ON inbox_messages TYPE option<string>;
    "#,
    // v13: what a deletion still has to remove from git (the session's worktree and
    // branch), kept on its tombstone until it is gone, so that a deletion cut short
    // (a kill -9) is finished at the next start.
    r#"
    DEFINE FIELD worktree ON deleted_sessions TYPE option<string>;
    DEFINE FIELD branch ON deleted_sessions TYPE option<string>;
    DEFINE FIELD force ON deleted_sessions TYPE bool DEFAULT false;
    "#,
    // v14: what a session spent (tokens and cost, by day) and how far its budget was
    // raised (JSON text); the lineage of a hand-off from one agent to another.
    r#"
    DEFINE FIELD spent ON sessions TYPE option<string>;
    DEFINE FIELD handed_from ON sessions TYPE option<string>;
    DEFINE FIELD handed_to ON sessions TYPE option<string>;
    "#,
    // v15: full-text search (ranked, with the matched words marked) over transcript
    // entries, inbox messages and sessions' names and tasks. Words are split at spaces,
    // punctuation and changes of character class, folded to lower-case ASCII and to
    // their English stems, so "failing" finds "failed".
    r#"
    DEFINE ANALYZER crucible_words TOKENIZERS blank, class, punct
        FILTERS lowercase, ascii, snowball(english);
    DEFINE INDEX search_transcript ON transcript FIELDS text
        FULLTEXT ANALYZER crucible_words BM25 HIGHLIGHTS;
    DEFINE INDEX search_inbox_title ON inbox_messages FIELDS title
        FULLTEXT ANALYZER crucible_words BM25 HIGHLIGHTS;
    DEFINE INDEX search_inbox_body ON inbox_messages FIELDS body
        FULLTEXT ANALYZER crucible_words BM25 HIGHLIGHTS;
    DEFINE INDEX search_session_name ON sessions FIELDS display_name
        FULLTEXT ANALYZER crucible_words BM25 HIGHLIGHTS;
    DEFINE INDEX search_session_task ON sessions FIELDS task
        FULLTEXT ANALYZER crucible_words BM25 HIGHLIGHTS;
    "#,
    // v16: the prompts a session acknowledged and has not yet given its agent, and the
    // prompt of the turn running (or, once interrupted, of the turn cut short), so that a
    // restart loses no prompt and can send a cut turn again.
    r#"
    DEFINE FIELD queued ON sessions TYPE option<array<string>>;
    DEFINE FIELD turn_prompt ON sessions TYPE option<string>;
    "#,
    // v17: who answered a message, and through which channel.
    r#"
    DEFINE FIELD answered_by ON inbox_messages TYPE option<string>;
    "#,
    // v18: what a question crucible asks itself is for (a context miss and its path, a
    // budget reached, an approval), as JSON text, so its answer is acted on by that and
    // not by its words.
    r#"
    DEFINE FIELD purpose ON inbox_messages TYPE option<string>;
    "#,
    // v19: context stacks in pieces, so that a stack of any size keeps recording: each
    // entry on a stack is a record of its own (`<session>-<seq>`, written once), and the
    // stack's record keeps the rest, with the seq ranges of the entries on it
    // (`on_stack`). A stack written whole (`on_stack` absent) is stored again in pieces
    // when it is next read. (Idempotent, as a test taking a database back to an earlier
    // version runs it again.)
    r#"
    DEFINE TABLE IF NOT EXISTS context_entries SCHEMAFULL;
    DEFINE FIELD IF NOT EXISTS session_id ON context_entries TYPE string;
    DEFINE FIELD IF NOT EXISTS seq ON context_entries TYPE int;
    DEFINE FIELD IF NOT EXISTS entry ON context_entries TYPE string;
    DEFINE FIELD IF NOT EXISTS on_stack ON context_stacks TYPE option<array<array<int>>>;
    "#,
    // v20: a question's digest (what was asked: its kind, words and choices), which an
    // answer may name so that it answers only the question its sender was shown.
    r#"
    DEFINE FIELD IF NOT EXISTS digest ON inbox_messages TYPE option<string>;
    "#,
    // v21: a session whose task went on with another profile of its fallback chain (a
    // usage limit, or the task's return at the limit's reset): to which, why and when
    // (JSON text).
    r#"
    DEFINE FIELD IF NOT EXISTS switched ON sessions TYPE option<string>;
    "#,
];

/// Where the version is kept.
pub const META_TABLE: &str = r#"
    DEFINE TABLE IF NOT EXISTS crucible_meta SCHEMAFULL;
    DEFINE FIELD IF NOT EXISTS version ON crucible_meta TYPE int;
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_migration_per_version() {
        assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
    }
}
