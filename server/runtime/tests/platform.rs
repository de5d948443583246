//! Addressed interrupts, per-node retry policies, the failure route and fan-out, over the
//! in-memory checkpointer.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use async_trait::async_trait;
use frontdesk_runtime::{
    Checkpointer, Durability, Event, EventKind, FailureKind, GraphBuilder, InterruptRequest, MemoryCheckpointer, Node,
    NodeContext, NodeError, NodeErrorKind, NodeOptions, NodeOutput, RetryPolicy, RunError, RunInput, RunRequest,
    RunStatus, Runner, RunnerConfig, Target, TaskNode, ThreadMode,
};
use serde::{Deserialize, Serialize};

frontdesk_runtime::state! {
    pub struct Case / CaseUpdate {
        log: Vec<String> => Append,
        answers: Vec<String> => Append,
        error: String => Replace,
        findings: Vec<String> => Append,
        loops: u32 => Replace,
    }
}

fn log(entry: impl Into<String>) -> CaseUpdate {
    CaseUpdate { log: Some(vec![entry.into()]), ..Default::default() }
}

fn create(thread: &str) -> RunRequest<CaseUpdate> {
    let mut request = RunRequest::new(thread, RunInput::Update(CaseUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    request
}

fn resume(thread: &str, id: &str, value: &str) -> RunRequest<CaseUpdate> {
    RunRequest::new(thread, RunInput::Resume { interrupt_id: id.into(), value: serde_json::json!(value) })
}

/// Runs to the end, collecting every event.
async fn run(
    runner: &Runner<Case>,
    request: RunRequest<CaseUpdate>,
) -> (Result<frontdesk_runtime::RunOutcome<Case>, RunError>, Vec<Event>) {
    let mut handle = match runner.start(request).await {
        Ok(handle) => handle,
        Err(error) => return (Err(error), Vec::new()),
    };
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    (handle.wait().await, events)
}

fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy::attempts(attempts).with_backoff(Duration::from_millis(1), Duration::from_millis(5))
}

// ---------------------------------------------------------------------------------------------
// addressed interrupts

/// Asks the changer and the manager at once; each answer re-runs it with that answer only.
struct Gather;

#[async_trait]
impl Node<Case> for Gather {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        match ctx.resume() {
            Some(answer) => Ok(NodeOutput::update(CaseUpdate {
                answers: Some(vec![format!("{}={}", answer.interrupt_id, answer.value.as_str().unwrap_or_default())]),
                ..Default::default()
            })),
            None => Ok(NodeOutput::interrupts(
                log("asked"),
                vec![
                    InterruptRequest::new("clarify-1", "awaiting_user", &serde_json::json!({"to": "changer"}))?,
                    InterruptRequest::new("approve-1", "awaiting_manager", &serde_json::json!({"to": "manager"}))?,
                ],
            )),
        }
    }
}

struct Step(&'static str);

#[async_trait]
impl Node<Case> for Step {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        Ok(NodeOutput::update(log(self.0)))
    }
}

fn gather_graph() -> frontdesk_runtime::Graph<Case> {
    GraphBuilder::new("gather")
        .node("gather", Gather)
        .node("decide", Step("decide"))
        .entry("gather")
        .edge("gather", Target::node("decide"))
        .edge("decide", Target::End)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_thread_holds_several_interrupts_and_each_resume_answers_exactly_one() {
    // Retention 1: only the newest checkpoint survives, and it must carry every open interrupt.
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new(1));
    let runner = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    let (outcome, events) = run(&runner, create("inv")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.status, RunStatus::Interrupted);
    let ids: Vec<&str> = outcome.interrupts.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["clarify-1", "approve-1"]);
    let raised: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::InterruptRaised { interrupt_id, .. } => Some(interrupt_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(raised, ["clarify-1", "approve-1"], "each interrupt is streamed");
    assert!(
        matches!(&events.last().unwrap().kind, EventKind::Interrupted { pending, .. } if pending.len() == 2),
        "the run ends paused on both: {:?}",
        events.last()
    );
    assert!(matches!(&events[0].kind, EventKind::RunStarted { resumed: false, .. }));

    // Another replica answers the manager first; the changer's question stays open.
    let replica = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    let (outcome, events) = run(&replica, resume("inv", "approve-1", "approved")).await;
    let outcome = outcome.unwrap();
    assert!(matches!(&events[0].kind, EventKind::RunStarted { resumed: true, .. }), "a resume says so");
    assert_eq!(outcome.status, RunStatus::Interrupted, "the thread still waits on the changer");
    assert_eq!(outcome.interrupts.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["clarify-1"]);
    assert_eq!(outcome.state.unwrap().answers, ["approve-1=approved"]);

    let version = store.latest("inv").await.unwrap().unwrap().version;
    let error = replica.start(resume("inv", "approve-1", "again")).await.err().unwrap();
    assert!(matches!(error, RunError::InterruptAnswered { ref interrupt_id, .. } if interrupt_id == "approve-1"));
    assert_eq!(error.failure_kind(), FailureKind::FailedPrecondition);
    let error = replica.start(resume("inv", "nope", "x")).await.err().unwrap();
    assert!(matches!(error, RunError::UnknownInterrupt { .. }), "{error:?}");
    assert_eq!(error.failure_kind(), FailureKind::NotFound);
    assert_eq!(store.latest("inv").await.unwrap().unwrap().version, version, "a refused resume runs nothing");

    // After a restart (a third runner), the changer answers and the case completes.
    let restarted = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    let (outcome, _) = run(&restarted, resume("inv", "clarify-1", "sick leave")).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(outcome.interrupts.is_empty());
    let state = outcome.state.unwrap();
    assert_eq!(state.answers, ["approve-1=approved", "clarify-1=sick leave"]);
    assert_eq!(state.log, ["asked", "decide", "decide"]);
}

