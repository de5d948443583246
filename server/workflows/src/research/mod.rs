//! The research workflow (docs/workflows/research.md): an orchestrator drives a planner,
//! researchers, an expert and a finalizer; a critic checks the planner's, each researcher's and
//! the expert's work, and a rejection sends it back with the critic's feedback until the retry
//! limit. Independent research steps run in parallel as one fan-out, each result reviewed by
//! its own critic task.
//!
//! ```text
//! START → orchestrator ─┬→ planner            → orchestrator
//!                       ├→ critic_planner     → orchestrator
//!                       ├→ researcher (fan-out: one task per pending step) → orchestrator
//!                       ├→ critic_researcher (fan-out: one task per new result) → orchestrator
//!                       ├→ expert             → orchestrator
//!                       ├→ critic_expert      → orchestrator
//!                       └→ finalizer → END
//! any component that fails for good → error_handler → finalizer
//! ```

pub mod calculator;
pub mod corpus;
mod desk;
pub mod nodes;
pub mod prompts;
pub mod types;

use std::{collections::BTreeMap, sync::Arc};

use frontdesk_llm::LlmClient;
use frontdesk_runtime::{
    Durability, Graph, GraphBuilder, GraphError, Keyed, NodeError, NodeErrorKind, NodeOptions, RetryPolicy, Target,
};

use self::corpus::Corpus;
pub use desk::{AskRequest, ResearchDesk, ResearchHandle, ResearchProgress, ResearchView};
pub use types::*;

pub const NAME: &str = "research";

pub const DESCRIPTION: &str = "Research questions: a planner, researchers in parallel over a document corpus with \
citations, an expert with a calculator and a finalizer, each checked by a critic, with a retry limit";

/// Rejections allowed per question unless the request says otherwise.
pub const DEFAULT_RETRY_LIMIT: u32 = 5;
/// The highest retry limit a request may ask for.
pub const MAX_RETRY_LIMIT: u32 = 20;

frontdesk_runtime::state! {
    /// One question's research; the thread id is the research id.
    pub struct ResearchState / ResearchUpdate {
        question: String => Replace,
        /// The corpus researched, by name.
        corpus: String => Replace,
        retry_limit: u32 => Replace,
        retry_count: u32 => Replace,
        /// The step that runs next, or, after it ran, the step the orchestrator reads.
        current_step: Step => Replace,
        messages: Vec<Message> => Append,
        plan: Option<Plan> => Replace,
        plan_verdict: Option<Verdict> => Replace,
        /// The plan's research steps by index: each researcher task and critic task writes its own.
        research: Keyed<u32, StepRecord> => Merge,
        expert: Option<ExpertAnswer> => Replace,
        expert_verdict: Option<Verdict> => Replace,
        final_answer: Option<String> => Replace,
        final_reasoning_trace: Option<String> => Replace,
        outcome: Outcome => Replace,
        error: Option<String> => Replace,
        error_component: Option<String> => Replace,
        created_at_ms: i64 => Replace,
    }
}

/// What the agents need from outside.
#[derive(Clone)]
pub struct ResearchDeps {
    pub llm: LlmClient,
    /// The corpora a question may name; `sample` (the shipped documents) is always there.
    pub corpora: Arc<BTreeMap<String, Arc<Corpus>>>,
    /// Whether independent research steps run at once (the default) or one after another.
    pub parallel: bool,
    /// Each component's retry policy for failures (model or tool unavailable): three attempts,
    /// then the error handler. Critics' rejections are counted separately, against the
    /// question's retry limit.
    pub retry: RetryPolicy,
}

/// The shipped corpus's name.
pub const SAMPLE_CORPUS: &str = "sample";

impl ResearchDeps {
    pub fn new(llm: LlmClient, corpora: BTreeMap<String, Arc<Corpus>>) -> Self {
        let mut corpora = corpora;
        corpora.entry(SAMPLE_CORPUS.to_owned()).or_insert_with(|| Arc::new(Corpus::shipped()));
        Self { llm, corpora: Arc::new(corpora), parallel: true, retry: RetryPolicy::attempts(3) }
    }

