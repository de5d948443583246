//! The triage workflow's domain types (the pieces of its state and the TriageResult, as docs/workflows/triage.md specifies them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Urgency {
    Low,
    Medium,
    High,
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TicketType {
    Billing,
    Technical,
    General,
}

impl TicketType {
    pub fn as_str(self) -> &'static str {
        match self {
            TicketType::Billing => "billing",
            TicketType::Technical => "technical",
            TicketType::General => "general",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecommendedAction {
    /// Simple question with a clear knowledge-base answer.
    AutoRespond,
    /// Needs a human specialist's attention.
    RouteSpecialist,
    /// Complex issue, VIP customer or sensitive matter.
    EscalateHuman,
}

impl RecommendedAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RecommendedAction::AutoRespond => "auto_respond",
            RecommendedAction::RouteSpecialist => "route_specialist",
            RecommendedAction::EscalateHuman => "escalate_human",
        }
    }

    /// Whether the ticket leaves the active store (docs/workflows/triage.md, "After the run: persistence").
    pub fn completes_ticket(self) -> bool {
        !matches!(self, RecommendedAction::RouteSpecialist)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Author {
    Customer,
    Assistant,
}

/// A message of the ticket's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TicketMessage {
    pub author: Author,
    pub text: String,
    pub at_ms: u64,
}

/// The ticket being triaged (the same for every run of the thread).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TicketInfo {
    pub ticket_id: String,
    pub customer_id: String,
    pub subject: String,
    pub created_at_ms: u64,
}

/// The translator's result for the whole ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Translation {
    /// ISO 639-1 code of the customer's language.
    pub original_language: String,
    pub is_english: bool,
    /// English text of each customer message, in order.
    pub translated_messages: Vec<String>,
    /// The customer messages as written, in order.
    pub original_messages: Vec<String>,
}

/// The supervisor's classification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SupervisorDecision {
    /// One or two sentences on the classification.
    #[schemars(length(max = 240))]
    pub reasoning: String,
    pub urgency: Urgency,
    pub ticket_type: TicketType,
    /// True for critical issues, security concerns, suspended accounts or anything a human must take over now.
    pub requires_escalation: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractedInfo {
    /// Product area, such as "invoices" or "api".
    #[schemars(length(max = 40))]
    pub product_area: String,
    /// Issue type, such as "refund_request" or "login_error".
    #[schemars(length(max = 40))]
    pub issue_type: String,
    /// The customer's sentiment, such as "calm", "frustrated" or "urgent".
    #[schemars(length(max = 20))]
    pub sentiment: String,
    /// ISO 639-1 language of the customer.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub language: String,
}

/// A knowledge-base hit as kept in state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbResult {
    pub article_id: String,
    pub title: String,
    pub score: f32,
}

/// The triage outcome (docs/workflows/triage.md, "The graph" and "After the run: persistence").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageResult {
    pub urgency: Urgency,
    pub ticket_type: TicketType,
    pub extracted_info: ExtractedInfo,
    pub recommended_action: RecommendedAction,
    /// In the customer's language.
    pub suggested_response: String,
    pub suggested_response_english: String,
    pub relevant_articles: Vec<String>,
    pub reasoning: String,
    /// The node that produced the result.
    pub agent: String,
}
