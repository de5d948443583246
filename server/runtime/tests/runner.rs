//! Runner semantics, end to end over the in-memory checkpointer.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use frontdesk_runtime::{
    checkpoint::{RunMarker, RunStatus},
    BusyPolicy, Checkpoint, CheckpointError, Checkpointer, CompletedRun, Completion, Durability, EventKind,
    GraphBuilder, GraphError, Handoff, HandoffError, InterruptRequest, MemoryCheckpointer, Node, NodeContext,
    NodeError, NodeErrorKind, NodeOutput, RunError, RunEvents, RunInput, RunRequest, Runner, RunnerConfig, StartError,
    Target, ThreadHead, ThreadMode, UnfinishedRun,
};

frontdesk_runtime::state! {
    pub struct Doc / DocUpdate {
        log: Vec<String> => Append,
        route: String => Replace,
        answer: String => Replace,
        loops: u32 => Replace,
    }
}

/// Appends its name to the log; optionally sets the route.
struct Step {
    name: &'static str,
    route: Option<&'static str>,
}

#[async_trait]
impl Node<Doc> for Step {
    async fn run(&self, _state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        Ok(NodeOutput::update(DocUpdate {
            log: Some(vec![self.name.to_owned()]),
            route: self.route.map(str::to_owned),
            ..Default::default()
        }))
    }
}

struct Sleep(Duration);

#[async_trait]
impl Node<Doc> for Sleep {
    async fn run(&self, _state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        tokio::time::sleep(self.0).await;
        Ok(NodeOutput::update(DocUpdate { log: Some(vec!["slept".into()]), ..Default::default() }))
    }
}

struct Fail;

#[async_trait]
impl Node<Doc> for Fail {
    async fn run(&self, _state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        Err(NodeError::new(NodeErrorKind::ModelOutputInvalid, "model replied with garbage"))
    }
}

/// Asks a question and waits for the answer.
struct Ask;

#[async_trait]
impl Node<Doc> for Ask {
    async fn run(&self, _state: &Doc, ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        match ctx.resume_value() {
            Some(answer) => Ok(NodeOutput::update(DocUpdate {
                answer: Some(answer.as_str().unwrap_or_default().to_owned()),
                log: Some(vec!["answered".into()]),
                ..Default::default()
            })),
            None => Ok(NodeOutput::interrupt(
                DocUpdate { log: Some(vec!["asked".into()]), ..Default::default() },
                InterruptRequest::new("why", "awaiting_user", &serde_json::json!({"question": "why?"}))?,
            )),
        }
    }
}

struct Loop;

#[async_trait]
impl Node<Doc> for Loop {
    async fn run(&self, state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        Ok(NodeOutput::update(DocUpdate { loops: Some(state.loops + 1), ..Default::default() }))
    }
}

fn routed_runner(store: Arc<dyn Checkpointer>) -> Runner<Doc> {
    let graph =
        GraphBuilder::new("routed")
            .node("classify", Step { name: "classify", route: None })
            .node("billing", Step { name: "billing", route: None })
            .node("general", Step { name: "general", route: None })
            .entry("classify")
            .conditional_edge("classify", [Target::node("billing"), Target::node("general"), Target::End], |s: &Doc| {
                match s.route.as_str() {
                    "billing" => Target::node("billing"),
                    "general" => Target::node("general"),
                    "none" => Target::End,
                    _ => Target::node("nowhere"),
                }
            })
            .edge("billing", Target::End)
            .edge("general", Target::End)
            .output(|s: &Doc| serde_json::json!({ "log": s.log }))
            .build()
            .unwrap();
    Runner::new(graph, store, RunnerConfig::default())
}

fn input(route: &str) -> RunRequest<DocUpdate> {
    let mut request =
        RunRequest::new("t1", RunInput::Update(DocUpdate { route: Some(route.into()), ..Default::default() }));
    request.mode = ThreadMode::CreateIfMissing;
    request
}

#[tokio::test]
async fn run_follows_conditional_edge_and_streams_ordered_events() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    let mut handle = runner.start(input("billing")).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "billing"]);
    assert_eq!(outcome.output, serde_json::json!({"log": ["classify", "billing"]}));

    let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "event ids are gap-free from 1");
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::RunStarted { .. } => "run_started".to_owned(),
            EventKind::NodeStarted { .. } => format!("start:{}", e.node.as_deref().unwrap()),
            EventKind::NodeFinished { next, .. } => {
                format!("finish:{}->{}", e.node.as_deref().unwrap(), next.as_deref().unwrap_or("end"))
            }
            EventKind::RunFinished { steps, .. } => format!("run_finished:{steps}"),
            other => panic!("unexpected event {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "start:classify",
            "finish:classify->billing",
            "start:billing",
            "finish:billing->end",
            "run_finished:2"
        ]
    );
    // One accepting commit plus one per node.
    let latest = store.latest("t1").await.unwrap().unwrap();
    assert_eq!(latest.version, 3);
    assert_eq!(latest.run.status, RunStatus::Completed);
    assert!(latest.next.is_none());
}

#[tokio::test]
async fn router_choosing_an_undeclared_target_fails_and_rolls_back() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    runner.start(input("none")).await.unwrap().wait().await.unwrap();
    let before = store.latest("t1").await.unwrap().unwrap();
    let mut request = input("bogus");
    request.mode = ThreadMode::Existing;
    let error = runner.start(request).await.unwrap().wait().await.unwrap_err();
    assert!(matches!(error, RunError::UndeclaredTarget { .. }), "{error:?}");
    let after = store.latest("t1").await.unwrap().unwrap();
    assert_eq!(after.run.status, RunStatus::Failed);
    assert_eq!(after.state, before.state, "a failed run restores the state from before it");
}

#[tokio::test]
async fn unknown_thread_is_not_found_unless_created() {
    let runner = routed_runner(Arc::new(MemoryCheckpointer::default()));
    let mut request = input("billing");
    request.mode = ThreadMode::Existing;
    assert!(matches!(runner.start(request).await, Err(RunError::NotFound { .. })));
}

#[tokio::test]
async fn a_new_thread_run_fails_on_an_existing_thread_and_writes_nothing() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    let mut first = input("billing");
    first.mode = ThreadMode::New;
    let outcome = runner.start(first).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let before = store.latest("t1").await.unwrap().unwrap();

    let mut again = input("general");
    again.mode = ThreadMode::New;
    let error = runner.start(again).await.map(|_| ()).unwrap_err();
    assert!(matches!(error, RunError::AlreadyExists { ref thread_id } if thread_id == "t1"), "{error:?}");
    let after = store.latest("t1").await.unwrap().unwrap();
    assert_eq!((after.version, after.state), (before.version, before.state), "the thread is untouched");
}

#[tokio::test]
async fn failing_node_emits_run_failed_and_leaves_state_as_it_was() {
    let store = Arc::new(MemoryCheckpointer::default());
    let graph = GraphBuilder::new("failing")
        .node("a", Step { name: "a", route: None })
        .node("fail", Fail)
        .entry("a")
        .edge("a", Target::node("fail"))
        .edge("fail", Target::End)
        .build()
        .unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    runner.create_thread("t1", &Doc { log: vec!["before".into()], ..Default::default() }).await.unwrap();
    let mut handle = runner
        .start(RunRequest::new(
            "t1",
            RunInput::Update(DocUpdate { log: Some(vec!["input".into()]), ..Default::default() }),
        ))
        .await
        .unwrap();
    let mut last = None;
    while let Some(event) = handle.events.recv().await {
        last = Some(event);
    }
    let error = handle.wait().await.unwrap_err();
    assert!(matches!(&error, RunError::Node { node, .. } if node == "fail"), "{error:?}");
    match last.unwrap().kind {
        EventKind::RunFailed { kind, message, .. } => {
            assert_eq!(kind, frontdesk_runtime::FailureKind::ModelOutputInvalid);
            assert!(message.contains("fail"), "{message}");
        }
        other => panic!("last event must be RunFailed, got {other:?}"),
    }
    let (state, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["before"], "neither the input nor node a's update survive a failed run");
    assert_eq!(cp.run.status, RunStatus::Failed);
    assert!(store.unfinished_threads().await.unwrap().is_empty(), "a failed run is never resumed by recovery");
}

#[tokio::test]
async fn node_timeout_fails_the_run() {
    let graph = GraphBuilder::new("slow")
        .node_with_timeout("slow", Sleep(Duration::from_secs(5)), Duration::from_millis(50))
        .entry("slow")
        .edge("slow", Target::End)
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let mut request = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    let error = runner.start(request).await.unwrap().wait().await.unwrap_err();
    assert!(matches!(error, RunError::NodeTimeout { ref node, .. } if node == "slow"), "{error:?}");
}

