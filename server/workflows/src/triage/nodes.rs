//! The triage agents.

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest};
use frontdesk_runtime::{EventKind, Node, NodeContext, NodeError, NodeErrorKind, NodeOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use tracing::{debug, warn};

use super::{
    kb::Category, prompts, ExtractedInfo, KbResult, RecommendedAction, TicketType, Translation, TriageDeps,
    TriageResult, TriageState, TriageUpdate,
};
use crate::llm_node;

type Output = Result<NodeOutput<TriageUpdate>, NodeError>;

/// How many articles a specialist reads.
const KB_RESULTS: usize = 3;

/// Runs a deterministic tool and streams the call and its result as events.
async fn tool<T: serde::Serialize>(ctx: &NodeContext, name: &str, arguments: serde_json::Value, result: &T) {
    let call_id = uuid::Uuid::now_v7().simple().to_string();
    ctx.emit(EventKind::ToolCalled {
        call_id: call_id.clone(),
        name: name.to_owned(),
        arguments_json: arguments.to_string(),
    })
    .await;
    let result_json = serde_json::to_string(result).unwrap_or_else(|_| "null".to_owned());
    // The tools are in-memory lookups that ran before the call was announced.
    let latency = std::time::Duration::ZERO;
    ctx.emit(EventKind::ToolReturned { call_id, name: name.to_owned(), result_json, is_error: false, latency }).await;
}

fn numbered(messages: &[String]) -> String {
    messages.iter().enumerate().map(|(i, m)| format!("{}. {m}\n", i + 1)).collect()
}

// ---------------------------------------------------------------------------------------------

/// The translator's language detection. Unknown keys are ignored: older scripts and models
/// that also return the translations are still understood.
#[derive(Debug, Deserialize, JsonSchema)]
struct LanguageDetection {
    /// ISO 639-1 code of the customer's language.
    #[schemars(length(max = 8))]
    original_language: String,
    is_english: bool,
}

/// Tokens a message's translation may take: about a token per three characters of the
/// original, doubled for languages that translate long, plus room for a short message.
fn translation_budget(original: &str) -> u32 {
    let chars = u32::try_from(original.chars().count()).unwrap_or(u32::MAX);
    chars.saturating_mul(2) / 3 + 64
}

pub struct Translator(pub TriageDeps);

#[async_trait]
impl Node<TriageState> for Translator {
    fn description(&self) -> &str {
        "Detects the customer's language and translates the ticket's messages into English for the agents"
    }

    async fn run(&self, state: &TriageState, ctx: &NodeContext) -> Output {
        let originals: Vec<String> = state.customer_messages().map(|m| m.text.clone()).collect();
        // The caller's language, when given, is the ticket's language: the API promises that
        // detection runs only when it is empty, so the model is not asked (and cannot
        // overrule it). Translation still follows for a language other than English.
        let (language, is_english) = match &state.language_hint {
            Some(hint) => (hint.clone(), hint == "en"),
            None => {
                let request = ChatRequest {
                    purpose: "translator.translate".into(),
                    messages: vec![
                        ChatMessage::system(prompts::TRANSLATOR),
                        ChatMessage::user(format!("Customer messages:\n{}", numbered(&originals))),
                    ],
                    temperature: Some(0.0),
                    max_tokens: Some(64),
                    ..Default::default()
                };
                let detected: LanguageDetection = llm_node::structured(ctx, &self.0.llm, request).await?;
                let language = detected.original_language.trim().to_ascii_lowercase();
                let is_english = detected.is_english || language == "en";
                (language, is_english)
            }
        };
        // One free-text call per message rather than one JSON list: the count always matches,
        // and a small model cannot leave a long list of strings unfinished. English needs none.
        // A follow-up keeps the translations of the messages translated before it.
        let earlier = state.translation.as_ref().filter(|t| !t.is_english);
        let mut translated_messages = Vec::with_capacity(originals.len());
        for (i, original) in originals.iter().enumerate() {
            if is_english {
                translated_messages.push(original.clone());
                continue;
            }
            let done = earlier
                .filter(|t| t.original_messages.get(i) == Some(original))
                .and_then(|t| t.translated_messages.get(i));
            if let Some(done) = done {
                translated_messages.push(done.clone());
                continue;
            }
            let request = ChatRequest {
                purpose: "translator.translate_message".into(),
                messages: vec![
                    ChatMessage::system(format!("{}\nCustomer's language: {language}", prompts::TRANSLATE_MESSAGE)),
                    ChatMessage::user(original.clone()),
                ],
                temperature: Some(0.0),
                max_tokens: Some(translation_budget(original)),
                ..Default::default()
            };
            translated_messages.push(llm_node::streamed_text(ctx, &self.0.llm, request).await?.trim().to_owned());
        }
        let translation = Translation {
            is_english,
            original_language: if language.is_empty() { "en".into() } else { language },
            translated_messages,
            original_messages: originals,
        };
        Ok(NodeOutput::update(TriageUpdate {
            translation: Some(Some(translation)),
            current_agent: Some("translator".into()),
            ..Default::default()
        }))
    }
}

// ---------------------------------------------------------------------------------------------

/// The system prompt, the worked examples as earlier turns, then the real question (always
/// the last message).
fn supervisor_messages(question: String) -> Vec<ChatMessage> {
    // The system prompt and examples are the same for every ticket: built once.
    static PREFIX: std::sync::OnceLock<Vec<ChatMessage>> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let mut messages = vec![ChatMessage::system(prompts::SUPERVISOR)];
        for (customer, text, urgency, ticket_type, escalate, reasoning) in prompts::SUPERVISOR_EXAMPLES {
            let ticket = numbered(&[(*text).to_owned()]);
            messages.push(ChatMessage::user(prompts::supervisor_question(customer, "", &ticket)));
            let answer = serde_json::json!({
                "reasoning": reasoning,
                "urgency": urgency,
                "ticket_type": ticket_type,
                "requires_escalation": escalate,
            });
            messages.push(ChatMessage::assistant(answer.to_string()));
        }
        messages
    });
    let mut messages = Vec::with_capacity(prefix.len() + 1);
    messages.extend_from_slice(prefix);
    messages.push(ChatMessage::user(question));
    messages
}

