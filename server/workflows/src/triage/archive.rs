//! Where finished tickets go: the ticket and chat repositories of docs/workflows/triage.md, as a trait the
//! service implements over SQL.

use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{KbResult, TicketMessage, TriageResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchivedStatus {
    /// Answered automatically.
    Resolved,
    /// Handed to a human.
    Escalated,
}

impl ArchivedStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ArchivedStatus::Resolved => "resolved",
            ArchivedStatus::Escalated => "escalated",
        }
    }
}

/// An archived ticket. Its ids are storage keys in its tenant (`crate::tenant`): the ticket's
/// and the customer's ids for the default tenant, `<tenant>/<id>` otherwise, so tenants'
/// tickets never clash; the desk shows callers their own ids.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedTicket {
    /// The ticket's key: `tenant.key(ticket_id)`.
    pub ticket_id: String,
    /// The customer's key: `tenant.key(customer_id)`.
    pub customer_id: String,
    /// The ticket's thread, `<customer key>:<ticket id>`.
    pub thread_id: String,
    pub status: ArchivedStatus,
    pub subject: String,
    pub language: String,
    pub result: TriageResult,
    /// The run that produced `result`.
    pub run_id: String,
    /// The knowledge-base articles the specialist was given, with titles and scores.
    pub kb_results: Vec<KbResult>,
    pub messages: Vec<TicketMessage>,
    /// The English text of each customer message, in order (the message itself when it was
    /// English): what the agents read, and what `GetTicket` shows beside the original.
    pub english: Vec<String>,
    pub created_at: SystemTime,
    pub completed_at: SystemTime,
}

/// Where a page of [`TicketArchive::list`] ends: the last ticket's completion time and id.
/// The desk hands it to clients inside an opaque page token (`crate::page_token`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveCursor {
    pub completed_at_ms: i64,
    pub ticket_id: String,
}

/// A triage request recorded under its idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request's outcome (JSON), replayed to a retry.
    pub output_json: String,
    /// The request's fingerprint; `None` for a request recorded before fingerprints were kept.
    pub fingerprint: Option<String>,
}

/// What claiming a triage request's idempotency key found (see [`TicketArchive::claim_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// The caller holds the claim now.
    Claimed,
    /// Another request holds it, with this fingerprint.
    Held { fingerprint: String },
}

#[derive(Debug, thiserror::Error)]
#[error("ticket archive unavailable")]
pub struct ArchiveError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// The archive, addressed by storage keys only (ticket keys, customer keys): it knows nothing
/// of tenants.
#[async_trait]
pub trait TicketArchive: Send + Sync + 'static {
    /// Saves a ticket and its messages in one transaction. Saving the same ticket again is a
    /// no-op, which is what makes archive-then-delete safe to repeat after a crash.
    async fn save(&self, ticket: &ArchivedTicket) -> Result<(), ArchiveError>;
    async fn get(&self, ticket_id: &str) -> Result<Option<ArchivedTicket>, ArchiveError>;
    async fn exists(&self, ticket_id: &str) -> Result<bool, ArchiveError>;
    /// A customer's archived tickets, most recently completed first (ties by ticket id,
    /// descending), after `after`; and where the next page starts, `None` on the last page.
    async fn list(
        &self,
        customer_id: &str,
        status: Option<ArchivedStatus>,
        after: Option<ArchiveCursor>,
        limit: usize,
    ) -> Result<(Vec<ArchivedTicket>, Option<ArchiveCursor>), ArchiveError>;
    /// Records the outcome of a triage request under its idempotency key, with the request's
    /// fingerprint. The first record of a key wins.
    async fn record_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: &str,
        output_json: &str,
    ) -> Result<(), ArchiveError>;
    async fn find_request(&self, customer_id: &str, key: &str) -> Result<Option<RecordedRequest>, ArchiveError>;
    /// Claims a triage request's idempotency key for `holder` while the request runs, so that
    /// a retry arriving meanwhile, on any replica, neither matches nor triages the message a
    /// second time. Taken when the key has no claim, or only one last renewed before
    /// `stale_before_ms` (its holder died); otherwise says which request holds it. Atomic: of
    /// two requests racing for a key, one gets it.
    async fn claim_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: &str,
        holder: &str,
        now_ms: i64,
        stale_before_ms: i64,
    ) -> Result<KeyClaim, ArchiveError>;
    /// Renews `holder`'s claim; false when it no longer holds it.
    async fn renew_claim(&self, customer_id: &str, key: &str, holder: &str, now_ms: i64) -> Result<bool, ArchiveError>;
    /// Releases `holder`'s claim, if it still holds it.
    async fn release_claim(&self, customer_id: &str, key: &str, holder: &str) -> Result<(), ArchiveError>;
}