#[tokio::test]
async fn a_resume_with_its_idempotency_key_is_replayed_not_run_twice() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let runner = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    run(&runner, create("inv")).await.0.unwrap();
    let mut first = resume("inv", "approve-1", "approved");
    first.idempotency_key = Some("reply-7".into());
    let outcome = run(&runner, first).await.0.unwrap();
    let mut retry = resume("inv", "approve-1", "approved");
    retry.idempotency_key = Some("reply-7".into());
    let replay = run(&runner, retry).await.0.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.run_id, outcome.run_id);
}

/// Fails when resumed. Without a failure route the resume rolls back and leaves the interrupt
/// pending; with one, the answer is spent and handed to the route.
struct FailOnResume;

#[async_trait]
impl Node<Case> for FailOnResume {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        match ctx.resume() {
            Some(_) => Err(NodeError::new(NodeErrorKind::InvalidInput, "the answer does not parse")),
            None => Ok(NodeOutput::interrupt(log("asked"), InterruptRequest::new("q", "awaiting_user", &())?)),
        }
    }
}

#[tokio::test]
async fn a_failed_resume_leaves_the_interrupt_pending() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let graph =
        GraphBuilder::new("ask").node("ask", FailOnResume).entry("ask").edge("ask", Target::End).build().unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    run(&runner, create("t")).await.0.unwrap();
    let error = run(&runner, resume("t", "q", "garbled")).await.0.err().unwrap();
    assert!(matches!(error, RunError::Node { .. }));
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!(latest.run.status, RunStatus::Failed);
    assert!(latest.pending.interrupt("q").is_some(), "the interrupt can be answered again");
    assert!(latest.pending.answered.is_empty());
}

struct RaiseTwice;

#[async_trait]
impl Node<Case> for RaiseTwice {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        let ask = || InterruptRequest::new("same", "awaiting_user", &());
        Ok(NodeOutput::interrupts(CaseUpdate::default(), vec![ask()?, ask()?]))
    }
}

#[tokio::test]
async fn an_interrupt_id_is_used_once_per_thread() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let graph = GraphBuilder::new("dup").node("ask", RaiseTwice).entry("ask").edge("ask", Target::End).build().unwrap();
    let runner = Runner::new(graph, store, RunnerConfig::default());
    let error = run(&runner, create("t")).await.0.err().unwrap();
    assert!(matches!(error, RunError::DuplicateInterrupt { .. }), "{error:?}");
}

struct Panics;

#[async_trait]
impl Node<Case> for Panics {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        panic!("boom in the node")
    }
}

/// A panic in workflow code fails the run like an error would (rolled back, streamed, the
/// thread free for the next run) instead of taking the run's task and the thread with it.
#[tokio::test]
async fn a_panicking_node_or_router_fails_its_run_and_leaves_the_thread_free() {
    let in_node = GraphBuilder::new("p")
        .node("first", Step("first"))
        .node("boom", Panics)
        .entry("first")
        .edge("first", Target::node("boom"))
        .edge("boom", Target::End)
        .build()
        .unwrap();
    let in_router = GraphBuilder::new("p")
        .node("first", Step("first"))
        .node("second", Step("second"))
        .entry("first")
        .conditional_edge("first", [Target::node("second")], |_: &Case| -> Target { panic!("boom in the router") })
        .edge("second", Target::End)
        .build()
        .unwrap();
    for (graph, node, message) in [(in_node, "boom", "boom in the node"), (in_router, "first", "boom in the router")] {
        let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
        let (result, events) = run(&runner, create("t")).await;
        match result {
            Err(RunError::Node { node: failed, source }) => {
                assert_eq!(failed, node);
                assert_eq!(source.kind, NodeErrorKind::Internal);
                assert!(source.message.contains(message), "{}", source.message);
            }
            other => panic!("expected the node's failure, got {other:?}"),
        }
        assert!(matches!(events.last().map(|e| &e.kind), Some(EventKind::RunFailed { .. })), "{events:?}");
        // The run created the thread: rolled back, there is none.
        assert!(store.latest("t").await.unwrap().is_none(), "rolled back to no thread");
        assert_eq!(runner.registry().active_runs(), 0);
        let mut next = RunRequest::new("t", RunInput::Update(log("again")));
        next.mode = ThreadMode::New;
        let error = run(&runner, next).await.0.unwrap_err();
        assert!(matches!(error, RunError::Node { .. }), "the thread takes the next run: {error:?}");
    }
}

/// A panic the nodes and routers do not cover (here the graph's output function) ends the run
/// as lost, as a crash would, but still releases it: nothing waits on it forever.
#[tokio::test]
async fn a_panic_outside_the_nodes_releases_the_run() {
    let graph = GraphBuilder::new("p")
        .node("first", Step("first"))
        .entry("first")
        .edge("first", Target::End)
        .output(|_: &Case| -> serde_json::Value { panic!("boom in the output") })
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let (result, events) = run(&runner, create("t")).await;
    assert!(matches!(result, Err(RunError::Lost)), "{result:?}");
    assert!(!events.is_empty(), "the stream ends");
    assert_eq!(runner.registry().active_runs(), 0);
    tokio::time::timeout(Duration::from_secs(5), runner.registry().wait_idle()).await.expect("the runner is idle");
}

