//! Function calling from nodes: the model is offered a node's tools, each call it makes is run
//! and streamed (a tool-call and a tool-result event), its result goes back to the model, and
//! after at most a few rounds the answer is a structured reply.

use std::sync::Arc;

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest, JsonSchemaFormat, LlmClient, OutputSchema, ToolCall, ToolSpec};
use frontdesk_runtime::{EventKind, NodeContext, NodeError, NodeErrorKind};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tracing::debug;

use crate::llm_node;

/// What a tool returned: a result, or an error the model is told about (a document that does
/// not exist, an expression that does not parse) rather than a failure of the node.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub value: serde_json::Value,
    pub is_error: bool,
}

impl ToolResult {
    /// A result to encode. A value that does not encode is the tool's bug, an `Internal`
    /// failure of the node rather than a `null` the model would be shown.
    pub fn ok(value: impl Serialize) -> Result<Self, NodeError> {
        let value = serde_json::to_value(value)
            .map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "cannot encode a tool result", e))?;
        Ok(Self::value(value))
    }

    /// A result that is already JSON.
    pub fn value(value: serde_json::Value) -> Self {
        Self { value, is_error: false }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self { value: serde_json::json!({ "error": message.into() }), is_error: true }
    }
}

/// The name a call to a tool the node does not offer is streamed under. Tool names in events
/// are metric labels (`tool_calls_total{tool}`), and a model can name any tool: each made-up
/// name would add a series. The model's own name stays where it is useful, in the error result
/// it is shown (streamed too) and in the call's [`ToolUse`].
pub const UNKNOWN_TOOL: &str = "unknown";

/// One tool call a model made, with its result: the transcript a node keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    pub name: String,
    pub arguments: serde_json::Value,
    pub result: serde_json::Value,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// The tools a node offers. `call` fails only when the node cannot go on (its data store is
/// down); a call the model got wrong is a [`ToolResult::error`].
#[async_trait]
pub trait Tools: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;
    async fn call(&self, name: &str, arguments: &str) -> Result<ToolResult, NodeError>;
    /// The answer the calls made so far already give, when the tools' results settle it
    /// without the model; the loop then ends without another model call. `None` (the
    /// default): the model answers.
    fn settled(&self, used: &[ToolUse]) -> Option<serde_json::Value> {
        let _ = used;
        None
    }
}

/// Arguments of a tool call, parsed for the tool; a reply the model got wrong becomes the
/// error result it is shown.
pub fn arguments<T: DeserializeOwned>(raw: &str) -> Result<T, ToolResult> {
    serde_json::from_str(raw).map_err(|e| ToolResult::error(format!("invalid arguments: {e}")))
}

/// Streams one tool call and its result as events; `latency` is how long the call took.
pub async fn announce(
    ctx: &NodeContext,
    name: &str,
    arguments: &serde_json::Value,
    result: &ToolResult,
    latency: std::time::Duration,
) {
    let call_id = uuid::Uuid::now_v7().simple().to_string();
    ctx.emit(EventKind::ToolCalled {
        call_id: call_id.clone(),
        name: name.to_owned(),
        arguments_json: arguments.to_string(),
    })
    .await;
    ctx.emit(EventKind::ToolReturned {
        call_id,
        name: name.to_owned(),
        result_json: result.value.to_string(),
        is_error: result.is_error,
        latency,
    })
    .await;
}

