//! The orchestrator and its agents. The orchestrator reads what the step that just ran
//! produced, decides the next step (counting a critic's rejection against the retry limit) and
//! sends the agent its instruction; the graph's router runs that agent, which answers back.

use async_trait::async_trait;
use frontdesk_llm::{ChatMessage, ChatRequest};
use frontdesk_runtime::{Keyed, Node, NodeContext, NodeError, NodeErrorKind, NodeOutput, TaskNode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tracing::info;

use super::{
    calculator::{self, CalculateArgs},
    corpus::{self, Corpus, ReadArgs, SearchArgs},
    prompts,
    types::*,
    ResearchDeps, ResearchState, ResearchUpdate,
};
use crate::{
    llm_node,
    tool_loop::{self, ToolResult, Tools},
};

pub const ORCHESTRATOR: &str = "orchestrator";
pub const PLANNER: &str = "planner";
pub const CRITIC_PLANNER: &str = "critic_planner";
pub const RESEARCHER: &str = "researcher";
pub const CRITIC_RESEARCHER: &str = "critic_researcher";
pub const EXPERT: &str = "expert";
pub const CRITIC_EXPERT: &str = "critic_expert";
pub const FINALIZER: &str = "finalizer";
pub const ERROR_HANDLER: &str = "error_handler";

/// Token budgets below cover each reply's longest strings (the schemas' `maxLength`s) at a token
/// per character, which a small model can spend: a reply cut short is invalid output.
///
/// Rounds of tool calls a researcher or the expert may make before answering.
const TOOL_ROUNDS: usize = 3;
/// Search hits a researcher sees per search.
const HITS: usize = 5;

type Output = Result<NodeOutput<ResearchUpdate>, NodeError>;

fn internal(message: impl Into<String>) -> NodeError {
    NodeError::new(NodeErrorKind::Internal, message)
}

/// The node that runs a step.
pub fn node_of(step: Step) -> &'static str {
    match step {
        Step::Input => ORCHESTRATOR,
        Step::Planner => PLANNER,
        Step::CriticPlanner => CRITIC_PLANNER,
        Step::Researcher => RESEARCHER,
        Step::CriticResearcher => CRITIC_RESEARCHER,
        Step::Expert => EXPERT,
        Step::CriticExpert => CRITIC_EXPERT,
        Step::Finalizer => FINALIZER,
        Step::Error => ERROR_HANDLER,
    }
}

/// The research steps in plan order.
fn steps(state: &ResearchState) -> impl Iterator<Item = &StepRecord> {
    state.research.entries.values()
}

fn findings(state: &ResearchState) -> String {
    steps(state)
        .filter_map(|s| s.result.as_ref().map(|r| format!("{}. {}: {}\n", s.index + 1, s.description, r.answer)))
        .collect()
}

// ---------------------------------------------------------------------------------------------

/// Step determination and execution: what ran, what its critic decided, what runs next.
pub struct Orchestrator;

#[async_trait]
impl Node<ResearchState> for Orchestrator {
    fn description(&self) -> &str {
        "Decides the next step from what ran and its critic's decision, counts rejections against the retry \
         limit, and instructs the next agent"
    }

