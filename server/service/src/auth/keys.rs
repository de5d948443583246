//! API keys: created, listed and revoked by `frontdesk-server keys`, verified by the auth layer.
//!
//! PLACEHOLDER written by the lead so the crate compiles while the key table is built: it
//! refuses every key. The keys helper replaces this whole file.

use std::time::Duration;

use async_trait::async_trait;
use frontdesk_store::Database;

use super::{KeyVerifier, Principal};
use crate::error::AccessError;

pub struct ApiKeys {
    _database: Database,
    _cache_ttl: Duration,
}

impl ApiKeys {
    pub fn new(database: Database, cache_ttl: Duration) -> Self {
        Self { _database: database, _cache_ttl: cache_ttl }
    }
}

#[async_trait]
impl KeyVerifier for ApiKeys {
    async fn verify(&self, _presented: &str) -> Result<Principal, AccessError> {
        Err(AccessError::InvalidKey)
    }
}
