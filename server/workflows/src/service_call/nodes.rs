//! The service call's agents. Every node of the flow configuration is a graph node run by one
//! of three workers — the reply agent (a 1-2 sentence answer to the customer), the MCP agent
//! (tool nodes: the model chooses and calls MCP tools; extraction nodes: JSON extraction, no
//! customer message) or the internal no-op — and after each one the navigator picks the next.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest, OutputSchema, Role, ToolSpec};
use frontdesk_runtime::{Node, NodeContext, NodeError, NodeErrorKind, NodeOutput};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tracing::{debug, warn};

use super::{
    config::{AgentConfig, FieldType, NodeAction, NodeConfig},
    context::{fields, Context, Exchange},
    tokens, CallDeps, CallState, CallUpdate,
};
use crate::{
    llm_node,
    message::Message,
    tool_loop::{self, ToolResult, ToolUse, Tools},
};

/// The navigator's node name in the graph.
pub const NAVIGATOR: &str = "navigator";
/// The graph's entry: a customer message arrives.
pub const RECEIVE: &str = "receive";

/// Nodes one customer message may run before the navigator stops the turn (loop prevention).
pub const MAX_STEPS_PER_TURN: u32 = 12;
/// A node visited this often in the recent path is not chosen again by a branching condition.
const LOOP_VISITS: usize = 3;
/// How much of the recent path loop prevention looks at.
const LOOP_WINDOW: usize = 8;
/// Rounds of tool calls an MCP node may make.
const TOOL_ROUNDS: usize = 3;

type Output = Result<NodeOutput<CallUpdate>, NodeError>;

fn internal(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::Internal, message)
}

/// A context update as the merge takes it.
fn context_of(map: Map<String, Value>) -> Context {
    serde_json::from_value(Value::Object(map)).unwrap_or_default()
}

/// Usage of one model call, counted with the real tokenizer.
fn usage(prompt: &[ChatMessage], completion: &str) -> (u64, u64) {
    (tokens::prompt(prompt), tokens::count(completion))
}

/// The messages of a structured call as the model receives them: `LlmClient` appends the
/// schema's instruction to the first system message.
fn as_sent(messages: &[ChatMessage], schema: &OutputSchema) -> Vec<ChatMessage> {
    let mut sent = messages.to_vec();
    match sent.first_mut() {
        Some(first) if first.role == Role::System => {
            first.content.push_str("\n\n");
            first.content.push_str(schema.instruction());
        }
        _ => sent.insert(0, ChatMessage::system(schema.instruction())),
    }
    sent
}

fn with_usage(mut update: CallUpdate, prompt_tokens: u64, completion_tokens: u64) -> CallUpdate {
    update.model_calls = Some(update.model_calls.unwrap_or(0) + 1);
    update.prompt_tokens = Some(update.prompt_tokens.unwrap_or(0) + prompt_tokens);
    update.completion_tokens = Some(update.completion_tokens.unwrap_or(0) + completion_tokens);
    update
}

/// Context fields the workflow keeps for itself: the conversation and the path (shown to agents
/// in their own compact form, when at all), the progress flags (the path says the same; failures
/// are shown to the navigator on their own), the navigator's last decision, and the agent's
/// persona (shown to no agent: the nodes' roles carry it).
fn bookkeeping(field: &str) -> bool {
    matches!(
        field,
        fields::SUMMARY
            | fields::NODE_TRAVERSAL_PATH
            | fields::FLAGS
            | "next_course_of_action"
            | "next_node_to_go_to"
            | "who_are_you"
    )
}

/// What a tool node is shown: every field the call has filled (the ids its tools need: the
/// customer for a task, the task for a booking, the session for the hangup), without the
/// workflow's bookkeeping ([`bookkeeping`]); tool steps do not read the conversation.
fn tracked(context: &Context) -> Map<String, Value> {
    context
        .0
        .iter()
        .filter(|(field, _)| !bookkeeping(field) && context.is_set(field))
        .map(|(field, value)| (field.clone(), value.clone()))
        .collect()
}

