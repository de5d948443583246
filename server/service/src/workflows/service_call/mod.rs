//! The service-call workflow's service side: its settings (`workflows.service_call`), its flow
//! configuration, its MCP servers, and its state on the wire (`ServiceCallState`).
//! `ConversationService` serves it.

mod mcp;

use std::{path::PathBuf, sync::Arc};

use frontdesk_api::v1 as pb;
use frontdesk_workflows::{
    conversation::ConversationHost,
    service_call::{self, config::AgentConfig, CallDeps, CallSpec, CallView, ToolProvider},
};
use serde::{Deserialize, Serialize};

use super::{BoxError, Conversational, HostedWorkflow, ProtoState, Wiring, WorkflowModule};

pub struct Workflow;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceCallSettings {
    /// The flow (`agent_config.json`); the shipped config/service_call/agent_config.json when
    /// unset. Validated at start-up: an invalid flow stops the server, naming node and field.
    pub config: Option<PathBuf>,
    /// The MCP servers whose tools the flow's tool nodes call. By default the shipped PMO server
    /// (`frontdesk-pmo-mcp`, over stdio, found beside this binary or on PATH).
    pub mcp_servers: Vec<frontdesk_mcp::McpServerConfig>,
}

impl Default for ServiceCallSettings {
    fn default() -> Self {
        Self { config: None, mcp_servers: vec![mcp::shipped_pmo()] }
    }
}

/// MCP tools to use instead of the configured servers (tests, embedding): put it in
/// `Overrides::parts`.
#[derive(Clone)]
pub struct UseTools(pub Arc<dyn ToolProvider>);

#[derive(Debug, thiserror::Error)]
pub enum ServiceCallStartError {
    #[error("invalid service-call flow (workflows.service_call.config)")]
    Config(#[source] frontdesk_workflows::WorkflowError),
    #[error("cannot reach the MCP servers (workflows.service_call.mcp_servers)")]
    Mcp(#[source] BoxError),
    #[error("invalid service-call graph")]
    Graph(#[source] frontdesk_runtime::GraphError),
    #[error("the service-call flow names tools its MCP servers do not offer (workflows.service_call)")]
    Tools(#[source] frontdesk_workflows::service_call::config::ConfigErrors),
}

impl WorkflowModule for Workflow {
    const NAME: &'static str = service_call::NAME;
    type Settings = ServiceCallSettings;

    async fn build(
        &self,
        settings: ServiceCallSettings,
        wiring: &Wiring<'_>,
    ) -> Result<Arc<dyn HostedWorkflow>, BoxError> {
        let ServiceCallSettings { config, mcp_servers } = settings;
        let config = match &config {
            Some(path) => AgentConfig::load(path).map_err(ServiceCallStartError::Config)?,
            None => AgentConfig::shipped(),
        };
        let tools: Option<Arc<dyn ToolProvider>> = match wiring.parts.get::<UseTools>() {
            Some(UseTools(tools)) => Some(tools.clone()),
            None => mcp::connect(&mcp_servers).await.map_err(ServiceCallStartError::Mcp)?,
        };
        if let Some(tools) = &tools {
            let specs = tools.specs();
            let offered: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
            config.check_tools(&offered).map_err(ServiceCallStartError::Tools)?;
        }
        let config = Arc::new(config);
        let spec = CallSpec { config: config.clone() };
        let deps = CallDeps { llm: wiring.llm.clone(), config: config.clone(), tools };
        let graph = service_call::build(deps, &spec).map_err(ServiceCallStartError::Graph)?;
        let host = ConversationHost::new(Arc::new(spec), wiring.runner(graph), wiring.conversation_limits.clone());
        Ok(Arc::new(Conversational::new(host)))
    }
}

impl ProtoState for CallView {
    fn into_proto(self) -> pb::conversation::State {
        let CallView {
            current_node,
            context,
            node_traversal_path,
            missing_mandatory_fields,
            call_ended,
            model_calls,
            prompt_tokens,
            completion_tokens,
        } = self;
        pb::conversation::State::ServiceCall(pb::ServiceCallState {
            current_node,
            context_json: context.to_string(),
            node_traversal_path,
            missing_mandatory_fields,
            call_ended,
            model_calls,
            prompt_tokens,
            completion_tokens,
        })
    }
}