#[tokio::test]
async fn run_deadline_fails_the_run() {
    let graph =
        GraphBuilder::new("slow").node("slow", Sleep(Duration::from_secs(5))).entry("slow").edge("slow", Target::End);
    let runner = Runner::new(graph.build().unwrap(), Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let mut request = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    request.timeout = Some(Duration::from_millis(50));
    let error = runner.start(request).await.unwrap().wait().await.unwrap_err();
    assert!(matches!(error, RunError::DeadlineExceeded), "{error:?}");
}

#[tokio::test]
async fn cancel_stops_an_in_flight_node_and_keeps_the_last_state() {
    let store = Arc::new(MemoryCheckpointer::default());
    let graph =
        GraphBuilder::new("slow").node("slow", Sleep(Duration::from_secs(30))).entry("slow").edge("slow", Target::End);
    let runner = Runner::new(graph.build().unwrap(), store.clone(), RunnerConfig::default());
    runner.create_thread("t", &Doc::default()).await.unwrap();
    let handle = runner
        .start(RunRequest::new("t", RunInput::Update(DocUpdate { log: Some(vec!["x".into()]), ..Default::default() })))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(runner.registry().cancel(&handle.run_id), "the run is registered while active");
    let started = std::time::Instant::now();
    let error = handle.wait().await.unwrap_err();
    assert!(matches!(error, RunError::Cancelled), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "cancel must not wait for the node");
    let (state, _) = runner.state("t").await.unwrap().unwrap();
    assert!(state.log.is_empty());
    assert_eq!(runner.registry().active_runs(), 0);
}

/// `spin` loops until it has run `until` times, within `max_steps`.
fn spin_graph(until: u32, max_steps: u32) -> frontdesk_runtime::Graph<Doc> {
    GraphBuilder::new("loop")
        .node("spin", Loop)
        .entry("spin")
        .conditional_edge("spin", [Target::node("spin"), Target::End], move |s: &Doc| {
            if s.loops < until {
                Target::node("spin")
            } else {
                Target::End
            }
        })
        .max_steps(max_steps)
        .build()
        .unwrap()
}

#[tokio::test]
async fn step_limit_stops_loops() {
    let graph = spin_graph(1000, 10);
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    let mut request = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    let error = runner.start(request).await.unwrap().wait().await.unwrap_err();
    assert!(matches!(error, RunError::StepLimit { limit: 10 }), "{error:?}");
}

/// The caller holds its stream open and never reads: its buffer fills, and the run waits for it
/// only until the run's deadline, then goes on to its end without it (its events still in the
/// run's log) instead of holding its thread and its slot for as long as the connection lasts.
#[tokio::test]
async fn a_caller_that_stops_reading_holds_its_run_back_until_the_deadline_only() {
    let graph = spin_graph(20, 100);
    let config = RunnerConfig { event_buffer: 2, ..RunnerConfig::default() };
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), config);
    let mut request = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    request.timeout = Some(Duration::from_millis(200));
    let (events, outcome, _cancel) = runner.start(request).await.unwrap().into_parts();
    let ended = tokio::time::timeout(Duration::from_secs(10), outcome).await.expect("the run ends without its reader");
    assert_eq!(ended.unwrap().expect("its nodes are quick, so it completes").state.unwrap().loops, 20);
    assert_eq!(runner.registry().active_runs(), 0);
    drop(events);
}

#[tokio::test]
async fn interrupt_persists_and_resume_continues_at_the_node() {
    let store = Arc::new(MemoryCheckpointer::default());
    let build = || {
        GraphBuilder::new("ask")
            .node("ask", Ask)
            .node("after", Step { name: "after", route: None })
            .entry("ask")
            .edge("ask", Target::node("after"))
            .edge("after", Target::End)
            .build()
            .unwrap()
    };
    let runner = Runner::new(build(), store.clone(), RunnerConfig::default());
    let mut request = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    request.mode = ThreadMode::CreateIfMissing;
    let outcome = runner.start(request).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Interrupted);
    assert_eq!(outcome.interrupts.len(), 1);
    assert_eq!((outcome.interrupts[0].id.as_str(), outcome.interrupts[0].reason.as_str()), ("why", "awaiting_user"));

    // A new turn cannot bypass a pending interrupt.
    let error = runner.start(RunRequest::new("t", RunInput::Update(DocUpdate::default()))).await.err().unwrap();
    assert!(matches!(error, RunError::Interrupted { .. }));

    // Another replica (a fresh runner on the same store) resumes exactly there.
    let replica = Runner::new(build(), store.clone(), RunnerConfig::default());
    let outcome = replica
        .start(RunRequest::new(
            "t",
            RunInput::Resume { interrupt_id: "why".into(), value: serde_json::json!("because") },
        ))
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let state = outcome.state.unwrap();
    assert_eq!(state.answer, "because");
    assert_eq!(state.log, vec!["asked", "answered", "after"]);
    let again = RunInput::Resume { interrupt_id: "why".into(), value: serde_json::json!("again") };
    let error = replica.start(RunRequest::new("t", again)).await.err().unwrap();
    assert!(matches!(error, RunError::InterruptAnswered { .. }), "{error:?}");
}

#[tokio::test]
async fn second_run_on_a_busy_thread_is_rejected_or_queued() {
    let store = Arc::new(MemoryCheckpointer::default());
    let graph = GraphBuilder::new("slow")
        .node("slow", Sleep(Duration::from_millis(200)))
        .entry("slow")
        .edge("slow", Target::End);
    let runner = Runner::new(graph.build().unwrap(), store.clone(), RunnerConfig::default());
    runner.create_thread("t", &Doc::default()).await.unwrap();
    let first = runner.start(RunRequest::new("t", RunInput::Update(DocUpdate::default()))).await.unwrap();
    let rejected = runner.start(RunRequest::new("t", RunInput::Update(DocUpdate::default()))).await;
    assert!(matches!(rejected, Err(RunError::ThreadBusy { .. })));
    let mut queued = RunRequest::new("t", RunInput::Update(DocUpdate::default()));
    queued.busy = BusyPolicy::Queue;
    let second = runner.start(queued).await.unwrap();
    first.wait().await.unwrap();
    let outcome = second.wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["slept", "slept"]);
}

#[tokio::test]
async fn idempotency_key_replays_the_first_outcome() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    let mut request = input("general");
    request.idempotency_key = Some("k1".into());
    let first = runner.start(request).await.unwrap().wait().await.unwrap();
    let version = store.latest("t1").await.unwrap().unwrap().version;
    let mut retry = input("billing");
    retry.idempotency_key = Some("k1".into());
    let replay = runner.start(retry).await.unwrap().wait().await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.run_id, first.run_id);
    assert_eq!(replay.output, first.output);
    assert_eq!(store.latest("t1").await.unwrap().unwrap().version, version, "a replay runs nothing");
}

#[tokio::test]
async fn an_idempotency_key_reused_by_a_different_request_is_refused() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    let mut request = input("general");
    request.idempotency_key = Some("k1".into());
    request.fingerprint = Some("fp-general".into());
    let first = runner.start(request).await.unwrap().wait().await.unwrap();
    let version = store.latest("t1").await.unwrap().unwrap().version;
    let mut other = input("billing");
    other.idempotency_key = Some("k1".into());
    other.fingerprint = Some("fp-billing".into());
    match runner.start(other).await {
        Err(RunError::IdempotencyMismatch { thread_id, key }) => {
            assert_eq!((thread_id, key), ("t1".into(), "k1".into()))
        }
        Err(other) => panic!("expected IdempotencyMismatch, got {other:?}"),
        Ok(_) => panic!("expected IdempotencyMismatch, got a run"),
    }
    assert_eq!(store.latest("t1").await.unwrap().unwrap().version, version, "a refused retry runs nothing");
    let mut same = input("general");
    same.idempotency_key = Some("k1".into());
    same.fingerprint = Some("fp-general".into());
    let replay = runner.start(same).await.unwrap().wait().await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.run_id, first.run_id);
}

/// A checkpoint left `Running` is what a crash leaves behind.
async fn crashed_thread(store: &MemoryCheckpointer, key: Option<&str>) {
    let state = Doc { log: vec!["classify".into()], route: "billing".into(), ..Default::default() };
    store
        .put(&Checkpoint {
            thread_id: "t1".into(),
            workflow: "routed".into(),
            version: 1,
            state: serde_json::to_vec(&state).unwrap(),
            next: Some("billing".into()),
            pending: Default::default(),
            run: RunMarker {
                run_id: "crashed-run".into(),
                idempotency_key: key.map(str::to_owned),
                fingerprint: key.map(|k| format!("fp-{k}")),
                status: RunStatus::Running,
                step: 1,
                output: None,
                owner: None,
            },
            created_at: std::time::SystemTime::now(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn retry_with_the_same_key_reattaches_to_a_crash_interrupted_run() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, Some("k1")).await;
    let busy = routed_runner(store.clone());
    let mut retry = input("billing");
    retry.idempotency_key = Some("k1".into());
    assert!(
        matches!(busy.start(retry).await, Err(RunError::ThreadBusy { .. })),
        "a fresh running checkpoint may belong to a live replica"
    );
    let runner = abandoned_after_zero(store.clone());
    let mut retry = input("billing");
    retry.idempotency_key = Some("k1".into());
    let outcome = runner.start(retry).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.run_id, "crashed-run");
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "billing"], "the input is not applied twice");
}