/// The first characters of a node's prompt template: the design's "prompt example", enough for
/// tone without the full text.
fn example(config: &AgentConfig, node: &NodeConfig) -> String {
    let limit = config.token_budget.prompt_example_chars;
    let text: String = node.prompt_templates.chars().take(limit).collect();
    if node.prompt_templates.chars().count() > limit {
        format!("{text}...")
    } else {
        text
    }
}

/// The opening of every worker's prompt: the node's role and goal, then its prompt example.
fn opening(config: &AgentConfig, node: &NodeConfig) -> String {
    format!("You are {}. Goal: {}\nExample: {}", node.role, node.node_goal, example(config, node))
}

/// Exchanges as lines (`Customer: ...`, `Agent: ...`), oldest first; an exchange the agent has
/// not answered yet (the customer's message of this turn) has no agent line.
fn transcript(exchanges: &[Exchange]) -> String {
    let mut text = String::new();
    for exchange in exchanges {
        for (who, said) in [("Customer", &exchange.customer), ("Agent", &exchange.agent)] {
            if !said.trim().is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(who);
                text.push_str(": ");
                text.push_str(said.trim());
            }
        }
    }
    text
}

// ---------------------------------------------------------------------------------------------

/// Entry of every turn: the customer's message is already in state; nothing to do but route.
pub struct Receive;

#[async_trait]
impl Node<CallState> for Receive {
    fn description(&self) -> &str {
        "A customer message arrives; the turn continues at the call's current node"
    }

    async fn run(&self, state: &CallState, _ctx: &NodeContext) -> Output {
        let update = match unanswered(state) {
            Some(customer) => CallUpdate { pending_customer: Some(Some(customer)), ..Default::default() },
            None => CallUpdate::default(),
        };
        Ok(NodeOutput::update(update))
    }
}

/// The customer's messages no reply has answered yet, when there are several: a turn that ran
/// out of its step budget before a reply left its message unanswered, and the next turn's
/// reply answers both (the turn's own message alone would drop the first from the exchanges the
/// extraction and the navigator read). `None` when the turn's own message is all there is.
fn unanswered(state: &CallState) -> Option<String> {
    let mut waiting: Vec<&str> = state
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == crate::message::Role::User)
        .map(|m| m.text.as_str())
        .collect();
    if waiting.len() < 2 {
        return None;
    }
    waiting.reverse();
    Some(waiting.join("\n"))
}

/// One node of the flow configuration, run by the worker its action names.
pub struct Worker {
    pub deps: CallDeps,
    pub node: String,
}

impl Worker {
    fn config(&self) -> Result<(&Arc<AgentConfig>, &NodeConfig), NodeError> {
        let config = &self.deps.config;
        let node = config.node(&self.node).ok_or_else(|| internal(format!("no node {} in the flow", self.node)))?;
        Ok((config, node))
    }

    /// The reply agent: one or two sentences to the customer, never asking what is answered.
    async fn reply(&self, state: &CallState, ctx: &NodeContext) -> Output {
        let (config, node) = self.config()?;
        let known = state.context.active_fields(config, &node.expected_context_fields);
        let recent = transcript(&state.context.recent_exchanges(config.token_budget.reply_exchanges));
        let customer = state.pending_customer.clone().unwrap_or_default();
        let mut system = opening(config, node);
        if !known.is_empty() {
            system.push_str(&format!("\nKnown: {}", Value::Object(known)));
        }
        if !recent.is_empty() {
            system.push_str(&format!("\nConversation so far:\n{recent}"));
        }
        system.push_str(
            "\nRules: read the conversation first; never ask for what it already answers; reply with one or two \
             natural sentences only.",
        );
        let messages = vec![
            ChatMessage::system(system),
            ChatMessage::user(if customer.is_empty() {
                "(the customer is waiting)".to_owned()
            } else {
                customer.clone()
            }),
        ];
        let request = ChatRequest {
            purpose: "worker_reply_agent.reply".into(),
            messages: messages.clone(),
            temperature: Some(0.3),
            max_tokens: Some(120),
            ..Default::default()
        };
        let reply = llm_node::streamed_text(ctx, &self.deps.llm, request).await?;
        let (prompt_tokens, completion_tokens) = usage(&messages, &reply);
        let mut context = Map::new();
        context.insert(
            "summary_of_conversation_on_each_step_until_now".into(),
            json!([{ "customer": customer, "agent": reply }]),
        );
        context.insert("flags".into(), json!({ format!("{}_flag", node.node_name.to_lowercase()): 1 }));
        let update = CallUpdate {
            messages: Some(vec![Message::assistant(&node.node_name, reply)]),
            context: Some(context_of(context)),
            pending_customer: Some(None),
            replied: Some(true),
            ..Default::default()
        };
        Ok(NodeOutput::update(with_usage(update, prompt_tokens, completion_tokens)))
    }

