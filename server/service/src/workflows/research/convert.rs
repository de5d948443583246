//! Research ⇄ proto conversions. Each destructures its source completely, so a field added on
//! either side breaks the build until it is handled here.

use frontdesk_api::v1 as pb;
use frontdesk_workflows::research::{
    Citation, Decision, ExpertAnswer, Message, MessageType, Outcome, Plan, ResearchProgress, ResearchState,
    ResearchView, Step, StepRecord, StepResult, Verdict,
};

use crate::convert::ms_timestamp;

fn ts(ms: i64) -> prost_types::Timestamp {
    ms_timestamp(u64::try_from(ms).unwrap_or(0))
}

fn step(s: Step) -> pb::ResearchStep {
    match s {
        Step::Input => pb::ResearchStep::Input,
        Step::Planner => pb::ResearchStep::Planner,
        Step::CriticPlanner => pb::ResearchStep::CriticPlanner,
        Step::Researcher => pb::ResearchStep::Researcher,
        Step::CriticResearcher => pb::ResearchStep::CriticResearcher,
        Step::Expert => pb::ResearchStep::Expert,
        Step::CriticExpert => pb::ResearchStep::CriticExpert,
        Step::Finalizer => pb::ResearchStep::Finalizer,
        Step::Error => pb::ResearchStep::Error,
    }
}

fn message(m: Message) -> pb::OrchestratorMessage {
    let Message { sender, receiver, kind, content, step_id } = m;
    let kind = match kind {
        MessageType::Instruction => "instruction",
        MessageType::Response => "response",
    };
    pb::OrchestratorMessage { sender, receiver, r#type: kind.to_owned(), content, step_id }
}

fn plan(p: Plan) -> pb::Plan {
    let Plan { research_steps, expert_steps, attempt } = p;
    pb::Plan { research_steps, expert_steps, attempt }
}

fn citation(c: Citation) -> pb::Citation {
    let Citation { document_id, title, passage, text } = c;
    pb::Citation { document_id, document_title: title, passage, text }
}

fn result(step_id: u32, step: String, r: StepResult, attempt: u32) -> pb::ResearchResult {
    let StepResult { answer, citations } = r;
    pb::ResearchResult { step_id, step, answer, citations: citations.into_iter().map(citation).collect(), attempt }
}

fn verdict(critic: Step, v: Verdict, step_id: Option<u32>, retry_count: u32) -> pb::CriticVerdict {
    let Verdict { decision, feedback } = v;
    pb::CriticVerdict {
        critic: critic.as_str().to_owned(),
        decision: match decision {
            Decision::Approve => pb::CriticDecision::Approve,
            Decision::Reject => pb::CriticDecision::Reject,
        } as i32,
        feedback,
        step_id,
        retry_count,
    }
}

fn expert(e: ExpertAnswer) -> pb::ExpertAnswer {
    let ExpertAnswer { answer, reasoning, attempt, transcript: _ } = e;
    pb::ExpertAnswer { answer, reasoning, attempt }
}

pub fn research(view: ResearchView) -> pb::Research {
    let ResearchView { research_id, state, updated_at_ms } = view;
    let ResearchState {
        question,
        corpus,
        retry_limit,
        retry_count,
        current_step,
        messages,
        plan: the_plan,
        plan_verdict: _,
        research: steps,
        expert: the_expert,
        expert_verdict: _,
        final_answer,
        final_reasoning_trace,
        outcome,
        error,
        error_component,
        created_at_ms,
    } = state;
    let results = steps
        .entries
        .into_values()
        .filter_map(|StepRecord { index, description, result: r, attempts, .. }| {
            r.map(|r| result(index, description, r, attempts))
        })
        .collect();
    pb::Research {
        research_id,
        question,
        corpus,
        outcome: match outcome {
            Outcome::Running => pb::ResearchOutcome::Running,
            Outcome::Answered => pb::ResearchOutcome::Answered,
            Outcome::RetryLimit => pb::ResearchOutcome::RetryLimit,
            Outcome::Failed => pb::ResearchOutcome::Failed,
        } as i32,
        current_step: step(current_step) as i32,
        retry_count,
        retry_limit,
        plan: the_plan.map(plan),
        results,
        expert: the_expert.map(expert),
        final_answer: final_answer.unwrap_or_default(),
        final_reasoning_trace: final_reasoning_trace.unwrap_or_default(),
        error: error.unwrap_or_default(),
        error_component: error_component.unwrap_or_default(),
        messages: messages.into_iter().map(message).collect(),
        created_at: Some(ts(created_at_ms)),
        updated_at: Some(ts(updated_at_ms)),
    }
}

pub fn progress(p: ResearchProgress) -> pb::AskResponse {
    use pb::ask_response::Payload;
    let payload = match p {
        ResearchProgress::Event(e) => Payload::Event(crate::convert::event(e)),
        ResearchProgress::Message(m) => Payload::Message(message(m)),
        ResearchProgress::Plan(p) => Payload::Plan(plan(p)),
        ResearchProgress::Result { step_id, step, result: r, attempt } => {
            Payload::ResearchResult(result(step_id, step, r, attempt))
        }
        ResearchProgress::Verdict { critic, verdict: v, step_id, retry_count } => {
            Payload::CriticDecision(verdict(critic, v, step_id, retry_count))
        }
        ResearchProgress::Expert(e) => Payload::ExpertAnswer(expert(e)),
    };
    pb::AskResponse { payload: Some(payload) }
}

pub fn last(view: ResearchView) -> pb::AskResponse {
    pb::AskResponse { payload: Some(pb::ask_response::Payload::Research(research(view))) }
}
