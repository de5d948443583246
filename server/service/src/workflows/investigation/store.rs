//! The investigation's data and records in the SQL database: the workflow's
//! [`InvestigationStore`] over the store crate's tables. Records are keyed by storage keys; a
//! tenant's listings are the rows in its key range (`KeyScope`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use frontdesk_store::{
    investigation::{
        AbsenceKind as StoreAbsence, ActionCursor as StoreActionCursor, AuditRow, HrMutationRow, InvestigationCursor, InvestigationRow, KeyScope,
        PendingActionRow,
    },
    Database,
};
use frontdesk_workflows::{
    investigation::{
        data::{Absence, DirectGrant, Role, RoleGrant, User},
        AbsenceKind, AccessLevel, ActionCursor, ActionStatus, AuditEntry, AuditRecord, HrMutation, InvestigationRecord,
        InvestigationStore, ListCursor, PendingAction, ResponderRole, Status, StoreFailure, StoredMutation,
    },
    Tenant,
};

pub struct SqlInvestigationStore {
    db: Database,
}

impl SqlInvestigationStore {
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

/// The rows of `tenant`'s investigations: keys with its prefix, or without any for `default`.
fn scope<'a>(tenant: &Tenant, prefix: &'a str) -> KeyScope<'a> {
    if tenant.is_default() {
        KeyScope::Unprefixed
    } else {
        KeyScope::Prefix(prefix)
    }
}

fn failed(error: impl std::error::Error + Send + Sync + 'static) -> StoreFailure {
    StoreFailure(Box::new(error))
}

#[derive(Debug, thiserror::Error)]
#[error("stored {what} {value:?} is not valid")]
struct Corrupt {
    what: &'static str,
    value: String,
}

fn corrupt(what: &'static str, value: impl Into<String>) -> StoreFailure {
    failed(Corrupt { what, value: value.into() })
}

fn to_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn status(s: &str) -> Result<Status, StoreFailure> {
    Status::parse(s).ok_or_else(|| corrupt("status", s))
}

fn mutation(row: HrMutationRow) -> Result<StoredMutation, StoreFailure> {
    let HrMutationRow {
        mutation_id,
        changer_id,
        target_user_id,
        system,
        access_level,
        change_type,
        description,
        changed_at,
        change_investigation,
    } = row;
    Ok(StoredMutation {
        mutation: HrMutation {
            mutation_id,
            changer_id,
            target_user_id,
            system,
            access_level: AccessLevel::parse(&access_level).ok_or_else(|| corrupt("access level", access_level))?,
            change_type,
            description,
            changed_at,
        },
        change_investigation: status(&change_investigation)?,
    })
}

fn record(row: InvestigationRow) -> Result<InvestigationRecord, StoreFailure> {
    let InvestigationRow { investigation_id, mutation_id, status: s, report_json, created_at, updated_at } = row;
    Ok(InvestigationRecord {
        investigation_id,
        mutation_id,
        status: status(&s)?,
        report: report_json.map(|json| serde_json::from_str(&json).map_err(|_| corrupt("report", json))).transpose()?,
        created_at_ms: to_ms(created_at),
        updated_at_ms: to_ms(updated_at),
    })
}

fn entry(row: AuditRow) -> Result<AuditEntry, StoreFailure> {
    let AuditRow {
        investigation_id,
        seq,
        correlation_id,
        at,
        actor,
        kind: _,
        status_from: _,
        status_to: _,
        entry_json,
    } = row;
    let record: AuditRecord = serde_json::from_str(&entry_json).map_err(|_| corrupt("audit entry", entry_json))?;
    Ok(AuditEntry { investigation_id, seq, correlation_id, at_ms: to_ms(at), actor, record })
}

fn action(row: PendingActionRow) -> Result<PendingAction, StoreFailure> {
    let PendingActionRow {
        action_id,
        investigation_id,
        mutation_id,
        recipient_id,
        recipient_role,
        subject,
        body,
        status: s,
        reply_json,
        created_at,
        answered_at,
    } = row;
    Ok(PendingAction {
        action_id,
        investigation_id,
        mutation_id,
        recipient_id,
        recipient_role: ResponderRole::parse(&recipient_role)
            .ok_or_else(|| corrupt("recipient role", recipient_role))?,
        subject,
        body,
        status: ActionStatus::parse(&s).ok_or_else(|| corrupt("action status", s))?,
        created_at_ms: to_ms(created_at),
        answered_at_ms: answered_at.map(to_ms),
        reply: reply_json.map(|json| serde_json::from_str(&json).map_err(|_| corrupt("reply", json))).transpose()?,
    })
}