    /// The JSON schema of a node's context updates: its expected fields, each optional.
    fn updates_schema(config: &AgentConfig, node: &NodeConfig) -> OutputSchema {
        let mut properties = Map::new();
        for field in &node.expected_context_fields {
            let kind = config.global_context_schema_semantics.field_semantics.get(field).map(|f| f.kind);
            let schema = match kind {
                Some(FieldType::Boolean) => json!({"type": ["boolean", "null"]}),
                Some(FieldType::Number) => json!({"type": ["number", "null"]}),
                Some(FieldType::Array) => {
                    json!({"type": ["array", "null"], "items": {"type": "string", "maxLength": 200}, "maxItems": 5})
                }
                Some(FieldType::Object) => json!({"type": ["object", "null"]}),
                _ => json!({"type": ["string", "null"], "maxLength": 200}),
            };
            properties.insert(field.clone(), schema);
        }
        let required: Vec<&String> = node.expected_context_fields.iter().collect();
        OutputSchema::new(json!({
            "type": "object",
            "properties": {
                "context_updates": {"type": "object", "properties": properties, "required": required},
            },
            "required": ["context_updates"],
        }))
    }

    /// Updates the model proposed, kept only for the node's expected fields and where the
    /// flow's schema allows them: a node fills what it is for, nothing else.
    fn accepted(config: &AgentConfig, node: &NodeConfig, proposed: Value) -> Map<String, Value> {
        let mut proposed = match proposed.get("context_updates") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        let unexpected: Vec<String> =
            proposed.keys().filter(|k| !node.expected_context_fields.contains(k)).cloned().collect();
        for field in &unexpected {
            proposed.remove(field);
        }
        if !unexpected.is_empty() {
            warn!(node = %node.node_name, ?unexpected, "context updates for fields the node does not fill dropped");
        }
        let (kept, dropped) = Context::filter_updates(config, proposed);
        if !dropped.is_empty() {
            warn!(node = %node.node_name, ?dropped, "context updates outside the flow's schema dropped");
        }
        kept
    }

    /// The MCP agent on an extraction node: structured data from the conversation, no message.
    async fn extract(&self, state: &CallState, ctx: &NodeContext) -> Output {
        let (config, node) = self.config()?;
        let mut recent = state.context.recent_exchanges(config.token_budget.extraction_exchanges);
        if let Some(customer) = &state.pending_customer {
            recent.push(Exchange { customer: customer.clone(), agent: String::new() });
        }
        let mut system = format!(
            "{}\nExtract {} from the conversation; null for what the customer has not stated.",
            opening(config, node),
            node.expected_context_fields.join(", ")
        );
        let known = state.context.active_fields(config, &[]);
        if !known.is_empty() {
            system.push_str(&format!("\nKnown: {}", Value::Object(known)));
        }
        let messages = vec![ChatMessage::system(system), ChatMessage::user(transcript(&recent))];
        let request = ChatRequest {
            purpose: "worker_mcp_agent.extract".into(),
            messages: messages.clone(),
            temperature: Some(0.1),
            max_tokens: Some(400),
            ..Default::default()
        };
        let schema = Self::updates_schema(config, node);
        let outcome = self
            .deps
            .llm
            .structured_with::<Value>(llm_node::attributed(ctx, request), &schema, &llm_node::call_options(ctx))
            .await;
        let proposed = llm_node::reported(ctx, outcome).await?;
        let completion = proposed.to_string();
        let mut updates = Self::accepted(config, node, proposed);
        updates.insert("flags".into(), json!({ format!("{}_flag", node.node_name.to_lowercase()): 1 }));
        let (prompt_tokens, completion_tokens) = usage(&as_sent(&messages, &schema), &completion);
        let update = CallUpdate { context: Some(context_of(updates)), ..Default::default() };
        Ok(NodeOutput::update(with_usage(update, prompt_tokens, completion_tokens)))
    }