pub struct Supervisor(pub TriageDeps);

#[async_trait]
impl Node<TriageState> for Supervisor {
    fn description(&self) -> &str {
        "Looks up the customer, then classifies urgency and ticket type and decides on direct escalation"
    }

    async fn run(&self, state: &TriageState, ctx: &NodeContext) -> Output {
        let customer_id = &state.ticket.customer_id;
        let customer = self.0.customers.lookup(customer_id).cloned();
        tool(ctx, "customer_lookup", serde_json::json!({ "customer_id": customer_id }), &customer).await;
        let Some(customer) = customer else {
            return Err(NodeError::new(
                NodeErrorKind::InvalidInput,
                format!("customer {customer_id} is not in the directory"),
            ));
        };
        let info = serde_json::to_string(&customer).unwrap_or_default();
        let request = ChatRequest {
            purpose: "supervisor.classify".into(),
            messages: supervisor_messages(prompts::supervisor_question(
                &info,
                &state.ticket.subject,
                &numbered(&state.english_messages()),
            )),
            temperature: Some(0.0),
            max_tokens: Some(300),
            ..Default::default()
        };
        let decision: super::SupervisorDecision = llm_node::structured(ctx, &self.0.llm, request).await?;
        debug!(thread_id = ctx.thread_id(), urgency = ?decision.urgency, ticket_type = ?decision.ticket_type,
            escalate = decision.requires_escalation, reasoning = %decision.reasoning, "ticket classified");
        Ok(NodeOutput::update(TriageUpdate {
            customer_info: Some(Some(customer)),
            supervisor_decision: Some(Some(decision)),
            current_agent: Some("supervisor".into()),
            ..Default::default()
        }))
    }
}

// ---------------------------------------------------------------------------------------------

/// The specialist's structured answer.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SpecialistOutput {
    /// One or two sentences on the decision.
    #[schemars(length(max = 240))]
    reasoning: String,
    recommended_action: RecommendedAction,
    /// The reply to send the customer, in English.
    #[schemars(length(max = 600))]
    suggested_response: String,
    /// Ids of the articles relied on.
    #[schemars(length(max = 5), inner(length(max = 40)))]
    relevant_articles: Vec<String>,
    extracted_info: ExtractedInfo,
}

pub struct Specialist {
    pub deps: TriageDeps,
    pub category: Category,
}

#[async_trait]
impl Node<TriageState> for Specialist {
    fn description(&self) -> &str {
        match self.category {
            Category::Billing => "Billing specialist: searches billing articles and recommends an action and a reply",
            Category::Technical => {
                "Technical specialist: searches technical articles and recommends an action and a reply"
            }
            Category::General => "General specialist: searches general articles and recommends an action and a reply",
        }
    }

