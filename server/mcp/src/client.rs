//! [`McpClient`]: one connection to one MCP server.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use frontdesk_llm::ToolSpec;
use rmcp::{
    model::{CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock, Implementation},
    service::{RoleClient, RunningService},
    transport::{
        common::client_side_sse::SseRetryPolicy, streamable_http_client::StreamableHttpClientTransportConfig,
        StreamableHttpClientTransport, TokioChildProcess,
    },
    ServiceExt,
};
use serde::{Deserialize, Serialize};

use crate::{
    config::{McpServerConfig, McpTransport, INHERITED_ENV},
    McpError,
};

/// A tool an MCP server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    pub name: String,
    /// The tool's description (its title when it has no description; empty when it has neither).
    pub description: String,
    /// The JSON schema of the tool's arguments object.
    pub input_schema: serde_json::Value,
    /// Whether calling the tool again with the same arguments changes nothing more: the server
    /// says it only reads (`readOnlyHint`) or is idempotent (`idempotentHint`). A tool that
    /// says neither is taken to act, so a caller must not repeat a call that may have reached it.
    #[serde(default)]
    pub repeatable: bool,
}

impl McpTool {
    /// The tool as a function-calling tool for the model.
    pub fn to_tool_spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.input_schema.clone(),
        }
    }

    fn from_rmcp(tool: rmcp::model::Tool) -> McpTool {
        let description = match (tool.description, tool.title) {
            (Some(description), _) => description.into_owned(),
            (None, Some(title)) => title,
            (None, None) => String::new(),
        };
        let hints = tool.annotations.as_ref();
        let says = |hint: Option<bool>| hint == Some(true);
        let repeatable = hints.is_some_and(|hints| says(hints.read_only_hint) || says(hints.idempotent_hint));
        McpTool {
            name: tool.name.into_owned(),
            description,
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            repeatable,
        }
    }
}

impl From<McpTool> for ToolSpec {
    fn from(tool: McpTool) -> ToolSpec {
        ToolSpec { name: tool.name, description: tool.description, parameters: tool.input_schema }
    }
}

/// The result of a tool call the server answered, successful or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// The tool's structured result when it gave one; otherwise its content: the text of a single
    /// text part as a JSON string, or an array of the parts (text parts as strings, others, such
    /// as images, as their MCP JSON).
    pub content: serde_json::Value,
    /// The tool reported an error (`isError: true`); `content` then says what went wrong.
    pub is_error: bool,
    /// How long the call took, as the client saw it.
    pub latency: Duration,
}

impl ToolOutcome {
    /// The outcome as text for the model: a string content as it is, anything else as JSON.
    pub fn text(&self) -> String {
        match &self.content {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        }
    }

    fn from_rmcp(result: CallToolResult, latency: Duration) -> ToolOutcome {
        let is_error = result.is_error.unwrap_or(false);
        let content = match result.structured_content {
            // A tool error's text says more than its structured form, if it has both.
            Some(structured) if !is_error || result.content.is_empty() => structured,
            _ => {
                let mut parts: Vec<serde_json::Value> = result
                    .content
                    .into_iter()
                    .map(|part| match part {
                        ContentBlock::Text(text) => serde_json::Value::String(text.text),
                        other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
                    })
                    .collect();
                match parts.len() {
                    0 => serde_json::Value::Null,
                    1 => parts.pop().expect("one part"),
                    _ => serde_json::Value::Array(parts),
                }
            }
        };
        ToolOutcome { content, is_error, latency }
    }
}

/// A connection to one MCP server, over stdio (a child process) or streamable HTTP.
///
/// Every request is bounded by the server's call timeout (default 30 s). Dropping a call's future
/// cancels the call: the server is sent `notifications/cancelled`. Dropping the client ends the
/// connection (and a stdio server's process); [`McpClient::close`] does so gracefully.
///
/// Over streamable HTTP, a request the server answers with 404 because it no longer knows the
/// session (it restarted, or the session expired) starts a new session and is sent once more;
/// the client stays open. No other failed request is sent again.
pub struct McpClient {
    name: String,
    /// What it was connected with, to connect again after the server went away.
    config: McpServerConfig,
    call_timeout: Duration,
    process_id: Option<u32>,
    service: RunningService<RoleClient, ClientConfig>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("name", &self.name)
            .field("call_timeout", &self.call_timeout)
            .field("process_id", &self.process_id)
            .field("closed", &self.service.is_closed())
            .finish()
    }
}

