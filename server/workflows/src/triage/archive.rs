//! Where finished tickets go: the ticket and chat repositories of docs/workflows/triage.md, as a trait the
//! service implements over SQL.

use std::time::SystemTime;

use async_trait::async_trait;

use super::{TicketMessage, TriageResult};

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

#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedTicket {
    pub ticket_id: String,
    pub customer_id: String,
    pub thread_id: String,
    pub status: ArchivedStatus,
    pub subject: String,
    pub language: String,
    pub result: TriageResult,
    pub messages: Vec<TicketMessage>,
    pub created_at: SystemTime,
    pub completed_at: SystemTime,
}

#[derive(Debug, thiserror::Error)]
#[error("ticket archive unavailable")]
pub struct ArchiveError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

#[async_trait]
pub trait TicketArchive: Send + Sync + 'static {
    /// Saves a ticket and its messages in one transaction. Saving the same ticket again is a
    /// no-op, which is what makes archive-then-delete safe to repeat after a crash.
    async fn save(&self, ticket: &ArchivedTicket) -> Result<(), ArchiveError>;
    async fn get(&self, ticket_id: &str) -> Result<Option<ArchivedTicket>, ArchiveError>;
    async fn exists(&self, ticket_id: &str) -> Result<bool, ArchiveError>;
    /// A customer's archived tickets ordered by ticket id, after `after`.
    async fn list(
        &self,
        customer_id: &str,
        status: Option<ArchivedStatus>,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ArchivedTicket>, Option<String>), ArchiveError>;
    /// Records the outcome of a triage request under its idempotency key.
    async fn record_request(&self, customer_id: &str, key: &str, output_json: &str) -> Result<(), ArchiveError>;
    async fn find_request(&self, customer_id: &str, key: &str) -> Result<Option<String>, ArchiveError>;
}
