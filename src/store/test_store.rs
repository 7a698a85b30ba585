//! The store's tests share one opener.

use std::path::Path;

use super::Store;
use crate::config::StoreConfig;

/// An in-memory store with the schema, for the store's own tests.
pub(crate) async fn memory_store() -> Store {
    let cfg = StoreConfig {
        url: "mem://".into(),
        ..StoreConfig::default()
    };
    #[allow(clippy::unwrap_used)]
    Store::open(&cfg, Path::new("/nonexistent")).await.unwrap()
}