    pub fn corpus(&self, name: &str) -> Result<Arc<Corpus>, NodeError> {
        self.corpora
            .get(name)
            .cloned()
            .ok_or_else(|| NodeError::new(NodeErrorKind::InvalidInput, format!("no corpus named {name}")))
    }
}

fn output(state: &ResearchState) -> serde_json::Value {
    serde_json::json!({
        "outcome": state.outcome,
        "final_answer": state.final_answer,
        "retry_count": state.retry_count,
    })
}

pub fn build(deps: ResearchDeps) -> Result<Graph<ResearchState>, GraphError> {
    use nodes::*;
    let options = || NodeOptions::default().retry(deps.retry.clone());
    let parallel = deps.parallel;
    let agents = [PLANNER, CRITIC_PLANNER, RESEARCHER, CRITIC_RESEARCHER, EXPERT, CRITIC_EXPERT, FINALIZER];
    let mut builder = GraphBuilder::new(NAME)
        .node(ORCHESTRATOR, Orchestrator)
        .node_with(PLANNER, Planner(deps.clone()), options())
        .node_with(CRITIC_PLANNER, CriticPlanner(deps.clone()), options())
        .fan_out_with(
            RESEARCHER,
            Researcher(deps.clone()),
            move |s: &ResearchState| research_tasks(s, parallel),
            options(),
        )
        .fan_out_with(CRITIC_RESEARCHER, CriticResearcher(deps.clone()), review_tasks, options())
        .node_with(EXPERT, Expert(deps.clone()), options())
        .node_with(CRITIC_EXPERT, CriticExpert(deps.clone()), options())
        .node_with(FINALIZER, Finalizer(deps.clone()), options())
        .node(ERROR_HANDLER, ErrorHandler)
        .entry(ORCHESTRATOR)
        .conditional_edge(ORCHESTRATOR, agents.iter().map(|a| Target::node(*a)), |s: &ResearchState| {
            Target::node(node_of(s.current_step))
        })
        .edge(ERROR_HANDLER, Target::node(FINALIZER))
        .edge(FINALIZER, Target::End)
        .on_failure(ERROR_HANDLER, |failure| failed(&failure.node, &failure.message));
    for agent in &agents[..agents.len() - 1] {
        builder = builder.edge(*agent, Target::node(ORCHESTRATOR));
    }
    // Every rejection costs a retry, so the limit bounds the loop; the step limit is a backstop
    // above the longest run the limit allows. Each agent's turn is two steps (it, then the
    // orchestrator), and so is its critic's: four for the plan, four for each research step
    // when they run one at a time (four for all of them in parallel), four for the expert,
    // four for every retry (an agent and its critic again), and the finalizer, the error
    // handler and the first orchestrator.
    builder
        .max_steps(max_steps())
        // Researchers' tasks commit one by one, and every step commits: a crash re-runs only
        // the work in flight (the unfinished research steps).
        .durability(Durability::EveryNode)
        .output(output)
        .build()
}

/// The step limit: the longest run the retry limit allows, with room to spare.
fn max_steps() -> u32 {
    let research_steps = nodes::MAX_RESEARCH_STEPS as u32;
    4 + 4 * research_steps + 4 + 4 * MAX_RETRY_LIMIT + 8
}

/// A new question's state.
pub fn initial(question: &str, corpus: &str, retry_limit: u32, now_ms: i64) -> ResearchUpdate {
    ResearchUpdate {
        question: Some(question.to_owned()),
        corpus: Some(corpus.to_owned()),
        retry_limit: Some(retry_limit),
        retry_count: Some(0),
        current_step: Some(Step::Input),
        created_at_ms: Some(now_ms),
        research: Some(Keyed::default()),
        ..Default::default()
    }
}