#[async_trait]
impl InvestigationStore for SqlInvestigationStore {
    async fn user(&self, user_id: &str) -> Result<Option<User>, StoreFailure> {
        Ok(self.db.hr_user(user_id).await.map_err(failed)?.map(user))
    }

    async fn users(&self) -> Result<Vec<User>, StoreFailure> {
        Ok(self.db.hr_users().await.map_err(failed)?.into_iter().map(user).collect())
    }

    async fn role(&self, role_id: &str) -> Result<Option<Role>, StoreFailure> {
        Ok(self.db.hr_role(role_id).await.map_err(failed)?.map(|r| {
            let frontdesk_store::investigation::HrRole { role_id, name, description } = r;
            Role { role_id, name, description }
        }))
    }

    async fn role_grants(&self, role_id: &str) -> Result<Vec<RoleGrant>, StoreFailure> {
        Ok(self
            .db
            .role_authorisations(role_id)
            .await
            .map_err(failed)?
            .into_iter()
            .map(|g| {
                let frontdesk_store::investigation::RoleAuthorisation { role_id, system, access_level } = g;
                RoleGrant { role_id, system, access_level }
            })
            .collect())
    }

    async fn direct_grants(&self, user_id: &str) -> Result<Vec<DirectGrant>, StoreFailure> {
        Ok(self
            .db
            .user_authorisations(user_id)
            .await
            .map_err(failed)?
            .into_iter()
            .map(|g| {
                let frontdesk_store::investigation::UserAuthorisation {
                    user_id,
                    system,
                    access_level,
                    granted_on,
                    expires_on,
                } = g;
                DirectGrant { user_id, system, access_level, granted_on, expires_on }
            })
            .collect())
    }

    async fn absences(&self, kind: AbsenceKind, user_id: &str) -> Result<Vec<Absence>, StoreFailure> {
        let kind = match kind {
            AbsenceKind::SickLeave => StoreAbsence::SickLeave,
            AbsenceKind::Vacation => StoreAbsence::Vacation,
            AbsenceKind::None => return Ok(Vec::new()),
        };
        Ok(self
            .db
            .absences(kind, user_id)
            .await
            .map_err(failed)?
            .into_iter()
            .map(|a| {
                let frontdesk_store::investigation::Absence { user_id, start_date, end_date } = a;
                Absence { user_id, start_date, end_date }
            })
            .collect())
    }

    async fn mutation(&self, mutation_id: &str) -> Result<Option<StoredMutation>, StoreFailure> {
        self.db.hr_mutation(mutation_id).await.map_err(failed)?.map(mutation).transpose()
    }

    async fn insert_mutation(&self, m: &HrMutation) -> Result<bool, StoreFailure> {
        let row = HrMutationRow {
            mutation_id: m.mutation_id.clone(),
            changer_id: m.changer_id.clone(),
            target_user_id: m.target_user_id.clone(),
            system: m.system.clone(),
            access_level: m.access_level.as_str().to_owned(),
            change_type: m.change_type.clone(),
            description: m.description.clone(),
            changed_at: m.changed_at.clone(),
            change_investigation: Status::Pending.as_str().to_owned(),
        };
        self.db.insert_hr_mutation(&row).await.map_err(failed)
    }

    async fn set_change_investigation(&self, mutation_id: &str, status: Status) -> Result<(), StoreFailure> {
        self.db.set_change_investigation(mutation_id, status.as_str()).await.map_err(failed).map(drop)
    }

    async fn save_investigation(&self, r: &InvestigationRecord) -> Result<(), StoreFailure> {
        let report_json = r.report.as_ref().map(|report| serde_json::to_string(report).unwrap_or_default());
        let row = InvestigationRow {
            investigation_id: r.investigation_id.clone(),
            mutation_id: r.mutation_id.clone(),
            status: r.status.as_str().to_owned(),
            report_json,
            created_at: from_ms(r.created_at_ms),
            updated_at: from_ms(r.updated_at_ms),
        };
        self.db.upsert_investigation(&row).await.map_err(failed)
    }

    async fn investigation(&self, investigation_id: &str) -> Result<Option<InvestigationRecord>, StoreFailure> {
        self.db.investigation(investigation_id).await.map_err(failed)?.map(record).transpose()
    }