#[tokio::test]
async fn a_different_request_with_the_key_of_a_crash_interrupted_run_is_refused() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, Some("k1")).await;
    let runner = abandoned_after_zero(store.clone());
    let mut retry = input("general");
    retry.idempotency_key = Some("k1".into());
    retry.fingerprint = Some("fp-another-request".into());
    assert!(matches!(runner.start(retry).await, Err(RunError::IdempotencyMismatch { .. })));
    assert_eq!(store.latest("t1").await.unwrap().unwrap().run.run_id, "crashed-run", "nothing ran");
}

/// A runner that treats every running checkpoint as abandoned.
fn abandoned_after_zero(store: Arc<dyn Checkpointer>) -> Runner<Doc> {
    let runner = routed_runner(store);
    let config = RunnerConfig { takeover_after: Duration::ZERO, ..RunnerConfig::default() };
    let graph = GraphBuilder::new("routed")
        .node("classify", Step { name: "classify", route: None })
        .node("billing", Step { name: "billing", route: None })
        .node("general", Step { name: "general", route: None })
        .entry("classify")
        .conditional_edge("classify", [Target::node("billing"), Target::node("general"), Target::End], |s: &Doc| {
            if s.route == "billing" {
                Target::node("billing")
            } else {
                Target::node("general")
            }
        })
        .edge("billing", Target::End)
        .edge("general", Target::End)
        .build()
        .unwrap();
    Runner::new(graph, runner.checkpointer().clone(), config)
}

#[tokio::test]
async fn a_new_turn_first_finishes_an_abandoned_run() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, None).await;
    let runner = abandoned_after_zero(store.clone());
    let mut turn = input("general");
    turn.mode = ThreadMode::Existing;
    let outcome = runner.start(turn).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "billing", "classify", "general"]);
}

/// The new turn's caller goes away (a disconnect, a deadline) while the turn first finishes the
/// abandoned run: that run still ends, and the thread is free again, not busy for as long as the
/// process lives.
#[tokio::test]
async fn a_new_turn_dropped_while_it_finishes_an_abandoned_run_leaves_the_thread_free() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, None).await;
    let graph = GraphBuilder::new("routed")
        .node("classify", Step { name: "classify", route: None })
        .node("billing", Sleep(Duration::from_millis(300)))
        .entry("classify")
        .edge("classify", Target::node("billing"))
        .edge("billing", Target::End)
        .build()
        .unwrap();
    let config = RunnerConfig { takeover_after: Duration::ZERO, ..RunnerConfig::default() };
    let runner = Runner::new(graph, store.clone(), config);
    let mut turn = input("billing");
    turn.mode = ThreadMode::Existing;
    assert!(
        tokio::time::timeout(Duration::from_millis(50), runner.start(turn)).await.is_err(),
        "still finishing the abandoned run when its caller goes"
    );
    tokio::time::timeout(Duration::from_secs(5), runner.registry().wait_idle()).await.expect("the abandoned run ends");
    let latest = store.latest("t1").await.unwrap().unwrap();
    assert_eq!((latest.run.run_id.as_str(), latest.run.status), ("crashed-run", RunStatus::Completed));
    let mut again = input("billing");
    again.mode = ThreadMode::Existing;
    let outcome = runner.start(again).await.expect("not busy").wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, ["classify", "slept", "classify", "slept"]);
}

#[tokio::test]
async fn recovery_finishes_crash_interrupted_runs() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, None).await;
    let runner = routed_runner(store.clone());
    assert_eq!(runner.recover().await.unwrap(), 1);
    let (state, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "billing"]);
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert!(store.unfinished_threads().await.unwrap().is_empty());
}

#[tokio::test]
async fn two_replicas_cannot_both_commit_a_turn() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let graph = || {
        GraphBuilder::new("slow")
            .node("slow", Sleep(Duration::from_millis(100)))
            .entry("slow")
            .edge("slow", Target::End)
    };
    // Separate registries: no shared in-process lock, only the checkpoint compare-and-set.
    let a = Runner::new(graph().build().unwrap(), store.clone(), RunnerConfig::default());
    let b = Runner::new(graph().build().unwrap(), store.clone(), RunnerConfig::default());
    a.create_thread("t", &Doc::default()).await.unwrap();
    let (ra, rb) = tokio::join!(
        async { a.start(RunRequest::new("t", RunInput::Update(DocUpdate::default()))).await?.wait().await },
        async { b.start(RunRequest::new("t", RunInput::Update(DocUpdate::default()))).await?.wait().await },
    );
    let ok = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 1, "exactly one replica commits: {ra:?} / {rb:?}");
    let (state, _) = a.state("t").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["slept"]);
}

#[test]
fn graph_validation_rejects_bad_graphs() {
    let unknown = GraphBuilder::<Doc>::new("g")
        .node("a", Step { name: "a", route: None })
        .entry("a")
        .edge("a", Target::node("b"))
        .build()
        .err();
    assert_eq!(unknown, Some(GraphError::UnknownTarget { from: "a".into(), to: "b".into() }));
    let unreachable = GraphBuilder::<Doc>::new("g")
        .node("a", Step { name: "a", route: None })
        .node("b", Step { name: "b", route: None })
        .entry("a")
        .edge("a", Target::End)
        .edge("b", Target::End)
        .build()
        .err();
    assert_eq!(unreachable, Some(GraphError::Unreachable("b".into())));
    let dangling = GraphBuilder::<Doc>::new("g").node("a", Step { name: "a", route: None }).entry("a").build().err();
    assert_eq!(dangling, Some(GraphError::NoOutgoingEdge("a".into())));
    let no_entry =
        GraphBuilder::<Doc>::new("g").node("a", Step { name: "a", route: None }).edge("a", Target::End).build().err();
    assert_eq!(no_entry, Some(GraphError::NoEntry));
}

#[test]
fn description_lists_nodes_edges_and_mermaid() {
    let runner = routed_runner(Arc::new(MemoryCheckpointer::default()));
    let description = runner.graph().describe();
    let names: Vec<_> = description.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["classify", "billing", "general"]);
    assert!(description.edges.iter().any(|e| e.source == "classify" && e.target == "__end__" && e.conditional));
    assert!(description.mermaid.starts_with("flowchart TD"));
    assert!(description.mermaid.contains("classify -.-> billing"));
}

/// Never finishes: a node in flight when the process dies.
struct Hang;

#[async_trait]
impl Node<Doc> for Hang {
    async fn run(&self, _state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        std::future::pending().await
    }
}

/// Reads the run's events until `node` has started: the run is past its commits before it.
async fn until_node_starts(events: &mut RunEvents, node: &str) {
    while let Some(event) = events.recv().await {
        if matches!(event.kind, EventKind::NodeStarted { .. }) && event.node.as_deref() == Some(node) {
            return;
        }
    }
    panic!("the run ended before {node} started");
}

fn two_step_graph(second: impl Node<Doc>, durability: Durability) -> frontdesk_runtime::Graph<Doc> {
    GraphBuilder::new("routed")
        .node("classify", Step { name: "classify", route: None })
        .node("billing", second)
        .entry("classify")
        .edge("classify", Target::node("billing"))
        .edge("billing", Target::End)
        .durability(durability)
        .build()
        .unwrap()
}

#[tokio::test]
async fn by_effect_durability_without_effects_writes_the_accepting_and_the_final_checkpoint_only() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let graph = two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect);
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    let mut handle = runner.start(input("billing")).await.unwrap();
    let mut finished = Vec::new();
    while let Some(event) = handle.events.recv().await {
        if let EventKind::NodeFinished { .. } = event.kind {
            finished.push(event.node.unwrap().to_string());
        }
    }
    assert_eq!(finished, ["classify", "billing"], "node events stream as with every-node durability");
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "billing"]);
    let history = store.history("t1", 10).await.unwrap();
    let written: Vec<(u64, RunStatus)> = history.iter().map(|cp| (cp.version, cp.run.status)).collect();
    assert_eq!(written, [(2, RunStatus::Completed), (1, RunStatus::Running)]);
}

