//! Workflow-agnostic domain ⇄ proto conversions: events, messages, conversations, graphs,
//! timestamps. A workflow's own conversions live beside its adapter (`workflows/<name>/`).
//! Each destructures its source completely, so a field added on either side breaks the build
//! until it is handled here.

use std::time::{Duration, SystemTime};

use frontdesk_api::v1 as pb;
use frontdesk_runtime::{EdgeInfo, Event, EventKind, GraphDescription, LlmCallInfo, NodeInfo, Usage};
use frontdesk_workflows::{ConversationView, Message, Role, TurnOutcome};

use crate::error::{classify, reason_name};

pub fn timestamp(time: SystemTime) -> prost_types::Timestamp {
    prost_types::Timestamp::from(time)
}

pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration { seconds: i64::MAX, nanos: 0 })
}

pub fn usage(u: Usage) -> pb::Usage {
    let Usage { prompt_tokens, completion_tokens, cost_usd } = u;
    pb::Usage { prompt_tokens, completion_tokens, cost_usd }
}

/// The reason of a failure kind, as events carry it (without the ERROR_REASON_ prefix).
fn kind_reason(kind: frontdesk_runtime::FailureKind) -> String {
    reason_name(classify(kind).1).to_owned()
}

pub fn event(e: Event) -> pb::RunEvent {
    use pb::run_event::Kind;
    let Event { run_id, event_id, time, node, task, kind } = e;
    let kind = match kind {
        EventKind::RunStarted { thread_id, workflow, resumed } => {
            // The caller's id, not the tenant's storage key (only the owner sees a run's events).
            let thread_id = frontdesk_workflows::tenant::caller_id(&thread_id).to_owned();
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
        EventKind::LlmCall(LlmCallInfo { model, purpose, usage: u, latency, attempts, error }) => {
            Kind::LlmCallFinished(pb::LlmCallFinished {
                model,
                usage: Some(usage(u)),
                latency: Some(duration(latency)),
                purpose,
                attempts,
                error: error.unwrap_or_default(),
            })
        }
        EventKind::ToolCalled { call_id, name, arguments_json } => {
            Kind::ToolCalled(pb::ToolCalled { call_id, name, arguments_json })
        }
        EventKind::ToolReturned { call_id, name, result_json, is_error, latency } => {
            Kind::ToolReturned(pb::ToolReturned {
                call_id,
                name,
                result_json,
                is_error,
                latency: Some(duration(latency)),
            })
        }
        EventKind::NodeRetrying { step, attempt, max_attempts, kind, message, delay } => {
            Kind::NodeRetrying(pb::NodeRetrying {
                step,
                attempt,
                max_attempts,
                reason: kind_reason(kind),
                message,
                delay: Some(duration(delay)),
            })
        }
        EventKind::NodeFailed { step, kind, message, fallback } => {
            Kind::NodeFailed(pb::NodeFailed { step, reason: kind_reason(kind), message, fallback_node: fallback })
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
        EventKind::Interrupted { pending, usage: u } => {
            #[allow(deprecated)]
            let interrupted = pb::RunInterrupted {
                reason: String::new(),
                payload_json: String::new(),
                pending_interrupt_ids: pending,
                usage: Some(usage(u)),
            };
            Kind::RunInterrupted(interrupted)
        }
        EventKind::RunFinished { steps, duration: d, usage: u, output_json } => Kind::RunFinished(pb::RunFinished {
            steps,
            duration: Some(duration(d)),
            usage: Some(usage(u)),
            output_json,
        }),
        EventKind::RunFailed { kind, message, usage: u } => {
            let (code, reason, _) = classify(kind);
            Kind::RunFailed(pb::RunFailed {
                code: code as i32,
                message,
                reason: reason_name(reason).to_owned(),
                usage: Some(usage(u)),
            })
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

/// A time kept as milliseconds since the Unix epoch.
pub fn ms_timestamp(ms: u64) -> prost_types::Timestamp {
    timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
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
        create_time: Some(ms_timestamp(at_ms)),
        node: node.unwrap_or_default(),
    }
}

/// A conversation and its messages (empty unless the view carries them). Its state is already
/// in wire form (`workflows::ProtoState`).
pub fn conversation(view: ConversationView<pb::conversation::State>) -> (pb::Conversation, Vec<pb::Message>) {
    let ConversationView { id, workflow, created_at, updated_at, version, turn_count, state: view_state, messages } =
        view;
    let conversation = pb::Conversation {
        conversation_id: id,
        workflow,
        create_time: Some(timestamp(created_at)),
        update_time: Some(timestamp(updated_at)),
        turn_count,
        version,
        state: Some(view_state),
    };
    (conversation, messages.into_iter().map(message).collect())
}

pub fn turn_result(outcome: TurnOutcome<pb::conversation::State>) -> pb::TurnResult {
    let TurnOutcome { run_id, reply, conversation: view, replayed } = outcome;
    pb::TurnResult { run_id, reply: reply.map(message), conversation: Some(conversation(view).0), replayed }
}

pub fn graph(description: GraphDescription, workflow: pb::Workflow) -> pb::DescribeWorkflowResponse {
    let GraphDescription { name: _, nodes, edges, mermaid, failure_node } = description;
    pb::DescribeWorkflowResponse {
        workflow: Some(workflow),
        nodes: nodes
            .into_iter()
            .map(|NodeInfo { name, description, fan_out, effects }| pb::GraphNode {
                name,
                description,
                fan_out,
                effects,
            })
            .collect(),
        edges: edges
            .into_iter()
            .map(|EdgeInfo { source, target, conditional }| pb::GraphEdge { source, target, conditional })
            .collect(),
        mermaid,
        failure_node: failure_node.unwrap_or_default(),
    }
}
