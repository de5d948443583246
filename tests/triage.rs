//! The triage workflow (docs/workflows/triage.md) end to end through a real server and its gRPC client, with a
//! scripted model: every route, every recommended action and its persistence, ticket matching,
//! translation, unknown customers and customer isolation.

mod common;

use common::TestServer;
use frontdesk_api::v1::{
    self, run_event::Kind, triage_service_client::TriageServiceClient, triage_ticket_response::Payload,
    RecommendedAction, TicketStatus, TicketType, Urgency,
};
use frontdesk_llm::ScriptedReply;
use frontdesk_server::workflows::triage::HostedTriage;
use futures::StreamExt;
use serde_json::json;
use std::time::Duration;
use tonic::{transport::Channel, Code};

struct Triage {
    s: TestServer,
    client: TriageServiceClient<Channel>,
}

/// A request for `customer`'s `message`, subject "Help", with idempotency key `key` (none when
/// empty).
fn ticket_request(customer: &str, message: &str, key: &str) -> v1::TriageTicketRequest {
    v1::TriageTicketRequest {
        customer_id: customer.into(),
        message: message.into(),
        subject: "Help".into(),
        language: String::new(),
        idempotency_key: key.into(),
    }
}

struct Outcome {
    resolution: v1::TicketResolution,
    /// Events of the ticket's run (after the resolution).
    events: Vec<v1::RunEvent>,
    /// Events of the matching run (before the resolution); empty when nothing was matched.
    matching: Vec<v1::RunEvent>,
    result: v1::TriageResult,
}

impl Triage {
    async fn start() -> Self {
        let s = TestServer::start().await;
        let channel = Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
        Self { s, client: TriageServiceClient::new(channel) }
    }

    async fn start_with(options: common::Options) -> Self {
        Self::connect(TestServer::start_with(options).await).await
    }

    async fn connect(s: TestServer) -> Self {
        let channel = Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
        Self { s, client: TriageServiceClient::new(channel) }
    }

    async fn restart(self, options: common::Options) -> Self {
        Self::connect(self.s.restart(options).await).await
    }

    async fn triage(&self, customer: &str, message: &str, key: &str) -> Result<Outcome, tonic::Status> {
        self.triage_request(ticket_request(customer, message, key)).await
    }

    async fn triage_request(&self, request: v1::TriageTicketRequest) -> Result<Outcome, tonic::Status> {
        collect(self.client.clone(), request).await
    }

    async fn active(&self, customer: &str) -> Vec<v1::Ticket> {
        let request = v1::ListActiveTicketsRequest { customer_id: customer.into() };
        self.client.clone().list_active_tickets(request).await.unwrap().into_inner().tickets
    }

    async fn get(&self, customer: &str, ticket: &str) -> Result<v1::GetTicketResponse, tonic::Status> {
        let request = v1::GetTicketRequest { customer_id: customer.into(), ticket_id: ticket.into() };
        Ok(self.client.clone().get_ticket(request).await?.into_inner())
    }
}

/// One triage call's stream, read to its end.
async fn collect(
    mut client: TriageServiceClient<Channel>,
    request: v1::TriageTicketRequest,
) -> Result<Outcome, tonic::Status> {
    let mut stream = client.triage_ticket(request).await?.into_inner();
    let (mut resolution, mut events, mut matching, mut result) = (None, Vec::new(), Vec::new(), None);
    while let Some(item) = stream.next().await {
        match item?.payload.unwrap() {
            Payload::Resolution(r) => resolution = Some(r),
            Payload::Event(e) if resolution.is_none() => matching.push(e),
            Payload::Event(e) => events.push(e),
            Payload::Result(r) => result = Some(r),
        }
    }
    Ok(Outcome { resolution: resolution.unwrap(), events, matching, result: result.expect("a result") })
}

/// The translator's language detection for an English ticket (no translation calls follow).
fn english() -> serde_json::Value {
    json!({"original_language": "en", "is_english": true})
}

fn decision(urgency: &str, ticket_type: &str, escalate: bool) -> serde_json::Value {
    json!({"reasoning": "scripted", "urgency": urgency, "ticket_type": ticket_type, "requires_escalation": escalate})
}

fn specialist(action: &str, reply: &str, articles: &[&str]) -> serde_json::Value {
    json!({
        "reasoning": "scripted",
        "recommended_action": action,
        "suggested_response": reply,
        "relevant_articles": articles,
        "extracted_info": {"product_area": "billing", "issue_type": "double_charge", "sentiment": "frustrated"}
    })
}

/// Scripts the model for one English ticket that a specialist answers: detected as English (so
/// nothing is translated), classified as `ticket_type` of `urgency` without escalation, and
/// answered by that type's specialist with `action` and `reply`, citing no article.
fn script_english(t: &Triage, urgency: &str, ticket_type: &str, action: &str, reply: &str) {
    let specialist_purpose = format!("specialist.{ticket_type}");
    t.s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision(urgency, ticket_type, false)),
        (&specialist_purpose, specialist(action, reply, &[])),
    ]);
}

/// A Spanish billing ticket (in English: "I was charged twice on my last invoice").
const SPANISH_DOUBLE_CHARGE: &str = "Me cobraron dos veces en mi última factura";

/// Scripts the model for `SPANISH_DOUBLE_CHARGE`: detected as Spanish and translated, classified
/// as billing, answered from the knowledge base (`kb_001`), and the answer translated back.
fn script_spanish_refund(t: &Triage) {
    t.s.script(&[
        ("translator.translate", json!({"original_language": "es", "is_english": false})),
        ("translator.translate_message", json!("I was charged twice on my last invoice")),
        ("supervisor.classify", decision("medium", "billing", false)),
        ("specialist.billing", specialist("auto_respond", "We will refund the duplicate charge.", &["kb_001"])),
        ("translator.translate_back", json!("Le reembolsaremos el cargo duplicado.")),
    ]);
}

