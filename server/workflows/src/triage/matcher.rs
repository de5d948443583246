//! Ticket matching as a graph of its own: which of the customer's active tickets does a new
//! message continue? One node, `ticket_matcher`, asks the model; its call streams and counts
//! like every other model call because it runs on the runtime.
//!
//! ```text
//! START → ticket_matcher → END          (ephemeral: nothing is written)
//! ```
//!
//! The graph is [`Durability::Ephemeral`]: its decision only picks the thread the message joins,
//! and the message is accepted (made durable) by that ticket's own run. A crash during matching
//! loses nothing the caller was told. The desk runs it only when the customer has active tickets;
//! with none there is nothing to match and no model call.

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest, LlmClient};
use frontdesk_runtime::{
    Durability, Graph, GraphBuilder, GraphError, Node, NodeContext, NodeError, NodeOutput, Target,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracing::info;

use super::{desk::MatchConfidence, prompts};
use crate::llm_node;

pub const NAME: &str = "triage_match";
pub const NODE: &str = "ticket_matcher";

/// An active ticket the message may continue, as the matcher reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub ticket_id: String,
    /// One line: subject, messages in English, classification so far.
    pub summary: String,
}

/// What the matcher decided, after the desk's rules: a match only to a listed ticket and only
/// with high or medium confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchDecision {
    pub matched_ticket_id: Option<String>,
    pub confidence: MatchConfidence,
    pub reasoning: String,
}

frontdesk_runtime::state! {
    /// One matching: the message, the candidates, the decision.
    pub struct MatchState / MatchUpdate {
        customer_id: String => Replace,
        message: String => Replace,
        candidates: Vec<Candidate> => Replace,
        decision: Option<MatchDecision> => Replace,
    }
}

/// The model's structured answer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ModelDecision {
    /// One sentence on why.
    #[schemars(length(max = 160))]
    reasoning: String,
    /// The id of the active ticket the message continues, or null.
    #[schemars(length(max = 20))]
    matched_ticket_id: Option<String>,
    confidence: MatchConfidence,
}

struct TicketMatcher {
    llm: LlmClient,
}

#[async_trait]
impl Node<MatchState> for TicketMatcher {
    async fn run(&self, state: &MatchState, ctx: &NodeContext) -> Result<NodeOutput<MatchUpdate>, NodeError> {
        let summaries: String =
            state.candidates.iter().map(|c| format!("- ticket_id {}: {}\n", c.ticket_id, c.summary)).collect();
        let request = ChatRequest {
            purpose: "ticket_matcher.match".into(),
            messages: vec![
                ChatMessage::system(prompts::MATCHER),
                ChatMessage::user(format!(
                    "Active tickets:\n{summaries}\nNew message from the customer:\n{}",
                    state.message
                )),
            ],
            temperature: Some(0.0),
            max_tokens: Some(200),
            ..Default::default()
        };
        let decision: ModelDecision = llm_node::structured(ctx, &self.llm, request).await?;
        // A ticket the customer does not have, or a weak match, starts a new ticket.
        let matched = decision
            .matched_ticket_id
            .filter(|id| state.candidates.iter().any(|c| c.ticket_id == *id))
            .filter(|_| matches!(decision.confidence, MatchConfidence::High | MatchConfidence::Medium));
        info!(customer_id = %state.customer_id, matched = ?matched, confidence = ?decision.confidence, "ticket matched");
        Ok(NodeOutput::update(MatchUpdate {
            decision: Some(Some(MatchDecision {
                matched_ticket_id: matched,
                confidence: decision.confidence,
                reasoning: decision.reasoning,
            })),
            ..Default::default()
        }))
    }

    fn description(&self) -> &str {
        "Decides which of the customer's active tickets the new message continues, if any"
    }
}

pub fn build(llm: LlmClient) -> Result<Graph<MatchState>, GraphError> {
    GraphBuilder::new(NAME)
        .node(NODE, TicketMatcher { llm })
        .entry(NODE)
        .edge(NODE, Target::End)
        .max_steps(1)
        .durability(Durability::Ephemeral)
        .build()
}