#[tokio::test]
async fn by_effect_durability_reruns_a_crashed_effect_free_run_from_its_input() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let dying = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut handle = dying.start(input("billing")).await.unwrap();
    // Wait until the second node is in flight: the first has finished, and wrote nothing.
    until_node_starts(&mut handle.events, "billing").await;
    let latest = store.latest("t1").await.unwrap().unwrap();
    assert_eq!((latest.version, latest.run.status), (1, RunStatus::Running));
    assert_eq!(latest.next.as_deref(), Some("classify"), "the input is durable, the node outputs are not");

    // The process "dies" here; the next one recovers the run from its input.
    let restarted = Runner::new(
        two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect),
        store.clone(),
        RunnerConfig::default(),
    );
    assert_eq!(restarted.recover().await.unwrap(), 1);
    let (state, cp) = restarted.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "billing"], "every node re-ran once, the input was applied once");
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert_eq!(cp.run.run_id, latest.run.run_id, "recovery finishes the same run");
}

/// A keyed turn whose input is `said` (appended to the log).
fn keyed_turn(said: &str, key: &str, fingerprint: &str) -> RunRequest<DocUpdate> {
    let mut request = input("billing");
    if let RunInput::Update(update) = &mut request.input {
        update.log = Some(vec![said.to_owned()]);
    }
    request.idempotency_key = Some(key.into());
    request.fingerprint = Some(fingerprint.into());
    request
}

#[tokio::test]
async fn a_retry_after_a_taken_over_run_failed_applies_its_input_once() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let dying = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut handle = dying.start(keyed_turn("hello", "k1", "f1")).await.unwrap();
    until_node_starts(&mut handle.events, "billing").await;
    // The process "dies"; the next one resumes the run from its accepting checkpoint, and the
    // run fails. The state from before it is gone, so its input stays.
    let failing = Runner::new(two_step_graph(Fail, Durability::ByEffect), store.clone(), RunnerConfig::default());
    assert_eq!(failing.recover().await.unwrap(), 0, "resumed, and failed");
    let (state, cp) = failing.state("t1").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Failed);
    assert_eq!(state.log, ["hello"], "the failed run kept its input");
    assert!(cp.pending.input_kept);

    let healthy = Runner::new(
        two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect),
        store.clone(),
        RunnerConfig::default(),
    );
    // Another request with the same key is not that one: its input is applied.
    let mut other = keyed_turn("hello", "k1", "f2");
    other.mode = ThreadMode::Existing;
    let applied = healthy.start(other).await.unwrap().wait().await.unwrap();
    assert_eq!(applied.state.unwrap().log, ["hello", "hello", "classify", "billing"]);
    // Start again from the failed run, and retry the very request.
    let failing = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut handle = failing.start(keyed_turn("hi", "k2", "f3")).await.unwrap();
    until_node_starts(&mut handle.events, "billing").await;
    let failing = Runner::new(two_step_graph(Fail, Durability::ByEffect), store.clone(), RunnerConfig::default());
    assert_eq!(failing.recover().await.unwrap(), 0, "resumed, and failed");
    let retry = healthy.start(keyed_turn("hi", "k2", "f3")).await.unwrap().wait().await.unwrap();
    let log = retry.state.unwrap().log;
    assert_eq!(log.iter().filter(|said| *said == "hi").count(), 1, "the input applied once: {log:?}");
    assert_eq!(log[log.len() - 3..], ["hi", "classify", "billing"]);
    let (_, cp) = healthy.state("t1").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert!(!cp.pending.input_kept, "only a failed checkpoint says so");
}

#[tokio::test]
async fn a_retry_after_an_ordinary_failed_run_applies_its_input() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let healthy = Runner::new(
        two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect),
        store.clone(),
        RunnerConfig::default(),
    );
    healthy.start(keyed_turn("first", "k0", "f0")).await.unwrap().wait().await.unwrap();
    let failing = Runner::new(two_step_graph(Fail, Durability::ByEffect), store.clone(), RunnerConfig::default());
    failing.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap_err();
    let (state, cp) = failing.state("t1").await.unwrap().unwrap();
    assert_eq!((cp.run.status, cp.pending.input_kept), (RunStatus::Failed, false));
    assert_eq!(state.log, ["first", "classify", "billing"], "rolled back past its input");
    let retry = healthy.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap();
    assert_eq!(retry.state.unwrap().log, ["first", "classify", "billing", "hello", "classify", "billing"]);
}

#[tokio::test]
async fn a_failed_run_that_created_its_thread_leaves_none_and_a_retry_creates_it() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let failing = Runner::new(two_step_graph(Fail, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut first = keyed_turn("hello", "k1", "f1");
    first.mode = ThreadMode::New;
    failing.start(first).await.unwrap().wait().await.unwrap_err();
    assert!(store.latest("t1").await.unwrap().is_none(), "no thread of the default state left behind");
    let healthy = Runner::new(
        two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect),
        store.clone(),
        RunnerConfig::default(),
    );
    let mut retry = keyed_turn("hello", "k1", "f1");
    retry.mode = ThreadMode::New;
    let outcome = healthy.start(retry).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, ["hello", "classify", "billing"], "a new thread again, not AlreadyExists");
}

#[tokio::test]
async fn a_run_stopped_with_its_process_is_left_for_the_next_start_not_rolled_back() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let stopping = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut handle = stopping.start(input("billing")).await.unwrap();
    until_node_starts(&mut handle.events, "billing").await;
    stopping.registry().stop();
    let error = handle.wait().await.unwrap_err();
    assert!(matches!(error, RunError::Stopped), "{error:?}");
    let latest = store.latest("t1").await.unwrap().unwrap();
    assert_eq!((latest.version, latest.run.status), (1, RunStatus::Running), "the accepted input is kept");
    // A run that would start now is refused before it writes anything.
    let mut other = input("billing");
    other.thread_id = "t2".into();
    let refused = stopping.start(other).await.err();
    assert!(matches!(refused, Some(RunError::Stopped)), "{refused:?}");
    assert!(store.latest("t2").await.unwrap().is_none());

    let restarted = Runner::new(
        two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect),
        store.clone(),
        RunnerConfig::default(),
    );
    assert_eq!(restarted.recover().await.unwrap(), 1);
    let (state, cp) = restarted.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "billing"]);
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert_eq!(cp.run.run_id, latest.run.run_id, "the next start finishes the same run");
}

#[tokio::test]
async fn by_effect_durability_writes_a_heartbeat_before_a_node_that_could_outlive_the_takeover_age() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    // Every node's timeout reaches past takeover_after, so each Running step is a heartbeat.
    let config = RunnerConfig {
        node_timeout: Duration::from_secs(10),
        takeover_after: Duration::from_secs(5),
        ..RunnerConfig::default()
    };
    let runner =
        Runner::new(two_step_graph(Step { name: "billing", route: None }, Durability::ByEffect), store.clone(), config);
    runner.start(input("billing")).await.unwrap().wait().await.unwrap();
    let history = store.history("t1", 10).await.unwrap();
    let written: Vec<(u64, RunStatus)> = history.iter().map(|cp| (cp.version, cp.run.status)).collect();
    assert_eq!(written, [(3, RunStatus::Completed), (2, RunStatus::Running), (1, RunStatus::Running)]);
}

/// Files something outside the state: records the run id of every call; hangs on the first
/// call when `hang_first` (the process dies while the effect is in flight). With `once`, it
/// files nothing when the state says it was filed, as a real submitter checks its record.
#[derive(Default)]
struct Effect {
    calls: Arc<std::sync::Mutex<Vec<String>>>,
    hang_first: bool,
    once: bool,
}

#[async_trait]
impl Node<Doc> for Effect {
    async fn run(&self, state: &Doc, ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        if self.once && state.log.iter().any(|entry| entry == "effect") {
            return Ok(NodeOutput::update(DocUpdate::default()));
        }
        let first = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(ctx.run_id().to_owned());
            calls.len() == 1
        };
        if first && self.hang_first {
            std::future::pending::<()>().await;
        }
        Ok(NodeOutput::update(DocUpdate { log: Some(vec!["effect".into()]), ..Default::default() }))
    }
}

/// classify -> effect (declared with effects) -> tail -> END, by effect.
fn effect_graph(effect: Effect, tail: impl Node<Doc>) -> frontdesk_runtime::Graph<Doc> {
    GraphBuilder::new("routed")
        .node("classify", Step { name: "classify", route: None })
        .node_with("effect", effect, frontdesk_runtime::NodeOptions::default().with_effects())
        .node("tail", tail)
        .entry("classify")
        .edge("classify", Target::node("effect"))
        .edge("effect", Target::node("tail"))
        .edge("tail", Target::End)
        .durability(Durability::ByEffect)
        .build()
        .unwrap()
}

fn written(history: &[Checkpoint]) -> Vec<(u64, RunStatus, Option<&str>)> {
    history.iter().rev().map(|cp| (cp.version, cp.run.status, cp.next.as_deref())).collect()
}