fn nodes(events: &[v1::RunEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(Kind::NodeStarted(_)) => Some(e.node.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn billing_auto_respond_is_archived_as_resolved() {
    let t = Triage::start().await;
    let text = "I was charged twice on my last invoice";
    t.s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision("high", "billing", false)),
        (
            "specialist.billing",
            specialist("auto_respond", "We will refund the duplicate charge.", &["kb_001", "kb_999"]),
        ),
    ]);
    let out = t.triage("CUST-001", text, "").await.unwrap();
    assert!(!out.resolution.matched_existing);
    assert!(out.resolution.ticket_id.starts_with("TKT-") && out.resolution.ticket_id.len() == 12);
    assert_eq!(nodes(&out.events), ["translator", "supervisor", "billing_specialist"]);
    let tools: Vec<(String, String)> = out
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(Kind::ToolReturned(r)) => Some((r.name.clone(), r.result_json.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(tools[0].0, "customer_lookup");
    assert!(tools[0].1.contains("Ana Smith"));
    assert_eq!(tools[1].0, "kb_search");
    assert!(tools[1].1.contains("kb_001"), "the knowledge base finds the double-charge article: {}", tools[1].1);
    let r = &out.result;
    assert_eq!(r.ticket_id, out.resolution.ticket_id);
    assert_eq!(r.recommended_action(), RecommendedAction::AutoRespond);
    assert_eq!(r.ticket_type(), TicketType::Billing);
    assert_eq!(r.urgency(), Urgency::High);
    assert_eq!(r.status(), TicketStatus::Resolved);
    assert_eq!(r.relevant_articles, ["kb_001"], "articles the specialist was not given are dropped");
    assert!(r.kb_results.iter().all(|h| h.article_id.starts_with("kb_")));
    let specialist_prompt = t.s.model.requests().into_iter().find(|q| q.purpose == "specialist.billing").unwrap();
    assert!(specialist_prompt.messages[1].content.contains("Resolving Double Charges"));

    assert!(t.active("CUST-001").await.is_empty(), "a resolved ticket leaves the active store");
    let ticket = t.get("CUST-001", &r.ticket_id).await.unwrap();
    assert_eq!(ticket.ticket.unwrap().status(), TicketStatus::Resolved);
    let texts: Vec<_> = ticket.messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, [text, "We will refund the duplicate charge."], "the ticket and its chat are archived");
    let listed = t
        .client
        .clone()
        .list_tickets(v1::ListTicketsRequest {
            customer_id: "CUST-001".into(),
            status: 0,
            page_size: 10,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tickets.len(), 1);
}

#[tokio::test]
async fn route_specialist_stays_active_and_a_follow_up_is_matched_to_it() {
    let t = Triage::start().await;
    let first = "The API returns a timeout error on every export";
    script_english(&t, "medium", "technical", "route_specialist", "An engineer will look into it.");
    let out = t.triage("CUST-003", first, "").await.unwrap();
    assert_eq!(out.result.status(), TicketStatus::Active);
    assert_eq!(nodes(&out.events), ["translator", "supervisor", "technical_specialist"]);
    assert!(out.matching.is_empty(), "nothing to match without active tickets: no matching run");
    let ticket_id = out.result.ticket_id.clone();
    let active = t.active("CUST-003").await;
    assert_eq!(active.iter().map(|t| t.ticket_id.as_str()).collect::<Vec<_>>(), [ticket_id.as_str()]);

    let follow_up = "Still timing out after the update, any news?";
    t.s.script(&[
        (
            "ticket_matcher.match",
            json!({"reasoning": "same export timeout", "matched_ticket_id": ticket_id, "confidence": "high"}),
        ),
        ("translator.translate", english()),
        ("supervisor.classify", decision("medium", "technical", false)),
        ("specialist.technical", specialist("auto_respond", "Please update to version 2.1, which fixes it.", &[])),
    ]);
    let out = t.triage("CUST-003", follow_up, "").await.unwrap();
    assert!(out.resolution.matched_existing);
    assert_eq!(out.resolution.confidence(), v1::MatchConfidence::High);
    // Matching is a run of its own graph, streamed before the resolution like any other run.
    assert_eq!(nodes(&out.matching), ["ticket_matcher"]);
    let matcher_call = out.matching.iter().find_map(|e| match &e.kind {
        Some(Kind::LlmCallFinished(call)) => Some(call.clone()),
        _ => None,
    });
    assert_eq!(matcher_call.expect("the matcher's model call is streamed").purpose, "ticket_matcher.match");
    assert!(matches!(out.matching.last().unwrap().kind, Some(Kind::RunFinished(_))));
    assert_ne!(out.matching[0].run_id, out.events[0].run_id, "matching and the ticket are two runs");
    assert!(out.resolution.usage.is_some(), "the matching run's usage is reported with the resolution");
    assert_eq!(nodes(&out.events), ["translator", "supervisor", "technical_specialist"]);
    assert_eq!(out.resolution.candidate_ticket_ids, std::slice::from_ref(&ticket_id));
    assert_eq!(out.result.ticket_id, ticket_id, "the follow-up continues the same ticket");
    assert_eq!(out.result.status(), TicketStatus::Resolved);
    let matcher = t.s.model.requests().into_iter().find(|q| q.purpose == "ticket_matcher.match").unwrap();
    assert!(matcher.messages[1].content.contains(first), "the matcher reads a summary of the active ticket");
    let ticket = t.get("CUST-003", &ticket_id).await.unwrap();
    assert_eq!(ticket.messages.len(), 3, "both customer messages and the reply are archived");
    assert!(t.active("CUST-003").await.is_empty());
}

#[tokio::test]
async fn a_low_confidence_match_opens_a_new_ticket() {
    let t = Triage::start().await;
    script_english(&t, "medium", "technical", "route_specialist", "Looking into it.");
    let first = t.triage("CUST-003", "login error", "").await.unwrap();
    t.s.script(&[
        (
            "ticket_matcher.match",
            json!({"reasoning": "different", "matched_ticket_id": first.result.ticket_id, "confidence": "low"}),
        ),
        ("translator.translate", english()),
        ("supervisor.classify", decision("low", "general", false)),
        ("specialist.general", specialist("route_specialist", "Sure.", &[])),
    ]);
    let second = t.triage("CUST-003", "how do I invite my team?", "").await.unwrap();
    assert!(!second.resolution.matched_existing);
    assert_ne!(second.result.ticket_id, first.result.ticket_id);
    assert_eq!(nodes(&second.events), ["translator", "supervisor", "general_specialist"]);
    assert_eq!(t.active("CUST-003").await.len(), 2);
}

#[tokio::test]
async fn a_matcher_that_fails_ends_the_stream_with_its_run_failed_event_and_no_ticket() {
    let t = Triage::start().await;
    script_english(&t, "medium", "technical", "route_specialist", "Looking into it.");
    t.triage("CUST-003", "login error", "").await.unwrap();
    // Twice invalid: the reply and its repair attempt.
    t.s.script(&[("ticket_matcher.match", json!({"nonsense": 1})), ("ticket_matcher.match", json!({"nonsense": 2}))]);
    let request = v1::TriageTicketRequest {
        customer_id: "CUST-003".into(),
        message: "any news?".into(),
        subject: String::new(),
        language: String::new(),
        idempotency_key: String::new(),
    };
    let mut stream = t.client.clone().triage_ticket(request).await.unwrap().into_inner();
    let (mut items, mut status) = (Vec::new(), None);
    while let Some(item) = stream.next().await {
        match item {
            Ok(item) => items.push(item.payload.unwrap()),
            Err(error) => status = Some(error),
        }
    }
    let status = status.expect("the stream ends with an error status");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(!items.iter().any(|p| matches!(p, Payload::Resolution(_))), "no ticket was resolved");
    let failed = items.iter().find_map(|p| match p {
        Payload::Event(v1::RunEvent { kind: Some(Kind::RunFailed(failed)), node, .. }) => Some((failed, node)),
        _ => None,
    });
    let (failed, _) = failed.expect("the matching run's RunFailed event is streamed");
    assert_eq!(failed.reason, "MODEL_OUTPUT_INVALID");
    assert_eq!(t.active("CUST-003").await.len(), 1, "the message joined no ticket");
}

#[tokio::test]
async fn escalation_skips_the_specialists_and_is_archived_as_escalated() {
    let t = Triage::start().await;
    let text = "Our production is down and we see data loss";
    t.s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision("critical", "technical", true)),
    ]);
    let out = t.triage("CUST-004", text, "").await.unwrap();
    assert_eq!(nodes(&out.events), ["translator", "supervisor", "escalate"]);
    let r = &out.result;
    assert_eq!(r.recommended_action(), RecommendedAction::EscalateHuman);
    assert!(r.requires_escalation);
    assert_eq!(r.urgency(), Urgency::Critical);
    assert_eq!(r.status(), TicketStatus::Escalated);
    assert!(!t.s.model.requests().iter().any(|q| q.purpose.starts_with("specialist.")));
    assert!(t.active("CUST-004").await.is_empty());
    let ticket = t.get("CUST-004", &r.ticket_id).await.unwrap();
    assert_eq!(ticket.ticket.unwrap().status(), TicketStatus::Escalated);
}