    async fn run(&self, state: &ResearchState, _ctx: &NodeContext) -> Output {
        let mut update = ResearchUpdate::default();
        let mut messages = Vec::new();
        let mut retry_count = state.retry_count;
        let plan = state.plan.clone().unwrap_or_default();
        let next = match state.current_step {
            Step::Input => {
                messages.push(Message::instruction(
                    Step::Planner,
                    format!("Develop a logical plan to answer: {}", state.question),
                    None,
                ));
                Step::Planner
            }
            Step::Planner => {
                messages.push(Message::instruction(
                    Step::CriticPlanner,
                    format!("Review plan: {}", plan.render()),
                    None,
                ));
                Step::CriticPlanner
            }
            Step::CriticPlanner => match &state.plan_verdict {
                Some(Verdict { decision: Decision::Approve, .. }) if !plan.research_steps.is_empty() => {
                    let records = plan.research_steps.iter().enumerate().map(|(i, step)| {
                        let index = u32::try_from(i).unwrap_or(u32::MAX);
                        let instruction = format!("Research: {step}");
                        messages.push(Message::instruction(Step::Researcher, instruction.clone(), Some(index)));
                        let record = StepRecord {
                            index,
                            description: step.clone(),
                            instruction,
                            attempts: 0,
                            result: None,
                            verdict: None,
                            transcript: Vec::new(),
                        };
                        (index, record)
                    });
                    update.research = Some(Keyed::replace(records.collect::<Vec<_>>()));
                    Step::Researcher
                }
                Some(Verdict { decision: Decision::Approve, .. }) => {
                    messages.push(Message::instruction(
                        Step::Expert,
                        format!("Perform steps: {}", plan.expert_steps.join(" ")),
                        None,
                    ));
                    Step::Expert
                }
                Some(Verdict { decision: Decision::Reject, feedback }) => {
                    retry_count += 1;
                    messages.push(Message::instruction(Step::Planner, feedback.clone(), None));
                    Step::Planner
                }
                None => return Err(internal("the planner's critic gave no verdict")),
            },
            Step::Researcher => {
                for record in steps(state).filter(|s| s.needs_review()) {
                    let answer = record.result.as_ref().map(|r| r.answer.as_str()).unwrap_or_default();
                    messages.push(Message::instruction(
                        Step::CriticResearcher,
                        format!("Review research: {answer}"),
                        Some(record.index),
                    ));
                }
                Step::CriticResearcher
            }
            Step::CriticResearcher => {
                let mut rejected = Vec::new();
                for record in steps(state) {
                    if let Some(Verdict { decision: Decision::Reject, feedback }) = &record.verdict {
                        retry_count += 1;
                        messages.push(Message::instruction(Step::Researcher, feedback.clone(), Some(record.index)));
                        let mut retry = record.clone();
                        retry.instruction = feedback.clone();
                        rejected.push((record.index, retry));
                    }
                }
                if steps(state).all(StepRecord::approved) {
                    messages.push(Message::instruction(
                        Step::Expert,
                        format!("Perform steps: {}", plan.expert_steps.join(" ")),
                        None,
                    ));
                    Step::Expert
                } else {
                    if !rejected.is_empty() {
                        update.research = Some(Keyed::merge(rejected));
                    } else if let Some(next) = steps(state).find(|s| s.needs_research()) {
                        // Sequential research: the next step of the plan.
                        messages.push(Message::instruction(
                            Step::Researcher,
                            next.instruction.clone(),
                            Some(next.index),
                        ));
                    }
                    Step::Researcher
                }
            }
            Step::Expert => {
                let answer = state.expert.as_ref().map(|e| e.answer.as_str()).unwrap_or_default();
                messages.push(Message::instruction(
                    Step::CriticExpert,
                    format!("Review expert answer: {answer}"),
                    None,
                ));
                Step::CriticExpert
            }
            Step::CriticExpert => match &state.expert_verdict {
                Some(Verdict { decision: Decision::Approve, .. }) => {
                    messages.push(Message::instruction(
                        Step::Finalizer,
                        "Generate final answer and reasoning trace",
                        None,
                    ));
                    Step::Finalizer
                }
                Some(Verdict { decision: Decision::Reject, feedback }) => {
                    retry_count += 1;
                    messages.push(Message::instruction(Step::Expert, feedback.clone(), None));
                    Step::Expert
                }
                None => return Err(internal("the expert's critic gave no verdict")),
            },
            Step::Finalizer | Step::Error => return Err(internal("the orchestrator runs no step after the finalizer")),
        };
        let next = if retry_count >= state.retry_limit && next != Step::Finalizer {
            info!(thread_id = %_ctx.thread_id(), retry_count, "retry limit reached");
            update.outcome = Some(Outcome::RetryLimit);
            update.final_answer = Some(Some(NOT_ANSWERED.into()));
            update.final_reasoning_trace = Some(Some(NOT_ANSWERED.into()));
            messages.push(Message::instruction(
                Step::Finalizer,
                format!(
                    "The retry limit of {} was reached. Generate final answer and reasoning trace",
                    state.retry_limit
                ),
                None,
            ));
            Step::Finalizer
        } else {
            next
        };
        update.retry_count = Some(retry_count);
        update.current_step = Some(next);
        update.messages = Some(messages);
        Ok(NodeOutput::update(update))
    }
}