#[tokio::test]
async fn by_effect_durability_commits_before_and_after_a_node_with_effects_only() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let runner = Runner::new(
        effect_graph(Effect::default(), Step { name: "tail", route: None }),
        store.clone(),
        RunnerConfig::default(),
    );
    let outcome = runner.start(input("billing")).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "effect", "tail"]);
    let history = store.history("t1", 10).await.unwrap();
    assert_eq!(
        written(&history),
        [
            (1, RunStatus::Running, Some("classify")),
            (2, RunStatus::Running, Some("effect")),
            (3, RunStatus::Running, Some("tail")),
            (4, RunStatus::Completed, None),
        ],
        "the input, before the effect, after it, the end; nothing after classify alone"
    );
    let described = runner.graph().describe();
    let effects: Vec<_> = described.nodes.iter().filter(|n| n.effects).map(|n| n.name.as_str()).collect();
    assert_eq!(effects, ["effect"], "the description says which nodes act outside the state");
}

#[tokio::test]
async fn a_crash_after_a_node_with_effects_never_runs_it_again() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let dying = Runner::new(
        effect_graph(Effect { calls: calls.clone(), ..Effect::default() }, Hang),
        store.clone(),
        RunnerConfig::default(),
    );
    let mut handle = dying.start(input("billing")).await.unwrap();
    until_node_starts(&mut handle.events, "tail").await;
    // The process "dies" with the effect-free tail in flight.
    let restarted = Runner::new(
        effect_graph(Effect { calls: calls.clone(), ..Effect::default() }, Step { name: "tail", route: None }),
        store.clone(),
        RunnerConfig::default(),
    );
    assert_eq!(restarted.recover().await.unwrap(), 1);
    let (state, cp) = restarted.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "effect", "tail"], "only the tail ran again");
    assert_eq!(cp.run.status, RunStatus::Completed);
    assert_eq!(calls.lock().unwrap().len(), 1, "the effect happened once");
}

#[tokio::test]
async fn a_crash_during_a_node_with_effects_resumes_at_it_with_the_same_run_id() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let dying = Runner::new(
        effect_graph(
            Effect { calls: calls.clone(), hang_first: true, once: false },
            Step { name: "tail", route: None },
        ),
        store.clone(),
        RunnerConfig::default(),
    );
    let mut handle = dying.start(input("billing")).await.unwrap();
    let run_id = handle.run_id.clone();
    until_node_starts(&mut handle.events, "effect").await;
    let latest = store.latest("t1").await.unwrap().unwrap();
    assert_eq!((latest.version, latest.next.as_deref()), (2, Some("effect")), "committed before the effect");

    let restarted = Runner::new(
        effect_graph(Effect { calls: calls.clone(), ..Effect::default() }, Step { name: "tail", route: None }),
        store.clone(),
        RunnerConfig::default(),
    );
    assert_eq!(restarted.recover().await.unwrap(), 1);
    let (state, _) = restarted.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "effect", "tail"], "classify did not run again");
    assert_eq!(*calls.lock().unwrap(), [run_id.clone(), run_id], "the effect ran again under the same run id");
}

#[tokio::test]
async fn a_run_that_fails_after_a_committed_effect_keeps_it_and_its_retry_does_not_repeat_it() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let effect = || Effect { calls: calls.clone(), once: true, ..Effect::default() };
    let failing = Runner::new(effect_graph(effect(), Fail), store.clone(), RunnerConfig::default());
    failing.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap_err();
    let (state, cp) = failing.state("t1").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Failed);
    assert_eq!(state.log, ["hello", "classify", "effect"], "rolled back to the effect, not past it");
    assert!(cp.pending.input_kept);

    let healthy =
        Runner::new(effect_graph(effect(), Step { name: "tail", route: None }), store.clone(), RunnerConfig::default());
    let retry = healthy.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap();
    assert_eq!(retry.state.unwrap().log, ["hello", "classify", "effect", "classify", "tail"]);
    assert_eq!(calls.lock().unwrap().len(), 1, "filed once");
}

/// The commit after the effect fails (the store is down for that one write): the run fails, and
/// its rollback still keeps the effect, so the keyed retry does not make it again.
#[tokio::test]
async fn a_run_whose_commit_after_its_effect_fails_keeps_the_effect() {
    let store = Arc::new(FailsOnePut { inner: MemoryCheckpointer::new(10), fail_version: 3, failed: false.into() });
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let effect = || Effect { calls: calls.clone(), once: true, ..Effect::default() };
    let runner =
        Runner::new(effect_graph(effect(), Step { name: "tail", route: None }), store.clone(), RunnerConfig::default());
    let error = runner.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap_err();
    assert!(matches!(error, RunError::Checkpoint(CheckpointError::Unavailable(_))), "{error:?}");
    let (state, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Failed);
    assert_eq!(state.log, ["hello", "classify", "effect"], "rolled back to the effect, not past it");
    assert!(cp.pending.input_kept);
    let retry = runner.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap();
    assert_eq!(retry.state.unwrap().log, ["hello", "classify", "effect", "classify", "tail"]);
    assert_eq!(calls.lock().unwrap().len(), 1, "filed once");
}

/// With `every_node` too, an effect is never undone: a run that fails after a node with effects
/// keeps what that node did (its records elsewhere stay consistent with the thread), even when
/// the run created the thread.
#[tokio::test]
async fn an_every_node_run_that_fails_after_its_effect_keeps_the_effect_for_its_retry() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    fn graph(calls: &Arc<std::sync::Mutex<Vec<String>>>, tail: impl Node<Doc>) -> frontdesk_runtime::Graph<Doc> {
        GraphBuilder::new("routed")
            .node_with(
                "effect",
                Effect { calls: calls.clone(), once: true, ..Effect::default() },
                frontdesk_runtime::NodeOptions::default().with_effects(),
            )
            .node("tail", tail)
            .entry("effect")
            .edge("effect", Target::node("tail"))
            .edge("tail", Target::End)
            .durability(Durability::EveryNode)
            .build()
            .unwrap()
    }
    let runner = Runner::new(graph(&calls, Fail), store.clone(), RunnerConfig::default());
    let creating = |key: &str| RunRequest { mode: ThreadMode::New, ..keyed_turn("hello", key, "f1") };
    runner.start(creating("k1")).await.unwrap().wait().await.unwrap_err();
    let (state, cp) = runner.state("t1").await.unwrap().expect("the thread that holds the effect stays");
    assert_eq!(cp.run.status, RunStatus::Failed);
    assert_eq!(state.log, ["hello", "effect"]);
    assert!(cp.pending.input_kept);
    assert_eq!(calls.lock().unwrap().len(), 1);

    // The thread exists because of this very request: its retry goes on, where another request
    // that must create the thread finds it taken.
    let healthy =
        Runner::new(graph(&calls, Step { name: "tail", route: None }), store.clone(), RunnerConfig::default());
    assert!(matches!(healthy.start(creating("k2")).await, Err(RunError::AlreadyExists { .. })));
    let retry = healthy.start(creating("k1")).await.expect("the retry goes on").wait().await.unwrap();
    assert_eq!(retry.state.unwrap().log, ["hello", "effect", "tail"]);
    assert_eq!(calls.lock().unwrap().len(), 1, "made once");
}

/// A store whose one write of `fail_version` fails as unreachable; everything else goes to the
/// memory store.
struct FailsOnePut {
    inner: MemoryCheckpointer,
    fail_version: u64,
    failed: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl Checkpointer for FailsOnePut {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        self.inner.latest(thread_id).await
    }
    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        if checkpoint.version == self.fail_version && !self.failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(CheckpointError::Unavailable("the store is down for this write".into()));
        }
        self.inner.put(checkpoint).await
    }
    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError> {
        self.inner.history(thread_id, limit).await
    }
    async fn find_idempotent(
        &self,
        thread_id: &str,
        key: &str,
    ) -> Result<Option<frontdesk_runtime::IdempotentRun>, CheckpointError> {
        self.inner.find_idempotent(thread_id, key).await
    }
    async fn thread(&self, thread_id: &str) -> Result<Option<frontdesk_runtime::ThreadSummary>, CheckpointError> {
        self.inner.thread(thread_id).await
    }
    async fn list_threads(
        &self,
        query: &frontdesk_runtime::ThreadQuery,
    ) -> Result<frontdesk_runtime::ThreadPage, CheckpointError> {
        self.inner.list_threads(query).await
    }
    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.unfinished_threads().await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        self.inner.delete_thread(thread_id).await
    }
    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError> {
        self.inner.renew_lease(replica, ttl).await
    }
    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError> {
        self.inner.lease_remaining(replica).await
    }
    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError> {
        self.inner.release_lease(replica).await
    }
}