    async fn run(&self, state: &TriageState, ctx: &NodeContext) -> Output {
        let category = self.category.as_str();
        let english = state.english_messages();
        let query = format!("{} {}", state.ticket.subject, english.join(" "));
        let hits: Vec<KbResult> = self
            .deps
            .kb
            .search(&query, Some(self.category), KB_RESULTS)
            .into_iter()
            .map(|h| KbResult { article_id: h.article_id, title: h.title, score: h.score })
            .collect();
        tool(ctx, "kb_search", serde_json::json!({ "query": query, "category": category }), &hits).await;
        let articles: String = hits
            .iter()
            .filter_map(|h| self.deps.kb.article(&h.article_id))
            .map(|a| format!("- {} \"{}\": {}\n", a.article_id, a.title, a.body))
            .collect();
        let decision = state.supervisor_decision.as_ref();
        let customer = state.customer_info.as_ref().map(|c| serde_json::to_string(c).unwrap_or_default());
        let request = ChatRequest {
            purpose: format!("specialist.{category}"),
            messages: vec![
                ChatMessage::system(prompts::specialist(category)),
                ChatMessage::user(format!(
                    "Customer: {}\nUrgency: {}\nSubject: {}\nTicket (English):\n{}\nKnowledge-base articles:\n{}",
                    customer.unwrap_or_default(),
                    decision.map_or("unknown".into(), |d| format!("{:?}", d.urgency).to_lowercase()),
                    state.ticket.subject,
                    numbered(&english),
                    if articles.is_empty() { "(none found)\n".to_owned() } else { articles },
                )),
            ],
            temperature: Some(0.2),
            // Room for the longest reply the schema allows: a reply cut off by the budget is not JSON.
            max_tokens: Some(1000),
            ..Default::default()
        };
        let out: SpecialistOutput = llm_node::structured(ctx, &self.deps.llm, request).await?;
        let mut relevant = out.relevant_articles;
        relevant.retain(|id| {
            let known = hits.iter().any(|h| &h.article_id == id);
            if !known {
                warn!(thread_id = ctx.thread_id(), article = %id, "specialist cited an article it was not given");
            }
            known
        });
        let translation = state.translation.as_ref();
        let language = translation.map_or_else(|| "en".to_owned(), |t| t.original_language.clone());
        let suggested_response = match translation {
            Some(t) if !t.is_english && !out.suggested_response.trim().is_empty() => {
                let request = ChatRequest {
                    purpose: "translator.translate_back".into(),
                    messages: vec![
                        ChatMessage::system(format!("{}\nCustomer's language: {language}", prompts::TRANSLATE_BACK)),
                        ChatMessage::user(out.suggested_response.clone()),
                    ],
                    temperature: Some(0.0),
                    max_tokens: Some(700),
                    ..Default::default()
                };
                llm_node::streamed_text(ctx, &self.deps.llm, request).await?
            }
            _ => out.suggested_response.clone(),
        };
        let ticket_type = decision.map_or(category_type(self.category), |d| d.ticket_type);
        let result = TriageResult {
            urgency: decision.map_or(super::Urgency::Medium, |d| d.urgency),
            ticket_type,
            extracted_info: ExtractedInfo { language: language.clone(), ..out.extracted_info },
            recommended_action: out.recommended_action,
            suggested_response,
            suggested_response_english: out.suggested_response,
            relevant_articles: relevant,
            reasoning: out.reasoning,
            agent: format!("{category}_specialist"),
        };
        Ok(NodeOutput::update(TriageUpdate {
            kb_results: Some(hits),
            triage_result: Some(Some(result)),
            current_agent: Some(format!("{category}_specialist")),
            ..Default::default()
        }))
    }
}

fn category_type(category: Category) -> TicketType {
    match category {
        Category::Billing => TicketType::Billing,
        Category::Technical => TicketType::Technical,
        Category::General => TicketType::General,
    }
}

// ---------------------------------------------------------------------------------------------

/// Direct escalation: no specialist, no model call.
pub struct Escalate;

#[async_trait]
impl Node<TriageState> for Escalate {
    fn description(&self) -> &str {
        "Direct escalation to a human, skipping the specialists"
    }

    async fn run(&self, state: &TriageState, _ctx: &NodeContext) -> Output {
        let decision = state.supervisor_decision.as_ref();
        let language = state.translation.as_ref().map_or_else(|| "en".to_owned(), |t| t.original_language.clone());
        let result = TriageResult {
            urgency: decision.map_or(super::Urgency::Critical, |d| d.urgency),
            ticket_type: decision.map_or(TicketType::General, |d| d.ticket_type),
            extracted_info: ExtractedInfo {
                product_area: decision.map_or("general".into(), |d| d.ticket_type.as_str().to_owned()),
                issue_type: "escalation".into(),
                sentiment: "urgent".into(),
                language,
            },
            recommended_action: RecommendedAction::EscalateHuman,
            // A fixed holding reply (English): escalations are answered by people.
            suggested_response: prompts::ESCALATION_REPLY.to_owned(),
            suggested_response_english: prompts::ESCALATION_REPLY.to_owned(),
            relevant_articles: Vec::new(),
            reasoning: format!(
                "Direct escalation required: {}",
                decision.map_or("no supervisor decision", |d| d.reasoning.as_str())
            ),
            agent: "escalate".into(),
        };
        Ok(NodeOutput::update(TriageUpdate {
            triage_result: Some(Some(result)),
            kb_results: Some(Vec::new()),
            current_agent: Some("escalate".into()),
            ..Default::default()
        }))
    }
}
