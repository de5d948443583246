//! The checkpointer conformance suite. Every [`Checkpointer`] implementation runs
//! [`run_all`] in its own tests; a store that passes behaves like every other store as far as
//! the runner can tell.
//!
//! Thread ids are prefixed with a random namespace so the suite can share a database with
//! other tests. Failures panic with a message naming the broken promise.

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use crate::checkpoint::{
    Checkpoint, CheckpointError, Checkpointer, Pending, PendingInterrupt, RunMarker, RunStatus, TaskWrite, ThreadQuery,
    UnfinishedRun,
};
use crate::node::Resume;

/// Runs every check against `store`.
pub async fn run_all(store: Arc<dyn Checkpointer>) {
    let ns = format!("conf-{}", uuid::Uuid::new_v4().simple());
    empty_thread(&*store, &ns).await;
    round_trip(&*store, &ns).await;
    compare_and_set(&*store, &ns).await;
    concurrent_writers_one_wins(store.clone(), &ns).await;
    concurrent_writes_keep_their_own_outcomes(store.clone(), &ns).await;
    idempotency_keys(&*store, &ns).await;
    listing_and_paging(&*store, &ns).await;
    unfinished_runs(&*store, &ns).await;
    retention_keeps_newest(&*store, &ns).await;
    pending_work_round_trips(&*store, &ns).await;
    delete_erases(&*store, &ns).await;
    head_is_latest_with_creation_time(&*store, &ns).await;
    owner_round_trips(&*store, &ns).await;
    replica_leases(&*store, &ns).await;
}