#[tokio::test]
async fn a_specialist_can_escalate_to_a_human() {
    let t = Triage::start().await;
    script_english(&t, "medium", "general", "escalate_human", "A colleague will contact you.");
    let out = t.triage("CUST-002", "legal question about our contract", "").await.unwrap();
    assert_eq!(out.result.status(), TicketStatus::Escalated);
    assert!(!out.result.requires_escalation);
}

#[tokio::test]
async fn a_non_english_ticket_is_translated_and_answered_in_its_language() {
    let t = Triage::start().await;
    let text = SPANISH_DOUBLE_CHARGE;
    script_spanish_refund(&t);
    let out = t.triage("CUST-002", text, "").await.unwrap();
    let r = &out.result;
    assert_eq!(r.language, "es");
    assert_eq!(r.suggested_response, "Le reembolsaremos el cargo duplicado.");
    assert_eq!(r.suggested_response_english, "We will refund the duplicate charge.");
    let requests = t.s.model.requests();
    let supervisor = requests.iter().find(|q| q.purpose == "supervisor.classify").unwrap();
    assert!(
        supervisor.messages.last().unwrap().content.contains("I was charged twice"),
        "agents read the English translation"
    );
    assert!(!supervisor.messages.last().unwrap().content.contains("cobraron"));
    let ticket = t.get("CUST-002", &r.ticket_id).await.unwrap();
    assert_eq!(ticket.messages[0].text, text, "the original is kept");
}

#[tokio::test]
async fn an_archived_non_english_ticket_keeps_its_translation_run_id_and_kb_articles() {
    let t = Triage::start().await;
    let text = SPANISH_DOUBLE_CHARGE;
    script_spanish_refund(&t);
    let out = t.triage("CUST-002", text, "").await.unwrap();
    assert_eq!(out.result.status(), TicketStatus::Resolved, "archived");
    assert!(!out.result.kb_results.is_empty(), "the specialist searched the knowledge base");
    let archived = t.get("CUST-002", &out.result.ticket_id).await.unwrap();
    assert_eq!(archived.ticket.as_ref().unwrap().status(), TicketStatus::Resolved);
    assert_eq!(archived.messages[0].text, text, "the original is kept");
    assert_eq!(archived.messages[0].english_text, "I was charged twice on my last invoice", "and its translation");
    assert_eq!(archived.messages[1].english_text, "", "replies carry no translation");
    let result = archived.result.expect("the archived result");
    assert_eq!(result.run_id, out.result.run_id, "the run that triaged it");
    assert_eq!(result.kb_results, out.result.kb_results, "the articles it was based on, with titles and scores");
    assert!(result.kb_results.iter().all(|hit| !hit.title.is_empty() && hit.score > 0.0));
    assert_eq!(result.relevant_articles, out.result.relevant_articles);
    assert_eq!(result.language, "es");
    assert_eq!(result.suggested_response_english, "We will refund the duplicate charge.");
}

#[tokio::test]
async fn an_explicit_language_is_honoured_without_detection_and_still_translated() {
    let t = Triage::start().await;
    let text = SPANISH_DOUBLE_CHARGE;
    // No `translator.translate` reply is scripted: detection must not run.
    t.s.script(&[
        ("translator.translate_message", json!("I was charged twice on my last invoice")),
        ("supervisor.classify", decision("medium", "billing", false)),
        ("specialist.billing", specialist("route_specialist", "We will look into the charge.", &[])),
        ("translator.translate_back", json!("Revisaremos el cargo.")),
    ]);
    let request = v1::TriageTicketRequest {
        customer_id: "CUST-002".into(),
        message: text.into(),
        subject: "Cobro".into(),
        language: "es".into(),
        idempotency_key: String::new(),
    };
    let out = t.triage_request(request).await.unwrap();
    let purposes: Vec<String> = t.s.model.requests().iter().map(|q| q.purpose.clone()).collect();
    assert!(!purposes.iter().any(|p| p == "translator.translate"), "no detection call: {purposes:?}");
    assert!(purposes.iter().any(|p| p == "translator.translate_message"), "still translated: {purposes:?}");
    assert_eq!(out.result.language, "es", "the caller's language, not a detected one");
    assert_eq!(out.result.suggested_response, "Revisaremos el cargo.");
    let ticket = t.get("CUST-002", &out.result.ticket_id).await.unwrap();
    assert_eq!(ticket.messages[0].english_text, "I was charged twice on my last invoice");
}

#[tokio::test]
async fn an_unknown_customer_is_not_found_before_any_model_call() {
    let t = Triage::start().await;
    let error = t.triage("CUST-999", "hello", "").await.err().unwrap();
    assert_eq!(error.code(), Code::NotFound);
    assert!(t.s.model.requests().is_empty());
    let error = t.triage("", "hello", "").await.err().unwrap();
    assert_eq!(error.code(), Code::InvalidArgument);
    let error = t.triage("CUST-001", "  ", "").await.err().unwrap();
    assert_eq!(error.code(), Code::InvalidArgument);
}