    /// The MCP agent on a tool node: the model chooses and calls the MCP tools; their results
    /// are mapped into context by the flow's `mcp_result_mapping`, and the model may fill the
    /// node's expected fields from them.
    async fn tools(&self, state: &CallState, ctx: &NodeContext) -> Output {
        let (config, node) = self.config()?;
        let provider = self.deps.tools.as_ref().ok_or_else(|| {
            NodeError::new(
                NodeErrorKind::DependencyFailed,
                format!("node {} needs MCP tools and none is configured", node.node_name),
            )
        })?;
        let messages = vec![
            ChatMessage::system(format!(
                "{}\nCall the tools this step needs, then answer with the context updates for: {}.",
                opening(config, node),
                node.expected_context_fields.join(", ")
            )),
            ChatMessage::user(format!("Known: {}", Value::Object(tracked(&state.context)))),
        ];
        let request = ChatRequest {
            purpose: "worker_mcp_agent.tools".into(),
            messages: messages.clone(),
            temperature: Some(0.1),
            max_tokens: Some(400),
            ..Default::default()
        };
        let schema = Self::updates_schema(config, node);
        let adapter = McpTools { provider: provider.as_ref(), config, node, ctx };
        let (proposed, used, exchanges) =
            tool_loop::answer_with_schema(ctx, &self.deps.llm, request, &adapter, TOOL_ROUNDS, &schema).await?;
        // The step failed when its last tool call did, or when no call was made: a lookup that
        // finds nothing before a create that succeeds is the step working, not failing.
        let failed = used.last().is_none_or(|call| call.is_error);
        // The model's reading first, then what the tools returned by the flow's mapping: a
        // tool's own record (an id, a booking) wins over the model's account of it. A failed
        // step keeps nothing of the model's: an earlier call that got through does not back
        // what it says of the one that failed (a hangup that failed must not end the call
        // because the model says it did). The records of the calls that did get through are
        // kept: they exist in the other system whatever became of the step.
        let mut updates = if failed { Map::new() } else { Self::accepted(config, node, proposed) };
        for call in used.iter().filter(|call| !call.is_error) {
            updates.extend(Context::map_tool_result(config, &call.name, &call.result));
        }
        // Both markers, so that they say how the node's latest run went: a failure after an
        // earlier success is still a failure (merging never erases a key, but a 0 replaces a 1).
        let name = node.node_name.to_lowercase();
        updates.insert(
            "flags".into(),
            json!({ format!("{name}_failed"): u8::from(failed), format!("{name}_flag"): u8::from(!failed) }),
        );
        if failed {
            // Graceful degradation, never a silent swallow: the failure is in the tool events
            // and in the flags the navigator's conditions read ("if MCP fetch fails").
            warn!(node = %node.node_name, "an MCP tool call failed");
        }
        let mut update = CallUpdate { context: Some(context_of(updates)), ..Default::default() };
        // Every model call of the tool loop, counted.
        for exchange in &exchanges {
            let (prompt_tokens, completion_tokens) = usage(&exchange.prompt, &exchange.reply);
            update = with_usage(update, prompt_tokens, completion_tokens);
        }
        Ok(NodeOutput::update(update))
    }
}

#[async_trait]
impl Node<CallState> for Worker {
    fn description(&self) -> &str {
        self.deps.config.node(&self.node).map_or("", |n| n.node_goal.as_str())
    }

    async fn run(&self, state: &CallState, ctx: &NodeContext) -> Output {
        let (config, node) = self.config()?;
        debug!(thread_id = ctx.thread_id(), node = %node.node_name, "service call node");
        match node.node_action {
            NodeAction::Reply => self.reply(state, ctx).await,
            NodeAction::Mcp if config.is_extraction(node) => self.extract(state, ctx).await,
            NodeAction::Mcp => self.tools(state, ctx).await,
            NodeAction::Internal => Ok(NodeOutput::update(CallUpdate::default())),
        }
    }
}