// ---------------------------------------------------------------------------------------------

/// The instructions the orchestrator sent `to`, oldest first: the agent's view of the
/// conversation (a retry sees the critic's feedback after the first instruction).
fn instructions(state: &ResearchState, to: Step, step_id: Option<u32>) -> Vec<ChatMessage> {
    state
        .messages
        .iter()
        .filter(|m| m.receiver == to.as_str() && m.kind == MessageType::Instruction && m.step_id == step_id)
        .map(|m| ChatMessage::user(m.content.clone()))
        .collect()
}

/// A plan's limits, as its schema states them (`PlanReply`). A model endpoint that ignores the
/// schema is not held to them, so a plan is checked against them too.
pub const MAX_RESEARCH_STEPS: usize = 5;
pub const MAX_EXPERT_STEPS: usize = 5;

#[derive(Debug, Deserialize, JsonSchema)]
struct PlanReply {
    /// Research steps: facts to look up in the documents; empty when none are needed.
    #[schemars(length(max = 5), inner(length(max = 160)))]
    research_steps: Vec<String>,
    /// Reasoning or calculation steps that answer the question from the research.
    #[schemars(length(min = 1, max = 5), inner(length(max = 160)))]
    expert_steps: Vec<String>,
}

pub struct Planner(pub ResearchDeps);

#[async_trait]
impl Node<ResearchState> for Planner {
    fn description(&self) -> &str {
        "Plans research steps (facts to look up) and expert steps (reasoning, calculation)"
    }

    async fn run(&self, state: &ResearchState, ctx: &NodeContext) -> Output {
        let mut messages = vec![ChatMessage::system(prompts::PLANNER)];
        if let Some(previous) = &state.plan {
            messages.push(ChatMessage::user(format!("Question: {}", state.question)));
            messages.push(ChatMessage::assistant(previous.render()));
            messages.extend(instructions(state, Step::Planner, None).into_iter().skip(1));
        } else {
            messages.extend(instructions(state, Step::Planner, None));
        }
        let request = ChatRequest {
            purpose: "planner.plan".into(),
            messages,
            temperature: Some(0.0),
            max_tokens: Some(1_200),
            ..Default::default()
        };
        let reply: PlanReply = llm_node::structured(ctx, &self.0.llm, request).await?;
        let (research, expert) = (reply.research_steps.len(), reply.expert_steps.len());
        if research > MAX_RESEARCH_STEPS || !(1..=MAX_EXPERT_STEPS).contains(&expert) {
            return Err(NodeError::new(
                NodeErrorKind::ModelOutputInvalid,
                format!(
                    "the plan has {research} research steps and {expert} expert steps; at most \
                     {MAX_RESEARCH_STEPS} and 1 to {MAX_EXPERT_STEPS} are allowed"
                ),
            ));
        }
        let attempt = state.plan.as_ref().map_or(0, |p| p.attempt) + 1;
        let plan = Plan { research_steps: reply.research_steps, expert_steps: reply.expert_steps, attempt };
        let summary = format!("{} research steps, {} expert steps", plan.research_steps.len(), plan.expert_steps.len());
        Ok(NodeOutput::update(ResearchUpdate {
            plan: Some(Some(plan)),
            plan_verdict: Some(None),
            messages: Some(vec![Message::response(Step::Planner, summary, None)]),
            ..Default::default()
        }))
    }
}

// ---------------------------------------------------------------------------------------------

