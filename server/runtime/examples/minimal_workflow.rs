//! A minimal workflow on the runtime, to copy from: typed state with reducers, a node with a
//! retry policy, a fan-out node, a failure route, and an addressed interrupt answered by a
//! resume. It runs on the in-memory checkpointer and prints the events of each run.
//!
//! ```text
//! cargo run -p frontdesk-runtime --example minimal_workflow
//! ```
//!
//! `docs/architecture.md` explains each piece; a real workflow calls a model in its nodes
//! (see `server/workflows`) and is hosted by the server through its registration.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use frontdesk_runtime::{
    GraphBuilder, InterruptRequest, MemoryCheckpointer, Node, NodeContext, NodeError, NodeErrorKind, NodeOptions,
    NodeOutput, RetryPolicy, RunInput, RunRequest, Runner, RunnerConfig, Target, TaskNode, ThreadMode,
};
use serde::{Deserialize, Serialize};

frontdesk_runtime::state! {
    /// A question answered from several sources, then approved by a person.
    pub struct Answer / AnswerUpdate {
        question: String => Replace,
        sources: Vec<String> => Replace,
        notes: Vec<String> => Append,
        approved_by: String => Replace,
        error: String => Replace,
    }
}

/// Picks the sources to read. Retried on transient failures (see the graph below).
struct Plan;

#[async_trait]
impl Node<Answer> for Plan {
    async fn run(&self, state: &Answer, _ctx: &NodeContext) -> Result<NodeOutput<AnswerUpdate>, NodeError> {
        if state.question.is_empty() {
            return Err(NodeError::new(NodeErrorKind::InvalidInput, "no question"));
        }
        let sources = vec!["handbook".to_owned(), "wiki".to_owned(), "tickets".to_owned()];
        Ok(NodeOutput::update(AnswerUpdate { sources: Some(sources), ..Default::default() }))
    }
}

/// The input of one fan-out task.
#[derive(Serialize, Deserialize)]
struct Source {
    name: String,
}

/// Reads one source; the three run at once.
struct Read;

#[async_trait]
impl TaskNode<Answer> for Read {
    type Input = Source;

    async fn run(&self, state: &Answer, input: Source, _ctx: &NodeContext) -> Result<AnswerUpdate, NodeError> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let note = format!("{} says something about {:?}", input.name, state.question);
        Ok(AnswerUpdate { notes: Some(vec![note]), ..Default::default() })
    }
}

/// Waits for a person's approval, addressed by a stable interrupt id.
struct Approve;

#[async_trait]
impl Node<Answer> for Approve {
    async fn run(&self, _state: &Answer, ctx: &NodeContext) -> Result<NodeOutput<AnswerUpdate>, NodeError> {
        match ctx.resume() {
            Some(resume) => {
                let approver = resume.value.as_str().unwrap_or("someone").to_owned();
                Ok(NodeOutput::update(AnswerUpdate { approved_by: Some(approver), ..Default::default() }))
            }
            None => Ok(NodeOutput::interrupt(
                AnswerUpdate::default(),
                InterruptRequest::new("approval", "awaiting_manager", &serde_json::json!({ "to": "manager" }))?,
            )),
        }
    }
}

/// Where failures end up: it writes nothing the failure update has not already written.
struct Report;

#[async_trait]
impl Node<Answer> for Report {
    async fn run(&self, _state: &Answer, _ctx: &NodeContext) -> Result<NodeOutput<AnswerUpdate>, NodeError> {
        Ok(NodeOutput::update(AnswerUpdate::default()))
    }
}

fn graph() -> frontdesk_runtime::Graph<Answer> {
    GraphBuilder::new("minimal")
        .node_with("plan", Plan, NodeOptions::default().retry(RetryPolicy::attempts(3)))
        .fan_out("read", Read, |state: &Answer| {
            state.sources.iter().map(|name| Source { name: name.clone() }).collect()
        })
        .node("approve", Approve)
        .node("report", Report)
        .entry("plan")
        .edge("plan", Target::node("read"))
        .edge("read", Target::node("approve"))
        .edge("approve", Target::node("report"))
        .edge("report", Target::End)
        .on_failure("report", |failure| AnswerUpdate { error: Some(failure.message.clone()), ..Default::default() })
        .output(|state: &Answer| serde_json::json!({ "notes": state.notes.len(), "approved_by": state.approved_by }))
        .build()
        .expect("the graph is valid")
}

async fn show(runner: &Runner<Answer>, request: RunRequest<AnswerUpdate>) -> Result<(), Box<dyn std::error::Error>> {
    let mut handle = runner.start(request).await?;
    while let Some(event) = handle.events.recv().await {
        let node = event.node.as_deref().unwrap_or("run");
        let task = event.task.map(|t| format!("#{t}")).unwrap_or_default();
        println!("  [{}] {node}{task}: {:?}", event.event_id, event.kind);
    }
    let outcome = handle.wait().await?;
    println!("  -> {:?}, output {}", outcome.status, outcome.output);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runner = Runner::new(graph(), Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());

    println!("a question: plan, read three sources at once, then wait for approval");
    let question = AnswerUpdate { question: Some("refund policy".into()), ..Default::default() };
    let mut request = RunRequest::new("q-1", RunInput::Update(question));
    request.mode = ThreadMode::New;
    show(&runner, request).await?;

    println!("the manager approves, answering the interrupt by its id");
    let answer = RunInput::Resume { interrupt_id: "approval".into(), value: serde_json::json!("dana") };
    show(&runner, RunRequest::new("q-1", answer)).await?;

    println!("an empty question: plan fails (not retried: invalid input) and the failure route reports it");
    let mut request = RunRequest::new("q-2", RunInput::Update(AnswerUpdate::default()));
    request.mode = ThreadMode::New;
    show(&runner, request).await?;
    let (state, _) = runner.state("q-2").await?.expect("the thread exists");
    println!("  error recorded in state: {:?}", state.error);
    Ok(())
}
