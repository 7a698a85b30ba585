//! Transcript entries are group-committed: the entries every session hands in while a
//! commit is under way share the next transaction and its one journal fsync, and each
//! caller is answered once its own entries are durable. With many sessions streaming, a
//! message no longer waits behind every other session's fsync.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::Ledger;
use super::error::{LedgerError, Result};
use crate::config::MAX_LIST_LIMIT;
use crate::protocol::{ConflictReport, Event, OutputChunk, TranscriptEntry, TranscriptParams};
use crate::store::{Store, StoreError};

pub(super) type AppendJob = (
    Vec<TranscriptEntry>,
    oneshot::Sender<std::result::Result<(), StoreError>>,
);

/// The most appends waiting to be taken at once, and the most bytes of text committed in
/// one transaction: well inside the engine's write buffer (8 MiB by default), which also
/// holds what the full-text index writes for every word of the text (a few times the
/// text) and for every entry.
pub(super) const MAX_APPEND_JOBS: usize = 512;
const MAX_APPEND_BYTES: usize = 128 * 1024;

impl Ledger {
    /// Stores transcript entries durably (group-committed with other sessions'), then
    /// announces them.
    pub async fn append_transcript(&self, entries: Vec<TranscriptEntry>) -> Result<()> {
        let stopped = || StoreError::WriterStopped("transcript");
        let (ack, done) = oneshot::channel();
        self.appends
            .send((entries.clone(), ack))
            .await
            .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())??;
        for entry in entries {
            self.publish(Event::Transcript(entry));
        }
        Ok(())
    }

    /// Announces streamed text; it is stored later as part of a whole entry.
    /// The conflict radar changed.
    pub fn publish_conflicts(&self, report: ConflictReport) {
        self.publish(Event::Conflicts(report));
    }

    /// The Matrix bot's emoji verification began, showed its emoji or ended.
    pub fn publish_verification(&self, verification: crate::protocol::MatrixVerification) {
        self.publish(Event::MatrixVerification(verification));
    }

    pub fn publish_output(&self, chunk: OutputChunk) {
        self.publish(Event::Output(chunk));
    }

    pub async fn transcript(&self, params: &TranscriptParams) -> Result<Vec<TranscriptEntry>> {
        self.get_session(&params.session_id)?;
        let limit = params.limit.unwrap_or(MAX_LIST_LIMIT);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(LedgerError::Invalid(format!(
                "limit must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        Ok(self
            .store
            .records()
            .transcript(&params.session_id, params.after.unwrap_or(0), limit)
            .await?)
    }
}

pub(super) async fn transcript_writer(store: Arc<Store>, mut jobs: mpsc::Receiver<AppendJob>) {
    let mut batch = Vec::with_capacity(MAX_APPEND_JOBS);
    while jobs.recv_many(&mut batch, MAX_APPEND_JOBS).await > 0 {
        for group in groups(batch.drain(..)) {
            commit(&store, group).await;
        }
    }
}

/// Consecutive jobs, in order, each group under [`MAX_APPEND_BYTES`] (a larger job alone).
fn groups(jobs: impl Iterator<Item = AppendJob>) -> Vec<Vec<AppendJob>> {
    let mut groups: Vec<Vec<AppendJob>> = Vec::new();
    let mut bytes = 0;
    for job in jobs {
        let size: usize = job.0.iter().map(entry_bytes).sum();
        match groups.last_mut() {
            Some(group) if bytes + size <= MAX_APPEND_BYTES => {
                bytes += size;
                group.push(job);
            }
            _ => {
                bytes = size;
                groups.push(vec![job]);
            }
        }
    }
    groups
}

fn entry_bytes(entry: &TranscriptEntry) -> usize {
    256 + entry.text.as_ref().map_or(0, String::len)
}

/// One transaction for the group; if it fails, each job on its own, so one refused
/// entry fails only its own session's append.
async fn commit(store: &Store, group: Vec<AppendJob>) {
    if group.len() > 1 {
        let entries: Vec<TranscriptEntry> = group
            .iter()
            .flat_map(|(entries, _)| entries.iter().cloned())
            .collect();
        if store.records().append_transcript(&entries).await.is_ok() {
            for (_, ack) in group {
                let _ = ack.send(Ok(()));
            }
            return;
        }
    }
    for (entries, ack) in group {
        let outcome = store.records().append_transcript(&entries).await;
        if let Err(e) = &outcome {
            tracing::error!(count = entries.len(), "transcript write failed: {e}");
        }
        let _ = ack.send(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EntryKind;

    fn entry(session: &str, seq: u64) -> TranscriptEntry {
        TranscriptEntry {
            session_id: session.into(),
            seq,
            at: "2026-11-25T10:00:00Z".into(),
            kind: EntryKind::Message,
            text: Some(format!("{session} line {seq}")),
            tool_call_id: None,
            status: None,
        }
    }

    #[tokio::test]
    async fn appends_of_many_sessions_share_commits_and_a_refused_one_fails_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Arc::new(
            Store::open(&Default::default(), &tmp.path().join("db"))
                .await
                .unwrap(),
        );
        store
            .records()
            .append_transcript(&[entry("s0", 1)])
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(MAX_APPEND_JOBS);
        // Queued before the writer starts, so they are taken as one batch.
        let mut waits = Vec::new();
        for session in 0..20 {
            let (ack, done) = oneshot::channel();
            let entries = vec![
                entry(&format!("s{session}"), 1),
                entry(&format!("s{session}"), 2),
            ];
            tx.send((entries, ack)).await.unwrap();
            waits.push(done);
        }
        tokio::spawn(transcript_writer(Arc::clone(&store), rx));
        let mut outcomes = Vec::new();
        for done in waits {
            outcomes.push(done.await.unwrap());
        }
        // s0's seq 1 is stored already: its append is refused, every other one is kept.
        assert!(outcomes[0].is_err(), "{:?}", outcomes[0]);
        assert!(outcomes[1..].iter().all(|o| o.is_ok()), "{outcomes:?}");
        for session in 1..20 {
            let kept = store
                .records()
                .transcript(&format!("s{session}"), 0, 10)
                .await
                .unwrap();
            assert_eq!(kept.len(), 2, "s{session}");
        }
        assert_eq!(
            store.records().transcript("s0", 0, 10).await.unwrap().len(),
            1
        );
        store.close().await;
    }
}