#[tokio::test]
async fn a_run_that_fails_before_its_effect_rolls_back_past_its_input() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let graph = GraphBuilder::new("routed")
        .node("classify", Fail)
        .node_with("effect", Effect::default(), frontdesk_runtime::NodeOptions::default().with_effects())
        .entry("classify")
        .edge("classify", Target::node("effect"))
        .edge("effect", Target::End)
        .durability(Durability::ByEffect)
        .build()
        .unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    runner.start(keyed_turn("hello", "k1", "f1")).await.unwrap().wait().await.unwrap_err();
    // The run created the thread: rolled back past its input, there is none.
    assert!(runner.state("t1").await.unwrap().is_none());
}

/// Takes completed states by their route: "billing" is recorded and erased, anything else kept;
/// "broken" fails.
#[derive(Default)]
struct Archive {
    taken: std::sync::Mutex<Vec<(String, Vec<String>)>>,
    runs: std::sync::Mutex<Vec<OfferedRun>>,
}

/// The run id, idempotency key and fingerprint of a run offered to the handoff.
type OfferedRun = (String, Option<String>, Option<String>);

#[async_trait]
impl Handoff<Doc> for Archive {
    async fn complete(&self, run: CompletedRun<'_>, state: &Doc) -> Result<Completion, HandoffError> {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        self.runs.lock().unwrap().push((run.run_id.to_owned(), owned(run.idempotency_key), owned(run.fingerprint)));
        match state.route.as_str() {
            "broken" => Err("archive unavailable".into()),
            "billing" => {
                self.taken.lock().unwrap().push((run.thread_id.to_owned(), state.log.clone()));
                Ok(Completion::Erase)
            }
            _ => Ok(Completion::Keep),
        }
    }
}

fn handoff_runner(store: Arc<dyn Checkpointer>, archive: Arc<Archive>) -> Runner<Doc> {
    let graph = GraphBuilder::new("routed")
        .node("classify", Step { name: "classify", route: None })
        .node("billing", Step { name: "billing", route: None })
        .node("ask", Ask)
        .entry("classify")
        .conditional_edge("classify", [Target::node("billing"), Target::node("ask")], |s: &Doc| {
            if s.route == "ask" {
                Target::node("ask")
            } else {
                Target::node("billing")
            }
        })
        .edge("billing", Target::End)
        .edge("ask", Target::End)
        .durability(Durability::ByEffect)
        .build()
        .unwrap();
    Runner::new(graph, store, RunnerConfig::default()).with_handoff(archive)
}

#[tokio::test]
async fn a_handed_off_run_erases_its_thread_instead_of_checkpointing() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let archive = Arc::new(Archive::default());
    let runner = handoff_runner(store.clone(), archive.clone());
    let mut handle = runner.start(input("billing")).await.unwrap();
    let mut finished = false;
    while let Some(event) = handle.events.recv().await {
        finished |= matches!(event.kind, EventKind::RunFinished { .. });
    }
    let outcome = handle.wait().await.unwrap();
    assert!(finished, "the run still reports its end");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(outcome.erased);
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "billing"]);
    assert_eq!(*archive.taken.lock().unwrap(), [("t1".to_owned(), vec!["classify".to_owned(), "billing".to_owned()])]);
    assert!(store.latest("t1").await.unwrap().is_none(), "no final checkpoint, and the accepting one is gone");
}

#[tokio::test]
async fn a_handoff_is_given_the_runs_idempotency_key_and_fingerprint() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let archive = Arc::new(Archive::default());
    let runner = handoff_runner(store.clone(), archive.clone());
    let mut request = input("billing");
    request.idempotency_key = Some("key-1".into());
    request.fingerprint = Some("request-1".into());
    let outcome = runner.start(request).await.unwrap().wait().await.unwrap();
    let expected = (outcome.run_id, Some("key-1".to_owned()), Some("request-1".to_owned()));
    assert_eq!(*archive.runs.lock().unwrap(), [expected]);
}

#[tokio::test]
async fn a_kept_or_failed_handoff_writes_the_final_checkpoint() {
    for route in ["general", "broken"] {
        let store = Arc::new(MemoryCheckpointer::new(10));
        let archive = Arc::new(Archive::default());
        let runner = handoff_runner(store.clone(), archive.clone());
        let outcome = runner.start(input(route)).await.unwrap().wait().await.unwrap();
        assert_eq!(outcome.status, RunStatus::Completed, "{route}: a failed handoff does not fail the run");
        assert!(!outcome.erased, "{route}");
        let latest = store.latest("t1").await.unwrap().unwrap();
        assert_eq!((latest.version, latest.run.status), (2, RunStatus::Completed), "{route}");
        assert!(archive.taken.lock().unwrap().is_empty());
    }
}

/// A graph output that refuses to encode, as one with a non-string map key would.
struct Unencodable;

impl serde::Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("this output has no JSON form"))
    }
}

#[tokio::test]
async fn an_output_that_does_not_encode_fails_the_run_before_its_end_is_recorded() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let archive = Arc::new(Archive::default());
    let graph = GraphBuilder::new("unencodable")
        .node("billing", Step { name: "billing", route: None })
        .entry("billing")
        .edge("billing", Target::End)
        .durability(Durability::ByEffect)
        .output(|_: &Doc| Unencodable)
        .build()
        .unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default()).with_handoff(archive.clone());
    let mut handle = runner.start(input("billing")).await.unwrap();
    let mut last = None;
    while let Some(event) = handle.events.recv().await {
        last = Some(event.kind);
    }
    let error = handle.wait().await.unwrap_err();
    assert!(matches!(&error, RunError::OutputCodec { thread_id, .. } if thread_id == "t1"), "{error:?}");
    assert!(
        matches!(last, Some(EventKind::RunFailed { kind: frontdesk_runtime::FailureKind::Internal, .. })),
        "the run ends failed, not finished with a null output: {last:?}"
    );
    assert!(archive.taken.lock().unwrap().is_empty(), "nothing was handed off");
    // The run created the thread: rolled back, there is none (and no output recorded).
    assert!(store.latest("t1").await.unwrap().is_none(), "the failed run is rolled back");
}

#[tokio::test]
async fn an_interrupted_run_is_not_handed_off() {
    let store = Arc::new(MemoryCheckpointer::new(10));
    let archive = Arc::new(Archive::default());
    let runner = handoff_runner(store.clone(), archive.clone());
    let outcome = runner.start(input("ask")).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Interrupted);
    assert!(!outcome.erased);
    assert!(archive.taken.lock().unwrap().is_empty());
    assert_eq!(store.latest("t1").await.unwrap().unwrap().run.status, RunStatus::Interrupted);
}

#[tokio::test]
async fn a_recovered_run_is_handed_off_too() {
    let store = Arc::new(MemoryCheckpointer::default());
    crashed_thread(&store, None).await;
    let archive = Arc::new(Archive::default());
    let runner = handoff_runner(store.clone(), archive.clone());
    assert_eq!(runner.recover().await.unwrap(), 1);
    assert_eq!(archive.taken.lock().unwrap().len(), 1);
    assert!(store.latest("t1").await.unwrap().is_none());
    assert!(store.unfinished_threads().await.unwrap().is_empty());
}

/// `input(route)` on an existing thread, starting from `head`.
fn input_from(route: &str, head: Option<ThreadHead>) -> RunRequest<DocUpdate> {
    let mut request = input(route);
    request.mode = ThreadMode::Existing;
    request.head = head;
    request
}

fn admit_all(_: &Doc, _: &Checkpoint) -> Result<(), &'static str> {
    Ok(())
}

#[tokio::test]
async fn an_update_starts_from_the_callers_head_without_reading_again() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    runner.start(input("none")).await.unwrap().wait().await.unwrap();
    let mut head = store.head("t1").await.unwrap().unwrap();
    // The head says what the store does not: a run that starts from it read nothing else.
    let told = Doc { log: vec!["from-head".into()], ..Default::default() };
    head.checkpoint.state = serde_json::to_vec(&told).unwrap();
    let created_at = head.created_at;
    let handle = runner.start_with(input_from("none", Some(head)), admit_all).await.unwrap();
    let outcome = handle.wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["from-head", "classify"]);
    // The times a caller shows come with the outcome, as the store has them.
    let thread = store.thread("t1").await.unwrap().unwrap();
    assert_eq!(outcome.thread_created_at, Some(created_at));
    assert_eq!(outcome.thread_created_at, Some(thread.created_at));
    assert_eq!(outcome.updated_at, Some(thread.updated_at));
}

