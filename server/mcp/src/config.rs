//! How a workflow names an MCP server: a name and a transport (serde, for the workflow's TOML).

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

/// The time a request (the handshake, a tool listing or a tool call) may take unless configured.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One MCP server a workflow uses.
///
/// ```toml
/// [[mcp_servers]]
/// name = "pmo"
/// transport = { type = "stdio", command = "frontdesk-pmo-mcp", args = ["--database", "sqlite://data/pmo.db"] }
///
/// [[mcp_servers]]
/// name = "crm"
/// call_timeout_ms = 10000
/// transport = { type = "streamable_http", url = "http://127.0.0.1:8931/mcp" }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name in logs and errors; unique among a workflow's servers.
    pub name: String,
    pub transport: McpTransport,
    /// How long each request to the server may take, in milliseconds (default 30 000). A call
    /// given more time by [`crate::McpClient::call_tool_with_timeout`] overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<u64>,
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpTransport {
    /// Start `command` as a child process and speak MCP over its stdin and stdout. Its stderr is
    /// inherited. The child's environment is only `env` on top of a small inherited set (`HOME`,
    /// `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, `LANG`, `TZ`, `TMPDIR`, `RUST_LOG`), so the
    /// server's own secrets (model API keys, database URLs) do not leak into it. Dropping or
    /// closing the client ends the child.
    Stdio {
        /// A path, or a name looked up in `PATH`.
        command: PathBuf,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// An MCP server's streamable HTTP endpoint, e.g. `http://127.0.0.1:8931/mcp`.
    StreamableHttp { url: String },
}

impl McpServerConfig {
    /// A server started as a child process.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        McpServerConfig {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
            },
            call_timeout_ms: None,
        }
    }

    /// A server reached over streamable HTTP.
    pub fn streamable_http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig {
            name: name.into(),
            transport: McpTransport::StreamableHttp { url: url.into() },
            call_timeout_ms: None,
        }
    }

    /// Sets the per-request timeout.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// The per-request timeout: `call_timeout_ms`, or [`DEFAULT_CALL_TIMEOUT`].
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }
}

/// The variables a stdio server inherits from this process (the set the MCP reference SDKs pass,
/// plus locale, time zone, temporary directory and Rust log filter).
pub(crate) const INHERITED_ENV: &[&str] =
    &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "RUST_LOG"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_and_http_servers_from_toml() {
        #[derive(Deserialize)]
        struct Workflow {
            mcp_servers: Vec<McpServerConfig>,
        }
        let workflow: Workflow = toml::from_str(
            r#"
            [[mcp_servers]]
            name = "pmo"
            transport = { type = "stdio", command = "frontdesk-pmo-mcp", args = ["--database", "sqlite://pmo.db"], env = { RUST_LOG = "debug" } }

            [[mcp_servers]]
            name = "crm"
            call_timeout_ms = 2500
            transport = { type = "streamable_http", url = "http://127.0.0.1:8931/mcp" }
            "#,
        )
        .unwrap();
        let mut expected = McpServerConfig::stdio("pmo", "frontdesk-pmo-mcp", ["--database", "sqlite://pmo.db"]);
        if let McpTransport::Stdio { env, .. } = &mut expected.transport {
            env.insert("RUST_LOG".into(), "debug".into());
        }
        assert_eq!(workflow.mcp_servers[0], expected);
        assert_eq!(workflow.mcp_servers[0].call_timeout(), DEFAULT_CALL_TIMEOUT);
        assert_eq!(
            workflow.mcp_servers[1],
            McpServerConfig::streamable_http("crm", "http://127.0.0.1:8931/mcp")
                .with_call_timeout(Duration::from_millis(2500))
        );
        assert_eq!(workflow.mcp_servers[1].call_timeout(), Duration::from_millis(2500));
    }

    #[test]
    fn json_round_trip_and_unknown_fields_rejected() {
        let config = McpServerConfig::stdio("pmo", "/usr/bin/pmo", ["-v"]);
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "pmo", "transport": {"type": "stdio", "command": "/usr/bin/pmo", "args": ["-v"]}})
        );
        assert_eq!(serde_json::from_value::<McpServerConfig>(json).unwrap(), config);
        let typo = serde_json::json!({"name": "x", "transport": {"type": "streamable_http", "uri": "http://x"}});
        assert!(serde_json::from_value::<McpServerConfig>(typo).is_err());
        let typo =
            serde_json::json!({"name": "x", "timeout": 3, "transport": {"type": "streamable_http", "url": "http://x"}});
        assert!(serde_json::from_value::<McpServerConfig>(typo).is_err());
        let unknown = serde_json::json!({"name": "x", "transport": {"type": "sse", "url": "http://x"}});
        assert!(serde_json::from_value::<McpServerConfig>(unknown).is_err());
    }
}
