//! What a caller lives through around a failure: re-attaching to a run by its id or by its
//! idempotency key, replica leases deciding when a run is abandoned, and recovery resuming
//! abandoned runs concurrently; and the process-wide limit on runs executing at once.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use async_trait::async_trait;
use frontdesk_runtime::{
    checkpoint::{RunMarker, RunStatus},
    Checkpoint, Checkpointer, EventKind, GraphBuilder, MemoryCheckpointer, Node, NodeContext, NodeError, NodeOutput,
    RunError, RunInput, RunRegistry, RunRequest, RunRetention, Runner, RunnerConfig, Target, ThreadMode,
};

frontdesk_runtime::state! {
    pub struct Doc / DocUpdate {
        log: Vec<String> => Append,
    }
}

/// Sleeps, counting how many run at once and how often it ran.
struct Slow {
    delay: Duration,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

#[async_trait]
impl Node<Doc> for Slow {
    async fn run(&self, _state: &Doc, _ctx: &NodeContext) -> Result<NodeOutput<DocUpdate>, NodeError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(NodeOutput::update(DocUpdate { log: Some(vec!["slow".into()]) }))
    }
}

#[derive(Clone, Default)]
struct Counters {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

fn runner(store: Arc<dyn Checkpointer>, delay: Duration, counters: &Counters, config: RunnerConfig) -> Runner<Doc> {
    let graph = GraphBuilder::new("slow")
        .node(
            "slow",
            Slow {
                delay,
                running: counters.running.clone(),
                most: counters.most.clone(),
                calls: counters.calls.clone(),
            },
        )
        .entry("slow")
        .edge("slow", Target::End)
        .output(|s: &Doc| serde_json::json!({ "log": s.log }))
        .build()
        .unwrap();
    Runner::new(graph, store, config)
}

fn replica(name: &str) -> RunnerConfig {
    RunnerConfig { replica: Some(name.into()), lease_ttl: Duration::from_millis(600), ..RunnerConfig::default() }
}

fn turn(thread: &str, key: &str) -> RunRequest<DocUpdate> {
    let mut request = RunRequest::new(thread, RunInput::Update(DocUpdate { log: Some(vec!["in".into()]) }));
    request.mode = ThreadMode::CreateIfMissing;
    request.idempotency_key = Some(key.into());
    request.fingerprint = Some(format!("fp-{key}"));
    request
}

/// What a crash of replica `owner` leaves: a running checkpoint whose input is accepted.
async fn crashed(store: &dyn Checkpointer, thread: &str, key: &str, owner: Option<&str>) {
    let state = Doc { log: vec!["in".into()] };
    store
        .put(&Checkpoint {
            thread_id: thread.into(),
            workflow: "slow".into(),
            version: 1,
            state: serde_json::to_vec(&state).unwrap(),
            next: Some("slow".into()),
            pending: Default::default(),
            run: RunMarker {
                run_id: format!("crashed-{thread}"),
                idempotency_key: Some(key.into()),
                fingerprint: Some(format!("fp-{key}")),
                status: RunStatus::Running,
                step: 0,
                output: None,
                owner: owner.map(str::to_owned),
            },
            created_at: std::time::SystemTime::now(),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_retry_with_the_key_of_a_run_in_flight_attaches_to_it() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let counters = Counters::default();
    let runner = runner(store, Duration::from_millis(200), &counters, RunnerConfig::default());
    let first = runner.start(turn("t", "k")).await.unwrap();
    let retry = runner.start(turn("t", "k")).await.expect("a retry attaches instead of THREAD_BUSY");
    assert_eq!(retry.run_id, first.run_id);
    let (mut events, outcome, _cancel) = retry.into_parts();
    let mut kinds = Vec::new();
    while let Some(event) = events.recv().await {
        kinds.push((event.event_id, std::mem::discriminant(&event.kind)));
        if event.is_terminal() {
            assert!(matches!(event.kind, EventKind::RunFinished { .. }));
        }
    }
    let ids: Vec<u64> = kinds.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "every event of the run, from the first");
    let attached = outcome.await.unwrap().unwrap();
    assert!(attached.replayed);
    assert_eq!(attached.output["log"], serde_json::json!(["in", "slow"]));
    let original = first.wait().await.unwrap();
    assert_eq!(original.run_id, attached.run_id);
    assert_eq!(counters.calls.load(Ordering::SeqCst), 1, "the turn ran once");

    let mut other = turn("t", "k");
    other.fingerprint = Some("fp-another".into());
    let running = runner.start(turn("t", "k2")).await.unwrap();
    let mut mismatch = turn("t", "k2");
    mismatch.fingerprint = Some("fp-another".into());
    assert!(matches!(runner.start(mismatch).await, Err(RunError::IdempotencyMismatch { .. })));
    running.wait().await.unwrap();
    // After the run: a replay from its checkpoint, as before.
    assert!(runner.start(turn("t", "k")).await.unwrap().wait().await.unwrap().replayed);
}

#[tokio::test]
async fn a_run_is_followed_by_id_from_any_event_while_it_runs_and_after_it_ended() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let registry = Arc::new(RunRegistry::new(RunRetention {
        max_events: 100,
        keep_finished: 1,
        keep_finished_for: Duration::from_secs(60),
    }));
    let counters = Counters::default();
    let runner =
        runner(store, Duration::from_millis(100), &counters, RunnerConfig::default()).with_registry(registry.clone());
    let handle = runner.start(turn("t", "k")).await.unwrap();
    let run_id = handle.run_id.clone();
    let mut live = registry.subscribe(&run_id, 1).expect("a running run can be followed");
    let mut ids = Vec::new();
    while let Some((event, skipped)) = live.next().await {
        assert_eq!(skipped, 0);
        ids.push(event.event_id);
    }
    assert_eq!(ids.first(), Some(&2), "events after the one already seen");
    let last = *ids.last().unwrap();
    handle.wait().await.unwrap();
    let mut late = registry.subscribe(&run_id, last - 1).expect("an ended run is kept");
    let (event, _) = late.next().await.unwrap();
    assert!(event.is_terminal(), "a late re-attach still gets the run's last event");
    assert!(late.next().await.is_none());
    // keep_finished = 1: the next run pushes this one out.
    runner.start(turn("u", "k")).await.unwrap().wait().await.unwrap();
    assert!(registry.subscribe(&run_id, 0).is_none());
    assert!(registry.subscribe("no-such-run", 0).is_none());
}

#[tokio::test]
async fn a_run_of_a_replica_whose_lease_expired_is_taken_over_at_once() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let counters = Counters::default();
    let survivor = runner(store.clone(), Duration::from_millis(10), &counters, replica("b"));
    crashed(&*store, "t", "k", Some("a")).await;