/// The tool rounds of a call: the model is offered `tools` for at most `rounds` rounds, each call
/// run, streamed and answered. Ends with the reply that made no call (if any), the request as
/// the conversation left it, and every call made.
async fn gather(
    ctx: &NodeContext,
    llm: &LlmClient,
    mut request: ChatRequest,
    tools: &dyn Tools,
    rounds: usize,
    schema: &OutputSchema,
) -> Result<(Option<String>, ChatRequest, Vec<ToolUse>, Vec<ModelExchange>), LoopFailed> {
    // Every call of the rounds, and the answer asked for after them, is made by this node.
    request = llm_node::attributed(ctx, request);
    let format = JsonSchemaFormat {
        name: frontdesk_llm::schema_name(&request.purpose),
        schema: Arc::new(schema.schema().clone()),
    };
    let mut used = Vec::new();
    let mut exchanges = Vec::new();
    for round in 0..rounds {
        let mut offer = request.clone();
        offer.tools = tools.specs();
        let offered: Vec<String> = offer.tools.iter().map(|spec| spec.name.clone()).collect();
        offer.response_format = Some(format.clone());
        let outcome = llm.complete(offer, &llm_node::call_options(ctx)).await;
        let response = match llm_node::reported(ctx, outcome).await {
            Ok(done) => done,
            Err(error) => return Err(LoopFailed { error, used }),
        };
        let calls: Vec<serde_json::Value> =
            response.tool_calls.iter().map(|c| serde_json::json!({"tool": c.name, "arguments": c.arguments})).collect();
        let reply =
            if calls.is_empty() { response.content.clone() } else { serde_json::Value::Array(calls).to_string() };
        exchanges.push(ModelExchange { prompt: request.messages.clone(), reply });
        if response.tool_calls.is_empty() {
            return Ok((Some(response.content), request, used, exchanges));
        }
        debug!(round, calls = response.tool_calls.len(), purpose = %request.purpose, "model chose tools");
        for ToolCall { name, arguments, .. } in response.tool_calls {
            let started = std::time::Instant::now();
            // Decided here, where the offer is known, so that a tool the node did not offer is
            // never run and never streamed (nor counted) under the model's name.
            let offers = offered.contains(&name);
            let result = if offers {
                match tools.call(&name, &arguments).await {
                    Ok(result) => result,
                    Err(error) => return Err(LoopFailed { error, used }),
                }
            } else {
                ToolResult::error(format!("no tool named {name}; the tools are: {}", offered.join(", ")))
            };
            let latency = started.elapsed();
            let arguments = serde_json::from_str(&arguments).unwrap_or(serde_json::Value::String(arguments));
            announce(ctx, if offers { &name } else { UNKNOWN_TOOL }, &arguments, &result, latency).await;
            request
                .messages
                .push(ChatMessage::assistant(serde_json::json!({"tool": name, "arguments": arguments}).to_string()));
            request.messages.push(ChatMessage::tool(result.value.to_string()));
            used.push(ToolUse { name, arguments, result: result.value, is_error: result.is_error });
        }
        if let Some(answer) = tools.settled(&used) {
            debug!(round, purpose = %request.purpose, "the tools' results settle the answer");
            return Ok((Some(answer.to_string()), request, used, exchanges));
        }
    }
    Ok((None, request, used, exchanges))
}

/// A tool loop that failed, with the calls it had made by then: they ran and were streamed,
/// so a caller that keeps a record of its tool calls (an audit trail) can still keep them.
#[derive(Debug)]
pub struct LoopFailed {
    pub error: NodeError,
    pub used: Vec<ToolUse>,
}

impl From<LoopFailed> for NodeError {
    fn from(failed: LoopFailed) -> Self {
        failed.error
    }
}

/// One model call of a tool loop: the messages it was sent and what it answered (the answer's
/// text, or its tool calls as JSON), for callers that account for tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelExchange {
    pub prompt: Vec<ChatMessage>,
    pub reply: String,
}

/// Asks for a structured reply of type `T`, offering `tools` by function calling for at most
/// `rounds` rounds: each call is run, streamed and answered; a reply without calls that parses
/// as `T` is the answer. Otherwise the answer is asked for once more without tools, with the
/// client's repair attempt. Returns the answer and every call made; a failure carries the calls
/// made before it ([`LoopFailed`]).
pub async fn answer<T>(
    ctx: &NodeContext,
    llm: &LlmClient,
    request: ChatRequest,
    tools: &dyn Tools,
    rounds: usize,
) -> Result<(T, Vec<ToolUse>), LoopFailed>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    let (early, request, used, _) = gather(ctx, llm, request, tools, rounds, &OutputSchema::of::<T>()).await?;
    let parsed = early.as_deref().map(|content| {
        frontdesk_llm::extract_json(content)
            .and_then(|value| serde_json::from_value::<T>(value).map_err(|e| e.to_string()))
    });
    if let Some(Ok(value)) = parsed {
        return Ok((value, used));
    }
    match llm_node::structured(ctx, llm, request).await {
        Ok(value) => Ok((value, used)),
        Err(error) => Err(LoopFailed { error, used }),
    }
}

/// [`answer`] with a schema built at run time (fields that come from configuration): the
/// answer is a JSON object valid for `schema`. Also returns every model call made.
pub async fn answer_with_schema(
    ctx: &NodeContext,
    llm: &LlmClient,
    request: ChatRequest,
    tools: &dyn Tools,
    rounds: usize,
    schema: &OutputSchema,
) -> Result<(serde_json::Value, Vec<ToolUse>, Vec<ModelExchange>), NodeError> {
    let (early, request, used, mut exchanges) = gather(ctx, llm, request, tools, rounds, schema).await?;
    if let Some(Ok(value @ serde_json::Value::Object(_))) = early.as_deref().map(frontdesk_llm::extract_json) {
        return Ok((value, used, exchanges));
    }
    let prompt = request.messages.clone();
    let outcome = llm.structured_with::<serde_json::Value>(request, schema, &llm_node::call_options(ctx)).await;
    let value = llm_node::reported(ctx, outcome).await?;
    exchanges.push(ModelExchange { prompt, reply: value.to_string() });
    Ok((value, used, exchanges))
}
