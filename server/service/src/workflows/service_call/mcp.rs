//! The service call's MCP servers: connected at start-up, their tools offered to the flow's
//! tool nodes through `frontdesk_mcp::McpToolbox`.

use std::{path::PathBuf, sync::Arc};

use async_trait::async_trait;
use frontdesk_llm::ToolSpec;
use frontdesk_mcp::{McpServerConfig, McpToolbox};
use frontdesk_workflows::service_call::{ToolFailure, ToolProvider, ToolReply};
use serde_json::Value;

use crate::workflows::BoxError;

/// The PMO MCP server that ships with Frontdesk (`frontdesk-pmo-mcp`, an in-memory SQLite
/// database seeded at start), over stdio: the binary beside this one when it is there (a
/// `cargo build` of the workspace puts both in one directory), else the name, for `PATH`.
pub fn shipped_pmo() -> McpServerConfig {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("frontdesk-pmo-mcp")))
        .filter(|path| path.exists());
    let command = beside.unwrap_or_else(|| PathBuf::from("frontdesk-pmo-mcp"));
    McpServerConfig::stdio("pmo", command, Vec::<String>::new())
}

struct Toolbox {
    toolbox: McpToolbox,
    specs: Vec<ToolSpec>,
}

#[async_trait]
impl ToolProvider for Toolbox {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    fn repeatable(&self, name: &str) -> bool {
        self.toolbox.repeatable(name)
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<ToolReply, ToolFailure> {
        match self.toolbox.call_tool(name, arguments).await {
            Ok(outcome) => {
                Ok(ToolReply { content: outcome.content, is_error: outcome.is_error, latency: outcome.latency })
            }
            Err(error) => Err(ToolFailure { tool: name.to_owned(), source: Box::new(error) }),
        }
    }
}

/// Connects to `servers`. Servers the operator configured must be reachable, or the server does
/// not start. The shipped default is only as good as the build: when its binary is missing the
/// call flow still starts, with a warning, and its tool nodes fail loudly when they run.
pub async fn connect(servers: &[McpServerConfig]) -> Result<Option<Arc<dyn ToolProvider>>, BoxError> {
    if servers.is_empty() {
        tracing::warn!("no mcp servers configured: the service-call flow's tool nodes will fail");
        return Ok(None);
    }
    match McpToolbox::connect(servers).await {
        Ok(toolbox) => {
            let specs = toolbox.tool_specs();
            tracing::info!(tools = specs.len(), servers = servers.len(), "mcp servers connected");
            Ok(Some(Arc::new(Toolbox { toolbox, specs })))
        }
        Err(error) if servers == [shipped_pmo()] => {
            tracing::warn!(error = %error, "the shipped pmo mcp server is not available (cargo build -p frontdesk-pmo-mcp builds it): the service-call flow's tool nodes will fail");
            Ok(None)
        }
        Err(error) => Err(Box::new(error)),
    }
}
