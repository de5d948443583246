//! The triage workflow (docs/workflows/triage.md): match a customer message to an active ticket,
//! translate, classify with a customer lookup, then a billing, technical or general specialist
//! with the knowledge base (or direct escalation); resolved and escalated tickets are archived.
//!
//! ```text
//! (ticket matching: the `triage_match` graph of `matcher`, when the customer has active tickets)
//! START → translator → supervisor ─┬→ billing_specialist   → END
//!                                  ├→ technical_specialist → END
//!                                  ├→ general_specialist   → END
//!                                  └→ escalate             → END
//! (archive resolved and escalated tickets, after the run)
//! ```

pub mod archive;
pub mod customers;
mod desk;
pub mod kb;
pub mod matcher;
mod nodes;
pub mod prompts;
pub mod types;

use std::sync::Arc;

use frontdesk_llm::LlmClient;
use frontdesk_runtime::{Durability, Graph, GraphBuilder, GraphError, Log, Target};
use serde::{Deserialize, Serialize};

pub use archive::{
    ArchiveCursor, ArchiveError, ArchivedStatus, ArchivedTicket, KeyClaim, RecordedRequest, TicketArchive,
};
pub use desk::{archived_ticket_key, validate_customer_id, validate_request, validate_ticket_id};
pub use desk::{
    MatchConfidence, Progress, Resolution, TicketStatus, TicketSummary, TicketView, TriageDesk, TriageHandle,
    TriageOutcome, TriageProgress, TriageRequest,
};
pub use types::*;

use self::{customers::CustomerDirectory, kb::KnowledgeBase};

pub const NAME: &str = "triage";

pub const DESCRIPTION: &str = "Support-ticket triage: ticket matching, translation, classification with customer \
lookup, billing / technical / general specialists with a knowledge base or escalation, persistence";

frontdesk_runtime::state! {
    /// The triage thread's state (docs/workflows/triage.md, "The graph").
    pub struct TriageState / TriageUpdate {
        ticket: TicketInfo => Replace,
        messages: Log<TicketMessage> => Append,
        language_hint: Option<String> => Replace,
        translation: Option<Translation> => Replace,
        customer_info: Option<customers::Customer> => Replace,
        supervisor_decision: Option<SupervisorDecision> => Replace,
        kb_results: Vec<KbResult> => Replace,
        triage_result: Option<TriageResult> => Replace,
        current_agent: String => Replace,
    }
}

impl TriageState {
    pub fn customer_messages(&self) -> impl Iterator<Item = &TicketMessage> {
        self.messages.items.iter().filter(|m| m.author == Author::Customer)
    }

    /// The customer's messages in English (translated where needed), in order.
    pub fn english_messages(&self) -> Vec<String> {
        match &self.translation {
            Some(t) => t.translated_messages.clone(),
            None => self.customer_messages().map(|m| m.text.clone()).collect(),
        }
    }
}

/// What a finished triage run reports (and what idempotent replays return).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageOutput {
    pub ticket_id: String,
    pub customer_id: String,
    pub language: String,
    pub requires_escalation: bool,
    pub kb_results: Vec<KbResult>,
    pub result: Option<TriageResult>,
}

impl TriageOutput {
    pub fn of(state: &TriageState) -> Self {
        TriageOutput {
            ticket_id: state.ticket.ticket_id.clone(),
            customer_id: state.ticket.customer_id.clone(),
            language: state.translation.as_ref().map_or_else(|| "en".to_owned(), |t| t.original_language.clone()),
            requires_escalation: state.supervisor_decision.as_ref().is_some_and(|d| d.requires_escalation),
            kb_results: state.kb_results.clone(),
            result: state.triage_result.clone(),
        }
    }
}

/// What the triage nodes need from outside.
#[derive(Clone)]
pub struct TriageDeps {
    pub llm: LlmClient,
    pub customers: Arc<CustomerDirectory>,
    pub kb: Arc<KnowledgeBase>,
}

pub fn build(deps: TriageDeps) -> Result<Graph<TriageState>, GraphError> {
    use kb::Category;
    GraphBuilder::new(NAME)
        .node("translator", nodes::Translator(deps.clone()))
        .node("supervisor", nodes::Supervisor(deps.clone()))
        .node("billing_specialist", nodes::Specialist { deps: deps.clone(), category: Category::Billing })
        .node("technical_specialist", nodes::Specialist { deps: deps.clone(), category: Category::Technical })
        .node("general_specialist", nodes::Specialist { deps: deps.clone(), category: Category::General })
        .node("escalate", nodes::Escalate)
        .entry("translator")
        .edge("translator", Target::node("supervisor"))
        .conditional_edge(
            "supervisor",
            [
                Target::node("billing_specialist"),
                Target::node("technical_specialist"),
                Target::node("general_specialist"),
                Target::node("escalate"),
            ],
            |s: &TriageState| match &s.supervisor_decision {
                Some(d) if d.requires_escalation => Target::node("escalate"),
                Some(d) => match d.ticket_type {
                    TicketType::Billing => Target::node("billing_specialist"),
                    TicketType::Technical => Target::node("technical_specialist"),
                    TicketType::General => Target::node("general_specialist"),
                },
                // The supervisor always decides; without a decision the run must not go on.
                None => Target::End,
            },
        )
        .edge("billing_specialist", Target::End)
        .edge("technical_specialist", Target::End)
        .edge("general_specialist", Target::End)
        .edge("escalate", Target::End)
        .max_steps(8)
        // The nodes only call the model and read the directory and the knowledge base, so a
        // crash that re-runs a ticket from its input costs model calls and nothing else; the
        // accepting commit and the final checkpoint are all a ticket needs to be crash-safe.
        .durability(Durability::ByEffect)
        .output(TriageOutput::of)
        .build()
}