/// A thread paused at a node that a later version of its workflow no longer has: resuming it
/// fails the run with a clear error, and the interrupt can be answered again.
#[tokio::test]
async fn a_resume_at_a_node_the_graph_no_longer_has_fails_cleanly() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let before = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    assert_eq!(run(&before, create("t")).await.0.unwrap().status, RunStatus::Interrupted);
    let renamed = GraphBuilder::new("gather")
        .node("gather_v2", Gather)
        .node("decide", Step("decide"))
        .entry("gather_v2")
        .edge("gather_v2", Target::node("decide"))
        .edge("decide", Target::End)
        .build()
        .unwrap();
    let after = Runner::new(renamed, store.clone(), RunnerConfig::default());
    match run(&after, resume("t", "clarify-1", "yes")).await.0 {
        Err(RunError::Node { node, source }) => {
            assert_eq!(node, "gather");
            assert!(source.message.contains("has no node \"gather\""), "{}", source.message);
        }
        other => panic!("expected the node's failure, got {other:?}"),
    }
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!(latest.run.status, RunStatus::Failed);
    assert!(latest.pending.interrupt("clarify-1").is_some(), "the interrupt can be answered again");
}

/// Logs whether it ran with an interrupt's answer.
struct SeesResume;

#[async_trait]
impl Node<Case> for SeesResume {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        Ok(NodeOutput::update(log(if ctx.resume().is_some() { "decide with an answer" } else { "decide" })))
    }
}

/// The answer was for the node that is gone: the failure route keeps it as the failure's, and
/// the route's node does not run as if it had been answered.
#[tokio::test]
async fn a_resume_at_a_missing_node_hands_its_answer_to_the_failure_route_only() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let before = Runner::new(gather_graph(), store.clone(), RunnerConfig::default());
    assert_eq!(run(&before, create("t")).await.0.unwrap().status, RunStatus::Interrupted);
    let renamed = GraphBuilder::new("gather")
        .node("gather_v2", Gather)
        .node("decide", SeesResume)
        .entry("gather_v2")
        .edge("gather_v2", Target::node("decide"))
        .edge("decide", Target::End)
        .on_failure("decide", |failure| CaseUpdate {
            answers: failure.answer.as_ref().map(|a| vec![a.interrupt_id.clone()]),
            ..Default::default()
        })
        .build()
        .unwrap();
    let after = Runner::new(renamed, store.clone(), RunnerConfig::default());
    let outcome = run(&after, resume("t", "clarify-1", "yes")).await.0.unwrap();
    let state = outcome.state.unwrap();
    assert_eq!(state.answers, ["clarify-1"], "the failure carries the answer");
    assert_eq!(state.log, ["asked", "decide"], "the route's node was not resumed with it");
}

/// Fails its first call only.
struct FailsOnce(Arc<AtomicU32>);

#[async_trait]
impl Node<Case> for FailsOnce {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(NodeError::new(NodeErrorKind::DependencyFailed, "down this once"));
        }
        Ok(NodeOutput::update(log("done")))
    }
}

/// A new request on a thread whose run a crash abandoned first finishes that run; when that run
/// fails, its failure is its own (it rolled back), and the new request goes on.
#[tokio::test]
async fn a_new_request_goes_on_after_the_abandoned_run_it_finished_failed() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let calls = Arc::new(AtomicU32::new(0));
    let graph =
        GraphBuilder::new("once").node("work", FailsOnce(calls.clone())).entry("work").edge("work", Target::End);
    let runner = Runner::new(
        graph.build().unwrap(),
        store.clone(),
        RunnerConfig { takeover_after: Duration::ZERO, ..RunnerConfig::default() },
    );
    let mut abandoned = frontdesk_runtime::conformance::sample("t", 1, RunStatus::Running);
    abandoned.workflow = "once".into();
    abandoned.state = serde_json::to_vec(&Case { log: vec!["accepted".into()], ..Default::default() }).unwrap();
    abandoned.next = Some("work".into());
    store.put(&abandoned).await.unwrap();

    let mut next = RunRequest::new("t", RunInput::Update(log("next")));
    next.mode = ThreadMode::Existing;
    let outcome = run(&runner, next).await.0.expect("the new request runs");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the abandoned run's attempt, then the new run's");
    assert_eq!(outcome.state.unwrap().log.last().map(String::as_str), Some("done"));
}

/// Never returns, as if it took its process down each time it ran.
struct KillsItsProcess(Arc<AtomicU32>);

#[async_trait]
impl Node<Case> for KillsItsProcess {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

/// A run whose node stops its process every time is taken over `max_takeovers` times (each
/// counted in its checkpoint first), then failed instead of being run again for ever.
#[tokio::test]
async fn a_run_that_keeps_stopping_its_process_is_failed_after_its_takeovers() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let calls = Arc::new(AtomicU32::new(0));
    let process = || {
        let graph = GraphBuilder::new("poison")
            .node("work", KillsItsProcess(calls.clone()))
            .entry("work")
            .edge("work", Target::End)
            .build()
            .unwrap();
        Runner::new(graph, store.clone(), RunnerConfig { max_takeovers: 3, ..RunnerConfig::default() })
    };
    let mut abandoned = frontdesk_runtime::conformance::sample("t", 1, RunStatus::Running);
    abandoned.workflow = "poison".into();
    abandoned.state = serde_json::to_vec(&Case { log: vec!["accepted".into()], ..Default::default() }).unwrap();
    abandoned.next = Some("work".into());
    store.put(&abandoned).await.unwrap();
    for takeover in 1..=3 {
        // A restarted process recovers the run, and "dies" in the node again.
        let restarted = process();
        assert!(tokio::time::timeout(Duration::from_millis(200), restarted.recover()).await.is_err());
        let latest = store.latest("t").await.unwrap().unwrap();
        assert_eq!((latest.run.status, latest.pending.takeovers), (RunStatus::Running, takeover));
        assert_eq!(calls.load(Ordering::SeqCst), takeover);
    }
    let last = process();
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), last.recover()).await.unwrap().unwrap(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "not run a fourth time");
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!(latest.run.status, RunStatus::Failed);
    assert_eq!(latest.pending.takeovers, 0);
}

