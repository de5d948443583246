//! [`McpToolbox`]: the tools of several MCP servers as one set, each call routed to its server.

use std::collections::HashMap;

use frontdesk_llm::ToolSpec;

use crate::{McpClient, McpError, McpServerConfig, McpTool, ToolOutcome};

/// Several MCP servers' tools as one set. Tool names must be unique across the servers; each
/// call goes to the server that offers the tool.
#[derive(Debug)]
pub struct McpToolbox {
    clients: Vec<McpClient>,
    /// Every tool, in server order and then each server's order.
    tools: Vec<McpTool>,
    /// Tool name to the index of its server in `clients`.
    routes: HashMap<String, usize>,
}

impl McpToolbox {
    /// Connects to every server (concurrently) and merges their tools. Any failure closes the
    /// servers already connected and is returned.
    pub async fn connect(configs: &[McpServerConfig]) -> Result<McpToolbox, McpError> {
        check_unique_names(configs.iter().map(|c| c.name.as_str()))?;
        let results = futures::future::join_all(configs.iter().map(McpClient::connect)).await;
        let mut clients = Vec::with_capacity(results.len());
        let mut failure = None;
        for result in results {
            match result {
                Ok(client) => clients.push(client),
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        if let Some(error) = failure {
            close_all(&mut clients).await;
            return Err(error);
        }
        McpToolbox::from_clients(clients).await
    }

    /// Merges the tools of connected clients. A tool name offered by two servers is
    /// [`McpError::DuplicateTool`] naming both; on any error the clients are closed.
    pub async fn from_clients(mut clients: Vec<McpClient>) -> Result<McpToolbox, McpError> {
        if let Err(error) = check_unique_names(clients.iter().map(McpClient::name)) {
            close_all(&mut clients).await;
            return Err(error);
        }
        let listings = futures::future::join_all(clients.iter().map(McpClient::list_tools)).await;
        let mut tools = Vec::new();
        let mut routes: HashMap<String, usize> = HashMap::new();
        let mut failure = None;
        for (index, listing) in listings.into_iter().enumerate() {
            let listed = match listing {
                Ok(listed) => listed,
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            };
            for tool in listed {
                if let Some(&first) = routes.get(&tool.name) {
                    failure = Some(McpError::DuplicateTool {
                        tool: tool.name,
                        first: clients[first].name().to_owned(),
                        second: clients[index].name().to_owned(),
                    });
                    break;
                }
                routes.insert(tool.name.clone(), index);
                tools.push(tool);
            }
            if failure.is_some() {
                break;
            }
        }
        if let Some(error) = failure {
            close_all(&mut clients).await;
            return Err(error);
        }
        Ok(McpToolbox { clients, tools, routes })
    }

    /// Every tool of every server.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Every tool as a function-calling tool for the model.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(McpTool::to_tool_spec).collect()
    }

    /// Whether `tool` may be called again without repeating an effect (see
    /// [`McpTool::repeatable`]); false for a tool no server offers.
    pub fn repeatable(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t.name == tool && t.repeatable)
    }

    /// The name of the server offering `tool`.
    pub fn server_of(&self, tool: &str) -> Option<&str> {
        self.routes.get(tool).map(|&index| self.clients[index].name())
    }

    /// The client of a server, by name.
    pub fn client(&self, server: &str) -> Option<&McpClient> {
        self.clients.iter().find(|c| c.name() == server)
    }

    /// The clients, in the order they were given.
    pub fn clients(&self) -> &[McpClient] {
        &self.clients
    }

    /// Calls a tool on the server that offers it ([`McpError::UnknownTool`] if none does).
    pub async fn call_tool(&self, name: &str, arguments: serde_json::Value) -> Result<ToolOutcome, McpError> {
        let client = self.route(name)?;
        client.call_tool(name, arguments).await
    }

    /// [`McpToolbox::call_tool`] with its own timeout.
    pub async fn call_tool_with_timeout(
        &self,
        name: &str,
        arguments: serde_json::Value,
        timeout: std::time::Duration,
    ) -> Result<ToolOutcome, McpError> {
        let client = self.route(name)?;
        client.call_tool_with_timeout(name, arguments, timeout).await
    }

    /// Closes every client.
    pub async fn close(&mut self) {
        close_all(&mut self.clients).await;
    }

    fn route(&self, tool: &str) -> Result<&McpClient, McpError> {
        self.routes
            .get(tool)
            .map(|&index| &self.clients[index])
            .ok_or_else(|| McpError::UnknownTool { tool: tool.to_owned() })
    }
}

fn check_unique_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), McpError> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(McpError::DuplicateServer { server: name.to_owned() });
        }
    }
    Ok(())
}

async fn close_all(clients: &mut [McpClient]) {
    futures::future::join_all(clients.iter_mut().map(McpClient::close)).await;
}