/// The three critics: one prompt each, one structured verdict.
async fn review(
    deps: &ResearchDeps,
    ctx: &NodeContext,
    critic: Step,
    criteria: &str,
    question: &str,
    work: String,
) -> Result<Verdict, NodeError> {
    let request = ChatRequest {
        purpose: format!("{}.review", critic.as_str()),
        messages: vec![
            ChatMessage::system(format!("{}\n{criteria}", prompts::CRITIC)),
            ChatMessage::user(format!("Question: {question}\n\n{work}")),
        ],
        temperature: Some(0.0),
        max_tokens: Some(400),
        ..Default::default()
    };
    llm_node::structured(ctx, &deps.llm, request).await
}

fn verdict_text(verdict: &Verdict) -> String {
    match verdict.decision {
        Decision::Approve => format!("approve: {}", verdict.feedback),
        Decision::Reject => format!("reject: {}", verdict.feedback),
    }
}

pub struct CriticPlanner(pub ResearchDeps);

#[async_trait]
impl Node<ResearchState> for CriticPlanner {
    fn description(&self) -> &str {
        "Approves the plan, or rejects it with feedback for the planner"
    }

    async fn run(&self, state: &ResearchState, ctx: &NodeContext) -> Output {
        let plan = state.plan.as_ref().ok_or_else(|| internal("no plan to review"))?;
        let verdict =
            review(&self.0, ctx, Step::CriticPlanner, prompts::CRITIC_PLANNER, &state.question, plan.render()).await?;
        Ok(NodeOutput::update(ResearchUpdate {
            messages: Some(vec![Message::response(Step::CriticPlanner, verdict_text(&verdict), None)]),
            plan_verdict: Some(Some(verdict)),
            ..Default::default()
        }))
    }
}

pub struct CriticExpert(pub ResearchDeps);

#[async_trait]
impl Node<ResearchState> for CriticExpert {
    fn description(&self) -> &str {
        "Approves the expert's answer, or rejects it with feedback"
    }

    async fn run(&self, state: &ResearchState, ctx: &NodeContext) -> Output {
        let expert = state.expert.as_ref().ok_or_else(|| internal("no expert answer to review"))?;
        let work = format!(
            "Research findings:\n{}\nAnswer: {}\nReasoning: {}",
            findings(state),
            expert.answer,
            expert.reasoning
        );
        let verdict = review(&self.0, ctx, Step::CriticExpert, prompts::CRITIC_EXPERT, &state.question, work).await?;
        Ok(NodeOutput::update(ResearchUpdate {
            messages: Some(vec![Message::response(Step::CriticExpert, verdict_text(&verdict), None)]),
            expert_verdict: Some(Some(verdict)),
            ..Default::default()
        }))
    }
}

/// Reviews one research step's result (a task of the `critic_researcher` fan-out).
pub struct CriticResearcher(pub ResearchDeps);

#[async_trait]
impl TaskNode<ResearchState> for CriticResearcher {
    type Input = u32;

    fn description(&self) -> &str {
        "Reviews each new research result, in parallel: approves it or rejects it with feedback"
    }

    async fn run(&self, state: &ResearchState, index: u32, ctx: &NodeContext) -> Result<ResearchUpdate, NodeError> {
        let record = state.research.entries.get(&index).ok_or_else(|| internal(format!("no research step {index}")))?;
        let result = record.result.as_ref().ok_or_else(|| internal(format!("research step {index} has no result")))?;
        let sources: String =
            result.citations.iter().map(|c| format!("[{}#{}] {}\n", c.document_id, c.passage, c.text)).collect();
        let work =
            format!("Research step: {}\nResult: {}\nCited passages:\n{sources}", record.description, result.answer);
        let verdict =
            review(&self.0, ctx, Step::CriticResearcher, prompts::CRITIC_RESEARCHER, &state.question, work).await?;
        let mut reviewed = record.clone();
        let message = Message::response(Step::CriticResearcher, verdict_text(&verdict), Some(index));
        reviewed.verdict = Some(verdict);
        Ok(ResearchUpdate {
            research: Some(Keyed::merge([(index, reviewed)])),
            messages: Some(vec![message]),
            ..Default::default()
        })
    }
}

