//! The research workflow's service side: its settings (`workflows.research`), its corpora, its
//! wiring, and `ResearchService`.

mod convert;
mod grpc;

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use frontdesk_api::v1::research_service_server::ResearchServiceServer;
use frontdesk_runtime::{RetryPolicy, Runner};
use frontdesk_workflows::{
    research::{self, corpus::Corpus, ResearchDeps, ResearchDesk},
    WorkflowError,
};
use serde::{Deserialize, Serialize};
use tonic::{server::NamedService, service::RoutesBuilder};

use self::grpc::ResearchApi;
use super::{BoxError, HostedTask, HostedWorkflow, TaskDesk, Wiring, WorkflowModule};
use crate::auth::{Access, ServiceAccess};

/// The scopes of `ResearchService`'s methods (scope service `research`).
static ACCESS: ServiceAccess = ServiceAccess {
    service: <ResearchServiceServer<ResearchApi> as NamedService>::NAME,
    scope: "research",
    methods: &[("Ask", Access::Write), ("GetResearch", Access::Read), ("ListResearch", Access::Read)],
};

pub struct Workflow;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResearchSettings {
    /// Document corpora a question may name, by name: directories of `.md` and `.txt` files
    /// (config/research/README.md). `sample`, the shipped documents, is always there.
    pub corpora: BTreeMap<String, PathBuf>,
    /// Whether a plan's research steps run at once (the default) or one after another.
    pub parallel_research: bool,
    /// First delay before a failed component's next attempt (doubling, with jitter, up to ten
    /// seconds); three attempts in all, then the error handler.
    pub retry_backoff_ms: u64,
}

impl Default for ResearchSettings {
    fn default() -> Self {
        Self { corpora: BTreeMap::new(), parallel_research: true, retry_backoff_ms: 500 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResearchStartError {
    #[error("workflows.research.corpora.{name} cannot be loaded")]
    Corpus {
        name: String,
        #[source]
        source: WorkflowError,
    },
    #[error("workflows.research.corpora.sample is the shipped corpus's name; give yours another")]
    SampleName,
    #[error("invalid research graph")]
    Graph(#[source] frontdesk_runtime::GraphError),
}

impl WorkflowModule for Workflow {
    const NAME: &'static str = research::NAME;
    type Settings = ResearchSettings;

    async fn build(
        &self,
        settings: ResearchSettings,
        wiring: &Wiring<'_>,
    ) -> Result<Arc<dyn HostedWorkflow>, BoxError> {
        let ResearchSettings { corpora, parallel_research, retry_backoff_ms } = settings;
        let mut loaded = BTreeMap::new();
        for (name, dir) in corpora {
            if name == research::SAMPLE_CORPUS {
                return Err(ResearchStartError::SampleName.into());
            }
            let corpus =
                Corpus::load(&dir).map_err(|source| ResearchStartError::Corpus { name: name.clone(), source })?;
            loaded.insert(name, Arc::new(corpus));
        }
        let mut deps = ResearchDeps::new(wiring.llm.clone(), loaded);
        deps.parallel = parallel_research;
        let backoff = Duration::from_millis(retry_backoff_ms);
        deps.retry = RetryPolicy::attempts(3).with_backoff(backoff, Duration::from_secs(10).max(backoff));
        let names = deps.corpora.keys().cloned().collect();
        let graph = research::build(deps).map_err(ResearchStartError::Graph)?;
        let desk = ResearchDesk::new(wiring.runner(graph), names);
        Ok(Arc::new(HostedTask::new(desk)))
    }
}

/// The research workflow as the server hosts it.
pub type HostedResearch = HostedTask<ResearchDesk>;

impl TaskDesk for ResearchDesk {
    const NAME: &'static str = research::NAME;
    const DESCRIPTION: &'static str = research::DESCRIPTION;
    type State = research::ResearchState;

    fn runner(&self) -> &Runner<Self::State> {
        ResearchDesk::runner(self)
    }

    fn add_service(desk: Arc<Self>, routes: &mut RoutesBuilder, max_message_bytes: usize) -> &'static ServiceAccess {
        routes.add_service(
            ResearchServiceServer::new(ResearchApi::new(desk)).max_decoding_message_size(max_message_bytes),
        );
        &ACCESS
    }
}