impl McpClient {
    /// Starts (stdio) or reaches (HTTP) the server and completes the MCP handshake within the
    /// server's call timeout.
    pub async fn connect(config: &McpServerConfig) -> Result<McpClient, McpError> {
        let name = config.name.clone();
        let timeout = config.call_timeout();
        let client_config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("frontdesk", env!("CARGO_PKG_VERSION")),
        );
        let handshake_timeout =
            || McpError::Timeout { server: name.clone(), operation: "the MCP handshake".into(), timeout };
        let handshake_failed = |source| McpError::Handshake { server: name.clone(), source: Box::new(source) };
        let (service, process_id) = match &config.transport {
            McpTransport::Stdio { command, args, env } => {
                let transport = spawn(&name, command, args, env)?;
                let process_id = transport.id();
                // On a timeout the transport is dropped with the future, which kills the child.
                let service = tokio::time::timeout(timeout, client_config.serve(transport))
                    .await
                    .map_err(|_| handshake_timeout())?
                    .map_err(handshake_failed)?;
                (service, process_id)
            }
            McpTransport::StreamableHttp { url } => {
                let mut http = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                // rmcp's default retries a broken response stream forever, so a call to a server
                // that died would hang until its timeout; give up after a few quick retries.
                http.retry_config = Arc::new(BoundedRetry);
                // A server that restarted or expired the session answers requests in it with 404
                // (MCP "Session Management"). rmcp then starts a new session (`initialize` without
                // the old id, then `notifications/initialized`), once for all the requests that met
                // the 404, and sends each of them once more. Resending is safe even for a tool that
                // acts: a server that did not know the session did not run the request. Any other
                // failure is not resent. This is rmcp's default, set here so that an upgrade that
                // changed it cannot silently bring back a server whose every call fails.
                http.reinit_on_expired_session = true;
                let transport = StreamableHttpClientTransport::from_config(http);
                let service = tokio::time::timeout(timeout, client_config.serve(transport))
                    .await
                    .map_err(|_| handshake_timeout())?
                    .map_err(handshake_failed)?;
                (service, None)
            }
        };
        if let Some(info) = service.peer_info() {
            let implementation = info.server_info.as_ref();
            tracing::info!(
                server = %name,
                implementation = implementation.map_or("?", |i| i.name.as_str()),
                version = implementation.map_or("?", |i| i.version.as_str()),
                protocol = %info.protocol_version,
                "connected to MCP server"
            );
        }
        Ok(McpClient { name, config: config.clone(), call_timeout: timeout, process_id, service })
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// The process id of a stdio server's child process.
    pub fn process_id(&self) -> Option<u32> {
        self.process_id
    }

    /// The timeout of each request.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Changes the timeout of each later request.
    pub fn set_call_timeout(&mut self, timeout: Duration) {
        self.call_timeout = timeout;
    }

    /// True once the connection has ended: closed, or the server went away.
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Every tool the server offers (all pages of `tools/list`).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        self.ensure_open()?;
        let operation = || "tools/list".to_owned();
        let tools = tokio::time::timeout(self.call_timeout, self.service.peer().list_all_tools())
            .await
            .map_err(|_| McpError::Timeout {
                server: self.name.clone(),
                operation: operation(),
                timeout: self.call_timeout,
            })?
            .map_err(|e| McpError::from_service(&self.name, operation(), self.call_timeout, e))?;
        Ok(tools.into_iter().map(McpTool::from_rmcp).collect())
    }

    /// Calls a tool with the client's call timeout. `arguments` is a JSON object, or null for
    /// none. A tool that reports an error is `Ok` with `is_error: true`; `Err` is a failure to get
    /// an answer (see [`McpError`]).
    pub async fn call_tool(&self, name: &str, arguments: serde_json::Value) -> Result<ToolOutcome, McpError> {
        self.call_tool_with_timeout(name, arguments, self.call_timeout).await
    }

    /// [`McpClient::call_tool`] with its own timeout. On a timeout the call is cancelled at the
    /// server (`notifications/cancelled`) and [`McpError::Timeout`] returned.
    pub async fn call_tool_with_timeout(
        &self,
        name: &str,
        arguments: serde_json::Value,
        timeout: Duration,
    ) -> Result<ToolOutcome, McpError> {
        self.ensure_open()?;
        let mut params = CallToolRequestParams::new(name.to_owned());
        match arguments {
            serde_json::Value::Object(arguments) => params = params.with_arguments(arguments),
            serde_json::Value::Null => {}
            other => {
                return Err(McpError::InvalidArguments {
                    server: self.name.clone(),
                    tool: name.to_owned(),
                    found: json_kind(&other),
                })
            }
        }
        let operation = || format!("tools/call `{name}`");
        let started = Instant::now();
        // Dropping rmcp's call future (here on a timeout, or by our caller) sends the server
        // `notifications/cancelled` for the request.
        let result = tokio::time::timeout(timeout, self.service.peer().call_tool(params))
            .await
            .map_err(|_| McpError::Timeout { server: self.name.clone(), operation: operation(), timeout })?
            .map_err(|e| McpError::from_service(&self.name, operation(), timeout, e))?;
        let outcome = ToolOutcome::from_rmcp(result, started.elapsed());
        tracing::debug!(server = %self.name, tool = name, is_error = outcome.is_error, latency = ?outcome.latency, "tool call");
        Ok(outcome)
    }

    /// Ends the connection: a stdio server's stdin is closed and the process waited for (then
    /// terminated if it lingers). Later requests fail with [`McpError::Closed`]; closing again
    /// does nothing.
    pub async fn close(&mut self) {
        if let Err(source) = self.service.close().await {
            // The service task panicked or was aborted: nothing is left to close.
            tracing::warn!(server = %self.name, error = %source, "MCP client task ended abnormally");
        }
    }

    fn ensure_open(&self) -> Result<(), McpError> {
        if self.service.is_closed() {
            Err(McpError::Closed { server: self.name.clone() })
        } else {
            Ok(())
        }
    }
}