/// What a service call's MCP tools look like to its nodes; the service implements it over its
/// configured MCP servers.
#[async_trait]
pub trait ToolProvider: Send + Sync + 'static {
    fn specs(&self) -> Vec<ToolSpec>;
    /// Whether calling `name` again repeats no effect (it only reads, or is idempotent). A tool
    /// node that calls a tool that is not is never retried after that call: the tools take no
    /// idempotency key, so a retry would create the record or make the booking twice.
    fn repeatable(&self, name: &str) -> bool;
    async fn call(&self, name: &str, arguments: Value) -> Result<ToolReply, ToolFailure>;
}

/// A tool's answer; `is_error` when the tool itself reported a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub content: Value,
    pub is_error: bool,
    pub latency: Duration,
}

/// The tool could not be reached or did not answer.
#[derive(Debug, thiserror::Error)]
#[error("MCP tool {tool} failed")]
pub struct ToolFailure {
    pub tool: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The MCP tools one tool node is offered: those its `tools` names (every tool when it names
/// none).
struct McpTools<'a> {
    provider: &'a dyn ToolProvider,
    config: &'a AgentConfig,
    node: &'a NodeConfig,
    ctx: &'a NodeContext,
}

#[async_trait]
impl Tools for McpTools<'_> {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.provider.specs();
        specs.retain(|spec| self.config.offers_tool(self.node, &spec.name));
        specs
    }

    /// Settled once the flow's `mcp_result_mapping` of the successful calls fills every field
    /// the node expects and the last call succeeded: asking the model to restate what the tools
    /// returned would cost a round of prompt tokens and could only be overruled by the mapping.
    fn settled(&self, used: &[ToolUse]) -> Option<Value> {
        if used.last().is_none_or(|call| call.is_error) || self.node.expected_context_fields.is_empty() {
            return None;
        }
        let mut mapped = Map::new();
        for call in used.iter().filter(|call| !call.is_error) {
            mapped.extend(Context::map_tool_result(self.config, &call.name, &call.result));
        }
        let mut updates = Map::new();
        for field in &self.node.expected_context_fields {
            let value = mapped.get(field).filter(|v| super::context::is_meaningful(v))?;
            updates.insert(field.clone(), value.clone());
        }
        Some(json!({ "context_updates": updates }))
    }

    async fn call(&self, name: &str, arguments: &str) -> Result<ToolResult, NodeError> {
        if !self.config.offers_tool(self.node, name) {
            // A model may name a tool it was not offered; the step does not run it.
            return Ok(ToolResult::error(format!(
                "{name} is not one of this step's tools ({})",
                self.node.tools.iter().flatten().map(String::as_str).collect::<Vec<_>>().join(", ")
            )));
        }
        let arguments: Value = match serde_json::from_str(arguments) {
            Ok(value) => value,
            Err(e) => return Ok(ToolResult::error(format!("invalid arguments: {e}"))),
        };
        // Before the call: one that fails or times out may still have reached the tool.
        if !self.provider.repeatable(name) {
            self.ctx.acted();
        }
        // A tool that cannot be reached is the model's to hear about (it may try another way,
        // and the flow's conditions may retry the node), not a failure of the call.
        Ok(match self.provider.call(name, arguments).await {
            Ok(reply) => ToolResult { value: reply.content, is_error: reply.is_error },
            Err(failure) => ToolResult::error(format!("{failure}: {}", failure.source)),
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// The navigator's structured answer.
#[derive(Debug, Deserialize)]
struct Decision {
    next_node: String,
    reason: String,
}

/// Decides the node after the one that just ran: the default when the node has no branching
/// conditions (no model call), otherwise the model reads the conditions against the active
/// context, the traversal path and the recent conversation. Then two checks of its own: a node
/// visited too often recently is not chosen again (the default is), and a tool node placed after
/// a mandatory field's producer is not entered while that field is missing (the producer runs
/// first).
pub struct Navigator(pub CallDeps);

impl Navigator {
    fn decide_without_model(node: &NodeConfig) -> Option<Option<String>> {
        node.branching_conditions.is_empty().then(|| node.default_next_node.clone())
    }
}

#[async_trait]
impl Node<CallState> for Navigator {
    fn description(&self) -> &str {
        "Picks the next node from the branching conditions, the traversal path and the mandatory fields; ends \
         the turn once a reply node has answered"
    }

    async fn run(&self, state: &CallState, ctx: &NodeContext) -> Output {
        let config = &self.0.config;
        let node =
            config.node(&state.current_node).ok_or_else(|| internal(format!("no node {}", state.current_node)))?;
        let mut path = state.context.traversal_path();
        path.push(node.node_name.clone());
        let mut update = CallUpdate::default();
        let (next, reason) = match Self::decide_without_model(node) {
            Some(next) => (next, "default next node".to_owned()),
            None => {
                let mut names: Vec<Value> =
                    config.children(node).iter().map(|c| Value::String((*c).to_owned())).collect();
                if node.default_next_node.is_none() || node.branching_conditions.iter().any(|c| c.child_node.is_none())
                {
                    names.push(Value::String("END".into()));
                }
                // Only what the choice needs: the current node's conditions and default, the
                // recent path, whether the node just failed, the mandatory fields that are set
                // and the latest exchanges (this turn's customer message last).
                let mut prompt = format!("Current node: {}\nConditions, in order:", node.node_name);
                for (i, c) in node.branching_conditions.iter().enumerate() {
                    prompt.push_str(&format!(
                        "\n{}. {} -> {}",
                        i + 1,
                        c.condition,
                        c.child_node.as_deref().unwrap_or("END")
                    ));
                }
                let recent: Vec<&str> = path.iter().rev().take(LOOP_WINDOW).rev().map(String::as_str).collect();
                prompt.push_str(&format!(
                    "\nDefault next node: {}\nPath: {}",
                    node.default_next_node.as_deref().unwrap_or("END"),
                    recent.join(" > ")
                ));
                if state.context.step_failed(&node.node_name) {
                    prompt.push_str(&format!("\n{} failed.", node.node_name));
                }
                let known = state.context.active_fields(config, &[]);
                if !known.is_empty() {
                    prompt.push_str(&format!("\nKnown: {}", Value::Object(known)));
                }
                let mut exchanges = state.context.recent_exchanges(config.token_budget.navigator_exchanges);
                if let Some(customer) = &state.pending_customer {
                    exchanges.push(Exchange { customer: customer.clone(), agent: String::new() });
                }
                let conversation = transcript(&exchanges);
                if !conversation.is_empty() {
                    prompt.push_str(&format!("\nConversation:\n{conversation}"));
                }
                let messages = vec![
                    ChatMessage::system(
                        "You are the navigator of a customer-service call. Pick the next node: the one of the first \
                         condition that holds, else the default next node.",
                    ),
                    ChatMessage::user(prompt),
                ];
                let schema = OutputSchema::new(json!({
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "maxLength": 160},
                        "next_node": {"enum": names.clone()},
                    },
                    "required": ["reason", "next_node"],
                }));
                let request = ChatRequest {
                    purpose: "node_navigator_agent.decide".into(),
                    messages: messages.clone(),
                    temperature: Some(0.0),
                    max_tokens: Some(200),
                    ..Default::default()
                };
                // The schema constrains decoding where the provider can; the check holds for the
                // rest: a node that is not one of the children is invalid output (one repair).
                let allowed: Vec<String> = names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect();
                let check = |d: &Decision| {
                    if allowed.contains(&d.next_node) {
                        Ok(())
                    } else {
                        Err(format!("next_node must be one of {}", allowed.join(", ")))
                    }
                };
                let outcome = self
                    .0
                    .llm
                    .structured_checked::<Decision>(
                        llm_node::attributed(ctx, request),
                        &schema,
                        &llm_node::call_options(ctx),
                        check,
                    )
                    .await;
                let decision = llm_node::reported(ctx, outcome).await?;
                let answer = json!({"reason": decision.reason, "next_node": decision.next_node}).to_string();
                let (prompt_tokens, completion_tokens) = usage(&as_sent(&messages, &schema), &answer);
                update = with_usage(update, prompt_tokens, completion_tokens);
                let next = (decision.next_node != "END").then_some(decision.next_node);
                (next, decision.reason)
            }
        };
        let next = next.and_then(|next| guard(config, state, &path, node, next));
        let mut context = Map::new();
        context.insert("node_traversal_path".into(), json!([node.node_name]));
        context.insert("next_node_to_go_to".into(), json!(next.clone().unwrap_or_default()));
        context.insert("next_course_of_action".into(), json!(reason));
        update.context = Some(context_of(context));
        update.current_node = next.clone();
        update.steps_this_turn = Some(state.steps_this_turn + 1);
        if next.is_none() {
            update.flow_finished = Some(true);
        }
        Ok(NodeOutput::update(update))
    }
}

/// The navigator's own checks on a chosen node; `None` ends the flow.
fn guard(config: &AgentConfig, state: &CallState, path: &[String], from: &NodeConfig, next: String) -> Option<String> {
    // Loop prevention: a node visited too often recently gives way to the default, and where
    // there is none, to the end of the flow (the default the navigator is shown for such a
    // node); a node that keeps failing must not be run again and again.
    let recent_visits = path.iter().rev().take(LOOP_WINDOW).filter(|n| **n == next).count();
    let next = match (&from.default_next_node, recent_visits >= LOOP_VISITS) {
        (Some(default), true) if *default != next => {
            warn!(node = %from.node_name, looping = %next, default = %default, "navigator loop prevented");
            default.clone()
        }
        (None, true) => {
            warn!(node = %from.node_name, looping = %next, "navigator loop prevented; the flow ends");
            return None;
        }
        _ => next,
    };
    // A tool node placed after a mandatory field's producer needs that field: while it is
    // missing, the producer runs first (a tool node before it, such as a catalog lookup, does
    // not).
    let Some(target) = config.node(&next) else { return Some(next) };
    let position = |name: &str| config.nodes.iter().position(|n| n.node_name == name);
    if target.node_action == NodeAction::Mcp && !config.is_extraction(target) {
        for field in state.context.missing_mandatory(config) {
            if let Some(producer) = config.producer_of(&field) {
                if producer.node_name != from.node_name && position(&producer.node_name) < position(&next) {
                    debug!(missing = %field, producer = %producer.node_name, "mandatory field missing");
                    return Some(producer.node_name.clone());
                }
            }
        }
    }
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visited(node: &str, times: usize) -> Vec<String> {
        vec![node.to_owned(); times]
    }

    /// A node chosen 3 times in the last 8 steps is not chosen again: its default runs, and
    /// where there is no default, the flow ends.
    #[test]
    fn loop_prevention_falls_back_to_the_default_or_the_end() {
        let config = AgentConfig::shipped();
        let state = CallState::default();
        let node = |name: &str| config.node(name).unwrap();
        let (from, again) = ("Empathize", "Identify_Issue");
        assert_eq!(guard(&config, &state, &visited(again, 2), node(from), again.into()).as_deref(), Some(again));
        assert_eq!(
            guard(&config, &state, &visited(again, 3), node(from), again.into()).as_deref(),
            Some("Console_Build_Rapport"),
            "the default of the node the navigator is at"
        );
        let hangup = "Execute_Call_Hangup";
        assert!(guard(&config, &state, &visited(hangup, 2), node(hangup), hangup.into()).is_some());
        assert_eq!(
            guard(&config, &state, &visited(hangup, 3), node(hangup), hangup.into()),
            None,
            "no default: the end"
        );
    }

    #[test]
    fn the_messages_a_turn_left_unanswered_are_answered_with_the_next() {
        let mut state = CallState {
            messages: vec![Message::assistant("welcome", "How can we help?"), Message::user("my boiler")],
            ..Default::default()
        };
        assert_eq!(unanswered(&state), None, "the turn's own message only");
        state.messages.push(Message::user("it leaks"));
        assert_eq!(unanswered(&state).as_deref(), Some("my boiler\nit leaks"));
        state.messages.push(Message::assistant("greet", "Sorry to hear that."));
        state.messages.push(Message::user("today please"));
        assert_eq!(unanswered(&state), None, "the reply answered the first two");
    }
}