/// Asks once; resumed, its first run with the answer never returns (the process "dies" in
/// it), with `fail_second` its second fails for good, later ones record the answer.
struct AskThenHang {
    resumed: Arc<AtomicU32>,
    fail_second: bool,
}

#[async_trait]
impl Node<Case> for AskThenHang {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        let Some(answer) = ctx.resume() else {
            return Ok(NodeOutput::interrupts(
                log("asked"),
                vec![InterruptRequest::new("clarify-1", "awaiting_user", &serde_json::json!({"to": "changer"}))?],
            ));
        };
        match self.resumed.fetch_add(1, Ordering::SeqCst) {
            0 => std::future::pending().await,
            1 if self.fail_second => Err(NodeError::new(NodeErrorKind::InvalidInput, "cannot use the answer now")),
            _ => Ok(NodeOutput::update(CaseUpdate {
                answers: Some(vec![format!("{}={}", answer.interrupt_id, answer.value.as_str().unwrap_or_default())]),
                ..Default::default()
            })),
        }
    }
}

/// ask (an `AskThenHang`) -> decide -> END.
fn ask_graph(resumed: &Arc<AtomicU32>, fail_second: bool, durability: Durability) -> frontdesk_runtime::Graph<Case> {
    GraphBuilder::new("ask")
        .node("ask", AskThenHang { resumed: resumed.clone(), fail_second })
        .node("decide", Step("decide"))
        .entry("ask")
        .edge("ask", Target::node("decide"))
        .edge("decide", Target::End)
        .durability(durability)
        .build()
        .unwrap()
}

/// A resume whose node was cut off by a crash is recovered with its answer: the interrupt is
/// already answered in the accepting checkpoint, so the answer must be there too.
#[tokio::test]
async fn a_resume_cut_off_by_a_crash_is_recovered_with_its_answer() {
    for durability in [Durability::EveryNode, Durability::ByEffect] {
        let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        let resumed = Arc::new(AtomicU32::new(0));
        let graph = || ask_graph(&resumed, false, durability);
        let crashed = Runner::new(graph(), store.clone(), RunnerConfig::default());
        assert_eq!(run(&crashed, create("t")).await.0.unwrap().status, RunStatus::Interrupted);
        let handle = crashed.start(resume("t", "clarify-1", "because")).await.unwrap();
        let (_events, _outcome, _cancel) = handle.into_parts();
        let accepted = store.latest("t").await.unwrap().unwrap();
        assert_eq!(accepted.run.status, RunStatus::Running, "{durability:?}");
        assert_eq!(accepted.pending.answered, ["clarify-1"]);
        assert_eq!(accepted.pending.resume.as_ref().map(|r| r.interrupt_id.as_str()), Some("clarify-1"));

        let restarted = Runner::new(graph(), store.clone(), RunnerConfig::default());
        assert_eq!(restarted.recover().await.unwrap(), 1);
        let (state, cp) = restarted.state("t").await.unwrap().unwrap();
        assert_eq!(cp.run.status, RunStatus::Completed, "{durability:?}");
        assert_eq!(state.answers, ["clarify-1=because"]);
        assert_eq!(state.log, ["asked", "decide"]);
        assert!(cp.pending.resume.is_none(), "the answer is spent once its node's update is committed");
    }
}

/// A resume cut off by a crash, whose recovered run then fails: the interrupt is pending again,
/// as it would be had the run failed before the crash, so the person's answer can be given
/// again instead of being refused as already answered.
#[tokio::test]
async fn a_recovered_resume_that_fails_reopens_its_interrupt() {
    for durability in [Durability::EveryNode, Durability::ByEffect] {
        let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        let resumed = Arc::new(AtomicU32::new(0));
        let graph = || ask_graph(&resumed, true, durability);
        let crashed = Runner::new(graph(), store.clone(), RunnerConfig::default());
        assert_eq!(run(&crashed, create("t")).await.0.unwrap().status, RunStatus::Interrupted);
        let handle = crashed.start(resume("t", "clarify-1", "because")).await.unwrap();
        let (_events, _outcome, _cancel) = handle.into_parts();
        while resumed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }

        let restarted = Runner::new(graph(), store.clone(), RunnerConfig::default());
        restarted.recover().await.unwrap();
        let latest = store.latest("t").await.unwrap().unwrap();
        assert_eq!(latest.run.status, RunStatus::Failed, "{durability:?}");
        assert!(latest.pending.interrupt("clarify-1").is_some(), "{durability:?}: pending again");
        assert!(!latest.pending.answered.contains(&"clarify-1".to_owned()));
        assert!(latest.pending.resume.is_none() && latest.pending.answering.is_none());

        let (outcome, _) = run(&restarted, resume("t", "clarify-1", "because")).await;
        let state = outcome.expect("answered again").state.unwrap();
        assert_eq!(state.answers, ["clarify-1=because"], "{durability:?}");
        assert_eq!(state.log, ["asked", "decide"]);
    }
}

// ---------------------------------------------------------------------------------------------
// retries and the failure route

/// Records where the thread's newest checkpoint says the run goes next, as it starts.
struct SeesCheckpoint {
    store: Arc<dyn Checkpointer>,
    next: Arc<Mutex<Option<Option<String>>>>,
}