/// Two open interrupts (a user's and a manager's), answered ids and a finished fan-out task.
pub fn sample_pending() -> Pending {
    Pending {
        interrupts: vec![
            PendingInterrupt {
                id: "clarify-1".into(),
                node: "request_information".into(),
                reason: "awaiting_user".into(),
                payload: r#"{"question":"why?","to":"changer"}"#.into(),
            },
            PendingInterrupt {
                id: "approve-1".into(),
                node: "manager_validation".into(),
                reason: "awaiting_manager".into(),
                payload: r#"{"to":"manager"}"#.into(),
            },
        ],
        answered: vec!["clarify-0".into()],
        tasks: vec![TaskWrite { node: "research".into(), task: 2, update: r#"{"notes":["ß"]}"#.into() }],
        resume: Some(Resume { interrupt_id: "clarify-0".into(), value: serde_json::json!({"reason": "ß"}) }),
        answering: Some(PendingInterrupt {
            id: "clarify-0".into(),
            node: "request_information".into(),
            reason: "awaiting_user".into(),
            payload: r#"{"question":"which role?","to":"changer"}"#.into(),
        }),
        failed_over_at: Some(7),
        takeovers: 2,
        input_kept: true,
    }
}

/// Millisecond precision: what every store is required to keep.
fn now_ms() -> SystemTime {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A checkpoint for tests of stores.
pub fn sample(thread_id: &str, version: u64, status: RunStatus) -> Checkpoint {
    Checkpoint {
        thread_id: thread_id.to_owned(),
        workflow: "conformance".to_owned(),
        version,
        state: format!(r#"{{"v":{version},"text":"héllo"}}"#).into_bytes(),
        next: (status == RunStatus::Running).then(|| "node_b".to_owned()),
        pending: Pending::default(),
        run: RunMarker {
            run_id: format!("run-{version}"),
            idempotency_key: None,
            fingerprint: None,
            status,
            step: version as u32,
            output: (status == RunStatus::Completed).then(|| r#"{"ok":true}"#.to_owned()),
            owner: None,
        },
        created_at: now_ms(),
    }
}

async fn empty_thread(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:empty");
    assert!(store.latest(&id).await.unwrap().is_none(), "latest of an unknown thread must be None");
    assert!(store.thread(&id).await.unwrap().is_none(), "thread() of an unknown thread must be None");
    assert!(store.head(&id).await.unwrap().is_none(), "head() of an unknown thread must be None");
    assert!(store.history(&id, 10).await.unwrap().is_empty(), "history of an unknown thread must be empty");
    assert!(!store.delete_thread(&id).await.unwrap(), "deleting an unknown thread must report false");
    assert!(store.find_idempotent(&id, "k").await.unwrap().is_none());
}

async fn round_trip(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:round-trip");
    let mut cp = sample(&id, 1, RunStatus::Interrupted);
    cp.pending.interrupts = vec![PendingInterrupt {
        id: "ask-1".into(),
        node: "ask".into(),
        reason: "awaiting_user".into(),
        payload: r#"{"question":"why?"}"#.into(),
    }];
    cp.next = Some("ask".into());
    cp.run.idempotency_key = Some("key-1".into());
    cp.run.fingerprint = Some("sha256:round-trip".into());
    cp.run.output = Some(r#"{"asked":true}"#.into());
    store.put(&cp).await.unwrap();
    let got = store.latest(&id).await.unwrap().expect("checkpoint just written");
    assert_eq!(got, cp, "a checkpoint must read back exactly as written");
    let summary = store.thread(&id).await.unwrap().expect("thread just written");
    assert_eq!(summary.version, 1);
    assert_eq!(summary.workflow, "conformance");
    assert_eq!(summary.created_at, cp.created_at);
}

/// `head` is `latest` and `thread`'s creation time in one answer, also once the thread has
/// moved past its first checkpoint (which may have been pruned) and after it is erased.
async fn head_is_latest_with_creation_time(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:head");
    let first = sample(&id, 1, RunStatus::Completed);
    store.put(&first).await.unwrap();
    let mut second = sample(&id, 2, RunStatus::Interrupted);
    second.created_at = first.created_at + Duration::from_millis(5);
    second.pending = sample_pending();
    store.put(&second).await.unwrap();
    let head = store.head(&id).await.unwrap().expect("thread just written");
    assert_eq!(head.checkpoint, second, "head() must hold the newest checkpoint exactly as written");
    assert_eq!(head.created_at, first.created_at, "head() must hold the thread's creation time");
    assert_eq!(head.created_at, store.thread(&id).await.unwrap().unwrap().created_at);
    assert!(store.delete_thread(&id).await.unwrap());
    assert!(store.head(&id).await.unwrap().is_none(), "head() of an erased thread must be None");
}

async fn compare_and_set(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:cas");
    store.put(&sample(&id, 1, RunStatus::Running)).await.unwrap();
    match store.put(&sample(&id, 1, RunStatus::Running)).await {
        Err(CheckpointError::Conflict { expected: 0, actual: 1, .. }) => {}
        other => panic!("a second version-1 write must conflict with actual 1, got {other:?}"),
    }
    match store.put(&sample(&id, 3, RunStatus::Running)).await {
        Err(CheckpointError::Conflict { expected: 2, actual: 1, .. }) => {}
        other => panic!("skipping a version must conflict, got {other:?}"),
    }
    assert_eq!(store.latest(&id).await.unwrap().unwrap().version, 1, "a losing write must write nothing");
    store.put(&sample(&id, 2, RunStatus::Completed)).await.unwrap();
    assert_eq!(store.latest(&id).await.unwrap().unwrap().version, 2);
    assert_eq!(store.thread(&id).await.unwrap().unwrap().version, 2);
}

async fn concurrent_writers_one_wins(store: Arc<dyn Checkpointer>, ns: &str) {
    for round in 0..5 {
        let id = format!("{ns}:race-{round}");
        store.put(&sample(&id, 1, RunStatus::Completed)).await.unwrap();
        let mut tasks = Vec::new();
        for writer in 0..8 {
            let store = store.clone();
            let mut cp = sample(&id, 2, RunStatus::Completed);
            cp.run.run_id = format!("writer-{writer}");
            tasks.push(tokio::spawn(async move { store.put(&cp).await.map(|()| writer) }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(writer) => winners.push(writer),
                Err(CheckpointError::Conflict { .. }) => {}
                Err(other) => panic!("concurrent writers must only see conflicts, got {other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one of eight concurrent writers must win, got {winners:?}");
        let latest = store.latest(&id).await.unwrap().unwrap();
        assert_eq!(latest.run.run_id, format!("writer-{}", winners[0]), "the winner's write must be the one stored");
    }
}

/// Many writes at once, as a store that commits concurrent writes together (group commit)
/// sees them in one transaction: writers on threads of their own all succeed and read back
/// exactly; conflicting writers (a race for one thread's next version, a race to create a
/// thread, a write that skips a version, a second first version) fail alone, each with the
/// versions of its own thread, and write nothing.
async fn concurrent_writes_keep_their_own_outcomes(store: Arc<dyn Checkpointer>, ns: &str) {
    const OWN_THREADS: usize = 32;
    const RACERS: usize = 6;
    let raced = format!("{ns}:together-raced");
    let created = format!("{ns}:together-created");
    let skipping = format!("{ns}:together-skipping");
    let repeated = format!("{ns}:together-repeated");
    for id in [&raced, &skipping, &repeated] {
        store.put(&sample(id, 1, RunStatus::Running)).await.unwrap();
    }

    /// What each writer did: its checkpoint and the store's answer.
    type Outcome = Vec<(Checkpoint, Result<(), CheckpointError>)>;
    let tasks = OWN_THREADS + 2 * RACERS + 2;
    let start = Arc::new(tokio::sync::Barrier::new(tasks));
    let spawn = |writes: Vec<Checkpoint>| {
        let (store, start) = (store.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            let mut outcome: Outcome = Vec::new();
            for cp in writes {
                let result = store.put(&cp).await;
                outcome.push((cp, result));
            }
            outcome
        })
    };
    let mut own = Vec::new();
    for t in 0..OWN_THREADS {
        let id = format!("{ns}:together-own-{t:02}");
        let writes = (1..=3u64)
            .map(|v| {
                let mut cp = sample(&id, v, if v == 3 { RunStatus::Completed } else { RunStatus::Running });
                cp.run.run_id = format!("own-{t}");
                cp.run.idempotency_key = Some(format!("key-{t}"));
                cp.state = format!(r#"{{"thread":{t},"v":{v}}}"#).into_bytes();
                cp
            })
            .collect();
        own.push(spawn(writes));
    }
    let mut racers = Vec::new();
    for r in 0..RACERS {
        let mut next = sample(&raced, 2, RunStatus::Completed);
        next.run.run_id = format!("racer-{r}");
        racers.push(spawn(vec![next]));
        let mut first = sample(&created, 1, RunStatus::Running);
        first.run.run_id = format!("creator-{r}");
        racers.push(spawn(vec![first]));
    }
    let skipper = spawn(vec![sample(&skipping, 3, RunStatus::Running)]);
    let repeater = spawn(vec![sample(&repeated, 1, RunStatus::Running)]);

    for task in own {
        let outcome = task.await.unwrap();
        let (last, _) = outcome.last().unwrap();
        for (cp, result) in &outcome {
            assert!(result.is_ok(), "a write to a thread of its own must succeed, got {result:?} for {}", cp.thread_id);
        }
        let latest = store.latest(&last.thread_id).await.unwrap();
        assert_eq!(latest.as_ref(), Some(last), "an acknowledged write must be stored exactly as written");
        assert_eq!(store.thread(&last.thread_id).await.unwrap().unwrap().version, 3);
        let key = store.find_idempotent(&last.thread_id, last.run.idempotency_key.as_deref().unwrap()).await.unwrap();
        assert_eq!(key.map(|k| k.version), Some(3), "the key recorded with a batched write");
    }

    let mut winners: Vec<Checkpoint> = Vec::new();
    for task in racers {
        for (cp, result) in task.await.unwrap() {
            match result {
                Ok(()) => winners.push(cp),
                Err(CheckpointError::Conflict { thread_id, expected, actual }) => {
                    assert_eq!(thread_id, cp.thread_id, "a conflict names the writer's own thread");
                    assert_eq!(
                        (expected, actual),
                        (cp.version - 1, cp.version),
                        "a racer that lost to another writer of its version reports that version"
                    );
                }
                Err(other) => panic!("racing writers must only see conflicts, got {other:?}"),
            }
        }
    }
    for id in [&raced, &created] {
        let won: Vec<_> = winners.iter().filter(|cp| &cp.thread_id == id).collect();
        assert_eq!(won.len(), 1, "exactly one racer for {id} must win, got {won:?}");
        assert_eq!(store.latest(id).await.unwrap().as_ref(), Some(won[0]), "the winner's write must be stored");
    }

    let lone = [(skipper, &skipping, 2, 1), (repeater, &repeated, 0, 1)];
    for (task, id, want_expected, want_actual) in lone {
        match task.await.unwrap().pop().unwrap().1 {
            Err(CheckpointError::Conflict { thread_id, expected, actual }) => {
                assert_eq!(&thread_id, id);
                assert_eq!((expected, actual), (want_expected, want_actual), "the conflict's versions for {id}");
            }
            other => panic!("a write that does not follow its thread's version must conflict, got {other:?}"),
        }
        let latest = store.latest(id).await.unwrap().unwrap();
        assert_eq!((latest.version, latest.run.run_id.as_str()), (1, "run-1"), "a losing write must write nothing");
    }
}

async fn idempotency_keys(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:idem");
    let mut running = sample(&id, 1, RunStatus::Running);
    running.run.idempotency_key = Some("turn-1".into());
    store.put(&running).await.unwrap();
    assert!(
        store.find_idempotent(&id, "turn-1").await.unwrap().is_none(),
        "a key is recorded only when its run completes or pauses"
    );
    let mut done = sample(&id, 2, RunStatus::Completed);
    done.run.run_id = "run-1".into();
    done.run.idempotency_key = Some("turn-1".into());
    done.run.fingerprint = Some("fp-turn-1".into());
    store.put(&done).await.unwrap();
    let found = store.find_idempotent(&id, "turn-1").await.unwrap().expect("key of a completed run");
    assert_eq!(found.run_id, "run-1");
    assert_eq!(found.version, 2);
    assert_eq!(found.status, RunStatus::Completed);
    assert_eq!(found.output.as_deref(), Some(r#"{"ok":true}"#));
    assert_eq!(found.fingerprint.as_deref(), Some("fp-turn-1"), "the key keeps its request's fingerprint");
    let mut unprinted = sample(&id, 3, RunStatus::Completed);
    unprinted.run.idempotency_key = Some("turn-2".into());
    store.put(&unprinted).await.unwrap();
    let found = store.find_idempotent(&id, "turn-2").await.unwrap().expect("key of a completed run");
    assert_eq!(found.fingerprint, None, "a key recorded without a fingerprint has none");
    let other = format!("{ns}:idem-other");
    assert!(store.find_idempotent(&other, "turn-1").await.unwrap().is_none(), "keys are scoped to their thread");
}

async fn listing_and_paging(store: &dyn Checkpointer, ns: &str) {
    let prefix = format!("{ns}:list:");
    for i in 0..5 {
        let mut cp = sample(&format!("{prefix}{i}"), 1, RunStatus::Completed);
        if i % 2 == 1 {
            cp.workflow = "other".into();
        }
        store.put(&cp).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_threads(&ThreadQuery {
                prefix: Some(prefix.clone()),
                after: after.clone(),
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(page.threads.len() <= 2, "a page must respect its limit");
        seen.extend(page.threads.into_iter().map(|t| t.thread_id));
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let expected: Vec<String> = (0..5).map(|i| format!("{prefix}{i}")).collect();
    assert_eq!(seen, expected, "paging must return every thread once, ordered by id");
    let filtered = store
        .list_threads(&ThreadQuery {
            prefix: Some(prefix.clone()),
            workflow: Some("other".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let ids: Vec<_> = filtered.threads.iter().map(|t| t.thread_id.clone()).collect();
    assert_eq!(ids, vec![format!("{prefix}1"), format!("{prefix}3")], "workflow filter");
    assert!(filtered.next_after.is_none());
}

async fn unfinished_runs(store: &dyn Checkpointer, ns: &str) {
    let crashed = format!("{ns}:unfinished-crashed");
    let done = format!("{ns}:unfinished-done");
    store.put(&sample(&crashed, 1, RunStatus::Running)).await.unwrap();
    store.put(&sample(&done, 1, RunStatus::Running)).await.unwrap();
    store.put(&sample(&done, 2, RunStatus::Completed)).await.unwrap();
    let unfinished = store.unfinished_threads().await.unwrap();
    assert!(unfinished.contains(&crashed), "a thread whose newest checkpoint is running is unfinished");
    assert!(!unfinished.contains(&done), "a completed thread is not unfinished");

    // The same threads with their runs: workflow, run id and owner of the newest checkpoint.
    let owned = format!("{ns}:unfinished-owned");
    let mut running = sample(&owned, 1, RunStatus::Running);
    running.workflow = "another-workflow".into();
    running.run.run_id = format!("{ns}-run-owned");
    running.run.owner = Some(format!("{ns}-replica"));
    store.put(&running).await.unwrap();
    let runs = store.unfinished_runs().await.unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r.thread_id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "unfinished runs are ordered by thread id");
    let threads = store.unfinished_threads().await.unwrap();
    for id in [&crashed, &owned] {
        assert!(ids.contains(&id.as_str()) && threads.contains(id), "{id}: listed by both");
    }
    assert!(!ids.contains(&done.as_str()), "a completed thread has no unfinished run");
    let listed = runs.iter().find(|r| r.thread_id == owned).expect("listed");
    assert_eq!(
        listed,
        &UnfinishedRun {
            thread_id: owned.clone(),
            workflow: "another-workflow".into(),
            run_id: format!("{ns}-run-owned"),
            owner: Some(format!("{ns}-replica")),
        },
        "an unfinished run as its newest checkpoint names it"
    );
    let crashed_run = runs.iter().find(|r| r.thread_id == crashed).expect("listed");
    assert_eq!(crashed_run.owner, None, "a run written without an owner has none");
    // Finished now: no longer listed.
    store.put(&sample(&owned, 2, RunStatus::Completed)).await.unwrap();
    let runs = store.unfinished_runs().await.unwrap();
    assert!(!runs.iter().any(|r| r.thread_id == owned), "a run that completed is no longer listed");
}

async fn retention_keeps_newest(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:retention");
    for v in 1..=6 {
        let mut cp = sample(&id, v, if v == 6 { RunStatus::Interrupted } else { RunStatus::Running });
        if v == 6 {
            cp.pending = sample_pending();
        }
        store.put(&cp).await.unwrap();
    }
    let history = store.history(&id, 100).await.unwrap();
    assert!(!history.is_empty());
    assert_eq!(history[0].version, 6, "history is newest first and keeps the newest");
    assert_eq!(history[0].pending, sample_pending(), "pruning never drops pending interrupts");
    assert!(history.windows(2).all(|w| w[0].version > w[1].version), "history is ordered newest first");
}

/// Several pending interrupts, answered ids and fan-out task writes read back exactly, per
/// version; a fan-out step in progress (running, with task writes) is an unfinished run.
async fn pending_work_round_trips(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:pending");
    let mut first = sample(&id, 1, RunStatus::Running);
    first.pending.tasks = vec![TaskWrite { node: "research".into(), task: 0, update: "{}".into() }];
    store.put(&first).await.unwrap();
    assert!(store.unfinished_threads().await.unwrap().contains(&id), "a fan-out step in progress is an unfinished run");
    let mut second = sample(&id, 2, RunStatus::Interrupted);
    second.pending = sample_pending();
    store.put(&second).await.unwrap();
    let got = store.latest(&id).await.unwrap().expect("checkpoint just written");
    assert_eq!(got.pending, sample_pending(), "pending work must read back exactly as written");
    let history = store.history(&id, 10).await.unwrap();
    assert_eq!(history[0].pending, sample_pending());
    if let Some(older) = history.get(1) {
        assert_eq!(older.pending, first.pending, "each retained checkpoint keeps its own pending work");
    }
    let mut third = sample(&id, 3, RunStatus::Completed);
    third.pending.answered = vec!["clarify-0".into(), "clarify-1".into(), "approve-1".into()];
    store.put(&third).await.unwrap();
    let got = store.latest(&id).await.unwrap().unwrap();
    assert!(got.pending.interrupts.is_empty(), "answered interrupts are no longer pending");
    assert_eq!(got.pending.answered.len(), 3, "answered ids are kept");
}

async fn delete_erases(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:delete");
    let mut cp = sample(&id, 1, RunStatus::Completed);
    cp.run.idempotency_key = Some("k".into());
    store.put(&cp).await.unwrap();
    assert!(store.delete_thread(&id).await.unwrap());
    assert!(store.latest(&id).await.unwrap().is_none(), "deleted thread has no checkpoint");
    assert!(store.history(&id, 10).await.unwrap().is_empty(), "deleted thread has no history");
    assert!(store.find_idempotent(&id, "k").await.unwrap().is_none(), "deletion erases idempotency records");
    assert!(store.thread(&id).await.unwrap().is_none());
    store.put(&sample(&id, 1, RunStatus::Completed)).await.unwrap();
    assert_eq!(store.latest(&id).await.unwrap().unwrap().version, 1, "a deleted thread starts again at version 1");

    // The unsynced delete erases the same things, visibly at once.
    let mut cp = sample(&id, 2, RunStatus::Completed);
    cp.run.idempotency_key = Some("k2".into());
    store.put(&cp).await.unwrap();
    assert!(store.delete_thread_unsynced(&id).await.unwrap());
    assert!(store.latest(&id).await.unwrap().is_none(), "unsynced delete: no checkpoint");
    assert!(store.find_idempotent(&id, "k2").await.unwrap().is_none(), "unsynced delete: no idempotency record");
    assert!(store.thread(&id).await.unwrap().is_none());
    assert!(!store.delete_thread_unsynced(&id).await.unwrap(), "deleting an unknown thread must report false");
}

/// A running checkpoint names the replica that wrote it, and reads it back; a checkpoint
/// without an owner reads back without one.
async fn owner_round_trips(store: &dyn Checkpointer, ns: &str) {
    let id = format!("{ns}:owner");
    let mut running = sample(&id, 1, RunStatus::Running);
    running.run.owner = Some(format!("{ns}-replica-ß"));
    store.put(&running).await.unwrap();
    let got = store.latest(&id).await.unwrap().expect("checkpoint just written");
    assert_eq!(got.run.owner, running.run.owner, "a running checkpoint keeps its owner");
    assert_eq!(got, running, "a checkpoint with an owner must read back exactly as written");
    assert!(store.unfinished_threads().await.unwrap().contains(&id), "an owned running checkpoint is unfinished");
    let unowned = sample(&id, 2, RunStatus::Running);
    store.put(&unowned).await.unwrap();
    let got = store.latest(&id).await.unwrap().expect("checkpoint just written");
    assert_eq!(got.run.owner, None, "a checkpoint written without an owner has none");
    assert_eq!(got, unowned);
    let history = store.history(&id, 10).await.unwrap();
    if let Some(older) = history.get(1) {
        assert_eq!(older.run.owner, running.run.owner, "each retained checkpoint keeps its own owner");
    }
}

/// Replica leases: renewed, extended, expired, released, independent per replica.
async fn replica_leases(store: &dyn Checkpointer, ns: &str) {
    let a = format!("{ns}-replica-a");
    let b = format!("{ns}-replica-b");
    let long = Duration::from_secs(30);
    let short = Duration::from_millis(300);

    assert_eq!(store.lease_remaining(&format!("{ns}-unknown")).await.unwrap(), None, "an unknown replica has no lease");
    store.release_lease(&format!("{ns}-unknown")).await.expect("releasing a lease that does not exist is not an error");

    store.renew_lease(&a, long).await.unwrap();
    let left = store.lease_remaining(&a).await.unwrap().expect("a lease just renewed has time left");
    assert!(left <= long, "a lease never has more than its ttl left, got {left:?} of {long:?}");
    assert!(left > long - Duration::from_secs(10), "a lease just renewed has most of its ttl left, got {left:?}");

    // Two replicas' leases are independent.
    store.renew_lease(&b, long).await.unwrap();
    store.release_lease(&a).await.unwrap();
    assert_eq!(store.lease_remaining(&a).await.unwrap(), None, "a released lease is gone at once");
    assert!(store.lease_remaining(&b).await.unwrap().is_some(), "releasing one replica's lease leaves another's");

    // A short lease expires by itself.
    store.renew_lease(&a, short).await.unwrap();
    assert!(store.lease_remaining(&a).await.unwrap().is_some_and(|left| left <= short));
    tokio::time::sleep(short * 2).await;
    assert_eq!(store.lease_remaining(&a).await.unwrap(), None, "a lease past its ttl has expired");
    assert!(store.lease_remaining(&b).await.unwrap().is_some(), "another replica's lease does not expire with it");

    // Renewing an existing lease extends it: past the short ttl, the long one still holds.
    store.renew_lease(&a, short).await.unwrap();
    store.renew_lease(&a, long).await.unwrap();
    tokio::time::sleep(short * 2).await;
    let left = store.lease_remaining(&a).await.unwrap().expect("a renewed lease outlasts its first ttl");
    assert!(left > short && left <= long, "a renewed lease runs to its new ttl, got {left:?}");

    // An expired lease may be renewed again.
    store.renew_lease(&b, short).await.unwrap();
    tokio::time::sleep(short * 2).await;
    assert_eq!(store.lease_remaining(&b).await.unwrap(), None);
    store.renew_lease(&b, long).await.unwrap();
    assert!(store.lease_remaining(&b).await.unwrap().is_some(), "an expired lease is renewed like a new one");

    store.release_lease(&a).await.unwrap();
    store.release_lease(&b).await.unwrap();
    assert_eq!(store.lease_remaining(&a).await.unwrap(), None);
    assert_eq!(store.lease_remaining(&b).await.unwrap(), None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryCheckpointer;

    #[tokio::test]
    async fn memory_checkpointer_conforms() {
        run_all(Arc::new(MemoryCheckpointer::new(3))).await;
        run_all(Arc::new(MemoryCheckpointer::new(1))).await;
    }
}
