//! Where an investigation reads HR data and keeps its records: a trait the service implements
//! over SQL. The records (the investigations index, the audit trail, pending actions and the
//! mutation's `change_investigation`) are projections of the investigation's state, written by
//! the agents as they act and keyed so that a node re-run after a crash overwrites instead of
//! duplicating (audit entries by position, actions by id).
//!
//! Tenancy (`crate::tenant`): the records are keyed by storage keys. The `investigation_id` of
//! an index row, an audit entry or an action, and an action's `action_id`, are what
//! `tenant.key(..)` gives for the caller's ids, so one mutation investigated by two tenants has
//! two sets of rows; what the entries and actions record inside (messages, replies,
//! notifications) keeps the caller's ids. Listings take the tenant and return its rows only.
//! HR data is shared by every tenant.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::Tenant;

use super::types::{AbsenceKind, ActionStatus, AdvisoryReport, AuditEntry, HrMutation, PendingAction, Status};

#[derive(Debug, thiserror::Error)]
#[error("investigation store unavailable")]
pub struct StoreFailure(#[source] pub Box<dyn std::error::Error + Send + Sync>);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub department: String,
    pub manager_id: Option<String>,
    pub role_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub role_id: String,
    pub name: String,
    pub description: String,
}

/// A role's grant of an access level on a system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleGrant {
    pub role_id: String,
    pub system: String,
    pub access_level: String,
}

/// A grant given to a user directly, valid from `granted_on` to `expires_on` (inclusive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectGrant {
    pub user_id: String,
    pub system: String,
    pub access_level: String,
    pub granted_on: String,
    pub expires_on: Option<String>,
}

/// A period of sick leave or vacation, dates `YYYY-MM-DD` inclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Absence {
    pub user_id: String,
    pub start_date: String,
    pub end_date: String,
}

impl Absence {
    pub fn covers(&self, day: &str) -> bool {
        self.start_date.as_str() <= day && day <= self.end_date.as_str()
    }
}

/// An investigation as the index lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct InvestigationRecord {
    pub investigation_id: String,
    pub mutation_id: String,
    pub status: Status,
    pub report: Option<AdvisoryReport>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Where a page of [`InvestigationStore::list_investigations`] ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCursor {
    pub created_at_ms: i64,
    /// The storage key of the page's last investigation.
    pub investigation_id: String,
}

/// Where a page of [`InvestigationStore::actions`] ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionCursor {
    pub created_at_ms: i64,
    /// The storage key of the page's last action.
    pub action_id: String,
}

/// A mutation as stored, with its `change_investigation` status.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMutation {
    pub mutation: HrMutation,
    pub change_investigation: Status,
}

#[async_trait]
pub trait InvestigationStore: Send + Sync + 'static {
    async fn user(&self, user_id: &str) -> Result<Option<User>, StoreFailure>;
    /// Every user, by id.
    async fn users(&self) -> Result<Vec<User>, StoreFailure>;
    async fn role(&self, role_id: &str) -> Result<Option<Role>, StoreFailure>;
    async fn role_grants(&self, role_id: &str) -> Result<Vec<RoleGrant>, StoreFailure>;
    async fn direct_grants(&self, user_id: &str) -> Result<Vec<DirectGrant>, StoreFailure>;
    /// `kind` is sick leave or vacation.
    async fn absences(&self, kind: AbsenceKind, user_id: &str) -> Result<Vec<Absence>, StoreFailure>;
    async fn mutation(&self, mutation_id: &str) -> Result<Option<StoredMutation>, StoreFailure>;
    /// Records a mutation given inline; false (nothing written) when its id exists.
    async fn insert_mutation(&self, mutation: &HrMutation) -> Result<bool, StoreFailure>;
    async fn set_change_investigation(&self, mutation_id: &str, status: Status) -> Result<(), StoreFailure>;
    /// Upserts the index row (its first `created_at_ms` is kept).
    async fn save_investigation(&self, record: &InvestigationRecord) -> Result<(), StoreFailure>;
    async fn investigation(&self, investigation_id: &str) -> Result<Option<InvestigationRecord>, StoreFailure>;
    /// `tenant`'s investigations, most recently created first, ties by key descending.
    async fn list_investigations(
        &self,
        tenant: &Tenant,
        status: Option<Status>,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<(Vec<InvestigationRecord>, Option<ListCursor>), StoreFailure>;
    /// Upserts entries by (investigation, seq), in one transaction.
    async fn write_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreFailure>;
    /// Entries with a seq above `after_seq`, in order.
    async fn audit_trail(&self, investigation_id: &str, after_seq: u32) -> Result<Vec<AuditEntry>, StoreFailure>;
    /// The entries of `tenant`'s investigations with `correlation_id`.
    async fn audit_by_correlation(
        &self,
        tenant: &Tenant,
        correlation_id: &str,
    ) -> Result<Vec<AuditEntry>, StoreFailure>;
    /// Upserts an action by id.
    async fn save_action(&self, action: &PendingAction) -> Result<(), StoreFailure>;
    /// A page of the actions of `tenant`'s investigations, oldest first: at most `limit` after
    /// `after`, and where the next page starts (`None` on the last page).
    async fn actions(
        &self,
        tenant: &Tenant,
        recipient_id: Option<&str>,
        status: Option<ActionStatus>,
        after: Option<ActionCursor>,
        limit: usize,
    ) -> Result<(Vec<PendingAction>, Option<ActionCursor>), StoreFailure>;
}
