//! Full-text search through the engine's search indexes (schema v15): transcript entries'
//! text, inbox messages' titles and bodies, sessions' names and tasks. The engine ranks
//! (BM25) and marks the matched words; what is shown is an excerpt around the first mark.

use serde::Deserialize;
use serde_json::json;

use super::conn::{Conn, Store};
use super::error::{Result, StoreError};
use crate::protocol::{EntryKind, HitKind, SearchHit};

/// What the engine puts around a matched word (control characters no text of ours is
/// shown with; [`excerpt`] takes them out).
const OPEN: char = '\u{2}';
const CLOSE: char = '\u{3}';

/// Characters of an excerpt.
pub const EXCERPT_CHARS: usize = 160;

/// The most transcript entries (or inbox messages, or sessions) one search ranks of a
/// field. Ranking reads every match (about 50 µs each on these machines), so a query
/// whose words are in more than this is answered with the first ones found instead,
/// best of them first, and said to be broad: a word more narrows it.
pub const RANK_CAP: usize = 500;

#[derive(Deserialize)]
struct EntryRow {
    session_id: String,
    seq: u64,
    kind: EntryKind,
    at: String,
    score: Option<f64>,
    marked: Option<String>,
}

/// An inbox message or a session found by one of its fields: for a message its
/// session's id and name, for a session its name (`id` is the session's).
#[derive(Deserialize)]
struct RecordRow {
    id: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    name: String,
    at: String,
    score: Option<f64>,
    marked: Option<String>,
}