#[async_trait]
impl Node<Case> for SeesCheckpoint {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        let latest = self.store.latest(ctx.thread_id()).await.unwrap().unwrap();
        *self.next.lock().unwrap() = Some(latest.next);
        Ok(NodeOutput::update(log("routed")))
    }
}

/// Under `by_effect`, the route the step limit takes is committed before a route node with
/// effects runs: a crash in it resumes at it, not at the looping node past its limit.
#[tokio::test]
async fn a_step_limit_route_to_a_node_with_effects_commits_before_it() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let next = Arc::new(Mutex::new(None));
    let graph = GraphBuilder::new("looping")
        .node_with("again", Step("again"), NodeOptions::default().with_effects())
        .node_with(
            "route",
            SeesCheckpoint { store: store.clone(), next: next.clone() },
            NodeOptions::default().with_effects(),
        )
        .entry("again")
        .edge("again", Target::node("again"))
        .edge("route", Target::End)
        .on_failure("route", |failure| CaseUpdate { error: Some(failure.message.clone()), ..Default::default() })
        .max_steps(2)
        .durability(Durability::ByEffect)
        .build()
        .unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    let outcome = run(&runner, create("t")).await.0.unwrap();
    assert_eq!(outcome.state.unwrap().log, ["again", "again", "routed"]);
    assert_eq!(*next.lock().unwrap(), Some(Some("route".to_owned())));
}

/// Never returns on its first call (the process "dies" in it); logs its later ones.
struct HangsFirst(Arc<AtomicU32>);

#[async_trait]
impl Node<Case> for HangsFirst {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            std::future::pending::<()>().await;
        }
        Ok(NodeOutput::update(log("escalated")))
    }
}

/// Always fails for good.
struct Broken;

#[async_trait]
impl Node<Case> for Broken {
    async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        Err(NodeError::new(NodeErrorKind::InvalidInput, "broken"))
    }
}

/// The run took the failure route and committed, then its process stopped: the run taken over
/// knows it did, so a second failure fails it instead of taking the route (and its node's
/// effects) once more.
#[tokio::test]
async fn a_run_taken_over_after_its_failure_route_does_not_take_it_again() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let escalations = Arc::new(AtomicU32::new(0));
    let graph = || {
        GraphBuilder::new("routed")
            .node("work", Broken)
            .node_with("escalate", HangsFirst(escalations.clone()), NodeOptions::default().with_effects())
            .node("close", Broken)
            .entry("work")
            .edge("work", Target::End)
            .edge("escalate", Target::node("close"))
            .edge("close", Target::End)
            .on_failure("escalate", |failure| CaseUpdate { error: Some(failure.node.clone()), ..Default::default() })
            .durability(Durability::EveryNode)
            .build()
            .unwrap()
    };
    let crashed = Runner::new(graph(), store.clone(), RunnerConfig::default());
    let handle = crashed.start(create("t")).await.unwrap();
    let (_events, _outcome, _cancel) = handle.into_parts();
    while escalations.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!((latest.next.as_deref(), latest.pending.failed_over_at), (Some("escalate"), Some(0)));

    let restarted = Runner::new(graph(), store.clone(), RunnerConfig::default());
    restarted.recover().await.unwrap();
    assert_eq!(escalations.load(Ordering::SeqCst), 2, "escalated again after the crash only, not after close failed");
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!(latest.run.status, RunStatus::Failed);
    assert_eq!(latest.pending.failed_over_at, None);
}

/// Fails with `kind` until its `fail_first` attempts are used up.
struct Flaky {
    kind: NodeErrorKind,
    fail_first: u32,
    calls: Arc<AtomicU32>,
}

#[async_trait]
impl Node<Case> for Flaky {
    async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(ctx.attempt(), call, "the context counts attempts");
        if call <= self.fail_first {
            return Err(NodeError::new(self.kind, format!("attempt {call} failed")));
        }
        Ok(NodeOutput::update(log(format!("ok after {call}"))))
    }
}

fn flaky_graph(
    kind: NodeErrorKind,
    fail_first: u32,
    policy: RetryPolicy,
    route: bool,
) -> (Runner<Case>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let mut builder = GraphBuilder::new("flaky")
        .node_with("call", Flaky { kind, fail_first, calls: calls.clone() }, NodeOptions::default().retry(policy))
        .node("finalize", Step("finalize"))
        .entry("call")
        .edge("call", Target::node("finalize"))
        .edge("finalize", Target::End);
    if route {
        builder = builder.on_failure("finalize", |failure| CaseUpdate {
            error: Some(format!("{} {:?} after {}", failure.node, failure.kind, failure.attempts)),
            answers: failure.answer.as_ref().map(|a| vec![a.interrupt_id.clone()]),
            ..Default::default()
        });
    }
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    (Runner::new(builder.build().unwrap(), store, RunnerConfig::default()), calls)
}

#[tokio::test]
async fn a_transient_failure_is_retried_and_each_attempt_streamed() {
    let (runner, calls) = flaky_graph(NodeErrorKind::ModelUnavailable, 2, fast_retry(3), false);
    let (outcome, events) = run(&runner, create("t")).await;
    let outcome = outcome.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(outcome.state.unwrap().log, ["ok after 3", "finalize"]);
    let retries: Vec<(u32, u32, FailureKind)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeRetrying { attempt, max_attempts, kind, .. } => Some((*attempt, *max_attempts, *kind)),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [(1, 3, FailureKind::ModelUnavailable), (2, 3, FailureKind::ModelUnavailable)]);
}

