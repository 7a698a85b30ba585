//! The params and results of `search`.

use serde::{Deserialize, Serialize};

use crate::protocol::types::{HitKind, SearchHit};

/// `search`: the words to find (every one must match), optionally in one session and of
/// some kinds only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchParams {
    pub query: String,
    #[serde(default)]
    pub session_id: Option<String>,
    /// `transcript`, `inbox`, `session`; all when none is given.
    #[serde(default)]
    pub types: Option<Vec<HitKind>>,
    /// The most hits (default 20, at most 200).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchResults {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The words are in so many transcript entries that not all were ranked: the
    /// transcript hits are the best of the first found. A word more narrows it.
    #[serde(default)]
    pub broad: bool,
}
