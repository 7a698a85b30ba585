//! Search over what the ledger keeps: the store finds and ranks, the ledger checks the
//! request, keeps to sessions that still exist and names them.

use super::Ledger;
use super::error::{LedgerError, Result};
use crate::protocol::{HitKind, SearchHit, SearchParams, SearchResults};

/// Hits given when the caller names no limit, and the most a caller may ask for.
pub const DEFAULT_HITS: u32 = 20;
pub const MAX_HITS: u32 = 200;

impl Ledger {
    pub async fn search(&self, params: &SearchParams) -> Result<SearchResults> {
        let query = params.query.trim();
        if !query.chars().any(char::is_alphanumeric) {
            return Err(LedgerError::Invalid(
                "query must have at least one word to find".into(),
            ));
        }
        let limit = params.limit.unwrap_or(DEFAULT_HITS);
        if !(1..=MAX_HITS).contains(&limit) {
            return Err(LedgerError::Invalid(format!(
                "limit must be between 1 and {MAX_HITS}"
            )));
        }
        if let Some(id) = &params.session_id {
            self.session_or_record(id)?;
        }
        let kinds: Vec<HitKind> = match &params.types {
            Some(kinds) if !kinds.is_empty() => kinds.clone(),
            _ => HitKind::ALL.to_vec(),
        };
        let (hits, broad) = self
            .store
            .search(query, params.session_id.as_deref(), &kinds, limit)
            .await?;
        // A deleted session's transcript is removed in batches after its record: what
        // is left of it is not shown. Inbox messages outlive their session and keep the
        // name they were sent under.
        let mut kept: Vec<SearchHit> = hits
            .into_iter()
            .filter_map(|mut hit| match self.session_or_record(&hit.session_id) {
                Ok(session) => {
                    hit.session_name = session.display_name;
                    Some(hit)
                }
                Err(_) if hit.kind == HitKind::Inbox => Some(hit),
                Err(_) => None,
            })
            .collect();
        kept.truncate(limit as usize);
        Ok(SearchResults { hits: kept, broad })
    }
}
