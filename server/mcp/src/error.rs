//! [`McpError`]: what goes wrong talking to MCP servers. A tool that reports an error is not one of
//! these: that is a [`crate::ToolOutcome`] with `is_error: true`.

use std::{path::PathBuf, time::Duration};

use rmcp::service::{ClientInitializeError, ServiceError};

/// A failure to reach, start or talk to an MCP server, or a toolbox that cannot be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The stdio server's command could not be started.
    #[error("MCP server `{server}`: cannot start `{}`", command.display())]
    Spawn {
        server: String,
        command: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The server did not complete the MCP handshake (it exited, refused the connection, or
    /// answered something other than MCP).
    #[error("MCP server `{server}`: the MCP handshake failed")]
    Handshake {
        server: String,
        #[source]
        source: Box<ClientInitializeError>,
    },
    /// A request (the handshake, a listing or a tool call) took longer than its timeout. A timed
    /// out tool call is cancelled at the server.
    #[error("MCP server `{server}`: {operation} timed out after {timeout:?}")]
    Timeout { server: String, operation: String, timeout: Duration },
    /// The connection is gone: the server exited or hung up, before or during the request.
    #[error("MCP server `{server}`: the connection closed during {operation} (the server exited or hung up)")]
    Disconnected {
        server: String,
        operation: String,
        #[source]
        source: Box<ServiceError>,
    },
    /// The transport failed to deliver the request (an HTTP error, a broken pipe).
    #[error("MCP server `{server}`: {operation} could not be sent")]
    Transport {
        server: String,
        operation: String,
        #[source]
        source: Box<ServiceError>,
    },
    /// The server answered with a JSON-RPC error (e.g. an unknown tool), not a tool result.
    #[error("MCP server `{server}`: {operation} was rejected: {message} (JSON-RPC error {code})")]
    Rejected { server: String, operation: String, code: i32, message: String, data: Option<Box<serde_json::Value>> },
    /// Any other protocol failure (an unexpected response, a cancelled request).
    #[error("MCP server `{server}`: {operation} failed")]
    Protocol {
        server: String,
        operation: String,
        #[source]
        source: Box<ServiceError>,
    },
    /// The client was closed with [`crate::McpClient::close`].
    #[error("MCP server `{server}`: the client is closed")]
    Closed { server: String },
    /// A tool's arguments must be a JSON object (or null, for none).
    #[error("tool `{tool}` of MCP server `{server}`: arguments must be a JSON object, not {found}")]
    InvalidArguments { server: String, tool: String, found: &'static str },
    /// No server of the toolbox offers this tool.
    #[error("no MCP server offers a tool `{tool}`")]
    UnknownTool { tool: String },
    /// Two servers of a toolbox offer a tool of the same name, so a call could not be routed.
    #[error("tool `{tool}` is offered by two MCP servers, `{first}` and `{second}`; tool names must be unique across a toolbox's servers")]
    DuplicateTool { tool: String, first: String, second: String },
    /// Two servers of a toolbox have the same name.
    #[error("two MCP servers are named `{server}`")]
    DuplicateServer { server: String },
}

impl McpError {
    /// The name of the server the error is about, if it is about one.
    pub fn server(&self) -> Option<&str> {
        match self {
            McpError::Spawn { server, .. }
            | McpError::Handshake { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Disconnected { server, .. }
            | McpError::Transport { server, .. }
            | McpError::Rejected { server, .. }
            | McpError::Protocol { server, .. }
            | McpError::Closed { server }
            | McpError::InvalidArguments { server, .. }
            | McpError::DuplicateServer { server } => Some(server),
            McpError::UnknownTool { .. } | McpError::DuplicateTool { .. } => None,
        }
    }

    /// True when the server can no longer be reached through this client (it exited, hung up or
    /// the transport broke): reconnecting is the only way on.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, McpError::Disconnected { .. } | McpError::Transport { .. } | McpError::Closed { .. })
    }

    /// Sorts an rmcp request failure.
    pub(crate) fn from_service(server: &str, operation: String, timeout: Duration, source: ServiceError) -> McpError {
        let server = server.to_owned();
        match source {
            ServiceError::McpError(data) => McpError::Rejected {
                server,
                operation,
                code: data.code.0,
                message: data.message.into_owned(),
                data: data.data.map(Box::new),
            },
            ServiceError::TransportClosed => McpError::Disconnected { server, operation, source: Box::new(source) },
            ServiceError::TransportSend(_) => McpError::Transport { server, operation, source: Box::new(source) },
            ServiceError::Timeout { .. } => McpError::Timeout { server, operation, timeout },
            source => McpError::Protocol { server, operation, source: Box::new(source) },
        }
    }
}