fn error_info(status: &tonic::Status) -> (String, std::collections::HashMap<String, String>) {
    let details = tonic_types::StatusExt::get_error_details(status);
    let info = details.error_info().expect("ErrorInfo");
    (info.reason.clone(), info.metadata.clone())
}

#[tokio::test]
async fn an_unknown_customer_is_not_found_on_every_rpc() {
    let t = Triage::start().await;
    let mut client = t.client.clone();
    let list = v1::ListTicketsRequest { customer_id: "CUST-999".into(), ..Default::default() };
    let active = v1::ListActiveTicketsRequest { customer_id: "CUST-999".into() };
    let get = v1::GetTicketRequest { customer_id: "CUST-999".into(), ticket_id: "TKT-00000000".into() };
    let active_listing = v1::ListTicketsRequest { status: TicketStatus::Active as i32, ..list.clone() };
    let statuses = [
        t.triage("CUST-999", "hello", "").await.err().unwrap(),
        client.list_tickets(list).await.err().unwrap(),
        client.list_tickets(active_listing).await.err().unwrap(),
        client.list_active_tickets(active).await.err().unwrap(),
        client.get_ticket(get).await.err().unwrap(),
    ];
    for status in statuses {
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        let (reason, metadata) = error_info(&status);
        assert_eq!(reason, "NOT_FOUND");
        assert_eq!(metadata.get("kind").map(String::as_str), Some("customer"), "{status:?}");
        assert_eq!(metadata.get("id").map(String::as_str), Some("CUST-999"));
    }
    assert!(t.s.model.requests().is_empty());
}

#[tokio::test]
async fn archived_tickets_page_with_opaque_tokens_and_a_bad_token_is_an_invalid_argument() {
    let t = Triage::start().await;
    let mut ids = Vec::new();
    for n in 0..3 {
        script_english(&t, "low", "billing", "auto_respond", "Refund started.");
        ids.push(t.triage("CUST-001", &format!("refund number {n}"), "").await.unwrap().result.ticket_id);
    }
    let request = |token: &str, status: TicketStatus| v1::ListTicketsRequest {
        customer_id: "CUST-001".into(),
        status: status as i32,
        page_size: 2,
        page_token: token.into(),
    };
    let mut client = t.client.clone();
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = client.list_tickets(request(&token, TicketStatus::Unspecified)).await.unwrap().into_inner();
        seen.extend(page.tickets.into_iter().map(|t| t.ticket_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
        assert!(!token.contains("TKT-"), "tokens are opaque: {token}");
    }
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids, "every archived ticket once");

    let first = client.list_tickets(request("", TicketStatus::Unspecified)).await.unwrap().into_inner();
    let valid = first.next_page_token;
    let other_customer =
        v1::ListTicketsRequest { customer_id: "CUST-002".into(), ..request(&valid, TicketStatus::Unspecified) };
    let bad = [
        request("garbage", TicketStatus::Unspecified),
        // What the store's cursor used to be: not a token this server hands out.
        request("1700000000000:TKT-00000000", TicketStatus::Unspecified),
        request(&valid, TicketStatus::Resolved),
        request(&valid, TicketStatus::Active),
        other_customer,
    ];
    for bad in bad {
        let status = client.list_tickets(bad.clone()).await.err().unwrap();
        assert_eq!(status.code(), Code::InvalidArgument, "{bad:?}: {status:?}");
        let details = tonic_types::StatusExt::get_error_details(&status);
        assert!(details.retry_info().is_none(), "a bad token is not worth retrying");
        let violations = &details.bad_request().expect("BadRequest").field_violations;
        assert_eq!(violations[0].field, "page_token");
    }
}

#[tokio::test]
async fn customers_cannot_see_each_others_tickets() {
    let t = Triage::start().await;
    script_english(&t, "medium", "technical", "route_specialist", "Checking.");
    let a = t.triage("CUST-001", "webhook delivery fails", "").await.unwrap();
    let ticket = &a.result.ticket_id;
    assert_eq!(t.get("CUST-003", ticket).await.err().unwrap().code(), Code::NotFound);
    assert!(t.active("CUST-003").await.is_empty());
    // CUST-003's first message is matched against CUST-003's tickets only: none, so no matcher call.
    script_english(&t, "medium", "technical", "route_specialist", "Checking.");
    let b = t.triage("CUST-003", "webhook delivery fails too", "").await.unwrap();
    assert!(b.resolution.candidate_ticket_ids.is_empty());
    assert!(!t.s.model.requests().iter().any(|q| q.purpose == "ticket_matcher.match"));
    assert_ne!(&b.result.ticket_id, ticket);
}

#[tokio::test]
async fn a_repeated_idempotency_key_replays_the_result() {
    let t = Triage::start().await;
    script_english(&t, "low", "billing", "auto_respond", "Refund started.");
    let first = t.triage("CUST-003", "refund please", "req-1").await.unwrap();
    let calls = t.s.model.requests().len();
    let again = t.triage("CUST-003", "refund please", "req-1").await.unwrap();
    assert!(again.result.replayed);
    assert_eq!(again.result.ticket_id, first.result.ticket_id);
    assert_eq!(again.result.suggested_response, "Refund started.");
    assert!(again.events.is_empty());
    assert_eq!(t.s.model.requests().len(), calls);
}

#[tokio::test]
async fn an_idempotency_key_reused_with_another_message_is_an_idempotency_mismatch() {
    let t = Triage::start().await;
    script_english(&t, "low", "billing", "auto_respond", "Refund started.");
    let first = t.triage("CUST-003", "refund please", "req-1").await.unwrap();
    let calls = t.s.model.requests().len();
    let status = t.triage("CUST-003", "my password does not work", "req-1").await.err().unwrap();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let details = tonic_types::StatusExt::get_error_details(&status);
    let info = details.error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "IDEMPOTENCY_MISMATCH");
    assert_eq!(info.metadata.get("kind").map(String::as_str), Some("customer"));
    assert_eq!(info.metadata.get("idempotency_key").map(String::as_str), Some("req-1"));
    assert_eq!(t.s.model.requests().len(), calls, "nothing is triaged for a refused retry");
    // Another customer's key of the same name is another key.
    script_english(&t, "low", "billing", "auto_respond", "Refund started.");
    assert!(!t.triage("CUST-001", "my password does not work", "req-1").await.unwrap().result.replayed);
    let again = t.triage("CUST-003", "refund please", "req-1").await.unwrap();
    assert!(again.result.replayed, "the same request still replays");
    assert_eq!(again.result.ticket_id, first.result.ticket_id);
}