#[tokio::test]
async fn validation_errors_are_never_retried_by_default() {
    let (runner, calls) = flaky_graph(NodeErrorKind::ModelOutputInvalid, 1, fast_retry(3), false);
    let (outcome, events) = run(&runner, create("t")).await;
    assert!(matches!(outcome, Err(RunError::Node { .. })));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(!events.iter().any(|e| matches!(e.kind, EventKind::NodeRetrying { .. })));
}

#[tokio::test]
async fn exhausted_retries_take_the_failure_route_instead_of_failing_the_run() {
    let (runner, calls) = flaky_graph(NodeErrorKind::ModelUnavailable, u32::MAX, fast_retry(3), true);
    let (outcome, events) = run(&runner, create("t")).await;
    let outcome = outcome.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(outcome.status, RunStatus::Completed);
    let state = outcome.state.unwrap();
    assert_eq!(state.error, "call ModelUnavailable after 3");
    assert_eq!(state.log, ["finalize"]);
    assert!(state.answers.is_empty(), "a node that was not resumed hands over no answer");
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::NodeFailed { fallback, .. } if fallback == "finalize")));
}

/// A node resumed with an answer that then fails for good hands the answer to the failure
/// route: it is spent (the interrupt cannot be answered again), so the route's update is the
/// last place that can keep it.
#[tokio::test]
async fn the_failure_route_keeps_the_answer_the_failed_node_was_resumed_with() {
    let graph = GraphBuilder::new("ask")
        .node("ask", FailOnResume)
        .node("finalize", Step("finalize"))
        .entry("ask")
        .edge("ask", Target::node("finalize"))
        .edge("finalize", Target::End)
        .on_failure("finalize", |failure| CaseUpdate {
            error: Some(format!("{} {:?} after {}", failure.node, failure.kind, failure.attempts)),
            answers: failure
                .answer
                .as_ref()
                .map(|a| vec![format!("{}={}", a.interrupt_id, a.value.as_str().unwrap_or_default())]),
            ..Default::default()
        })
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    assert_eq!(run(&runner, create("t")).await.0.unwrap().status, RunStatus::Interrupted);

    let outcome = run(&runner, resume("t", "q", "I stood in for Bob")).await.0.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let state = outcome.state.unwrap();
    assert_eq!(state.error, "ask InvalidInput after 1");
    assert_eq!(state.answers, ["q=I stood in for Bob"]);
    assert_eq!(state.log, ["asked", "finalize"]);
    let again = run(&runner, resume("t", "q", "again")).await.0;
    assert!(matches!(again, Err(RunError::InterruptAnswered { .. })), "{again:?}");
}

#[tokio::test]
async fn a_node_timeout_is_retried() {
    struct SlowOnce(AtomicU32);
    #[async_trait]
    impl Node<Case> for SlowOnce {
        async fn run(&self, _state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(NodeOutput::update(log("fast")))
        }
    }
    let options = NodeOptions::default().timeout(Duration::from_millis(50)).retry(fast_retry(2));
    let graph = GraphBuilder::new("slow")
        .node_with("slow", SlowOnce(AtomicU32::new(0)), options)
        .entry("slow")
        .edge("slow", Target::End)
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let outcome = run(&runner, create("t")).await.0.unwrap();
    assert_eq!(outcome.state.unwrap().log, ["fast"]);
}

