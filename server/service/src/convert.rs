//! Domain ⇄ proto conversions. Each destructures its source completely, so a field added on
//! either side breaks the build until it is handled here.

use std::time::{Duration, SystemTime};

use frontdesk_api::v1 as pb;
use frontdesk_runtime::{EdgeInfo, Event, EventKind, GraphDescription, LlmCallInfo, NodeInfo, Usage};
use frontdesk_workflows::{
    intake::{IntakeView, Mode},
    ConversationView, Message, Role, StateView, TurnOutcome,
};

use crate::error::classify;

pub fn timestamp(time: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(time)
}

pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration { seconds: i64::MAX, nanos: 0 })
}

fn usage(u: Usage) -> pb::Usage {
    let Usage { prompt_tokens, completion_tokens, cost_usd } = u;
    pb::Usage { prompt_tokens, completion_tokens, cost_usd }
}

/// An ErrorReason value name as events carry it (without the ERROR_REASON_ prefix).
fn reason_name(kind: frontdesk_runtime::FailureKind) -> String {
    let (_, reason, _) = classify(kind);
    reason.as_str_name().trim_start_matches("ERROR_REASON_").to_owned()
}

pub fn event(e: Event) -> pb::RunEvent {
    use pb::run_event::Kind;
    let Event { run_id, event_id, time, node, task, kind } = e;
    let kind = match kind {
        EventKind::RunStarted { thread_id, workflow, resumed } => {
            Kind::RunStarted(pb::RunStarted { thread_id, workflow, resumed })
        }
        EventKind::NodeStarted { step } => Kind::NodeStarted(pb::NodeStarted { step }),
        EventKind::NodeFinished { step, update_json, duration: d, next } => Kind::NodeFinished(pb::NodeFinished {
            step,
            update_json,
            duration: Some(duration(d)),
            next_node: next.unwrap_or_default(),
        }),
        EventKind::TokenDelta { text } => Kind::TokenDelta(pb::TokenDelta { text }),
        EventKind::LlmCall(LlmCallInfo { model, purpose, usage: u, latency, attempts }) => {
            Kind::LlmCallFinished(pb::LlmCallFinished {
                model,
                usage: Some(usage(u)),
                latency: Some(duration(latency)),
                purpose,
                attempts,
            })
        }
        EventKind::ToolCalled { call_id, name, arguments_json } => {
            Kind::ToolCalled(pb::ToolCalled { call_id, name, arguments_json })
        }
        EventKind::ToolReturned { call_id, name, result_json, is_error } => {
            Kind::ToolReturned(pb::ToolReturned { call_id, name, result_json, is_error })
        }
        EventKind::NodeRetrying { step, attempt, max_attempts, kind, message, delay } => {
            Kind::NodeRetrying(pb::NodeRetrying {
                step,
                attempt,
                max_attempts,
                reason: reason_name(kind),
                message,
                delay: Some(duration(delay)),
            })
        }
        EventKind::NodeFailed { step, kind, message, fallback } => {
            Kind::NodeFailed(pb::NodeFailed { step, reason: reason_name(kind), message, fallback_node: fallback })
        }
        EventKind::TasksDispatched { step, tasks, already_done } => {
            Kind::TasksDispatched(pb::TasksDispatched { step, tasks, already_done })
        }
        EventKind::TaskFinished { step, update_json, duration: d } => {
            Kind::TaskFinished(pb::TaskFinished { step, update_json, duration: Some(duration(d)) })
        }
        EventKind::InterruptRaised { interrupt_id, reason, payload_json } => {
            Kind::InterruptRaised(pb::InterruptRaised { interrupt_id, reason, payload_json })
        }
        EventKind::Interrupted { pending } => {
            #[allow(deprecated)]
            let interrupted = pb::RunInterrupted {
                reason: String::new(),
                payload_json: String::new(),
                pending_interrupt_ids: pending,
            };
            Kind::RunInterrupted(interrupted)
        }
        EventKind::RunFinished { steps, duration: d, usage: u, output_json } => Kind::RunFinished(pb::RunFinished {
            steps,
            duration: Some(duration(d)),
            usage: Some(usage(u)),
            output_json,
        }),
        EventKind::RunFailed { kind, message } => {
            let (code, _, _) = classify(kind);
            Kind::RunFailed(pb::RunFailed { code: code as i32, message, reason: reason_name(kind) })
        }
    };
    pb::RunEvent {
        run_id: run_id.to_string(),
        event_id,
        time: Some(timestamp(time)),
        node: node.map(|n| n.to_string()).unwrap_or_default(),
        task,
        kind: Some(kind),
    }
}