/// A retry sent while the first call is still matching (its deadline passed, say) must not
/// triage the message a second time under a new ticket id: the first call holds the key, so the
/// retry is told to come back, and once the first is recorded the retry replays it.
#[tokio::test]
async fn a_retry_while_the_first_call_is_matching_waits_for_it_instead_of_opening_a_second_ticket() {
    let t = Triage::start().await;
    script_english(&t, "medium", "technical", "route_specialist", "Looking into it.");
    let open = t.triage("CUST-003", "login error", "").await.unwrap();
    let slow_match = frontdesk_llm::ScriptedReply::json(
        &json!({"reasoning": "different", "matched_ticket_id": null, "confidence": "low"}),
    )
    .for_purpose("ticket_matcher.match")
    .after(std::time::Duration::from_millis(700));
    t.s.model.push_reply(slow_match);
    script_english(&t, "low", "general", "route_specialist", "Sure.");

    let first = {
        let request = ticket_request("CUST-003", "how do I invite my team?", "invite-1");
        tokio::spawn(collect(t.client.clone(), request))
    };
    common::wait_for("the first call to reach the matcher", || {
        t.s.model.requests().iter().any(|q| q.purpose == "ticket_matcher.match")
    })
    .await;
    let busy = t.triage("CUST-003", "how do I invite my team?", "invite-1").await.err().expect("the key is held");
    assert_eq!(busy.code(), Code::Aborted, "{busy:?}");
    let details = tonic_types::StatusExt::get_error_details(&busy);
    assert_eq!(details.error_info().expect("ErrorInfo").reason, "THREAD_BUSY");
    assert!(details.retry_info().and_then(|r| r.retry_delay).is_some(), "told when to come back");
    let mismatch = t.triage("CUST-003", "something else entirely", "invite-1").await.err().unwrap();
    assert_eq!(mismatch.code(), Code::FailedPrecondition, "another request with a held key: {mismatch:?}");

    let ticket = first.await.unwrap().unwrap().result.ticket_id;
    let calls = t.s.model.requests().len();
    let again = t.triage("CUST-003", "how do I invite my team?", "invite-1").await.unwrap();
    assert!(again.result.replayed);
    assert_eq!(again.result.ticket_id, ticket);
    assert_eq!(t.s.model.requests().len(), calls, "nothing is triaged twice");
    let mut active: Vec<String> = t.active("CUST-003").await.into_iter().map(|t| t.ticket_id).collect();
    active.sort();
    let mut expected = vec![open.result.ticket_id, ticket];
    expected.sort();
    assert_eq!(active, expected, "one ticket for the first message, one for the retried one");
}

/// A caller that goes away mid-run must still leave its outcome recorded under its key: the
/// retry replays it rather than opening a second ticket.
#[tokio::test]
async fn a_caller_that_goes_away_mid_run_still_has_its_outcome_recorded_for_the_retry() {
    let t = Triage::start().await;
    t.s.model.push_reply(
        frontdesk_llm::ScriptedReply::json(&english())
            .for_purpose("translator.translate")
            .after(std::time::Duration::from_millis(300)),
    );
    t.s.script(&[
        ("supervisor.classify", decision("medium", "technical", false)),
        ("specialist.technical", specialist("route_specialist", "An engineer will look.", &[])),
    ]);
    let request = ticket_request("CUST-003", "exports time out", "gone-1");
    let mut stream = t.client.clone().triage_ticket(request).await.unwrap().into_inner();
    let first = stream.next().await.unwrap().unwrap();
    let Some(Payload::Resolution(resolution)) = first.payload else { panic!("resolution first: {first:?}") };
    drop(stream);

    let replay = loop {
        match t.triage("CUST-003", "exports time out", "gone-1").await {
            Ok(out) => break out,
            Err(status) if status.code() == Code::Aborted => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(status) => panic!("{status:?}"),
        }
    };
    assert!(replay.result.replayed, "the first call's outcome was recorded");
    assert_eq!(replay.result.ticket_id, resolution.ticket_id);
    assert_eq!(t.active("CUST-003").await.len(), 1);
}

fn one_second_grace() -> common::Options {
    common::Options { configure: |config| config.shutdown_grace_secs = 1, ..Default::default() }
}

/// Starts a keyed request for a new ticket of CUST-003 whose classification outlasts the grace
/// period, restarts the server once the run is in the supervisor (the shutdown stops the run
/// where it is: UNAVAILABLE SHUTTING_DOWN), and returns the restarted server, the request and
/// the ticket id it was given. `resumed` is what the model replies to the resumed run.
async fn stop_a_keyed_ticket_mid_run(resumed: &[ScriptedReply]) -> (Triage, v1::TriageTicketRequest, String) {
    let t = Triage::start_with(one_second_grace()).await;
    t.s.script(&[("translator.translate", english())]);
    let hanging = ScriptedReply::json(&decision("medium", "technical", false)).for_purpose("supervisor.classify");
    t.s.model.push_reply(hanging.after(Duration::from_secs(60)));
    let request = ticket_request("CUST-003", "exports time out", "stopped-1");
    let mut stream = t.client.clone().triage_ticket(request.clone()).await.unwrap().into_inner();
    let mut ticket_id = None;
    loop {
        match stream.next().await.unwrap().unwrap().payload.unwrap() {
            Payload::Resolution(r) => ticket_id = Some(r.ticket_id),
            Payload::Event(e) if e.node == "supervisor" && matches!(e.kind, Some(Kind::NodeStarted(_))) => break,
            _ => {}
        }
    }
    let caller = tokio::spawn(async move {
        let mut last = None;
        while let Some(item) = stream.next().await {
            last = Some(item);
        }
        last
    });
    // The resumed run starts again from the accepted message: the nodes before the stop wrote
    // nothing durable, so the translator runs again.
    t.s.model.push_reply(ScriptedReply::json(&english()).for_purpose("translator.translate"));
    for reply in resumed {
        t.s.model.push_reply(reply.clone());
    }
    let t = t.restart(common::Options::default()).await;
    let last = caller.await.unwrap();
    let Some(Err(status)) = last else { panic!("the first call ends with an error: {last:?}") };
    assert_eq!(error_info(&status).0, "SHUTTING_DOWN", "{status:?}");
    (t, request, ticket_id.expect("a resolution first"))
}

async fn retry_until_answered(t: &Triage, request: &v1::TriageTicketRequest) -> Outcome {
    for _ in 0..100 {
        match t.triage_request(request.clone()).await {
            Ok(out) => return out,
            Err(status) if matches!(status.code(), Code::Aborted | Code::Unavailable) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(status) => panic!("{status:?}"),
        }
    }
    panic!("the retry was never answered");
}

