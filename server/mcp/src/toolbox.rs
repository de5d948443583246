//! [`McpToolbox`]: the tools of several MCP servers as one set, each call routed to its server.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use frontdesk_llm::ToolSpec;

use crate::{McpClient, McpError, McpServerConfig, McpTool, ToolOutcome};

/// Several MCP servers' tools as one set. Tool names must be unique across the servers; each
/// call goes to the server that offers the tool. A server whose connection the client finds
/// closed (a stdio server that exited) is connected again by the next call to one of its tools;
/// the call that found it gone is not sent again, as it may have reached the server. An HTTP
/// server that forgot the client's session is given a new one by the client itself, which sends
/// again the call the server refused (see [`McpClient`]).
#[derive(Debug)]
pub struct McpToolbox {
    slots: Vec<Slot>,
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
        let slots = clients.into_iter().map(Slot::new).collect();
        Ok(McpToolbox { slots, tools, routes })
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
        self.routes.get(tool).map(|&index| self.slots[index].name.as_str())
    }

    /// The client of a server, by name, as it is connected now.
    pub fn client(&self, server: &str) -> Option<Arc<McpClient>> {
        self.slots.iter().find(|slot| slot.name == server).map(Slot::current)
    }

    /// Calls a tool on the server that offers it ([`McpError::UnknownTool`] if none does),
    /// connecting to that server again first if its connection is gone.
    pub async fn call_tool(&self, name: &str, arguments: serde_json::Value) -> Result<ToolOutcome, McpError> {
        let client = self.route(name)?.live().await?;
        client.call_tool(name, arguments).await
    }

    /// [`McpToolbox::call_tool`] with its own timeout.
    pub async fn call_tool_with_timeout(
        &self,
        name: &str,
        arguments: serde_json::Value,
        timeout: std::time::Duration,
    ) -> Result<ToolOutcome, McpError> {
        let client = self.route(name)?.live().await?;
        client.call_tool_with_timeout(name, arguments, timeout).await
    }

    /// Closes every client no call still holds; the others end as their last call drops them.
    pub async fn close(self) {
        let mut owned: Vec<McpClient> = self
            .slots
            .into_iter()
            .filter_map(|slot| {
                let client = slot.client.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
                Arc::try_unwrap(client).ok()
            })
            .collect();
        close_all(&mut owned).await;
    }

    fn route(&self, tool: &str) -> Result<&Slot, McpError> {
        self.routes
            .get(tool)
            .map(|&index| &self.slots[index])
            .ok_or_else(|| McpError::UnknownTool { tool: tool.to_owned() })
    }
}

/// One server's connection, replaced when it is found gone.
#[derive(Debug)]
struct Slot {
    name: String,
    client: RwLock<Arc<McpClient>>,
    /// Held while connecting again, so calls that find the connection gone at once wait for one
    /// new connection instead of each starting its own server.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Slot {
    fn new(client: McpClient) -> Self {
        Slot {
            name: client.name().to_owned(),
            client: RwLock::new(Arc::new(client)),
            reconnecting: tokio::sync::Mutex::new(()),
        }
    }

    fn current(&self) -> Arc<McpClient> {
        self.client.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The connection, connected again first when it is gone. A failure to connect is the
    /// call's error; the next call tries again.
    async fn live(&self) -> Result<Arc<McpClient>, McpError> {
        let client = self.current();
        if !client.is_closed() {
            return Ok(client);
        }
        let _one_at_a_time = self.reconnecting.lock().await;
        let client = self.current();
        if !client.is_closed() {
            return Ok(client);
        }
        tracing::warn!(server = %self.name, "mcp server connection lost; connecting again");
        let fresh = Arc::new(McpClient::connect(client.config()).await?);
        tracing::info!(server = %self.name, "mcp server connected again");
        *self.client.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh.clone();
        Ok(fresh)
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