/// Reconnects a broken streamable HTTP response stream 3 times, after 250 ms, 500 ms and 1 s,
/// then fails the requests waiting on it ([`McpError::Disconnected`]).
#[derive(Debug)]
struct BoundedRetry;

impl SseRetryPolicy for BoundedRetry {
    fn retry(&self, current_times: usize) -> Option<Duration> {
        (current_times < 3).then(|| Duration::from_millis(250 << current_times))
    }
}

fn spawn(
    server: &str,
    command: &Path,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
) -> Result<TokioChildProcess, McpError> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear();
    for key in INHERITED_ENV {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.envs(env);
    TokioChildProcess::new(cmd).map_err(|source| McpError::Spawn {
        server: server.to_owned(),
        command: command.to_owned(),
        source,
    })
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn outcome_prefers_structured_content() {
        let outcome = ToolOutcome::from_rmcp(
            result(serde_json::json!({
                "content": [{"type": "text", "text": "{\"id\":1}"}],
                "structuredContent": {"id": 1}
            })),
            Duration::from_millis(3),
        );
        assert_eq!(outcome.content, serde_json::json!({"id": 1}));
        assert!(!outcome.is_error);
        assert_eq!(outcome.text(), "{\"id\":1}");
    }

    #[test]
    fn outcome_of_text_parts_and_errors() {
        let one = ToolOutcome::from_rmcp(
            result(serde_json::json!({"content": [{"type": "text", "text": "no such customer"}], "isError": true})),
            Duration::ZERO,
        );
        assert_eq!(one.content, serde_json::json!("no such customer"));
        assert!(one.is_error);
        assert_eq!(one.text(), "no such customer");
        let two = ToolOutcome::from_rmcp(
            result(serde_json::json!({"content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ]})),
            Duration::ZERO,
        );
        assert_eq!(two.content, serde_json::json!(["a", {"type": "image", "data": "AAAA", "mimeType": "image/png"}]));
        let none = ToolOutcome::from_rmcp(result(serde_json::json!({"content": []})), Duration::ZERO);
        assert_eq!(none.content, serde_json::Value::Null);
    }

    #[test]
    fn tool_spec_from_an_mcp_tool() {
        let tool = McpTool {
            name: "customer_get".into(),
            description: "Find a customer".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {"phone": {"type": "string"}}}),
            repeatable: true,
        };
        let spec = tool.to_tool_spec();
        assert_eq!(spec.name, "customer_get");
        assert_eq!(spec.description, "Find a customer");
        assert_eq!(spec.parameters, tool.input_schema);
        assert_eq!(ToolSpec::from(tool), spec);
    }

    #[tokio::test]
    async fn a_missing_command_is_a_spawn_error() {
        let config = McpServerConfig::stdio("ghost", "/nonexistent/frontdesk-mcp-server", Vec::<String>::new());
        let error = McpClient::connect(&config).await.unwrap_err();
        assert!(matches!(&error, McpError::Spawn { server, .. } if server == "ghost"), "{error:?}");
        assert!(std::error::Error::source(&error).is_some());
    }

    #[tokio::test]
    async fn a_command_that_is_no_mcp_server_fails_the_handshake() {
        // `true` exits at once: the handshake meets a closed pipe.
        let config = McpServerConfig::stdio("not-mcp", "true", Vec::<String>::new());
        let error = McpClient::connect(&config).await.unwrap_err();
        assert!(matches!(&error, McpError::Handshake { server, .. } if server == "not-mcp"), "{error:?}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out_the_handshake() {
        // `sleep` reads nothing and answers nothing.
        let config = McpServerConfig::stdio("silent", "sleep", ["30"]).with_call_timeout(Duration::from_millis(300));
        let started = Instant::now();
        let error = McpClient::connect(&config).await.unwrap_err();
        assert!(matches!(&error, McpError::Timeout { server, .. } if server == "silent"), "{error:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn an_http_server_that_is_not_there_fails_the_handshake() {
        // A port that was free a moment ago.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = McpServerConfig::streamable_http("gone", format!("http://127.0.0.1:{port}/mcp"))
            .with_call_timeout(Duration::from_secs(10));
        let error = McpClient::connect(&config).await.unwrap_err();
        assert!(matches!(&error, McpError::Handshake { server, .. } if server == "gone"), "{error:?}");
    }
}