async fn archived(t: &Triage, customer: &str) -> Vec<v1::Ticket> {
    let request = v1::ListTicketsRequest { customer_id: customer.into(), ..Default::default() };
    t.client.clone().list_tickets(request).await.unwrap().into_inner().tickets
}

#[tokio::test]
async fn a_keyed_ticket_finished_after_a_restart_is_replayed_to_the_retry_not_triaged_again() {
    let resumed = [
        ScriptedReply::json(&decision("medium", "technical", false)).for_purpose("supervisor.classify"),
        ScriptedReply::json(&specialist("auto_respond", "Fixed.", &[])).for_purpose("specialist.technical"),
    ];
    let (t, request, ticket_id) = stop_a_keyed_ticket_mid_run(&resumed).await;
    // Start-up recovery finished the run, which archived the ticket; nobody was there to
    // record its outcome under the key but the archiving itself.
    t.s.server().recovered().await;
    let out = retry_until_answered(&t, &request).await;
    assert!(out.result.replayed, "{:?}", out.result);
    assert_eq!(out.result.ticket_id, ticket_id);
    let tickets: Vec<String> = archived(&t, "CUST-003").await.into_iter().map(|t| t.ticket_id).collect();
    assert_eq!(tickets, [ticket_id], "one ticket");
    assert!(t.active("CUST-003").await.is_empty());
}

#[tokio::test]
async fn a_keyed_ticket_kept_active_by_a_run_finished_after_a_restart_is_replayed_not_matched_again() {
    let resumed = [
        ScriptedReply::json(&decision("medium", "technical", false)).for_purpose("supervisor.classify"),
        ScriptedReply::json(&specialist("route_specialist", "An engineer will look.", &[]))
            .for_purpose("specialist.technical"),
    ];
    let (t, request, ticket_id) = stop_a_keyed_ticket_mid_run(&resumed).await;
    // Start-up recovery finished the run and the ticket stays active: nothing archived it, and
    // nobody was there to record its outcome under the key.
    t.s.server().recovered().await;
    let calls = t.s.model.requests().len();
    // No matcher reply is scripted: matching the retry as a new message would fail it.
    let out = retry_until_answered(&t, &request).await;
    assert!(out.matching.is_empty(), "not matched again");
    assert_eq!(out.resolution.ticket_id, ticket_id);
    assert!(out.result.replayed, "{:?}", out.result);
    assert_eq!(out.result.ticket_id, ticket_id);
    assert_eq!(t.s.model.requests().len(), calls, "no model call");
    let active: Vec<String> = t.active("CUST-003").await.into_iter().map(|t| t.ticket_id).collect();
    assert_eq!(active, [ticket_id], "one ticket");
    let conversation = t.get("CUST-003", &active[0]).await.unwrap();
    let customer_messages = conversation.messages.iter().filter(|m| m.role == v1::Role::User as i32).count();
    assert_eq!(customer_messages, 1, "the message once");
}

#[tokio::test]
async fn a_retry_while_a_keyed_ticket_is_being_resumed_goes_to_that_ticket_not_the_matcher() {
    let slow = ScriptedReply::json(&decision("medium", "technical", false)).for_purpose("supervisor.classify");
    let resumed = [
        slow.after(Duration::from_millis(500)),
        ScriptedReply::json(&specialist("route_specialist", "An engineer will look.", &[]))
            .for_purpose("specialist.technical"),
    ];
    let (t, request, ticket_id) = stop_a_keyed_ticket_mid_run(&resumed).await;
    // No matcher reply is scripted: matching the retry as a new message would fail it.
    let out = retry_until_answered(&t, &request).await;
    assert_eq!(out.resolution.ticket_id, ticket_id);
    assert_eq!(out.result.ticket_id, ticket_id);
    assert!(out.matching.is_empty(), "not matched again");
    let active: Vec<String> = t.active("CUST-003").await.into_iter().map(|t| t.ticket_id).collect();
    assert_eq!(active, [ticket_id], "one ticket");
    let conversation = t.get("CUST-003", &active[0]).await.unwrap();
    let customer_messages = conversation.messages.iter().filter(|m| m.role == v1::Role::User as i32).count();
    assert_eq!(customer_messages, 1, "the message once");
}

#[tokio::test]
async fn an_archived_ticket_left_active_by_a_crash_is_repaired_on_read() {
    let t = Triage::start().await;
    script_english(&t, "medium", "technical", "route_specialist", "Checking.");
    let out = t.triage("CUST-001", "sso configuration help", "").await.unwrap();
    let ticket_id = out.result.ticket_id.clone();
    // What a crash between "archive" and "delete checkpoint" leaves behind.
    let db = t.s.server().database();
    let record = frontdesk_store::CompletedTicket {
        ticket_id: ticket_id.clone(),
        customer_id: "CUST-001".into(),
        thread_id: format!("CUST-001:{ticket_id}"),
        status: "resolved".into(),
        recommended_action: "auto_respond".into(),
        urgency: "medium".into(),
        ticket_type: "technical".into(),
        subject: "Help".into(),
        summary: "sso configuration help".into(),
        suggested_response: "Done.".into(),
        relevant_articles: vec![],
        language: "en".into(),
        result: json!({
            "urgency": "medium", "ticket_type": "technical",
            "extracted_info": {"product_area": "", "issue_type": "", "sentiment": "", "language": "en"},
            "recommended_action": "auto_respond", "suggested_response": "Done.", "suggested_response_english": "Done.",
            "relevant_articles": [], "reasoning": "", "agent": "technical_specialist"
        }),
        run_id: out.result.run_id.clone(),
        kb_results: json!([]),
        created_at: std::time::SystemTime::now(),
        completed_at: std::time::SystemTime::now(),
    };
    db.save_completed_ticket(&record, &[]).await.unwrap();
    assert!(t.active("CUST-001").await.is_empty(), "never both archived and active");
    let thread =
        t.s.server()
            .registry()
            .find::<HostedTriage>()
            .unwrap()
            .desk()
            .runner()
            .state(&format!("CUST-001:{ticket_id}"))
            .await
            .unwrap();
    assert!(thread.is_none(), "the repair deleted the leftover checkpoint");
    assert_eq!(t.get("CUST-001", &ticket_id).await.unwrap().ticket.unwrap().status(), TicketStatus::Resolved);
}