/// Which research steps the researchers take next: every step awaiting research, or, when
/// research is sequential, the first of them.
pub fn research_tasks(state: &ResearchState, parallel: bool) -> Vec<ResearchTask> {
    let pending = steps(state)
        .filter(|s| s.needs_research())
        .map(|s| ResearchTask { index: s.index, instruction: s.instruction.clone() });
    if parallel {
        pending.collect()
    } else {
        pending.take(1).collect()
    }
}

/// Which results the researchers' critic reviews next.
pub fn review_tasks(state: &ResearchState) -> Vec<u32> {
    steps(state).filter(|s| s.needs_review()).map(|s| s.index).collect()
}

// ---------------------------------------------------------------------------------------------

/// The input of one researcher task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchTask {
    pub index: u32,
    pub instruction: String,
}

/// A passage the researcher cites.
#[derive(Debug, Deserialize, JsonSchema)]
struct CitationRef {
    #[schemars(length(max = 64))]
    document_id: String,
    passage: u32,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ResearchReply {
    /// What the documents say about the step, in two or three sentences.
    #[schemars(length(max = 500))]
    answer: String,
    /// The passages the answer rests on.
    #[schemars(length(max = 4))]
    citations: Vec<CitationRef>,
}

/// The researcher's tools: search and read the corpus.
struct CorpusTools<'a>(&'a Corpus);

#[async_trait]
impl Tools for CorpusTools<'_> {
    fn specs(&self) -> Vec<frontdesk_llm::ToolSpec> {
        vec![corpus::search_spec(), corpus::read_spec()]
    }

    async fn call(&self, name: &str, arguments: &str) -> Result<ToolResult, NodeError> {
        Ok(match name {
            "search" => match tool_loop::arguments::<SearchArgs>(arguments) {
                Ok(args) => {
                    let limit = args.limit.map_or(HITS, |l| (l as usize).clamp(1, HITS));
                    ToolResult::ok(self.0.search(&args.query, limit))?
                }
                Err(error) => error,
            },
            "read" => match tool_loop::arguments::<ReadArgs>(arguments) {
                Ok(args) => match self.0.read(&args.document_id, args.passage) {
                    Ok(passage) => ToolResult::ok(passage)?,
                    Err(error) => ToolResult::error(error.to_string()),
                },
                Err(error) => error,
            },
            other => ToolResult::error(format!("no tool named {other}")),
        })
    }
}

/// One research step (a task of the `researcher` fan-out): searches and reads the corpus by
/// function calling, then answers with citations.
pub struct Researcher(pub ResearchDeps);

#[async_trait]
impl TaskNode<ResearchState> for Researcher {
    type Input = ResearchTask;

    fn description(&self) -> &str {
        "Researches each pending step, in parallel: searches and reads the document corpus (tools search, read), \
         answers with citations"
    }