    // Replica a renewed its lease just now: a live run, busy with the usual short wait.
    store.renew_lease("a", Duration::from_millis(600)).await.unwrap();
    match survivor.start(turn("t", "k")).await {
        Err(RunError::ThreadBusy { retry_after: None, .. }) => {}
        other => panic!("expected THREAD_BUSY without a wait, got {:?}", other.map(|h| h.run_id)),
    }
    // It missed renewals: busy until its lease expires, and the caller is told how long.
    tokio::time::sleep(Duration::from_millis(350)).await;
    match survivor.start(turn("t", "k")).await {
        Err(RunError::ThreadBusy { retry_after: Some(wait), .. }) => assert!(wait <= Duration::from_millis(300)),
        other => panic!("expected THREAD_BUSY with the lease's remainder, got {:?}", other.map(|h| h.run_id)),
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let outcome = survivor.start(turn("t", "k")).await.unwrap().wait().await.unwrap();
    assert_eq!(outcome.run_id, "crashed-t", "the retry took the abandoned run over");
    assert_eq!(outcome.state.unwrap().log, ["in", "slow"], "its input was applied once");
    let latest = store.latest("t").await.unwrap().unwrap();
    assert_eq!(latest.run.owner.as_deref(), Some("b"));
}

#[tokio::test]
async fn recovery_leaves_live_replicas_alone_and_takes_back_its_own_runs() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let counters = Counters::default();
    crashed(&*store, "live", "k", Some("other")).await;
    crashed(&*store, "mine", "k", Some("me")).await;
    store.renew_lease("other", Duration::from_secs(30)).await.unwrap();
    let restarted = runner(store.clone(), Duration::from_millis(10), &counters, replica("me"));
    assert_eq!(restarted.recover().await.unwrap(), 1, "only the run of this replica's previous life");
    assert_eq!(store.latest("mine").await.unwrap().unwrap().run.status, RunStatus::Completed);
    assert_eq!(store.latest("live").await.unwrap().unwrap().run.status, RunStatus::Running);
    store.release_lease("other").await.unwrap();
    assert_eq!(restarted.recover().await.unwrap(), 1, "a released lease is taken over at once");
    assert_eq!(store.latest("live").await.unwrap().unwrap().run.status, RunStatus::Completed);
}

