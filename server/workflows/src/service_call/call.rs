//! The service call as a conversation: its state, its graph (built from the flow
//! configuration) and how `ConversationService` drives it.

use std::sync::Arc;

use frontdesk_llm::LlmClient;
use frontdesk_runtime::{Durability, Graph, GraphBuilder, GraphError, NodeOptions, RetryPolicy, Target};
use serde::{Deserialize, Serialize};

use super::{
    config::{AgentConfig, NodeAction},
    context::Context,
    nodes::{self, Navigator, Receive, ToolProvider, Worker},
};
use crate::{
    conversation::{turn_output, ConversationSpec},
    message::Message,
};

pub const NAME: &str = "service_call";

pub const DESCRIPTION: &str = "Customer-service calls as a configurable node flow: reply, MCP tool and extraction \
nodes, a navigator choosing the next node, a context that is merged and never erased";

/// What the call's welcome says before the customer speaks.
pub const WELCOME: &str = "Thank you for calling. How can we help you today?";

frontdesk_runtime::state! {
    /// One call.
    pub struct CallState / CallUpdate {
        messages: Vec<Message> => Append,
        /// The call's context; merged by the flow's non-destructive rules.
        context: Context => Merged,
        /// The node the call is at: where the next step runs.
        current_node: String => Replace,
        /// The customer's message of this turn, until a reply answers it.
        pending_customer: Option<String> => Replace,
        /// Whether a reply node has answered in this turn (which ends the turn).
        replied: bool => Replace,
        steps_this_turn: u32 => Replace,
        /// The flow reached its end (a node with no next node).
        flow_finished: bool => Replace,
        turns: u32 => Sum,
        model_calls: u32 => Sum,
        /// Counted with the real tokenizer (see `tokens`).
        prompt_tokens: u64 => Sum,
        completion_tokens: u64 => Sum,
    }
}

impl CallState {
    /// Hung up (the hangup tool said so), or the flow has no node left.
    pub fn ended(&self) -> bool {
        self.flow_finished || self.context.get("call_ended").and_then(serde_json::Value::as_bool).unwrap_or(false)
    }
}

/// The call's view on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    pub current_node: String,
    pub context: serde_json::Value,
    pub node_traversal_path: Vec<String>,
    pub missing_mandatory_fields: Vec<String>,
    pub call_ended: bool,
    pub model_calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What the call's nodes need from outside.
#[derive(Clone)]
pub struct CallDeps {
    pub llm: LlmClient,
    pub config: Arc<AgentConfig>,
    /// The MCP tools of the configured servers; a tool node without them fails its step.
    pub tools: Option<Arc<dyn ToolProvider>>,
}

pub struct CallSpec {
    pub config: Arc<AgentConfig>,
}

impl ConversationSpec for CallSpec {
    type State = CallState;
    type View = CallView;

    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn initial_state(&self) -> CallState {
        let session = uuid::Uuid::now_v7().to_string();
        CallState {
            messages: vec![Message::assistant("welcome", WELCOME)],
            context: Context::from_template(&self.config, &session),
            current_node: self.config.entry().node_name.clone(),
            ..Default::default()
        }
    }

    fn user_turn(&self, message: Message) -> CallUpdate {
        CallUpdate {
            pending_customer: Some(Some(message.text.clone())),
            messages: Some(vec![message]),
            replied: Some(false),
            steps_this_turn: Some(0),
            turns: Some(1),
            ..Default::default()
        }
    }

    fn messages<'s>(&self, state: &'s CallState) -> &'s [Message] {
        &state.messages
    }

    fn turn_count(&self, state: &CallState) -> u32 {
        state.turns
    }

    fn view(&self, state: &CallState) -> CallView {
        CallView {
            current_node: state.current_node.clone(),
            context: serde_json::to_value(&state.context).unwrap_or_default(),
            node_traversal_path: state.context.traversal_path(),
            missing_mandatory_fields: state.context.missing_mandatory(&self.config),
            call_ended: state.ended(),
            model_calls: state.model_calls,
            prompt_tokens: state.prompt_tokens,
            completion_tokens: state.completion_tokens,
        }
    }

    fn reset(&self, _state: &CallState) -> CallState {
        self.initial_state()
    }

    fn ended(&self, state: &CallState) -> bool {
        state.ended()
    }
}

/// After the navigator: the turn ends once a reply has answered, the call has ended, or the
/// turn has run its step budget; otherwise the call goes on at its new current node.
fn after_navigator(state: &CallState) -> Target {
    if state.replied || state.ended() || state.steps_this_turn >= nodes::MAX_STEPS_PER_TURN {
        Target::End
    } else {
        Target::node(state.current_node.clone())
    }
}

/// The graph of a flow: `receive`, one node per configured node, and the navigator after each.
pub fn build(deps: CallDeps, spec: &CallSpec) -> Result<Graph<CallState>, GraphError> {
    let config = deps.config.clone();
    let names: Vec<String> = config.nodes.iter().map(|n| n.node_name.clone()).collect();
    let options = || NodeOptions::default().retry(RetryPolicy::attempts(3));
    let mut builder = GraphBuilder::new(NAME).node(nodes::RECEIVE, Receive).entry(nodes::RECEIVE);
    for node in &config.nodes {
        // A tool node acts outside the state (a customer is created, an appointment booked);
        // reply and extraction nodes only call the model.
        let tools = node.node_action == NodeAction::Mcp && !config.is_extraction(node);
        let options = if tools { options().with_effects() } else { options() };
        let name = node.node_name.clone();
        builder = builder
            .node_with(name.clone(), Worker { deps: deps.clone(), node: name.clone() }, options)
            .edge(name, Target::node(nodes::NAVIGATOR));
    }
    let targets = || names.iter().map(|n| Target::node(n.clone())).chain([Target::End]).collect::<Vec<_>>();
    let spec_output = CallSpec { config: spec.config.clone() };
    builder
        .node_with(nodes::NAVIGATOR, Navigator(deps.clone()), options())
        .conditional_edge(nodes::RECEIVE, targets(), |s: &CallState| {
            // A call that has ended runs nothing (the host refuses its messages first).
            if s.ended() {
                Target::End
            } else {
                Target::node(s.current_node.clone())
            }
        })
        .conditional_edge(nodes::NAVIGATOR, targets(), after_navigator)
        // Two steps (a node and the navigator) per node visit; the per-turn budget ends a turn
        // first.
        .max_steps(2 * nodes::MAX_STEPS_PER_TURN + 4)
        // Commits around tool nodes: a crash re-runs at most the model-only nodes since the last
        // tool call, or the tool node it interrupted.
        .durability(Durability::ByEffect)
        .output(move |state| turn_output(&spec_output, state))
        .build()
}
