//! The agents' tools: typed functions with JSON-schema arguments. A tool the flow fixes is
//! called directly; one the model must choose is offered by function calling
//! (the agent nodes of [`super::nodes`]). Every call streams a tool-call and a tool-result event and is written
//! to the audit trail.

use std::sync::Arc;

use frontdesk_llm::ToolSpec;
use frontdesk_runtime::{NodeError, NodeErrorKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    data::{InvestigationStore, StoreFailure},
    types::{AbsenceKind, AccessLevel, AdvisoryReport, Recommendation},
};

pub const CHECK_AUTHORIZATION: &str = "check_authorization";
pub const LOOKUP_DATA: &str = "lookup_data";
pub const SEND_NOTIFICATION: &str = "send_notification";
pub const GENERATE_REPORT: &str = "generate_report";

/// A grant that bears on an access check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// `role:<role_id>` or `direct`.
    pub source: String,
    pub system: String,
    pub access_level: String,
    /// Whether the grant covers the level asked for on the day asked about.
    pub covers: bool,
    /// Why it does not, when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckAuthorizationArgs {
    pub user_id: String,
    pub system: String,
    pub access_level: AccessLevel,
    /// The day to check, `YYYY-MM-DD`.
    pub on: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthorizationResult {
    pub user_id: String,
    pub user_known: bool,
    pub authorized: bool,
    /// Every grant of the user on the system, covering or not.
    pub grants: Vec<Grant>,
}

/// The tables `lookup_data` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// By user id.
    Users,
    /// Direct grants, by user id.
    Authorisations,
    /// By role id.
    Roles,
    /// A role's grants, by role id.
    RoleAuthorisations,
    /// By user id.
    SickLeave,
    /// By user id.
    Vacation,
    /// By mutation id.
    HrMutations,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LookupDataArgs {
    pub table: Table,
    /// The user, role or mutation id the table is keyed by.
    #[schemars(length(max = 32))]
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerateReportArgs {
    pub mutation_id: String,
    pub recommendation: Recommendation,
    pub summary: String,
    pub details: String,
}

/// The data the tools read.
#[derive(Clone)]
pub struct Tools {
    pub store: Arc<dyn InvestigationStore>,
}

fn unavailable(tool: &str, error: StoreFailure) -> NodeError {
    NodeError::with_source(NodeErrorKind::DependencyFailed, format!("tool {tool} could not read the HR data"), error)
}

impl Tools {
    /// Whether `user_id` held `access_level` (or higher) on `system` on the day `on`, through
    /// their role or a direct grant valid that day.
    pub async fn check_authorization(&self, args: &CheckAuthorizationArgs) -> Result<AuthorizationResult, NodeError> {
        let store = &self.store;
        let user = store.user(&args.user_id).await.map_err(|e| unavailable(CHECK_AUTHORIZATION, e))?;
        let mut grants = Vec::new();
        if let Some(role_id) = user.as_ref().and_then(|u| u.role_id.clone()) {
            for grant in store.role_grants(&role_id).await.map_err(|e| unavailable(CHECK_AUTHORIZATION, e))? {
                if grant.system != args.system {
                    continue;
                }
                let level = AccessLevel::parse(&grant.access_level);
                let covers = level.is_some_and(|l| l >= args.access_level);
                grants.push(Grant {
                    source: format!("role:{role_id}"),
                    system: grant.system,
                    access_level: grant.access_level,
                    covers,
                    note: (!covers).then(|| "level below the one required".to_owned()),
                });
            }
        }
        for grant in store.direct_grants(&args.user_id).await.map_err(|e| unavailable(CHECK_AUTHORIZATION, e))? {
            if grant.system != args.system {
                continue;
            }
            let level_ok = AccessLevel::parse(&grant.access_level).is_some_and(|l| l >= args.access_level);
            let started = grant.granted_on.as_str() <= args.on.as_str();
            let expired = grant.expires_on.as_deref().is_some_and(|end| end < args.on.as_str());
            let note = if !level_ok {
                Some("level below the one required".to_owned())
            } else if !started {
                Some(format!("granted only from {}", grant.granted_on))
            } else if expired {
                Some(format!("expired on {}", grant.expires_on.as_deref().unwrap_or_default()))
            } else {
                None
            };
            grants.push(Grant {
                source: "direct".into(),
                system: grant.system,
                access_level: grant.access_level,
                covers: note.is_none(),
                note,
            });
        }
        Ok(AuthorizationResult {
            user_id: args.user_id.clone(),
            user_known: user.is_some(),
            authorized: grants.iter().any(|g| g.covers),
            grants,
        })
    }

    /// The rows of `table` for `key`, as JSON.
    pub async fn lookup_data(&self, args: &LookupDataArgs) -> Result<serde_json::Value, NodeError> {
        let store = &self.store;
        let key = args.key.as_str();
        let fail = |e| unavailable(LOOKUP_DATA, e);
        let rows = match args.table {
            Table::Users => serde_json::to_value(store.user(key).await.map_err(fail)?.into_iter().collect::<Vec<_>>()),
            Table::Authorisations => serde_json::to_value(store.direct_grants(key).await.map_err(fail)?),
            Table::Roles => serde_json::to_value(store.role(key).await.map_err(fail)?.into_iter().collect::<Vec<_>>()),
            Table::RoleAuthorisations => serde_json::to_value(store.role_grants(key).await.map_err(fail)?),
            Table::SickLeave => serde_json::to_value(store.absences(AbsenceKind::SickLeave, key).await.map_err(fail)?),
            Table::Vacation => serde_json::to_value(store.absences(AbsenceKind::Vacation, key).await.map_err(fail)?),
            Table::HrMutations => serde_json::to_value(
                store.mutation(key).await.map_err(fail)?.map(|m| m.mutation).into_iter().collect::<Vec<_>>(),
            ),
        };
        rows.map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "cannot encode lookup rows", e))
    }

    /// The report, with its id: one report per mutation, so a regenerated report replaces it.
    pub fn generate_report(&self, args: &GenerateReportArgs) -> AdvisoryReport {
        AdvisoryReport {
            report_id: format!("RPT-{}", args.mutation_id),
            summary: args.summary.clone(),
            recommendation: args.recommendation,
            details: args.details.clone(),
        }
    }
}

/// The tools a model may choose from, as function specs.
pub fn lookup_data_spec() -> ToolSpec {
    ToolSpec {
        name: LOOKUP_DATA.into(),
        description: "Reads HR records: users, authorisations (direct grants), roles, role_authorisations, \
                      sick_leave, vacation or hr_mutations, by the id the table is keyed by"
            .into(),
        parameters: frontdesk_llm::schema_for::<LookupDataArgs>(),
    }
}
