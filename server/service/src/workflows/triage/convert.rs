//! Triage ⇄ proto conversions. Each destructures its source completely, so a field added on
//! either side breaks the build until it is handled here.

use frontdesk_api::v1 as pb;
use frontdesk_workflows::triage::{
    self as triage, Author, MatchConfidence, RecommendedAction, Resolution, TicketMessage, TicketSummary, TicketType,
    TicketView, TriageOutcome, TriageOutput, Urgency,
};

use crate::convert::{ms_timestamp, usage};

fn urgency(u: Urgency) -> pb::Urgency {
    match u {
        Urgency::Low => pb::Urgency::Low,
        Urgency::Medium => pb::Urgency::Medium,
        Urgency::High => pb::Urgency::High,
        Urgency::Critical => pb::Urgency::Critical,
    }
}

fn ticket_type(t: TicketType) -> pb::TicketType {
    match t {
        TicketType::Billing => pb::TicketType::Billing,
        TicketType::Technical => pb::TicketType::Technical,
        TicketType::General => pb::TicketType::General,
    }
}

fn action(a: RecommendedAction) -> pb::RecommendedAction {
    match a {
        RecommendedAction::AutoRespond => pb::RecommendedAction::AutoRespond,
        RecommendedAction::RouteSpecialist => pb::RecommendedAction::RouteSpecialist,
        RecommendedAction::EscalateHuman => pb::RecommendedAction::EscalateHuman,
    }
}

fn ticket_status(s: triage::TicketStatus) -> pb::TicketStatus {
    match s {
        triage::TicketStatus::Active => pb::TicketStatus::Active,
        triage::TicketStatus::Resolved => pb::TicketStatus::Resolved,
        triage::TicketStatus::Escalated => pb::TicketStatus::Escalated,
    }
}

pub fn resolution(r: Resolution) -> pb::TicketResolution {
    let Resolution { ticket_id, matched_existing, confidence, reasoning, candidates, usage: u } = r;
    pb::TicketResolution {
        ticket_id,
        matched_existing,
        confidence: match confidence {
            None => pb::MatchConfidence::Unspecified,
            Some(MatchConfidence::High) => pb::MatchConfidence::High,
            Some(MatchConfidence::Medium) => pb::MatchConfidence::Medium,
            Some(MatchConfidence::Low) => pb::MatchConfidence::Low,
        } as i32,
        reasoning,
        candidate_ticket_ids: candidates,
        usage: u.map(usage),
    }
}

fn result_fields(out: TriageOutput, status: triage::TicketStatus) -> pb::TriageResult {
    let TriageOutput { ticket_id, customer_id, language, requires_escalation, kb_results, result } = out;
    let mut pb_result = pb::TriageResult {
        ticket_id,
        customer_id,
        language,
        requires_escalation,
        status: ticket_status(status) as i32,
        kb_results: kb_results
            .into_iter()
            .map(|triage::KbResult { article_id, title, score }| pb::KbArticleHit { article_id, title, score })
            .collect(),
        ..Default::default()
    };
    if let Some(triage::TriageResult {
        urgency: u,
        ticket_type: t,
        extracted_info,
        recommended_action,
        suggested_response,
        suggested_response_english,
        relevant_articles,
        reasoning,
        agent: _,
    }) = result
    {
        let triage::ExtractedInfo { product_area, issue_type, sentiment, language } = extracted_info;
        pb_result.urgency = urgency(u) as i32;
        pb_result.ticket_type = ticket_type(t) as i32;
        pb_result.recommended_action = action(recommended_action) as i32;
        pb_result.suggested_response = suggested_response;
        pb_result.suggested_response_english = suggested_response_english;
        pb_result.relevant_articles = relevant_articles;
        pb_result.reasoning = reasoning;
        pb_result.extracted_info = Some(pb::ExtractedInfo { product_area, issue_type, sentiment, language });
    }
    pb_result
}

pub fn triage_result(outcome: TriageOutcome) -> pb::TriageResult {
    let TriageOutcome { run_id, output, status, replayed } = outcome;
    pb::TriageResult { run_id, replayed, ..result_fields(output, status) }
}

pub fn ticket(summary: TicketSummary) -> pb::Ticket {
    let TicketSummary { ticket_id, customer_id, status, subject, result, created_at_ms, updated_at_ms } = summary;
    pb::Ticket {
        ticket_id,
        customer_id,
        status: ticket_status(status) as i32,
        subject,
        urgency: result.as_ref().map_or(pb::Urgency::Unspecified, |r| urgency(r.urgency)) as i32,
        ticket_type: result.as_ref().map_or(pb::TicketType::Unspecified, |r| ticket_type(r.ticket_type)) as i32,
        recommended_action: result.as_ref().map_or(pb::RecommendedAction::Unspecified, |r| action(r.recommended_action))
            as i32,
        create_time: Some(ms_timestamp(created_at_ms)),
        update_time: Some(ms_timestamp(updated_at_ms)),
    }
}

pub fn ticket_view(view: TicketView) -> pb::GetTicketResponse {
    let TicketView { summary, messages, english, language, run_id, kb_results } = view;
    let result = summary.result.clone().map(|r| {
        let output = TriageOutput {
            ticket_id: summary.ticket_id.clone(),
            customer_id: summary.customer_id.clone(),
            language: language.clone(),
            requires_escalation: r.recommended_action == RecommendedAction::EscalateHuman && r.agent == "escalate",
            kb_results,
            result: Some(r),
        };
        pb::TriageResult { run_id, ..result_fields(output, summary.status) }
    });
    let mut customer_index = 0;
    let messages = messages
        .into_iter()
        .map(|TicketMessage { author, text, at_ms }| {
            let (role, english_text) = match author {
                Author::Customer => {
                    let english_text = english.get(customer_index).filter(|e| **e != text).cloned().unwrap_or_default();
                    customer_index += 1;
                    (pb::Role::User, english_text)
                }
                Author::Assistant => (pb::Role::Assistant, String::new()),
            };
            pb::TicketMessage { role: role as i32, text, english_text, create_time: Some(ms_timestamp(at_ms)) }
        })
        .collect();
    pb::GetTicketResponse { ticket: Some(ticket(summary)), messages, result }
}