/// A completed ticket is archived as its run completes and its thread erased without waiting
/// for the erase to be durable. What a crash before it is leaves: the run's accepting checkpoint
/// of an archived ticket. Start-up recovery must delete it, not triage the ticket again.
#[tokio::test]
async fn a_crash_before_the_erase_is_durable_does_not_triage_the_ticket_again() {
    use frontdesk_runtime::{Checkpoint, Log, RunMarker, RunStatus, State};
    use frontdesk_workflows::triage::{Author, TicketInfo, TicketMessage, TriageState, TriageUpdate};

    let t = Triage::start().await;
    // The server's own start-up recovery runs in the background: the checkpoint planted below
    // must not be found by it, only by the recovery this test runs.
    t.s.server().recovered().await;
    script_english(&t, "medium", "billing", "auto_respond", "Refunded.");
    let out = t.triage("CUST-001", "refund my invoice", "").await.unwrap();
    let ticket_id = out.result.ticket_id.clone();
    let thread = format!("CUST-001:{ticket_id}");
    let runner = t.s.server().registry().find::<HostedTriage>().unwrap().desk().runner().clone();
    assert!(runner.state(&thread).await.unwrap().is_none(), "archived, so erased");

    let mut state = TriageState::default();
    state.apply(TriageUpdate {
        ticket: Some(TicketInfo {
            ticket_id: ticket_id.clone(),
            customer_id: "CUST-001".into(),
            subject: "Help".into(),
            created_at_ms: 1,
        }),
        messages: Some(Log::append(vec![TicketMessage {
            author: Author::Customer,
            text: "refund my invoice".into(),
            at_ms: 1,
        }])),
        ..Default::default()
    });
    let accepting = Checkpoint {
        thread_id: thread.clone(),
        workflow: "triage".into(),
        version: 1,
        state: serde_json::to_vec(&state).unwrap(),
        next: Some("translator".into()),
        pending: Default::default(),
        run: RunMarker {
            run_id: "crashed".into(),
            idempotency_key: None,
            fingerprint: None,
            status: RunStatus::Running,
            step: 0,
            output: None,
            owner: None,
        },
        created_at: std::time::SystemTime::now(),
    };
    runner.checkpointer().put(&accepting).await.unwrap();
    let calls = t.s.model.requests().len();

    t.s.server().registry().recover().await.unwrap();
    assert!(runner.state(&thread).await.unwrap().is_none(), "the leftover checkpoint is deleted");
    assert_eq!(t.s.model.requests().len(), calls, "the archived ticket is not triaged again");
    let ticket = t.get("CUST-001", &ticket_id).await.unwrap();
    assert_eq!(ticket.ticket.unwrap().status(), TicketStatus::Resolved);
    assert!(t.active("CUST-001").await.is_empty());
}

/// A keyed run that completed its ticket, whose archiving failed as it completed (the handoff
/// kept the final checkpoint) and whose caller went away before archiving it itself, leaves a
/// `completed` checkpoint carrying the request's key and nothing recorded under the key. The
/// retry's repair archives the ticket, records the outcome under the key and replays it: one
/// ticket, no model call.
#[tokio::test]
async fn a_retry_of_a_ticket_whose_archiving_a_repair_finishes_is_replayed_not_triaged_again() {
    use frontdesk_runtime::{Checkpoint, Log, RunMarker, RunStatus, State};
    use frontdesk_workflows::triage::{Author, TicketInfo, TicketMessage, TriageState, TriageUpdate};

    let t = Triage::start().await;
    t.s.server().recovered().await;
    let (customer, message, key, ticket_id) = ("CUST-001", "refund my invoice", "handoff-failed-1", "TKT-5EED0001");
    let request = ticket_request(customer, message, key);
    let thread = format!("{customer}:{ticket_id}");
    let mut state = TriageState::default();
    state.apply(TriageUpdate {
        ticket: Some(TicketInfo {
            ticket_id: ticket_id.into(),
            customer_id: customer.into(),
            subject: "Help".into(),
            created_at_ms: 1,
        }),
        messages: Some(Log::append(vec![TicketMessage { author: Author::Customer, text: message.into(), at_ms: 1 }])),
        triage_result: Some(Some(
            serde_json::from_value(json!({
                "urgency": "medium", "ticket_type": "billing",
                "extracted_info": {"product_area": "billing", "issue_type": "refund", "sentiment": "calm", "language": "en"},
                "recommended_action": "auto_respond", "suggested_response": "Refunded.",
                "suggested_response_english": "Refunded.", "relevant_articles": [], "reasoning": "scripted",
                "agent": "billing_specialist"
            }))
            .unwrap(),
        )),
        ..Default::default()
    });
    // The fingerprint the server computes for `request` (the triage desk's, over the request's
    // customer, message, subject and language).
    let fingerprint = frontdesk_workflows::idempotency::fingerprint(&[
        ("customer_id", customer),
        ("message", message),
        ("subject", "Help"),
        ("language", ""),
    ]);
    let completed = Checkpoint {
        thread_id: thread.clone(),
        workflow: "triage".into(),
        version: 1,
        state: serde_json::to_vec(&state).unwrap(),
        next: None,
        pending: Default::default(),
        run: RunMarker {
            run_id: "completed-unarchived".into(),
            idempotency_key: Some(key.into()),
            fingerprint: Some(fingerprint),
            status: RunStatus::Completed,
            step: 4,
            output: Some("{}".into()),
            owner: None,
        },
        created_at: std::time::SystemTime::now(),
    };
    let runner = t.s.server().registry().find::<HostedTriage>().unwrap().desk().runner().clone();
    runner.checkpointer().put(&completed).await.unwrap();
    let calls = t.s.model.requests().len();

    let out = t.triage_request(request.clone()).await.unwrap();
    assert!(out.result.replayed, "{:?}", out.result);
    assert_eq!(out.result.ticket_id, ticket_id);
    assert_eq!(out.result.run_id, "completed-unarchived");
    assert_eq!(out.result.recommended_action(), RecommendedAction::AutoRespond);
    assert_eq!(t.s.model.requests().len(), calls, "not triaged again");
    let tickets: Vec<String> = archived(&t, customer).await.into_iter().map(|t| t.ticket_id).collect();
    assert_eq!(tickets, [ticket_id], "one ticket");
    assert!(t.active(customer).await.is_empty());
    assert!(runner.state(&thread).await.unwrap().is_none(), "the repair erased the thread");
    // Recorded: the next retry replays it too, without any repair.
    let again = t.triage_request(request).await.unwrap();
    assert!(again.result.replayed);
    assert_eq!(again.result.ticket_id, ticket_id);
}