pub fn message(m: Message) -> pb::Message {
    let Message { id, role, text, node, at_ms } = m;
    pb::Message {
        message_id: id,
        role: match role {
            Role::User => pb::Role::User,
            Role::Assistant => pb::Role::Assistant,
            Role::System => pb::Role::System,
        } as i32,
        text,
        create_time: Some(timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(at_ms))),
        node: node.unwrap_or_default(),
    }
}

fn intake_mode(mode: Mode) -> pb::IntakeMode {
    match mode {
        Mode::Chat => pb::IntakeMode::Chat,
        Mode::Elicitation => pb::IntakeMode::Elicitation,
        Mode::TeamMatching => pb::IntakeMode::TeamMatching,
        Mode::Review => pb::IntakeMode::Review,
    }
}

fn state(view: StateView) -> pb::conversation::State {
    match view {
        StateView::Intake(IntakeView {
            mode,
            collected_fields,
            fields_marked_unknown,
            missing_fields,
            identified_team_id,
            identified_team_name,
            submission_url,
            submission_error,
        }) => pb::conversation::State::Intake(pb::IntakeState {
            mode: intake_mode(mode) as i32,
            collected_fields: collected_fields.into_iter().collect(),
            fields_marked_unknown,
            missing_fields,
            identified_team_id: identified_team_id.unwrap_or_default(),
            identified_team_name: identified_team_name.unwrap_or_default(),
            submission_url: submission_url.unwrap_or_default(),
            submission_error: submission_error.unwrap_or_default(),
        }),
    }
}

/// A conversation and its messages (empty unless the view carries them).
pub fn conversation(view: ConversationView) -> (pb::Conversation, Vec<pb::Message>) {
    let ConversationView { id, workflow, created_at, updated_at, version, turn_count, state: view_state, messages } =
        view;
    let conversation = pb::Conversation {
        conversation_id: id,
        workflow,
        create_time: Some(timestamp(created_at)),
        update_time: Some(timestamp(updated_at)),
        turn_count,
        version,
        state: Some(state(view_state)),
    };
    (conversation, messages.into_iter().map(message).collect())
}

pub fn turn_result(outcome: TurnOutcome) -> pb::TurnResult {
    let TurnOutcome { run_id, reply, conversation: view, replayed } = outcome;
    pb::TurnResult { run_id, reply: reply.map(message), conversation: Some(conversation(view).0), replayed }
}

pub fn graph(description: GraphDescription, workflow: pb::Workflow) -> pb::DescribeWorkflowResponse {
    let GraphDescription { name: _, nodes, edges, mermaid, failure_node } = description;
    pb::DescribeWorkflowResponse {
        workflow: Some(workflow),
        nodes: nodes
            .into_iter()
            .map(|NodeInfo { name, description, fan_out }| pb::GraphNode { name, description, fan_out })
            .collect(),
        edges: edges
            .into_iter()
            .map(|EdgeInfo { source, target, conditional }| pb::GraphEdge { source, target, conditional })
            .collect(),
        mermaid,
        failure_node: failure_node.unwrap_or_default(),
    }
}

// ---------------------------------------------------------------------------------------------
// triage

use frontdesk_workflows::triage::{
    self as triage, Author, MatchConfidence, RecommendedAction, Resolution, TicketMessage, TicketSummary, TicketType,
    TicketView, TriageOutcome, TriageOutput, Urgency,
};

fn ms_timestamp(ms: u64) -> prost_types::Timestamp {
    timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}

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
    let TicketView { summary, messages, english, language } = view;
    let result = summary.result.clone().map(|r| {
        let output = TriageOutput {
            ticket_id: summary.ticket_id.clone(),
            customer_id: summary.customer_id.clone(),
            language: language.clone(),
            requires_escalation: r.recommended_action == RecommendedAction::EscalateHuman && r.agent == "escalate",
            kb_results: Vec::new(),
            result: Some(r),
        };
        result_fields(output, summary.status)
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