#[tokio::test]
async fn a_head_the_thread_has_moved_past_is_stale_and_writes_nothing() {
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    runner.start(input("none")).await.unwrap().wait().await.unwrap();
    let old = store.head("t1").await.unwrap().unwrap();
    runner.start(input_from("none", None)).await.unwrap().wait().await.unwrap();
    let before = store.latest("t1").await.unwrap().unwrap();

    let stale = runner.start_with(input_from("billing", Some(old)), admit_all).await.err().unwrap();
    assert!(matches!(stale, StartError::Stale), "{stale:?}");
    assert_eq!(store.latest("t1").await.unwrap().unwrap(), before, "a stale head must write nothing");

    // Started again without it, the turn reads the thread as it is.
    let outcome = runner.start_with(input_from("billing", None), admit_all).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.state.unwrap().log, vec!["classify", "classify", "classify", "billing"]);
    assert_eq!(outcome.version, before.version + 3);
}

#[tokio::test]
async fn a_head_that_would_refuse_or_wait_is_decided_on_a_fresh_read() {
    // A refusal on the caller's read may be that read being out of date: stale, not refused.
    let store = Arc::new(MemoryCheckpointer::default());
    let runner = routed_runner(store.clone());
    runner.start(input("none")).await.unwrap().wait().await.unwrap();
    let head = store.head("t1").await.unwrap().unwrap();
    let refuse = |_: &Doc, _: &Checkpoint| Err::<(), _>("closed");
    let error = runner.start_with(input_from("none", Some(head)), refuse).await.err().unwrap();
    assert!(matches!(error, StartError::Stale), "{error:?}");
    let error = runner.start_with(input_from("none", None), refuse).await.err().unwrap();
    assert!(matches!(error, StartError::Refused("closed")), "{error:?}");

    // A pending interrupt on the caller's read: stale too; `start` ignores the head and refuses.
    let graph = GraphBuilder::new("ask").node("ask", Ask).entry("ask").edge("ask", Target::End).build().unwrap();
    let runner = Runner::new(graph, store.clone(), RunnerConfig::default());
    let mut ask = RunRequest::new("t2", RunInput::Update(DocUpdate::default()));
    ask.mode = ThreadMode::CreateIfMissing;
    runner.start(ask).await.unwrap().wait().await.unwrap();
    let head = store.head("t2").await.unwrap().unwrap();
    assert_eq!(head.checkpoint.pending.interrupts.len(), 1);
    let mut request = RunRequest::new("t2", RunInput::Update(DocUpdate::default()));
    request.head = Some(head.clone());
    let error = runner.start_with(request, admit_all).await.err().unwrap();
    assert!(matches!(error, StartError::Stale), "{error:?}");
    let mut request = RunRequest::new("t2", RunInput::Update(DocUpdate::default()));
    request.head = Some(head);
    assert!(matches!(runner.start(request).await.err().unwrap(), RunError::Interrupted { .. }));
}

/// A store whose next list of unfinished runs shows a checkpoint read earlier (`stale`), as a
/// scan that raced a run's last commit would, and whose next `latest` waits for `release`
/// (telling `reached` when it starts waiting). Counts `latest` reads and lease reads.
/// Everything else goes straight to the memory store.
#[derive(Default)]
struct RacedRead {
    inner: MemoryCheckpointer,
    latest_reads: std::sync::atomic::AtomicUsize,
    lease_reads: std::sync::atomic::AtomicUsize,
    lists: std::sync::atomic::AtomicUsize,
    stale: std::sync::Mutex<Option<Checkpoint>>,
    hold: std::sync::Mutex<Option<(tokio::sync::oneshot::Sender<()>, tokio::sync::oneshot::Receiver<()>)>>,
}

#[async_trait]
impl Checkpointer for RacedRead {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, frontdesk_runtime::CheckpointError> {
        self.latest_reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let hold = self.hold.lock().unwrap().take();
        if let Some((reached, release)) = hold {
            let _ = reached.send(());
            let _ = release.await;
        }
        self.inner.latest(thread_id).await
    }
    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), frontdesk_runtime::CheckpointError> {
        self.inner.put(checkpoint).await
    }
    async fn history(
        &self,
        thread_id: &str,
        limit: usize,
    ) -> Result<Vec<Checkpoint>, frontdesk_runtime::CheckpointError> {
        self.inner.history(thread_id, limit).await
    }
    async fn find_idempotent(
        &self,
        thread_id: &str,
        key: &str,
    ) -> Result<Option<frontdesk_runtime::IdempotentRun>, frontdesk_runtime::CheckpointError> {
        self.inner.find_idempotent(thread_id, key).await
    }
    async fn thread(
        &self,
        thread_id: &str,
    ) -> Result<Option<frontdesk_runtime::ThreadSummary>, frontdesk_runtime::CheckpointError> {
        self.inner.thread(thread_id).await
    }
    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, frontdesk_runtime::CheckpointError> {
        self.inner.head(thread_id).await
    }
    async fn list_threads(
        &self,
        query: &frontdesk_runtime::ThreadQuery,
    ) -> Result<frontdesk_runtime::ThreadPage, frontdesk_runtime::CheckpointError> {
        self.inner.list_threads(query).await
    }
    async fn unfinished_threads(&self) -> Result<Vec<String>, frontdesk_runtime::CheckpointError> {
        self.inner.unfinished_threads().await
    }
    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, frontdesk_runtime::CheckpointError> {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(stale) = self.stale.lock().unwrap().take() {
            let RunMarker { run_id, owner, .. } = stale.run;
            return Ok(vec![UnfinishedRun { thread_id: stale.thread_id, workflow: stale.workflow, run_id, owner }]);
        }
        self.inner.unfinished_runs().await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<bool, frontdesk_runtime::CheckpointError> {
        self.inner.delete_thread(thread_id).await
    }
    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), frontdesk_runtime::CheckpointError> {
        self.inner.renew_lease(replica, ttl).await
    }
    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, frontdesk_runtime::CheckpointError> {
        self.lease_reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.lease_remaining(replica).await
    }
    async fn release_lease(&self, replica: &str) -> Result<(), frontdesk_runtime::CheckpointError> {
        self.inner.release_lease(replica).await
    }
}

/// The takeover scan reads a thread as running just before that run's last commit. It must not
/// take the thread's lock for a run that has ended here: a caller who sends the next turn as
/// soon as the last one answered would be told the thread is busy.
#[tokio::test]
async fn a_recovery_scan_that_raced_a_finished_run_leaves_the_next_turn_alone() {
    let store = Arc::new(RacedRead::default());
    let runner = routed_runner(store.clone());
    let first = runner.start(input("billing")).await.unwrap().wait().await.unwrap();
    // What a read just before the first turn's last commit saw: that run, still running.
    let mut accepting = store.inner.latest("t1").await.unwrap().unwrap();
    assert_eq!(accepting.run.run_id, first.run_id);
    accepting.run.status = RunStatus::Running;
    accepting.run.output = None;
    accepting.version -= 1;
    *store.stale.lock().unwrap() = Some(accepting);
    let (reached_tx, reached) = tokio::sync::oneshot::channel();
    let (release, release_rx) = tokio::sync::oneshot::channel();
    *store.hold.lock().unwrap() = Some((reached_tx, release_rx));

    let scan = tokio::spawn({
        let runner = runner.clone();
        async move { runner.recover().await }
    });
    // The scan has listed the stale run and is reading the thread again.
    reached.await.unwrap();
    let mut next = input("general");
    next.busy = BusyPolicy::Reject;
    let second = runner.start(next).await.expect("the next turn is not turned away as busy");
    let second = second.wait().await.unwrap();
    let _ = release.send(());
    assert_eq!(scan.await.unwrap().unwrap(), 0, "nothing was left running");
    let (state, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!(state.log, vec!["classify", "billing", "classify", "general"]);
    assert_eq!((cp.run.run_id.as_str(), cp.run.status), (second.run_id.as_str(), RunStatus::Completed));
}

/// A run in progress here is not the scan's business: it is skipped without reading its thread.
#[tokio::test]
async fn a_recovery_scan_skips_a_thread_running_here_without_reading_it() {
    let store = Arc::new(RacedRead::default());
    let runner = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), RunnerConfig::default());
    let mut handle = runner.start(input("billing")).await.unwrap();
    // The run is under way (past its accepting commit, now in the node that never ends).
    until_node_starts(&mut handle.events, "billing").await;
    let reads = store.latest_reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(runner.recover().await.unwrap(), 0);
    assert_eq!(store.latest_reads.load(std::sync::atomic::Ordering::SeqCst), reads, "no read for a thread held here");
    let (_, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!(cp.run.status, RunStatus::Running, "the run is left to itself");
}

/// A runner of replica `replica-a` on a store where `replica-b` holds a live lease.
async fn replica_a_beside_live_replica_b() -> (Arc<RacedRead>, Runner<Doc>) {
    let store = Arc::new(RacedRead::default());
    let config = RunnerConfig { replica: Some("replica-a".into()), ..RunnerConfig::default() };
    let runner = Runner::new(two_step_graph(Hang, Durability::ByEffect), store.clone(), config);
    store.inner.renew_lease("replica-b", Duration::from_secs(60)).await.unwrap();
    (store, runner)
}