    async fn list_investigations(
        &self,
        tenant: &Tenant,
        status: Option<Status>,
        after: Option<ListCursor>,
        limit: usize,
    ) -> Result<(Vec<InvestigationRecord>, Option<ListCursor>), StoreFailure> {
        let after =
            after.map(|c| InvestigationCursor { created_at_ms: c.created_at_ms, investigation_id: c.investigation_id });
        let prefix = tenant.key_prefix();
        let (rows, next) = self
            .db
            .list_investigations_in(scope(tenant, &prefix), status.map(Status::as_str), after.as_ref(), limit)
            .await
            .map_err(failed)?;
        let records = rows.into_iter().map(record).collect::<Result<Vec<_>, _>>()?;
        Ok((records, next.map(|c| ListCursor { created_at_ms: c.created_at_ms, investigation_id: c.investigation_id })))
    }

    async fn write_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreFailure> {
        let rows: Vec<AuditRow> = entries
            .iter()
            .map(|e| {
                let (status_from, status_to) = match &e.record {
                    AuditRecord::StatusChange(c) => {
                        (c.from.map(|s| s.as_str().to_owned()), Some(c.to.as_str().to_owned()))
                    }
                    _ => (None, None),
                };
                AuditRow {
                    investigation_id: e.investigation_id.clone(),
                    seq: e.seq,
                    correlation_id: e.correlation_id.clone(),
                    at: from_ms(e.at_ms),
                    actor: e.actor.clone(),
                    kind: e.record.kind().to_owned(),
                    status_from,
                    status_to,
                    entry_json: serde_json::to_string(&e.record).unwrap_or_default(),
                }
            })
            .collect();
        self.db.upsert_audit_entries(&rows).await.map_err(failed)
    }

    async fn audit_trail(&self, investigation_id: &str, after_seq: u32) -> Result<Vec<AuditEntry>, StoreFailure> {
        let after = (after_seq > 0).then_some(after_seq);
        self.db.audit_trail(investigation_id, after).await.map_err(failed)?.into_iter().map(entry).collect()
    }

    async fn audit_by_correlation(
        &self,
        tenant: &Tenant,
        correlation_id: &str,
    ) -> Result<Vec<AuditEntry>, StoreFailure> {
        let prefix = tenant.key_prefix();
        let rows = self.db.audit_by_correlation_in(scope(tenant, &prefix), correlation_id).await.map_err(failed)?;
        rows.into_iter().map(entry).collect()
    }

    async fn save_action(&self, a: &PendingAction) -> Result<(), StoreFailure> {
        let row = PendingActionRow {
            action_id: a.action_id.clone(),
            investigation_id: a.investigation_id.clone(),
            mutation_id: a.mutation_id.clone(),
            recipient_id: a.recipient_id.clone(),
            recipient_role: a.recipient_role.as_str().to_owned(),
            subject: a.subject.clone(),
            body: a.body.clone(),
            status: a.status.as_str().to_owned(),
            reply_json: a.reply.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default()),
            created_at: from_ms(a.created_at_ms),
            answered_at: a.answered_at_ms.map(from_ms),
        };
        self.db.upsert_pending_action(&row).await.map_err(failed)
    }

    async fn actions(
        &self,
        tenant: &Tenant,
        recipient_id: Option<&str>,
        status: Option<ActionStatus>,
        after: Option<ActionCursor>,
        limit: usize,
    ) -> Result<(Vec<PendingAction>, Option<ActionCursor>), StoreFailure> {
        let prefix = tenant.key_prefix();
        let after = after.map(|c| StoreActionCursor { created_at_ms: c.created_at_ms, action_id: c.action_id });
        let (rows, next) = self
            .db
            .list_pending_actions_in(
                scope(tenant, &prefix),
                recipient_id,
                status.map(ActionStatus::as_str),
                after.as_ref(),
                limit,
            )
            .await
            .map_err(failed)?;
        let actions = rows.into_iter().map(action).collect::<Result<Vec<_>, _>>()?;
        Ok((actions, next.map(|c| ActionCursor { created_at_ms: c.created_at_ms, action_id: c.action_id })))
    }
}

fn user(u: frontdesk_store::investigation::HrUser) -> User {
    let frontdesk_store::investigation::HrUser { user_id, name, email, department, manager_id, role_id } = u;
    User { user_id, name, email, department, manager_id, role_id }
}