impl Store {
    /// The best `limit` of each kind in `kinds` for `query` (all its words must match),
    /// best first; `session_id` keeps to one session. Names of sessions are left for the
    /// caller, except on session hits. True beside them when the query's words are in
    /// more than [`RANK_CAP`] transcript entries, or inbox messages' titles or bodies, or
    /// sessions' names or tasks: those hits are the first found, not the best of all.
    pub async fn search(
        &self,
        query: &str,
        session_id: Option<&str>,
        kinds: &[HitKind],
        limit: u32,
    ) -> Result<(Vec<SearchHit>, bool)> {
        let within = if session_id.is_some() {
            "AND session_id = $session_id"
        } else {
            ""
        };
        let within_session = if session_id.is_some() {
            "AND record::id(id) = $session_id"
        } else {
            ""
        };
        let vars = json!({
            "query": query,
            "session_id": session_id,
            "limit": limit,
            "open": OPEN.to_string(),
            "close": CLOSE.to_string(),
        });
        let mut hits = Vec::new();
        let mut broad = false;
        if kinds.contains(&HitKind::Transcript) {
            let (found, wide) = self
                .transcript_hits(within, session_id.is_some(), &vars)
                .await?;
            hits.extend(found);
            broad = wide;
        }
        if kinds.contains(&HitKind::Inbox) {
            let columns = "session_id, session_name AS name, timestamp AS at";
            let (rows, wide) = self
                .by_fields("inbox_messages", &["title", "body"], columns, within, &vars)
                .await?;
            broad |= wide;
            hits.extend(rows.into_iter().map(|(r, marked)| {
                let mut hit = record_hit(
                    HitKind::Inbox,
                    r.session_id.unwrap_or_default(),
                    r.name,
                    r.at,
                    r.score,
                    marked,
                );
                hit.message_id = Some(r.id);
                hit
            }));
        }
        if kinds.contains(&HitKind::Session) {
            let columns = "display_name AS name, started_at AS at";
            let (rows, wide) = self
                .by_fields(
                    "sessions",
                    &["display_name", "task"],
                    columns,
                    within_session,
                    &vars,
                )
                .await?;
            broad |= wide;
            hits.extend(rows.into_iter().map(|(r, marked)| {
                record_hit(HitKind::Session, r.id, r.name, r.at, r.score, marked)
            }));
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok((hits, broad))
    }

    /// The transcript entries that match, ranked unless more than [`RANK_CAP`] do (then
    /// the first found, and true beside them). `one_session`: `within` keeps to one.
    async fn transcript_hits(
        &self,
        within: &str,
        one_session: bool,
        vars: &serde_json::Value,
    ) -> Result<(Vec<SearchHit>, bool)> {
        // Without an order the engine stops at the limit: how many match, up to one
        // more than are ranked, is cheap to learn. Within one session the engine
        // intersects the word's entries with the session's index before reading any,
        // and ranking is cheap, while the probe would filter entry by entry.
        let mut broad = false;
        if !one_session {
            let probe = format!(
                "SELECT VALUE seq FROM transcript WHERE text @1@ $query LIMIT {}",
                RANK_CAP + 1
            );
            let matches: Vec<u64> = self.rows(&probe, vars.clone(), 0).await?;
            broad = matches.len() > RANK_CAP;
        }
        let order = if broad { "" } else { "ORDER BY score DESC" };
        let sql = format!(
            "SELECT session_id, seq, kind, at, search::score(1) AS score,
                search::highlight($open, $close, 1) AS marked
             FROM transcript WHERE text @1@ $query {within}
             {order} LIMIT $limit"
        );
        let rows: Vec<EntryRow> = self.rows(&sql, vars.clone(), 0).await?;
        let hits = rows.into_iter().map(|r| {
            let (snippet, marks) = excerpt(r.marked.as_deref().unwrap_or(""), EXCERPT_CHARS);
            SearchHit {
                kind: HitKind::Transcript,
                session_id: r.session_id,
                session_name: String::new(),
                seq: Some(r.seq),
                entry_kind: Some(r.kind),
                message_id: None,
                at: r.at,
                score: r.score.unwrap_or(0.0),
                snippet,
                marks,
                kiln: None,
            }
        });
        Ok((hits.collect(), broad))
    }
}

impl Store {
    /// The records of `table` whose `fields` match, one statement per field (the engine
    /// scores a match of one index only), merged; true beside them when a field matches
    /// in more than [`RANK_CAP`] records, whose hits are then the first found (as the
    /// transcript's are).
    async fn by_fields(
        &self,
        table: &str,
        fields: &[&str],
        columns: &str,
        within: &str,
        vars: &serde_json::Value,
    ) -> Result<(Vec<(RecordRow, Option<String>)>, bool)> {
        let mut found = Vec::new();
        let mut broad = false;
        for field in fields {
            // As for the transcript: how many match, up to one more than are ranked,
            // without an order (the engine stops at the limit); within one session the
            // engine narrows first, and ranking is cheap.
            let wide = if within.is_empty() {
                let probe = format!(
                    "SELECT VALUE record::id(id) FROM {table} WHERE {field} @1@ $query LIMIT {}",
                    RANK_CAP + 1
                );
                let matches: Vec<serde_json::Value> = self.rows(&probe, vars.clone(), 0).await?;
                matches.len() > RANK_CAP
            } else {
                false
            };
            broad |= wide;
            let order = if wide { "" } else { "ORDER BY score DESC" };
            let sql = format!(
                "SELECT record::id(id) AS id, {columns},
                    search::score(1) AS score, search::highlight($open, $close, 1) AS marked
                 FROM {table} WHERE {field} @1@ $query {within}
                 {order} LIMIT $limit"
            );
            let rows: Vec<RecordRow> = self.rows(&sql, vars.clone(), 0).await?;
            for row in rows {
                merge(&mut found, row);
            }
        }
        Ok((found, broad))
    }
}

impl Store {
    /// How many changes each search index holds that the engine has not merged into it
    /// yet, by index name (an embedded store only). Every indexed write leaves its
    /// changes beside the index, and the engine's compaction folds them in shortly after
    /// in rounds of bounded size; searches read them meanwhile, at a cost that grows
    /// with them. A backlog that stays is a compaction that fails.
    pub async fn search_backlog(&self) -> Result<Vec<(String, usize)>> {
        let Conn::Local(_, ds) = &self.conn else {
            return Ok(Vec::new());
        };
        let Some(names) = self.index_names().await else {
            return Ok(Vec::new());
        };
        let db_err = |e: anyhow::Error| StoreError::Engine(std::sync::Arc::new(e));
        let tx = ds
            .transaction(surrealdb_kvs::TransactionType::Read)
            .await
            .map_err(db_err)?;
        let mut backlog = Vec::new();
        let mut indexes: Vec<_> = names
            .indexes
            .iter()
            .filter(|(_, name)| name.starts_with("search_"))
            .collect();
        indexes.sort_by(|a, b| a.1.cmp(b.1));
        for ((table, ix), name) in indexes {
            // `/*<ns>*<db>*<table>\0+<index>` then the kind of key: `!tx` a write's
            // changes to one word's entries, `!tt` older per-entry ones, `!dx` its
            // changes to the index's counts, `!dc` followed by more older ones.
            let mut prefix = b"/*".to_vec();
            prefix.extend(names.ns.to_be_bytes());
            prefix.push(b'*');
            prefix.extend(names.db.to_be_bytes());
            prefix.push(b'*');
            prefix.extend(table.as_bytes());
            prefix.extend([0, b'+']);
            prefix.extend(ix.to_be_bytes());
            let mut pending = 0;
            for family in [&b"!tx"[..], b"!tt", b"!dx", b"!dc\0"] {
                let mut start = prefix.clone();
                start.extend(family);
                let mut end = prefix.clone();
                end.extend(&family[..3]);
                end.push(0xff);
                let range = surrealdb_kvs::key::RawRange::of_bytes(&start, &end);
                match tx.count(range, None).await {
                    Ok(n) => pending += n,
                    Err(e) => {
                        let _ = tx.cancel().await;
                        return Err(db_err(e));
                    }
                }
            }
            backlog.push((name.clone(), pending));
        }
        let _ = tx.cancel().await;
        Ok(backlog)
    }
}

/// A hit on an inbox message or a session, its excerpt from the field that matched.
fn record_hit(
    kind: HitKind,
    session_id: String,
    session_name: String,
    at: String,
    score: Option<f64>,
    marked: Option<String>,
) -> SearchHit {
    let (snippet, marks) = excerpt(marked.as_deref().unwrap_or(""), EXCERPT_CHARS);
    SearchHit {
        kind,
        session_id,
        session_name,
        seq: None,
        entry_kind: None,
        message_id: None,
        at,
        score: score.unwrap_or(0.0),
        snippet,
        marks,
        kiln: None,
    }
}

/// Adds `row`, found by one field, to `found`: a record found by several fields is one
/// hit whose score is their sum, shown by the first field that matched.
fn merge(found: &mut Vec<(RecordRow, Option<String>)>, mut row: RecordRow) {
    match found.iter_mut().find(|(held, _)| held.id == row.id) {
        Some((held, _)) => {
            held.score = Some(held.score.unwrap_or(0.0) + row.score.unwrap_or(0.0));
        }
        None => {
            let marked = row.marked.take();
            found.push((row, marked));
        }
    }
}

/// One line of at most `width` characters from `marked` (text with the engine's marks
/// around matched words), around its first mark: the marks taken out and given as
/// character ranges of the excerpt, whitespace runs made one space, an elided start or
/// end shown with `…`.
pub fn excerpt(marked: &str, width: usize) -> (String, Vec<(usize, usize)>) {
    // The text as characters with whether each is inside a mark, whitespace folded.
    let mut chars: Vec<(char, bool)> = Vec::with_capacity(marked.len());
    let mut inside = false;
    for c in marked.chars() {
        match c {
            OPEN => inside = true,
            CLOSE => inside = false,
            c if c.is_whitespace() || c.is_control() => {
                if chars.last().is_some_and(|(l, _)| *l != ' ') {
                    chars.push((' ', inside));
                }
            }
            c => chars.push((c, inside)),
        }
    }
    while chars.last().is_some_and(|(c, _)| *c == ' ') {
        chars.pop();
    }
    let width = width.max(8);
    let first = chars.iter().position(|(_, m)| *m).unwrap_or(0);
    // Start a fifth of the way before the first match, on a word's start when near.
    let mut start = first.saturating_sub(width / 5);
    if start > 0
        && let Some(space) = chars[start..first].iter().position(|(c, _)| *c == ' ')
    {
        start += space + 1;
    }
    let lead = start > 0;
    let room = width - usize::from(lead);
    let end = (start + room).min(chars.len());
    let tail = end < chars.len();
    let end = if tail { end - 1 } else { end };
    let mut out = String::with_capacity(width * 2);
    let mut marks = Vec::new();
    let mut open: Option<usize> = None;
    let mut at = 0;
    if lead {
        out.push('…');
        at += 1;
    }
    for &(c, m) in &chars[start..end] {
        match (m, open) {
            (true, None) => open = Some(at),
            (false, Some(s)) => {
                marks.push((s, at));
                open = None;
            }
            _ => {}
        }
        out.push(c);
        at += 1;
    }
    if let Some(s) = open {
        marks.push((s, at));
    }
    if tail {
        out.push('…');
    }
    (out, marks)
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