    async fn run(
        &self,
        state: &ResearchState,
        task: ResearchTask,
        ctx: &NodeContext,
    ) -> Result<ResearchUpdate, NodeError> {
        let record = state
            .research
            .entries
            .get(&task.index)
            .ok_or_else(|| internal(format!("no research step {}", task.index)))?;
        let corpus = self.0.corpus(&state.corpus)?;
        // Hits first, so that even a model that does not call tools answers from the documents.
        let hits = corpus.search(&record.description, HITS);
        let hit_lines: String =
            hits.iter().map(|h| format!("- [{}#{}] {}: {}\n", h.document_id, h.passage, h.title, h.snippet)).collect();
        let mut messages = vec![
            ChatMessage::system(prompts::RESEARCHER),
            ChatMessage::user(format!(
                "Question: {}\nResearch step: {}\nSearch results for the step:\n{hit_lines}",
                state.question, record.description
            )),
        ];
        if let Some(previous) = &record.result {
            messages.push(ChatMessage::assistant(previous.answer.clone()));
            messages.push(ChatMessage::user(format!("The critic rejected this: {}", task.instruction)));
        }
        let request = ChatRequest {
            purpose: "researcher.research".into(),
            messages,
            temperature: Some(0.0),
            max_tokens: Some(900),
            ..Default::default()
        };
        let (reply, transcript) =
            tool_loop::answer::<ResearchReply>(ctx, &self.0.llm, request, &CorpusTools(&corpus), TOOL_ROUNDS).await?;
        // A citation of a passage that does not exist is dropped: a result cites only what the
        // corpus holds, with the passage's text.
        let mut citations = Vec::new();
        for cited in reply.citations {
            if let Ok(passage) = corpus.read(&cited.document_id, cited.passage) {
                citations.push(Citation {
                    document_id: passage.document_id,
                    title: passage.title,
                    passage: passage.passage,
                    text: passage.text,
                });
            }
        }
        let mut done = record.clone();
        done.attempts += 1;
        done.instruction = task.instruction;
        done.result = Some(StepResult { answer: reply.answer.clone(), citations });
        done.verdict = None;
        done.transcript = transcript;
        Ok(ResearchUpdate {
            research: Some(Keyed::merge([(task.index, done)])),
            messages: Some(vec![Message::response(Step::Researcher, reply.answer, Some(task.index))]),
            ..Default::default()
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// The expert's tool: the calculator.
struct Calculator;

#[async_trait]
impl Tools for Calculator {
    fn specs(&self) -> Vec<frontdesk_llm::ToolSpec> {
        vec![calculator::calculate_spec()]
    }

    async fn call(&self, name: &str, arguments: &str) -> Result<ToolResult, NodeError> {
        if name != "calculate" {
            return Ok(ToolResult::error(format!("no tool named {name}")));
        }
        Ok(match tool_loop::arguments::<CalculateArgs>(arguments) {
            Ok(args) => match calculator::evaluate(&args.expression) {
                Ok(value) => ToolResult::value(serde_json::json!({ "expression": args.expression, "value": value })),
                Err(error) => ToolResult::error(error.to_string()),
            },
            Err(error) => error,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ExpertReply {
    /// The answer to the question.
    #[schemars(length(max = 500))]
    answer: String,
    /// How the answer follows from the research and the calculations.
    #[schemars(length(max = 800))]
    reasoning: String,
}

pub struct Expert(pub ResearchDeps);

#[async_trait]
impl Node<ResearchState> for Expert {
    fn description(&self) -> &str {
        "Answers from the approved research by the plan's expert steps, calculating with the calculate tool"
    }

    async fn run(&self, state: &ResearchState, ctx: &NodeContext) -> Output {
        let plan = state.plan.clone().unwrap_or_default();
        let mut messages = vec![
            ChatMessage::system(prompts::EXPERT),
            ChatMessage::user(format!(
                "Question: {}\nResearch findings:\n{}\nExpert steps: {}",
                state.question,
                findings(state),
                plan.expert_steps.join(" ")
            )),
        ];
        if let Some(previous) = &state.expert {
            messages.push(ChatMessage::assistant(previous.answer.clone()));
            messages.extend(instructions(state, Step::Expert, None).into_iter().skip(1).last());
        }
        let request = ChatRequest {
            purpose: "expert.answer".into(),
            messages,
            temperature: Some(0.0),
            max_tokens: Some(1_500),
            ..Default::default()
        };
        let (reply, transcript) =
            tool_loop::answer::<ExpertReply>(ctx, &self.0.llm, request, &Calculator, TOOL_ROUNDS).await?;
        let attempt = state.expert.as_ref().map_or(0, |e| e.attempt) + 1;
        Ok(NodeOutput::update(ResearchUpdate {
            messages: Some(vec![Message::response(Step::Expert, reply.answer.clone(), None)]),
            expert: Some(Some(ExpertAnswer { answer: reply.answer, reasoning: reply.reasoning, attempt, transcript })),
            expert_verdict: Some(None),
            ..Default::default()
        }))
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
struct FinalReply {
    #[schemars(length(max = 600))]
    final_answer: String,
    /// How the answer was reached: the plan, what the research found, the reasoning.
    #[schemars(length(max = 1000))]
    final_reasoning_trace: String,
}

pub struct Finalizer(pub ResearchDeps);

#[async_trait]
impl Node<ResearchState> for Finalizer {
    fn description(&self) -> &str {
        "Writes the final answer and reasoning trace; states plainly when the retry limit was reached or a \
         component failed"
    }

    async fn run(&self, state: &ResearchState, ctx: &NodeContext) -> Output {
        let done = |answer: String, trace: String, outcome: Outcome| ResearchUpdate {
            final_answer: Some(Some(answer)),
            final_reasoning_trace: Some(Some(trace)),
            outcome: Some(outcome),
            current_step: Some(Step::Finalizer),
            messages: Some(vec![Message::response(Step::Finalizer, "Final answer and reasoning trace ready", None)]),
            ..Default::default()
        };
        // No model call on the way out of a failure or the retry limit: the answer must not
        // depend on the model that may be what failed.
        if let (Some(component), Some(error)) = (&state.error_component, &state.error) {
            let trace = format!("{NOT_ANSWERED} The {component} failed: {error}");
            return Ok(NodeOutput::update(done(NOT_ANSWERED.into(), trace, Outcome::Failed)));
        }
        if state.outcome == Outcome::RetryLimit {
            let mut trace = format!("{NOT_ANSWERED} The retry limit of {} was reached.", state.retry_limit);
            let last = state
                .messages
                .iter()
                .rev()
                .find(|m| m.sender.starts_with("critic_") && m.content.starts_with("reject"));
            if let Some(last) = last {
                trace.push_str(&format!(" Last rejection ({}): {}", last.sender, last.content));
            }
            return Ok(NodeOutput::update(done(NOT_ANSWERED.into(), trace, Outcome::RetryLimit)));
        }
        let expert = state.expert.as_ref().ok_or_else(|| internal("no expert answer to finalize"))?;
        let plan = state.plan.clone().unwrap_or_default();
        let request = ChatRequest {
            purpose: "finalizer.finalize".into(),
            messages: vec![
                ChatMessage::system(prompts::FINALIZER),
                ChatMessage::user(format!(
                    "Question: {}\nPlan:\n{}Research findings:\n{}Expert answer: {}\nExpert reasoning: {}",
                    state.question,
                    plan.render(),
                    findings(state),
                    expert.answer,
                    expert.reasoning
                )),
            ],
            temperature: Some(0.0),
            max_tokens: Some(1_800),
            ..Default::default()
        };
        let reply: FinalReply = llm_node::structured(ctx, &self.0.llm, request).await?;
        Ok(NodeOutput::update(done(reply.final_answer, reply.final_reasoning_trace, Outcome::Answered)))
    }
}

/// Where a component that failed for good is routed: records which one and why, for the
/// finalizer.
pub struct ErrorHandler;

#[async_trait]
impl Node<ResearchState> for ErrorHandler {
    fn description(&self) -> &str {
        "Records the component that failed and why, and hands over to the finalizer"
    }

    async fn run(&self, state: &ResearchState, _ctx: &NodeContext) -> Output {
        let component = state.error_component.clone().unwrap_or_else(|| "unknown".into());
        let error = state.error.clone().unwrap_or_default();
        Ok(NodeOutput::update(ResearchUpdate {
            current_step: Some(Step::Error),
            messages: Some(vec![Message::response(Step::Error, format!("{component} failed: {error}"), None)]),
            ..Default::default()
        }))
    }
}

/// The failure route's record of a failed component.
pub fn failed(node: &str, message: &str) -> ResearchUpdate {
    ResearchUpdate {
        error: Some(Some(message.to_owned())),
        error_component: Some(Some(node.to_owned())),
        outcome: Some(Outcome::Failed),
        ..Default::default()
    }
}
