//! MCP client plumbing for Frontdesk workflows, on the official `rmcp` SDK.
//!
//! - [`McpServerConfig`] names a server and its transport: a child process over stdio or a
//!   streamable HTTP endpoint (serde, for workflow configuration).
//! - [`McpClient`] connects to one server, lists its tools ([`McpTool`]) and calls them. A tool
//!   that reports an error is a [`ToolOutcome`] with `is_error: true`, for the model to read;
//!   failing to get an answer at all (the server is gone, the call timed out, the server rejected
//!   the request) is an [`McpError`].
//! - [`McpToolbox`] merges several servers' tools into one set (a tool name offered twice is an
//!   error naming both servers) and routes each call; its tools convert to
//!   [`frontdesk_llm::ToolSpec`] for function calling.
//!
//! Every request is bounded by a timeout (default 30 s, [`DEFAULT_CALL_TIMEOUT`]); dropping a
//! call's future cancels the call at the server.

mod client;
mod config;
mod error;
mod toolbox;

pub use client::{McpClient, McpTool, ToolOutcome};
pub use config::{McpServerConfig, McpTransport, DEFAULT_CALL_TIMEOUT};
pub use error::McpError;
pub use toolbox::McpToolbox;

#[cfg(test)]
mod tests {
    use super::*;

    /// Clients, toolboxes and their calls can move between tasks (`tokio::spawn`).
    #[allow(dead_code)]
    fn sendable(client: &McpClient, toolbox: &McpToolbox) {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: T) {}
        send_sync(client);
        send_sync(toolbox);
        send(client.call_tool("t", serde_json::Value::Null));
        send(client.list_tools());
        send(toolbox.call_tool("t", serde_json::Value::Null));
        send(McpClient::connect(&McpServerConfig::streamable_http("s", "http://127.0.0.1:1/mcp")));
        send(McpToolbox::connect(&[]));
    }
}