/// A node whose attempt made an outside effect (`ctx.acted()`) and then failed, by an error
/// its policy retries or by its timeout, is not run again: the effect would happen twice. It
/// takes the failure route instead. An attempt that failed before acting is retried as before.
#[tokio::test]
async fn an_attempt_that_acted_is_not_retried_on_an_error_or_a_timeout() {
    struct ActsThenFails {
        calls: Arc<AtomicU32>,
        act_on: u32,
        hang: bool,
    }
    #[async_trait]
    impl Node<Case> for ActsThenFails {
        async fn run(&self, _state: &Case, ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if call >= self.act_on {
                ctx.acted();
                assert!(ctx.has_acted());
            }
            if self.hang {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Err(NodeError::new(NodeErrorKind::ModelUnavailable, format!("attempt {call} failed")))
        }
    }
    for (act_on, hang, expected_calls) in [(1, false, 1), (2, false, 2), (1, true, 1), (3, true, 3)] {
        let calls = Arc::new(AtomicU32::new(0));
        let node = ActsThenFails { calls: calls.clone(), act_on, hang };
        let options = NodeOptions::default().timeout(Duration::from_millis(50)).retry(fast_retry(3)).with_effects();
        let graph = GraphBuilder::new("acts")
            .node_with("book", node, options)
            .node("finalize", Step("finalize"))
            .entry("book")
            .edge("book", Target::node("finalize"))
            .edge("finalize", Target::End)
            .on_failure("finalize", |failure| CaseUpdate {
                error: Some(format!("{} after {}", failure.node, failure.attempts)),
                ..Default::default()
            })
            .build()
            .unwrap();
        let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
        let outcome = run(&runner, create("t")).await.0.unwrap();
        let case = format!("acting from attempt {act_on}, hanging {hang}");
        assert_eq!(calls.load(Ordering::SeqCst), expected_calls, "{case}");
        assert_eq!(outcome.state.unwrap().error, format!("book after {expected_calls}"), "{case}");
    }
}

struct Loop;

#[async_trait]
impl Node<Case> for Loop {
    async fn run(&self, state: &Case, _ctx: &NodeContext) -> Result<NodeOutput<CaseUpdate>, NodeError> {
        Ok(NodeOutput::update(CaseUpdate { loops: Some(state.loops + 1), ..Default::default() }))
    }
}

#[tokio::test]
async fn the_step_limit_takes_the_failure_route() {
    let graph = GraphBuilder::new("loop")
        .node("spin", Loop)
        .node("finalize", Step("finalize"))
        .entry("spin")
        .conditional_edge("spin", [Target::node("spin"), Target::node("finalize")], |_| Target::node("spin"))
        .edge("finalize", Target::End)
        .max_steps(4)
        .on_failure("finalize", |failure| CaseUpdate {
            error: Some(format!("{:?}", failure.kind)),
            ..Default::default()
        })
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let outcome = run(&runner, create("t")).await.0.unwrap();
    let state = outcome.state.unwrap();
    assert_eq!((state.loops, state.error.as_str()), (4, "StepLimit"));
    assert_eq!(state.log, ["finalize"]);
}

#[tokio::test]
async fn a_failure_on_the_failure_route_fails_the_run() {
    let (first, second) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let failing = |calls: &Arc<AtomicU32>| Flaky {
        kind: NodeErrorKind::InvalidInput,
        fail_first: u32::MAX,
        calls: calls.clone(),
    };
    let graph = GraphBuilder::new("double")
        .node("call", failing(&first))
        .node("finalize", failing(&second))
        .entry("call")
        .edge("call", Target::node("finalize"))
        .edge("finalize", Target::End)
        .on_failure("finalize", |_| CaseUpdate::default())
        .build()
        .unwrap();
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    let error = run(&runner, create("t")).await.0.err().unwrap();
    assert!(matches!(error, RunError::Node { ref node, .. } if node == "finalize"), "{error:?}");
    assert_eq!((first.load(Ordering::SeqCst), second.load(Ordering::SeqCst)), (1, 1), "each node ran once");
    assert!(store.latest("t").await.unwrap().is_none(), "the run created the thread: rolled back, there is none");
}

#[test]
fn the_failure_route_must_name_a_node() {
    let error = GraphBuilder::<Case>::new("bad")
        .node("a", Step("a"))
        .entry("a")
        .edge("a", Target::End)
        .on_failure("missing", |_| CaseUpdate::default())
        .build()
        .err()
        .unwrap();
    assert_eq!(error, frontdesk_runtime::GraphError::UnknownFailureNode("missing".into()));
}

// ---------------------------------------------------------------------------------------------
// fan-out

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Topic {
    name: String,
}

/// Researches one topic. Every task first waits at a barrier of all three, which only opens
/// when the three run at the same time; `hold` makes a task's first call never return, as a
/// task in flight when the process dies.
struct Research {
    calls: Arc<Mutex<HashMap<String, u32>>>,
    barrier: Option<Arc<tokio::sync::Barrier>>,
    hold_first_call: Vec<&'static str>,
    fail: Option<&'static str>,
}

#[async_trait]
impl TaskNode<Case> for Research {
    type Input = Topic;

    async fn run(&self, _state: &Case, input: Topic, ctx: &NodeContext) -> Result<CaseUpdate, NodeError> {
        let call = {
            let mut calls = self.calls.lock().unwrap();
            let count = calls.entry(input.name.clone()).or_default();
            *count += 1;
            *count
        };
        if let Some(barrier) = &self.barrier {
            barrier.wait().await;
        }
        if self.fail == Some(input.name.as_str()) {
            return Err(NodeError::new(NodeErrorKind::DependencyFailed, "corpus unavailable"));
        }
        if call == 1 && self.hold_first_call.contains(&input.name.as_str()) {
            std::future::pending::<()>().await;
        }
        // Later topics finish first, so dispatch order is not finish order.
        let delay = match input.name.as_str() {
            "a" => 30,
            "b" => 15,
            _ => 0,
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let task = ctx.task().expect("a task knows its index");
        Ok(CaseUpdate { findings: Some(vec![format!("{}#{task}", input.name)]), ..Default::default() })
    }
}

fn research_graph(research: Research, topics: &'static [&'static str]) -> frontdesk_runtime::Graph<Case> {
    GraphBuilder::new("research")
        .node("plan", Step("plan"))
        .fan_out_with(
            "research",
            research,
            move |_: &Case| topics.iter().map(|t| Topic { name: (*t).to_owned() }).collect(),
            NodeOptions::default().retry(fast_retry(1)),
        )
        .node("summarize", Step("summarize"))
        .entry("plan")
        .edge("plan", Target::node("research"))
        .edge("research", Target::node("summarize"))
        .edge("summarize", Target::End)
        .on_failure("summarize", |failure| CaseUpdate { error: Some(failure.message.clone()), ..Default::default() })
        .build()
        .unwrap()
}

#[tokio::test]
async fn fan_out_runs_tasks_concurrently_and_applies_updates_in_dispatch_order() {
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let research = Research {
        calls: calls.clone(),
        barrier: Some(Arc::new(tokio::sync::Barrier::new(3))),
        hold_first_call: Vec::new(),
        fail: None,
    };
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new(100));
    let runner = Runner::new(research_graph(research, &["a", "b", "c"]), store.clone(), RunnerConfig::default());
    let (outcome, events) = run(&runner, create("q")).await;
    let outcome = outcome.unwrap();
    let state = outcome.state.unwrap();
    assert_eq!(state.findings, ["a#0", "b#1", "c#2"], "updates land in dispatch order");
    assert_eq!(state.log, ["plan", "summarize"]);
    let finished: Vec<Option<u32>> =
        events.iter().filter(|e| matches!(e.kind, EventKind::TaskFinished { .. })).map(|e| e.task).collect();
    assert_eq!(finished, [Some(2), Some(1), Some(0)], "task events stream as tasks finish");
    assert!(events.iter().any(|e| matches!(e.kind, EventKind::TasksDispatched { tasks: 3, already_done: 0, .. })));
    // Every finished task was a checkpoint of its own before the step completed.
    let history = store.history("q", 100).await.unwrap();
    let task_writes: Vec<usize> = history.iter().rev().map(|cp| cp.pending.tasks.len()).collect();
    assert!(task_writes.windows(3).any(|w| w == [1, 2, 3]), "pending writes per checkpoint: {task_writes:?}");
    assert!(history[0].pending.tasks.is_empty(), "a finished step leaves no pending writes");
}