/// Writes a running first checkpoint per (thread, workflow, owner), behind the wrapper's counters.
async fn seed_running(store: &RacedRead, runs: &[(&str, &str, Option<&str>)]) {
    for (thread, workflow, owner) in runs {
        let mut cp = frontdesk_runtime::conformance::sample(thread, 1, RunStatus::Running);
        cp.workflow = (*workflow).to_owned();
        cp.run.owner = owner.map(str::to_owned);
        store.inner.put(&cp).await.unwrap();
    }
}

/// Every workflow's runner scans every running thread of every replica. Another workflow's runs,
/// and runs of a replica whose lease is live, are left alone from the scan's list: no read of
/// their checkpoints, and one read of each live replica's lease per scan.
#[tokio::test]
async fn a_recovery_scan_leaves_live_replicas_and_other_workflows_alone_without_reading_them() {
    let (store, runner) = replica_a_beside_live_replica_b().await;
    seed_running(
        &store,
        &[
            ("b1", "routed", Some("replica-b")),
            ("b2", "routed", Some("replica-b")),
            ("b3", "routed", Some("replica-b")),
            ("other", "another-workflow", None),
        ],
    )
    .await;
    assert_eq!(store.unfinished_runs().await.unwrap().len(), 4);

    assert_eq!(runner.recover().await.unwrap(), 0);
    assert_eq!(store.latest_reads.load(std::sync::atomic::Ordering::SeqCst), 0, "no checkpoint read");
    assert_eq!(store.lease_reads.load(std::sync::atomic::Ordering::SeqCst), 1, "one lease read for replica-b");
    for thread in ["b1", "b2", "b3", "other"] {
        let cp = store.inner.latest(thread).await.unwrap().unwrap();
        assert_eq!((cp.version, cp.run.status), (1, RunStatus::Running), "{thread} is left to its owner");
    }
}

/// What a takeover scan goes on with, decided from the list alone: not a thread held here, not a
/// run of another replica whose lease is live (its lease read once); a run of this replica, of a
/// replica whose lease expired, or of no replica at all is abandoned. The server's scan asks this
/// once for every workflow, and wakes only the workflows it names.
#[tokio::test]
async fn the_abandoned_runs_of_a_list_are_told_apart_without_reading_them() {
    let (store, runner) = replica_a_beside_live_replica_b().await;
    // Held here: a run under way on t1, in the node that never ends.
    let mut handle = runner.start(input("billing")).await.unwrap();
    until_node_starts(&mut handle.events, "billing").await;
    seed_running(
        &store,
        &[
            ("b1", "routed", Some("replica-b")),
            ("b2", "routed", Some("replica-b")),
            ("c1", "routed", Some("replica-c")),
            ("a1", "routed", Some("replica-a")),
            ("none", "routed", None),
        ],
    )
    .await;
    let listed = store.unfinished_runs().await.unwrap();
    assert_eq!(listed.len(), 6, "{listed:?}");
    let reads = store.latest_reads.load(std::sync::atomic::Ordering::SeqCst);

    let abandoned = runner.registry().abandoned(&*store, Some("replica-a"), listed).await;
    let threads: Vec<&str> = abandoned.iter().map(|run| run.thread_id.as_str()).collect();
    assert_eq!(threads, ["a1", "c1", "none"]);
    assert_eq!(store.latest_reads.load(std::sync::atomic::Ordering::SeqCst), reads, "no checkpoint read");
    assert_eq!(
        store.lease_reads.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one lease read each for replica-b and replica-c"
    );
}

/// The server's takeover scan lists once for every workflow and hands each runner the abandoned
/// runs: a runner resumes its own among them without listing again, and leaves another
/// workflow's run to that workflow.
#[tokio::test]
async fn a_takeover_resumes_the_runs_it_is_handed_without_listing_again() {
    let store = Arc::new(RacedRead::default());
    crashed_thread(&store.inner, None).await;
    seed_running(&store, &[("other", "another-workflow", None)]).await;
    let runner = routed_runner(store.clone());
    let listed = store.unfinished_runs().await.unwrap();
    let abandoned = runner.registry().abandoned(&*store, None, listed).await;
    assert_eq!(abandoned.len(), 2, "{abandoned:?}");

    assert_eq!(runner.resume_abandoned(abandoned).await, 1);
    assert_eq!(store.lists.load(std::sync::atomic::Ordering::SeqCst), 1, "the runner did not list again");
    let (state, cp) = runner.state("t1").await.unwrap().unwrap();
    assert_eq!((state.log, cp.run.status), (vec!["classify".to_owned(), "billing".to_owned()], RunStatus::Completed));
    let other = store.inner.latest("other").await.unwrap().unwrap();
    assert_eq!((other.version, other.run.status), (1, RunStatus::Running), "another workflow's run is left alone");
}

/// Reports a model call that spent 10 + 2 tokens, then finishes, pauses or fails as the route
/// says.
struct Spend;

#[async_trait]
impl Node<Doc> for Spend {
    async fn run(&self, state: &Doc, ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        let usage = frontdesk_runtime::Usage { prompt_tokens: 10, completion_tokens: 2, cost_usd: 0.5 };
        let call = frontdesk_runtime::LlmCallInfo {
            model: "m".into(),
            purpose: "spend".into(),
            usage,
            latency: Duration::ZERO,
            attempts: 1,
            error: Some("replied with garbage".into()),
        };
        ctx.emit(EventKind::LlmCall(call)).await;
        let update = DocUpdate { log: Some(vec!["spent".into()]), ..Default::default() };
        match state.route.as_str() {
            "fail" => Err(NodeError::new(NodeErrorKind::Internal, "gave up")),
            "ask" => Ok(NodeOutput::interrupt(update, InterruptRequest::new("why", "awaiting_user", &"why?")?)),
            _ => Ok(NodeOutput::update(update)),
        }
    }
}

/// Every way a run ends says what its model calls spent, so a caller counts a run that paused
/// or failed too (its calls were billed all the same).
#[tokio::test]
async fn every_run_end_carries_what_its_model_calls_spent() {
    let graph = GraphBuilder::new("spend")
        .node("spend", Spend)
        .entry("spend")
        .edge("spend", Target::End)
        .output(|s: &Doc| serde_json::json!({ "log": s.log }))
        .build()
        .unwrap();
    let runner = Runner::new(graph, Arc::new(MemoryCheckpointer::default()), RunnerConfig::default());
    for route in ["done", "ask", "fail"] {
        let mut request = input(route);
        request.thread_id = format!("t-{route}");
        let mut handle = runner.start(request).await.unwrap();
        let mut last = None;
        while let Some(event) = handle.events.recv().await {
            last = Some(event.kind);
        }
        let usage = match last {
            Some(EventKind::RunFinished { usage, .. }) if route == "done" => usage,
            Some(EventKind::Interrupted { usage, .. }) if route == "ask" => usage,
            Some(EventKind::RunFailed { usage, .. }) if route == "fail" => usage,
            other => panic!("{route}: ended with {other:?}"),
        };
        assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.cost_usd), (10, 2, 0.5), "{route}");
    }
}

/// Records what it is shown: (workflow, event kind, elapsed).
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<(String, String, Duration)>>);

impl frontdesk_runtime::RunObserver for Seen {
    fn observe(&self, workflow: &str, event: &frontdesk_runtime::Event, elapsed: Duration) {
        let kind = format!("{:?}", event.kind);
        let kind = kind.split([' ', '(', '{']).next().unwrap().to_owned();
        self.0.lock().unwrap().push((workflow.to_owned(), kind, elapsed));
    }
}

/// A registry's observer is shown every event of its runners' runs, as they are emitted, named
/// by the run's workflow, with the time the run has taken so far.
#[tokio::test]
async fn the_registry_observer_sees_every_event_of_every_run_with_its_workflow() {
    let seen = Arc::new(Seen::default());
    let registry = Arc::new(frontdesk_runtime::RunRegistry::default().with_observer(seen.clone()));
    let runner = routed_runner(Arc::new(MemoryCheckpointer::default())).with_registry(registry);
    let mut handle = runner.start(input("billing")).await.unwrap();
    let mut emitted = Vec::new();
    while let Some(event) = handle.events.recv().await {
        let kind = format!("{:?}", event.kind);
        emitted.push(kind.split([' ', '(', '{']).next().unwrap().to_owned());
    }
    handle.wait().await.unwrap();
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|(_, kind, _)| kind.clone()).collect::<Vec<_>>(), emitted);
    assert!(seen.iter().all(|(workflow, _, _)| workflow == "routed"), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].2 <= w[1].2), "elapsed grows: {seen:?}");
}
