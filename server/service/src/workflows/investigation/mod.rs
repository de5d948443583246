//! The investigation workflow's service side: its settings (`workflows.investigation`), its SQL
//! records, the sample HR data, its wiring, and `InvestigationService`.

mod convert;
mod grpc;
pub mod store;
#[cfg(test)]
mod tests;

use std::{sync::Arc, time::Duration};

use frontdesk_api::v1::investigation_service_server::InvestigationServiceServer;
use frontdesk_runtime::{RetryPolicy, Runner};
use frontdesk_workflows::investigation::{self, InvestigationDeps, InvestigationDesk, InvestigationStore};
use serde::{Deserialize, Serialize};
use tonic::{server::NamedService, service::RoutesBuilder};

use self::{grpc::InvestigationApi, store::SqlInvestigationStore};
use super::{BoxError, HostedTask, HostedWorkflow, TaskDesk, Wiring, WorkflowModule};
use crate::auth::{Access, ServiceAccess};

/// The scopes of `InvestigationService`'s methods (scope service `investigation`).
static ACCESS: ServiceAccess = ServiceAccess {
    service: <InvestigationServiceServer<InvestigationApi> as NamedService>::NAME,
    scope: "investigation",
    methods: &[
        ("StartInvestigation", Access::Write),
        ("Respond", Access::Write),
        ("GetInvestigation", Access::Read),
        ("ListInvestigations", Access::Read),
        ("WatchInvestigation", Access::Read),
        ("GetAuditTrail", Access::Read),
        ("ListPendingActions", Access::Read),
    ],
};

pub struct Workflow;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InvestigationSettings {
    /// Imports the shipped sample HR data (config/investigation) at start-up when the database
    /// has no HR data yet. `frontdesk-server import-hr-data DIR` imports your own.
    pub sample_data: bool,
    /// First delay before an agent's failed attempt is retried (doubling, with jitter, up to
    /// ten seconds); three attempts in all, then manual intervention.
    pub retry_backoff_ms: u64,
}

impl Default for InvestigationSettings {
    fn default() -> Self {
        Self { sample_data: true, retry_backoff_ms: 500 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InvestigationStartError {
    #[error("cannot import the sample HR data")]
    SampleData(#[source] frontdesk_store::StoreError),
    #[error("invalid investigation graph")]
    Graph(#[source] frontdesk_runtime::GraphError),
}

/// The sample HR data shipped with Frontdesk, by file name.
pub const SAMPLE_DATA: &[(&str, &str)] = &[
    ("users.csv", include_str!("../../../../../config/investigation/users.csv")),
    ("roles.csv", include_str!("../../../../../config/investigation/roles.csv")),
    ("role_authorisations.csv", include_str!("../../../../../config/investigation/role_authorisations.csv")),
    ("authorisations.csv", include_str!("../../../../../config/investigation/authorisations.csv")),
    ("sickLeave.csv", include_str!("../../../../../config/investigation/sickLeave.csv")),
    ("vacation.csv", include_str!("../../../../../config/investigation/vacation.csv")),
    ("hr_mutations.csv", include_str!("../../../../../config/investigation/hr_mutations.csv")),
];

impl WorkflowModule for Workflow {
    const NAME: &'static str = investigation::NAME;
    type Settings = InvestigationSettings;

    async fn build(
        &self,
        settings: InvestigationSettings,
        wiring: &Wiring<'_>,
    ) -> Result<Arc<dyn HostedWorkflow>, BoxError> {
        let InvestigationSettings { sample_data, retry_backoff_ms } = settings;
        let database = wiring.database.clone();
        if sample_data && database.hr_data_is_empty().await.map_err(InvestigationStartError::SampleData)? {
            let counts = database.import_hr_csv(SAMPLE_DATA).await.map_err(InvestigationStartError::SampleData)?;
            tracing::info!(?counts, "imported the sample hr data");
        }
        let store: Arc<dyn InvestigationStore> = Arc::new(SqlInvestigationStore::new(database));
        let mut deps = InvestigationDeps::new(wiring.llm.clone(), store.clone());
        let backoff = Duration::from_millis(retry_backoff_ms);
        deps.retry = RetryPolicy::attempts(3).with_backoff(backoff, Duration::from_secs(10).max(backoff));
        let graph = investigation::build(deps).map_err(InvestigationStartError::Graph)?;
        let desk = InvestigationDesk::new(wiring.runner(graph), store);
        Ok(Arc::new(HostedTask::new(desk)))
    }
}

/// The investigation workflow as the server hosts it.
pub type HostedInvestigation = HostedTask<InvestigationDesk>;

impl TaskDesk for InvestigationDesk {
    const NAME: &'static str = investigation::NAME;
    const DESCRIPTION: &'static str = investigation::DESCRIPTION;
    type State = investigation::InvestigationState;

    fn runner(&self) -> &Runner<Self::State> {
        InvestigationDesk::runner(self)
    }

    fn add_service(desk: Arc<Self>, routes: &mut RoutesBuilder, max_message_bytes: usize) -> &'static ServiceAccess {
        routes.add_service(
            InvestigationServiceServer::new(InvestigationApi::new(desk)).max_decoding_message_size(max_message_bytes),
        );
        &ACCESS
    }
}