/// Importing with the caller's ticket id (`triage_as_new_ticket`, what replays and imports use):
/// an id that is active or archived is refused before any model call.
#[tokio::test]
async fn an_imported_ticket_id_that_exists_is_refused_before_any_model_call() {
    use frontdesk_workflows::{triage::TriageRequest, WorkflowError};
    let t = Triage::start().await;
    let desk = t.s.server().registry().find::<HostedTriage>().unwrap().desk().clone();
    let request = |message: &str| TriageRequest {
        customer_id: "CUST-001".into(),
        message: message.into(),
        subject: Some("Imported".into()),
        language: None,
        idempotency_key: None,
    };
    let import = |message: &'static str, id: &'static str| {
        let (desk, request) = (desk.clone(), request(message));
        async move {
            let mut handle = desk.triage_as_new_ticket(&frontdesk_workflows::Tenant::default(), request, id).await?;
            while handle.progress.next().await.is_some() {}
            handle.outcome.await
        }
    };
    t.s.script(&[
        ("translator.translate", english()),
        ("supervisor.classify", decision("medium", "technical", false)),
        ("specialist.technical", specialist("route_specialist", "Checking.", &[])),
        ("translator.translate", english()),
        ("supervisor.classify", decision("low", "billing", false)),
        ("specialist.billing", specialist("auto_respond", "Refunded.", &[])),
    ]);
    let active = import("sso login fails", "UPSTREAM-1").await.unwrap();
    assert_eq!(active.status, frontdesk_workflows::triage::TicketStatus::Active);
    let archived = import("refund my invoice", "UPSTREAM-2").await.unwrap();
    assert_eq!(archived.status, frontdesk_workflows::triage::TicketStatus::Resolved);
    let calls = t.s.model.requests().len();

    for id in ["UPSTREAM-1", "UPSTREAM-2"] {
        let error = import("again", id).await.map(|_| ()).unwrap_err();
        assert!(
            matches!(error, WorkflowError::AlreadyExists { what: "ticket", id: ref got } if got == id),
            "{error:?}"
        );
    }
    assert_eq!(t.s.model.requests().len(), calls, "no model call for a refused import");
    let kept = t.get("CUST-001", "UPSTREAM-1").await.unwrap();
    assert_eq!(kept.messages.len(), 1, "the active ticket is untouched");
    assert_eq!(t.active("CUST-001").await.len(), 1);
}

/// An archived ticket's thread is gone, but the triage workflow still knows it: listing its
/// model calls (none recorded, with the call log off) answers with none, not NOT_FOUND.
#[tokio::test]
async fn an_archived_tickets_thread_is_known_to_list_llm_calls() {
    let t = Triage::start().await;
    script_english(&t, "low", "billing", "auto_respond", "Refund started.");
    let out = t.triage("CUST-003", "refund please", "").await.unwrap();
    assert_eq!(out.result.status(), TicketStatus::Resolved);
    let mut workflows = t.s.client.workflows();
    let thread_id = format!("CUST-003:{}", out.result.ticket_id);
    let request = v1::ListLlmCallsRequest { thread_id, ..Default::default() };
    let listed = workflows.list_llm_calls(request).await.unwrap().into_inner();
    assert!(listed.calls.is_empty());
    let request = v1::ListLlmCallsRequest { thread_id: "CUST-003:TKT-NONE".into(), ..Default::default() };
    assert_eq!(workflows.list_llm_calls(request).await.unwrap_err().code(), Code::NotFound);
}

#[tokio::test]
async fn triage_is_listed_and_described() {
    let t = Triage::start().await;
    let workflows = t.s.client.list_workflows().await.unwrap();
    let triage = workflows.iter().find(|w| w.name == "triage").unwrap();
    assert_eq!(triage.kind(), v1::WorkflowKind::Task);
    // A task workflow has no conversations: addressing it as one is a failed precondition.
    let error = t.s.client.start_conversation("triage", Default::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::FailedPrecondition));
    assert!(error.api().unwrap().is_reason(v1::ErrorReason::NotConversational));
    let graph = t.s.client.describe_workflow("triage").await.unwrap();
    let nodes: Vec<_> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        nodes,
        ["translator", "supervisor", "billing_specialist", "technical_specialist", "general_specialist", "escalate"]
    );
}

/// What a failed new ticket left before its run deleted the thread it created: a `failed`
/// checkpoint of the default state. The repair deletes it on the next read instead of listing an
/// empty ticket (databases written before heal so, or at the start-up sweep).
#[tokio::test]
async fn a_thread_left_without_a_ticket_is_deleted_not_listed() {
    use frontdesk_runtime::{Checkpoint, RunMarker, RunStatus};
    use frontdesk_workflows::triage::TriageState;

    let t = Triage::start().await;
    t.s.server().recovered().await;
    let thread = "CUST-001:TKT-00000001".to_owned();
    let left = Checkpoint {
        thread_id: thread.clone(),
        workflow: "triage".into(),
        version: 2,
        state: serde_json::to_vec(&TriageState::default()).unwrap(),
        next: None,
        pending: Default::default(),
        run: RunMarker {
            run_id: "failed-new".into(),
            idempotency_key: None,
            fingerprint: None,
            status: RunStatus::Failed,
            step: 0,
            output: None,
            owner: None,
        },
        created_at: std::time::SystemTime::now(),
    };
    let runner = t.s.server().registry().find::<HostedTriage>().unwrap().desk().runner().clone();
    let mut first = left.clone();
    first.version = 1;
    first.run.status = RunStatus::Running;
    runner.checkpointer().put(&first).await.unwrap();
    runner.checkpointer().put(&left).await.unwrap();
    assert!(t.active("CUST-001").await.is_empty(), "no empty ticket listed");
    assert!(runner.state(&thread).await.unwrap().is_none(), "the thread is deleted");
}

/// A new ticket whose first run fails rolls back to nothing: no ticket to list or to match
/// against, for the next message and for the request's keyed retry alike.
#[tokio::test]
async fn a_new_ticket_whose_run_failed_leaves_no_ticket_behind() {
    let t = Triage::start().await;
    // Nothing scripted: the translator's call fails the run.
    let Err(failed) = t.triage("CUST-001", "refund my invoice", "failed-new-1").await else { panic!("the run fails") };
    assert_eq!(failed.code(), Code::Internal, "{failed:?}");
    assert!(t.active("CUST-001").await.is_empty(), "no ticket left behind");

    // The retry is a new ticket, with no matching (nothing scripted for the matcher).
    script_english(&t, "medium", "billing", "route_specialist", "Checking.");
    let retried = t.triage("CUST-001", "refund my invoice", "failed-new-1").await.unwrap();
    assert!(retried.matching.is_empty(), "nothing to match against");
    assert!(!retried.resolution.matched_existing);
    assert!(retried.result.ticket_id.starts_with("TKT-"), "{:?}", retried.result.ticket_id);
    let active: Vec<String> = t.active("CUST-001").await.into_iter().map(|t| t.ticket_id).collect();
    assert_eq!(active, [retried.result.ticket_id]);
}
