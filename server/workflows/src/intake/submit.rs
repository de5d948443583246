//! Where confirmed intake requests go. The default writes to a local outbox table (see the
//! service crate); [`super::sharepoint::SharePointSubmitter`] files a list item per team.

use std::collections::BTreeMap;

use async_trait::async_trait;

/// A confirmed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// Stable across retries of the same run (a crash-resumed run submits with the same id),
    /// so a submitter can de-duplicate.
    pub id: String,
    pub thread_id: String,
    pub team_id: String,
    pub team_name: String,
    /// Field name to value, for every collected field.
    pub fields: BTreeMap<String, String>,
    /// Fields the user marked as unknown.
    pub unknown: Vec<String>,
    /// Field name to its user-facing label, in configured order.
    pub labels: Vec<(String, String)>,
}

/// Proof of a filed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    pub id: String,
    /// Where a person can see the item.
    pub url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The target refused the item (4xx). Retrying the same item will not help.
    #[error("submission rejected ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// The target could not be reached or failed (network, 5xx, database).
    #[error("submission target unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Authentication with the target failed.
    #[error("authentication with the submission target failed: {0}")]
    Auth(String),
    /// No target is configured for this team.
    #[error("no submission target is configured for team {team_id}")]
    NoTarget { team_id: String },
}

#[async_trait]
pub trait Submitter: Send + Sync + 'static {
    async fn submit(&self, submission: &Submission) -> Result<Receipt, SubmitError>;
}
