//! The triage workflow's service side: its settings (`workflows.triage`), its active-ticket
//! store and archive, its wiring, its start-up repair, and `TriageService`.

pub mod archive;
mod convert;
mod grpc;
#[cfg(test)]
mod tests;

use std::{any::Any, path::PathBuf, sync::Arc};

use async_trait::async_trait;
use frontdesk_api::v1::triage_service_server::TriageServiceServer;
use frontdesk_runtime::{Checkpointer, GraphDescription, GraphError, UnfinishedRun};
use frontdesk_store::{RedisCheckpointer, RedisOptions, StoreError};
use frontdesk_workflows::{
    triage::{self, customers::CustomerDirectory, kb::KnowledgeBase, TriageDeps, TriageDesk},
    WorkflowError,
};
use serde::{Deserialize, Serialize};
use tonic::{server::NamedService, service::RoutesBuilder};

use self::{archive::SqlTicketArchive, grpc::TriageApi};
use super::{BoxError, HostedWorkflow, Wiring, WorkflowKind, WorkflowModule};
use crate::auth::{Access, ServiceAccess};

/// The scopes of `TriageService`'s methods (scope service `triage`).
static ACCESS: ServiceAccess = ServiceAccess {
    service: <TriageServiceServer<TriageApi> as NamedService>::NAME,
    scope: "triage",
    methods: &[
        ("TriageTicket", Access::Write),
        ("GetTicket", Access::Read),
        ("ListTickets", Access::Read),
        ("ListActiveTickets", Access::Read),
    ],
};

pub struct Workflow;

#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TriageSettings {
    /// Customer directory (JSON Lines); the shipped config/triage/customers.jsonl when unset.
    pub customers: Option<PathBuf>,
    /// Knowledge-base articles (JSON Lines); the shipped config/triage/articles.jsonl when unset.
    pub articles: Option<PathBuf>,
    /// Where active tickets' checkpoints live: the SQL database (default) or Redis, as the
    /// triage design has it.
    pub active_store: ActiveStore,
    /// Redis URL for `active_store = "redis"`, e.g. redis://127.0.0.1:6379.
    pub redis_url: Option<String>,
    /// Prefix of every Redis key: `{prefix}:checkpoint:{thread_id}:{version}`, the thread id
    /// `{customer_id}:{ticket_id}`, the customer id as `{tenant}/{customer_id}` for a tenant
    /// other than `default`.
    pub redis_key_prefix: Option<String>,
    /// When a triage run writes checkpoints: `exit` (default) writes the accepted ticket and the
    /// final state, and a crash re-runs the ticket's model calls; `every_node` also writes one
    /// after each node, so a crash re-runs only the node in flight.
    pub durability: DurabilitySetting,
}

/// Never prints the Redis URL's password.
impl std::fmt::Debug for TriageSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redis_url = self
            .redis_url
            .as_deref()
            .map(|url| crate::config::redact_url_password(url).unwrap_or_else(|| url.to_owned()));
        f.debug_struct("TriageSettings")
            .field("customers", &self.customers)
            .field("articles", &self.articles)
            .field("active_store", &self.active_store)
            .field("redis_url", &redis_url)
            .field("redis_key_prefix", &self.redis_key_prefix)
            .field("durability", &self.durability)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DurabilitySetting {
    /// Commits around nodes with effects and when the run stops. `exit`, its name before
    /// nodes declared effects, is still read.
    #[default]
    #[serde(alias = "exit")]
    ByEffect,
    EveryNode,
}