#[tokio::test]
async fn recovery_after_a_crash_re_runs_only_the_unfinished_tasks() {
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let make = || Research { calls: calls.clone(), barrier: None, hold_first_call: vec!["b", "c"], fail: None };
    let crashed = Runner::new(research_graph(make(), &["a", "b", "c"]), store.clone(), RunnerConfig::default());
    // The first process: task a finishes and is committed; b and c are in flight when it "dies"
    // (their first calls never return, and nothing of that process runs again).
    let handle = crashed.start(create("q")).await.unwrap();
    let (_events, _outcome, _cancel) = handle.into_parts();
    let mut waited = 0;
    loop {
        let latest = store.latest("q").await.unwrap().unwrap();
        if latest.pending.tasks.len() == 1 {
            assert_eq!(latest.run.status, RunStatus::Running);
            assert_eq!(latest.pending.tasks[0].task, 0);
            break;
        }
        waited += 1;
        assert!(waited < 500, "task a's pending write was never committed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The restarted process (its own runner and thread locks) recovers the run.
    let restarted = Runner::new(research_graph(make(), &["a", "b", "c"]), store.clone(), RunnerConfig::default());
    assert_eq!(restarted.recover().await.unwrap(), 1);
    let counts = calls.lock().unwrap().clone();
    assert_eq!(counts["a"], 1, "the committed task is not run again");
    assert_eq!((counts["b"], counts["c"]), (2, 2), "the unfinished tasks are run again");
    let (state, cp) = restarted.state("q").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert_eq!(state.findings, ["a#0", "b#1", "c#2"]);
    assert!(cp.pending.tasks.is_empty());
}

#[tokio::test]
async fn a_failed_task_fails_its_step_and_takes_the_failure_route() {
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let research = Research { calls: calls.clone(), barrier: None, hold_first_call: vec!["a"], fail: Some("b") };
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let runner = Runner::new(research_graph(research, &["a", "b", "c"]), store.clone(), RunnerConfig::default());
    let outcome = run(&runner, create("q")).await.0.unwrap();
    let state = outcome.state.unwrap();
    assert!(state.findings.is_empty(), "no task's update is applied when the step fails");
    assert!(state.error.contains("research failed"), "{}", state.error);
    assert_eq!(state.log, ["plan", "summarize"]);
    assert!(store.latest("q").await.unwrap().unwrap().pending.tasks.is_empty());
}

#[tokio::test]
async fn a_fan_out_with_no_tasks_is_a_step_that_changes_nothing() {
    let calls = Arc::new(Mutex::new(HashMap::new()));
    let research = Research { calls: calls.clone(), barrier: None, hold_first_call: Vec::new(), fail: None };
    let runner =
        Runner::new(research_graph(research, &[]), Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let outcome = run(&runner, create("q")).await.0.unwrap();
    let state = outcome.state.unwrap();
    assert!(state.findings.is_empty());
    assert_eq!(state.log, ["plan", "summarize"]);
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn a_fan_out_node_is_described_as_such() {
    let research = Research { calls: Default::default(), barrier: None, hold_first_call: Vec::new(), fail: None };
    let description = research_graph(research, &["a"]).describe();
    assert!(description.nodes.iter().any(|n| n.name == "research" && n.fan_out));
    assert_eq!(description.failure_node.as_deref(), Some("summarize"));
    assert!(description.mermaid.contains("research[[research]]"), "{}", description.mermaid);
}

// ---------------------------------------------------------------------------------------------
// ephemeral graphs

#[tokio::test]
async fn an_ephemeral_run_streams_and_completes_but_writes_nothing() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let graph = GraphBuilder::new("match")
        .node("a", Step("a"))
        .node("b", Step("b"))
        .entry("a")
        .edge("a", Target::node("b"))
        .edge("b", Target::End)
        .durability(frontdesk_runtime::Durability::Ephemeral)
        .build()
        .unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    let (outcome, events) = run(&runner, RunRequest::new("m-1", RunInput::Update(CaseUpdate::default()))).await;
    let outcome = outcome.unwrap();
    assert_eq!(outcome.state.unwrap().log, ["a", "b"]);
    assert!(matches!(events.last().unwrap().kind, EventKind::RunFinished { steps: 2, .. }));
    assert!(store.latest("m-1").await.unwrap().is_none(), "an ephemeral run writes no checkpoint");

    let mut keyed = RunRequest::new("m-2", RunInput::Update(CaseUpdate::default()));
    keyed.idempotency_key = Some("k".into());
    assert!(matches!(runner.start(keyed).await.err().unwrap(), RunError::Ephemeral { .. }));
    let resumed = runner.start(resume("m-1", "x", "y")).await.err().unwrap();
    assert!(matches!(resumed, RunError::Ephemeral { .. }));
}

#[tokio::test]
async fn an_ephemeral_run_cannot_pause() {
    let graph = GraphBuilder::new("match")
        .node("ask", Gather)
        .entry("ask")
        .edge("ask", Target::End)
        .durability(frontdesk_runtime::Durability::Ephemeral)
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let error = run(&runner, RunRequest::new("m", RunInput::Update(CaseUpdate::default()))).await.0.err().unwrap();
    assert!(matches!(error, RunError::Ephemeral { .. }), "{error:?}");
}