#[tokio::test]
async fn recovery_resumes_runs_concurrently_within_its_bound_and_a_retry_attaches() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let counters = Counters::default();
    for i in 0..8 {
        crashed(&*store, &format!("t{i}"), "k", Some("me")).await;
    }
    let config = RunnerConfig { recovery_concurrency: 3, ..replica("me") };
    let restarted = runner(store.clone(), Duration::from_millis(150), &counters, config);
    let recovery = tokio::spawn({
        let restarted = restarted.clone();
        async move { restarted.recover().await }
    });
    // A retry of a turn being recovered (or queued for it) attaches or takes over; never busy.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let retried = restarted.start(turn("t0", "k")).await.expect("no THREAD_BUSY during recovery");
    assert_eq!(retried.run_id, "crashed-t0");
    retried.wait().await.unwrap();
    recovery.await.unwrap().unwrap();
    let most = counters.most.load(Ordering::SeqCst);
    assert!((2..=4).contains(&most), "runs resumed at once: {most} (bound 3, plus the retry's own)");
    assert_eq!(counters.calls.load(Ordering::SeqCst), 8, "each run once");
    for i in 0..8 {
        assert_eq!(store.latest(&format!("t{i}")).await.unwrap().unwrap().run.status, RunStatus::Completed);
    }
}

#[tokio::test]
async fn runs_beyond_the_active_limit_wait_for_a_slot_and_all_complete() {
    let store: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
    let registry = Arc::new(RunRegistry::default().with_max_active(2));
    let counters = Counters::default();
    let limited =
        runner(store.clone(), Duration::from_millis(50), &counters, RunnerConfig::default()).with_registry(registry);
    let mut handles = Vec::new();
    for i in 0..6 {
        handles.push(limited.start(turn(&format!("t{i}"), "k")).await.unwrap());
    }
    for handle in handles {
        handle.wait().await.unwrap();
    }
    assert_eq!(counters.calls.load(Ordering::SeqCst), 6, "every run ran");
    assert_eq!(counters.most.load(Ordering::SeqCst), 2, "never more than the limit at once");
    for i in 0..6 {
        assert!(store.latest(&format!("t{i}")).await.unwrap().is_some(), "every run committed");
    }
    // Any configured number is accepted, even one above what tokio's semaphore can count.
    let unlimited = Arc::new(RunRegistry::default().with_max_active(usize::MAX));
    let unlimited = runner(store, Duration::ZERO, &counters, RunnerConfig::default()).with_registry(unlimited);
    unlimited.start(turn("t-max", "k")).await.unwrap().wait().await.unwrap();
}