impl From<DurabilitySetting> for frontdesk_runtime::Durability {
    fn from(setting: DurabilitySetting) -> Self {
        match setting {
            DurabilitySetting::ByEffect => Self::ByEffect,
            DurabilitySetting::EveryNode => Self::EveryNode,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActiveStore {
    #[default]
    Sql,
    Redis,
}

#[derive(Debug, thiserror::Error)]
pub enum TriageStartError {
    #[error("cannot load the triage customer directory or knowledge base")]
    Config(#[source] WorkflowError),
    #[error("invalid triage graph")]
    Graph(#[source] GraphError),
    #[error("workflows.triage.active_store is redis but workflows.triage.redis_url is not set")]
    NoRedisUrl,
    #[error("cannot connect to the triage active-ticket store")]
    ActiveStore(#[source] StoreError),
}

impl WorkflowModule for Workflow {
    const NAME: &'static str = triage::NAME;
    type Settings = TriageSettings;

    async fn build(&self, settings: TriageSettings, wiring: &Wiring<'_>) -> Result<Arc<dyn HostedWorkflow>, BoxError> {
        let TriageSettings { customers, articles, active_store, redis_url, redis_key_prefix, durability } = settings;
        let customers = match &customers {
            Some(path) => CustomerDirectory::load(path).map_err(TriageStartError::Config)?,
            None => CustomerDirectory::shipped(),
        };
        let kb = match &articles {
            Some(path) => KnowledgeBase::load(path).map_err(TriageStartError::Config)?,
            None => KnowledgeBase::shipped(),
        };
        let active_store: Arc<dyn Checkpointer> = match active_store {
            ActiveStore::Sql => wiring.checkpointer.clone(),
            ActiveStore::Redis => {
                let url = redis_url.as_deref().ok_or(TriageStartError::NoRedisUrl)?;
                let mut options = RedisOptions { retention: wiring.checkpoint_retention, ..RedisOptions::default() };
                if let Some(prefix) = redis_key_prefix {
                    options.key_prefix = prefix;
                }
                Arc::new(RedisCheckpointer::connect(url, options).await.map_err(TriageStartError::ActiveStore)?)
            }
        };
        let customers = Arc::new(customers);
        let deps = TriageDeps { llm: wiring.llm.clone(), customers: customers.clone(), kb: Arc::new(kb) };
        let graph = triage::build(deps).map_err(TriageStartError::Graph)?.with_durability(durability.into());
        let desk = TriageDesk::new(
            wiring.runner_on(graph, active_store),
            wiring.llm.clone(),
            customers,
            Arc::new(SqlTicketArchive::new(wiring.database.clone())),
            wiring.conversation_limits.max_text_chars,
        )
        .map_err(TriageStartError::Graph)?;
        Ok(Arc::new(HostedTriage { desk: Arc::new(desk) }))
    }
}

pub struct HostedTriage {
    desk: Arc<TriageDesk>,
}

impl HostedTriage {
    pub fn desk(&self) -> &Arc<TriageDesk> {
        &self.desk
    }
}

#[async_trait]
impl HostedWorkflow for HostedTriage {
    fn name(&self) -> &str {
        triage::NAME
    }

    fn description(&self) -> &str {
        triage::DESCRIPTION
    }

    fn kind(&self) -> WorkflowKind<'_> {
        WorkflowKind::Task
    }

    fn graph(&self) -> GraphDescription {
        self.desk.runner().graph().describe()
    }

    async fn recover(&self) -> Result<usize, WorkflowError> {
        // Sweep first: a crash can bring back the accepting checkpoint of a run whose ticket
        // is already archived (its erase was not yet durable), and resuming that run would
        // triage the ticket again. Recovered runs archive their tickets themselves.
        self.desk.sweep().await?;
        Ok(self.desk.runner().recover().await?)
    }

    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        // The start-up sweep reads every ticket; here only the abandoned runs can need it.
        self.desk.take_over(abandoned).await
    }

    async fn keeps_thread(&self, thread_id: &str) -> Result<bool, WorkflowError> {
        self.desk.archived_thread(thread_id).await
    }

    fn add_service(&self, routes: &mut RoutesBuilder, max_message_bytes: usize) -> Option<&'static ServiceAccess> {
        routes.add_service(
            TriageServiceServer::new(TriageApi::new(self.desk.clone())).max_decoding_message_size(max_message_bytes),
        );
        Some(&ACCESS)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
