//! Checks shared by the SQLite and PostgreSQL tests, beyond the runtime's conformance suite.
#![allow(dead_code)]

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant, UNIX_EPOCH},
};

use frontdesk_runtime::{conformance::sample, Checkpoint, CheckpointError, Checkpointer, RunStatus};
use frontdesk_store::{
    sqlx, CompletedTicket, Database, DbPool, NewSubmission, SqlCheckpointer, TicketMessage, WriteBatchStats,
    WriteObserver, WriteOutcome,
};

pub mod api_keys;
pub mod investigation;
pub mod llm_calls;

pub fn ns() -> String {
    format!("t-{}", uuid::Uuid::new_v4().simple())
}

/// Rows of `table` belonging to `thread_id`.
pub async fn count_rows(db: &Database, table: &str, thread_id: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table} WHERE thread_id = $1"));
    match db.pool() {
        DbPool::Sqlite(pool) => sqlx::query_scalar(sql).bind(thread_id).fetch_one(pool).await,
        DbPool::Postgres(pool) => sqlx::query_scalar(sql).bind(thread_id).fetch_one(pool).await,
    }
    .unwrap()
}

/// The newest `checkpoint_retention` checkpoints stay; older rows are deleted.
pub async fn retention_prunes(db: &Database) {
    let retention = db.options().checkpoint_retention;
    let store = db.checkpointer();
    let id = format!("{}:prune", ns());
    for v in 1..=10u64 {
        store.put(&sample(&id, v, RunStatus::Running)).await.unwrap();
        let expected = v.min(retention as u64) as i64;
        assert_eq!(count_rows(db, "checkpoints", &id).await, expected, "rows after writing version {v}");
    }
    let history = store.history(&id, 100).await.unwrap();
    let versions: Vec<u64> = history.iter().map(|c| c.version).collect();
    let expected: Vec<u64> = (1..=10u64).rev().take(retention).collect();
    assert_eq!(versions, expected);
    assert_eq!(store.history(&id, 1).await.unwrap().len(), 1);
    assert!(store.history(&id, 0).await.unwrap().is_empty());
    assert_eq!(count_rows(db, "threads", &id).await, 1);
}

/// `narrow` keeps fewer checkpoints per thread than `wide` did, on the same data (a restart with
/// a lower retention): its next write to a thread leaves only the newest `narrow` keeps, alone
/// and in a batch (two writes put together while `hold` keeps the writer waiting, as for
/// [`put_together`]). Returns how `narrow` committed the batch.
pub async fn a_lower_retention_drops_the_excess<H: Send, F: Future<Output = H>>(
    wide: &Database,
    narrow: &Database,
    hold: impl FnOnce() -> F,
) -> WriteBatchStats {
    let (kept, keeps) = (wide.options().checkpoint_retention, narrow.options().checkpoint_retention);
    assert!(keeps < kept && kept >= 3, "{keeps} must be below {kept}, which must be at least 3");
    let ns = ns();
    let (alone, batched) = (format!("{ns}:alone"), format!("{ns}:batched"));
    for thread in [&alone, &batched] {
        for v in 1..=5u64 {
            wide.checkpointer().put(&sample(thread, v, RunStatus::Running)).await.unwrap();
        }
        assert_eq!(count_rows(wide, "checkpoints", thread).await, kept.min(5) as i64);
    }
    let sixth = sample(&alone, 6, RunStatus::Completed);
    narrow.checkpointer().put(&sixth).await.unwrap();
    let writes = vec![sample(&alone, 7, RunStatus::Running), sample(&batched, 6, RunStatus::Completed)];
    let (results, stats) = put_together(narrow, hold().await, writes.clone()).await;
    for (cp, result) in writes.iter().zip(results) {
        assert!(result.is_ok(), "{} version {}: {result:?}", cp.thread_id, cp.version);
        let history = narrow.checkpointer().history(&cp.thread_id, 100).await.unwrap();
        let versions: Vec<u64> = history.iter().map(|c| c.version).collect();
        let expected: Vec<u64> = (1..=cp.version).rev().take(keeps).collect();
        assert_eq!(versions, expected, "{}: only the newest {keeps} stay", cp.thread_id);
        assert_eq!(history.first(), Some(cp), "{}: the newest is the one written", cp.thread_id);
        assert_eq!(count_rows(narrow, "checkpoints", &cp.thread_id).await, keeps as i64);
    }
    stats
}

/// `tasks` writers (spread over the given stores) each commit `per_task` increments of one
/// thread by read-modify-write with retries on conflict. No increment may be lost and every
/// failure must be a conflict.
pub async fn contended_increments<C: Checkpointer>(stores: Vec<Arc<C>>, tasks: usize, per_task: u64) {
    let id = format!("{}:contended", ns());
    let mut first = sample(&id, 1, RunStatus::Running);
    first.state = b"0".to_vec();
    stores[0].put(&first).await.unwrap();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = stores[t % stores.len()].clone();
        let id = id.clone();
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            let mut done = 0;
            while done < per_task {
                let latest = store.latest(&id).await.unwrap().unwrap();
                let counter: u64 = std::str::from_utf8(&latest.state).unwrap().parse().unwrap();
                let mut next = sample(&id, latest.version + 1, RunStatus::Running);
                next.state = (counter + 1).to_string().into_bytes();
                next.run.run_id = format!("task-{t}");
                match store.put(&next).await {
                    Ok(()) => done += 1,
                    Err(CheckpointError::Conflict { expected, actual, .. }) => {
                        assert_eq!(expected, latest.version);
                        assert!(actual > expected, "a conflict reports the newer version ({actual} > {expected})");
                        conflicts += 1;
                    }
                    Err(other) => panic!("writers must only ever see conflicts, got {other:?}"),
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for h in handles {
        conflicts += h.await.unwrap();
    }
    let total = tasks as u64 * per_task;
    let latest = stores[0].latest(&id).await.unwrap().unwrap();
    assert_eq!(latest.version, total + 1, "every successful write advanced the version by one");
    assert_eq!(latest.state, total.to_string().into_bytes(), "no increment was lost");
    eprintln!("contended_increments: {tasks} tasks x {per_task} writes, {conflicts} conflicts");
}

pub async fn intake_round_trip(db: &Database) {
    let thread = format!("{}:intake", ns());
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
    let first = NewSubmission {
        id: format!("{thread}-1"),
        thread_id: thread.clone(),
        team_id: "billing".into(),
        team_name: "Billing".into(),
        fields: serde_json::json!({"name": "Ada", "amount": 12.5, "tags": ["a", "b"]}),
        url: Some("https://example.test/s/1".into()),
        created_at: at(1_700_000_000_001),
    };
    let second = NewSubmission {
        id: format!("{thread}-2"),
        url: None,
        fields: serde_json::json!({}),
        created_at: at(1_700_000_000_002),
        ..first.clone()
    };
    db.insert_submission(&second).await.unwrap();
    db.insert_submission(&first).await.unwrap();
    db.insert_submission(&first).await.unwrap(); // retried: a no-op
    assert_eq!(db.list_submissions(&thread).await.unwrap(), vec![first, second]);
    assert!(db.list_submissions("no-such-thread").await.unwrap().is_empty());
}

/// Sequential puts on one thread; returns the mean latency.
pub async fn put_latency<C: Checkpointer>(store: &C, writes: u64) -> Duration {
    let id = format!("{}:latency", ns());
    let state = vec![b'x'; 2048];
    let mut cps = Vec::new();
    for v in 1..=writes {
        let mut cp = sample(&id, v, RunStatus::Running);
        cp.state = state.clone();
        cps.push(cp);
    }
    // Warm up the statement cache.
    for cp in &cps[..10] {
        store.put(cp).await.unwrap();
    }
    let start = Instant::now();
    for cp in &cps[10..] {
        store.put(cp).await.unwrap();
    }
    start.elapsed() / (writes as u32 - 10)
}

/// Waits until `submitted` checkpoint writes have reached the database's write queue.
async fn queued(db: &Database, submitted: u64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while db.write_batches().submitted < submitted {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("every put reaches the write queue");
}

/// Puts each checkpoint of `writes` from a task of its own, each queued before the next starts,
/// so that a batch holds them in this order (the writer held meanwhile). Returns the tasks.
async fn queue_in_order(
    db: &Database,
    store: &Arc<SqlCheckpointer>,
    writes: &[Checkpoint],
) -> Vec<tokio::task::JoinHandle<Result<(), CheckpointError>>> {
    let before = db.write_batches();
    let mut tasks = Vec::new();
    for (n, cp) in (1..).zip(writes.iter().cloned()) {
        let store = store.clone();
        tasks.push(tokio::spawn(async move { store.put(&cp).await }));
        queued(db, before.submitted + n).await;
    }
    tasks
}

/// Puts every checkpoint of `writes` at once, each from a task of its own, while `hold` keeps
/// the writer waiting (the connection the write queue needs next, or the database's write
/// lock); drops `hold` once every put is queued. Returns each put's result, in order, and how
/// the database committed checkpoint writes meanwhile.
pub async fn put_together<H: Send>(
    db: &Database,
    hold: H,
    writes: Vec<Checkpoint>,
) -> (Vec<Result<(), CheckpointError>>, WriteBatchStats) {
    let before = db.write_batches();
    let store = Arc::new(db.checkpointer());
    let n = writes.len() as u64;
    let tasks: Vec<_> = writes
        .into_iter()
        .map(|cp| {
            let store = store.clone();
            tokio::spawn(async move { store.put(&cp).await })
        })
        .collect();
    queued(db, before.submitted + n).await;
    drop(hold);
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let after = db.write_batches();
    let delta = WriteBatchStats {
        submitted: after.submitted - before.submitted,
        batches: after.batches - before.batches,
        writes: after.writes - before.writes,
        largest: after.largest,
        waiting: after.waiting,
    };
    (results, delta)
}

/// Writes to threads of their own and conflicting writes, committed together: each keeps its
/// own outcome. `hold` must give what keeps the writer waiting until every put is queued (see
/// [`put_together`]), so that they make one batch.
pub async fn one_batch_keeps_each_outcome<H: Send, F: Future<Output = H>>(db: &Database, hold: impl FnOnce() -> F) {
    let ns = ns();
    let store = db.checkpointer();
    let raced = format!("{ns}:raced");
    let skipped = format!("{ns}:skipped");
    let absent = format!("{ns}:absent");
    store.put(&sample(&raced, 1, RunStatus::Running)).await.unwrap();
    store.put(&sample(&skipped, 1, RunStatus::Running)).await.unwrap();
    // Half the own threads get their first write in the batch, half their second: a store may
    // write the two kinds by different statements (SQLite does) or group them differently, so the
    // batch mixes them, with the racers spread among them rather than at its end.
    let mut writes = Vec::new();
    for i in 0..40 {
        let thread = format!("{ns}:own-{i:02}");
        let version = if i % 2 == 0 {
            1
        } else {
            store.put(&sample(&thread, 1, RunStatus::Running)).await.unwrap();
            2
        };
        writes.push(sample(&thread, version, RunStatus::Running));
    }
    for (r, at) in [(0, 7), (1, 30), (2, 42)] {
        let mut cp = sample(&raced, 2, RunStatus::Completed);
        cp.run.run_id = format!("racer-{r}");
        writes.insert(at, cp);
    }
    writes.push(sample(&skipped, 3, RunStatus::Running));
    writes.push(sample(&absent, 2, RunStatus::Running));
    let (results, stats) = put_together(db, hold().await, writes.clone()).await;
    assert_eq!(stats.batches, 1, "writes waiting together are committed in one transaction: {stats:?}");
    assert_eq!(stats.writes, writes.len() as u64);
    let mut raced_winners = Vec::new();
    for (cp, result) in writes.iter().zip(&results) {
        match result {
            Ok(()) if cp.thread_id == raced => raced_winners.push(cp),
            Ok(()) => {
                assert_ne!(cp.thread_id, skipped, "a write skipping a version must not succeed");
                assert_ne!(cp.thread_id, absent, "a write after a version nobody wrote must not succeed");
                assert_eq!(store.latest(&cp.thread_id).await.unwrap().as_ref(), Some(cp), "acknowledged and stored");
            }
            Err(CheckpointError::Conflict { thread_id, expected, actual }) if cp.thread_id == raced => {
                assert_eq!((thread_id.as_str(), *expected, *actual), (raced.as_str(), 1, 2), "a lost race's versions");
            }
            Err(CheckpointError::Conflict { thread_id, expected, actual }) if cp.thread_id == skipped => {
                assert_eq!((thread_id.as_str(), *expected, *actual), (skipped.as_str(), 2, 1), "a skip's versions");
            }
            Err(CheckpointError::Conflict { thread_id, expected, actual }) if cp.thread_id == absent => {
                assert_eq!((thread_id.as_str(), *expected, *actual), (absent.as_str(), 1, 0), "no thread: version 0");
            }
            Err(other) => {
                panic!("{}: only conflicting writes may fail, and only with a conflict: {other:?}", cp.thread_id)
            }
        }
    }
    assert_eq!(raced_winners.len(), 1, "exactly one racer wins");
    assert_eq!(store.latest(&raced).await.unwrap().as_ref(), Some(raced_winners[0]));
    assert_eq!(store.latest(&skipped).await.unwrap().unwrap().version, 1, "the skip wrote nothing");
    assert_eq!(store.latest(&absent).await.unwrap(), None, "the write after nothing wrote nothing");
}

/// A thread's first and second write in one batch, queued in that order among writes to other
/// threads: both commit, the second after the first. A store that writes a batch as one
/// statement must not let the second read the thread as it was before the first. `hold` as for
/// [`put_together`].
pub async fn a_thread_twice_in_one_batch<H: Send, F: Future<Output = H>>(db: &Database, hold: impl FnOnce() -> F) {
    let ns = ns();
    let store = Arc::new(db.checkpointer());
    let twice = format!("{ns}:twice");
    let writes = [
        sample(&format!("{ns}:before"), 1, RunStatus::Running),
        sample(&twice, 1, RunStatus::Running),
        sample(&format!("{ns}:between"), 1, RunStatus::Running),
        sample(&twice, 2, RunStatus::Completed),
        sample(&format!("{ns}:after"), 1, RunStatus::Running),
    ];
    let held = hold().await;
    let before = db.write_batches();
    let tasks = queue_in_order(db, &store, &writes).await;
    drop(held);
    for (cp, task) in writes.iter().zip(tasks) {
        assert!(matches!(task.await.unwrap(), Ok(())), "{} version {} commits", cp.thread_id, cp.version);
    }
    assert_eq!(db.write_batches().batches - before.batches, 1, "the writes were committed together");
    assert_eq!(store.latest(&twice).await.unwrap().as_ref(), Some(&writes[3]), "the second write is the newest");
    assert_eq!(store.thread(&twice).await.unwrap().map(|t| t.version), Some(2), "the thread is at the second");
}

/// A batch holding a write whose commit the database refuses (the caller installed a deferred
/// check that fails at `COMMIT` for thread ids containing `:poison`): every caller of the batch
/// gets an error that is not a conflict, none of its writes is stored, and the next write
/// commits.
pub async fn a_failed_commit_fails_its_whole_batch<H: Send, F: Future<Output = H>>(
    db: &Database,
    hold: impl FnOnce() -> F,
) {
    let ns = ns();
    let store = db.checkpointer();
    let mut writes: Vec<Checkpoint> =
        (0..10).map(|i| sample(&format!("{ns}:fine-{i}"), 1, RunStatus::Running)).collect();
    writes.insert(4, sample(&format!("{ns}:poison"), 1, RunStatus::Running));
    let (results, stats) = put_together(db, hold().await, writes.clone()).await;
    assert_eq!(stats.batches, 1, "{stats:?}");
    for (cp, result) in writes.iter().zip(&results) {
        assert!(
            matches!(result, Err(CheckpointError::Unavailable(_))),
            "{}: a failed commit answers every caller of its batch with the error, got {result:?}",
            cp.thread_id
        );
        assert!(
            store.latest(&cp.thread_id).await.unwrap().is_none(),
            "{}: nothing of the batch is stored",
            cp.thread_id
        );
    }
    let after = sample(&format!("{ns}:after"), 1, RunStatus::Running);
    store.put(&after).await.expect("the writer recovers from a failed commit");
    assert_eq!(store.latest(&after.thread_id).await.unwrap(), Some(after));
}

/// A batch holding a write whose statements the database refuses (the caller installed a
/// check that fails the checkpoint insert of thread ids containing `:refused`): that write
/// fails alone; the others are stored.
pub async fn a_refused_write_fails_alone<H: Send, F: Future<Output = H>>(db: &Database, hold: impl FnOnce() -> F) {
    let ns = ns();
    let store = db.checkpointer();
    let mut writes: Vec<Checkpoint> =
        (0..10).map(|i| sample(&format!("{ns}:fine-{i}"), 1, RunStatus::Running)).collect();
    writes.insert(3, sample(&format!("{ns}:refused"), 1, RunStatus::Running));
    let (results, stats) = put_together(db, hold().await, writes.clone()).await;
    assert_eq!(stats.batches, 1, "{stats:?}");
    for (cp, result) in writes.iter().zip(&results) {
        if cp.thread_id.ends_with(":refused") {
            assert!(matches!(result, Err(CheckpointError::Unavailable(_))), "the refused write fails: {result:?}");
            assert!(store.thread(&cp.thread_id).await.unwrap().is_none(), "the refused write left nothing");
        } else {
            assert!(result.is_ok(), "{}: a write beside a refused one commits, got {result:?}", cp.thread_id);
            assert_eq!(store.latest(&cp.thread_id).await.unwrap().as_ref(), Some(cp));
        }
    }
}

/// Records what a [`WriteObserver`] is told.
#[derive(Default)]
struct RecordingObserver(std::sync::Mutex<Vec<(WriteOutcome, Duration)>>);

impl WriteObserver for RecordingObserver {
    fn checkpoint_written(&self, outcome: WriteOutcome, waited: Duration) {
        self.0.lock().unwrap().push((outcome, waited));
    }
}

/// The database's write observer hears of every write with its outcome and how long its caller
/// waited, the wait for the writer included; writes waiting for their commit are counted as
/// such until answered. Thread ids containing `:refused` must be refused, as for
/// [`a_refused_write_fails_alone`]; `hold` as for [`put_together`]. Sets the database's
/// observer, so it runs on a database of its own.
pub async fn writes_are_observed<H: Send, F: Future<Output = H>>(db: &Database, hold: impl FnOnce() -> F) {
    let ns = ns();
    let seen = Arc::new(RecordingObserver::default());
    assert!(db.set_write_observer(seen.clone()).is_ok(), "the first observer is set");
    assert!(db.set_write_observer(Arc::new(RecordingObserver::default())).is_err(), "the first one stays");
    let store = Arc::new(db.checkpointer());
    let raced = format!("{ns}:raced");
    store.put(&sample(&raced, 1, RunStatus::Running)).await.unwrap();
    let writes = [
        sample(&format!("{ns}:fine"), 1, RunStatus::Running),
        sample(&raced, 1, RunStatus::Running),
        sample(&format!("{ns}:refused"), 1, RunStatus::Running),
    ];
    let held = hold().await;
    let tasks = queue_in_order(db, &store, &writes).await;
    assert_eq!(db.write_batches().waiting, writes.len(), "queued behind the held writer, all wait");
    let holding = Duration::from_millis(50);
    tokio::time::sleep(holding).await;
    drop(held);
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    assert!(matches!(
        results[..],
        [Ok(()), Err(CheckpointError::Conflict { .. }), Err(CheckpointError::Unavailable(_))]
    ));
    assert_eq!(db.write_batches().waiting, 0, "every caller was answered");

    let seen = std::mem::take(&mut *seen.0.lock().unwrap());
    assert_eq!(seen.len(), 4, "the first write and the three held ones: {seen:?}");
    assert_eq!(seen[0].0, WriteOutcome::Committed);
    let mut held_outcomes: Vec<_> = seen[1..].iter().map(|(outcome, _)| format!("{outcome:?}")).collect();
    held_outcomes.sort();
    assert_eq!(held_outcomes, ["Committed", "Conflict", "Failed"]);
    for (outcome, waited) in &seen[1..] {
        assert!(*waited >= holding, "{outcome:?} waited {waited:?}, the writer held for {holding:?} of it");
    }
}

/// What a database's pool says of itself: within its maximum; with nothing running, every open
/// connection idle (once sqlx has taken back the last one, on a task of its own), nobody
/// waiting, not failing.
pub async fn pool_stats_at_rest(db: &Database) {
    db.checkpointer().latest("nothing").await.unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let stats = db.pool_stats();
            if stats.idle == stats.open {
                return stats;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("connections still busy at rest: {:?}", db.pool_stats()));
    // `sqlite::memory:` has one connection, whatever the options say.
    assert!((1..=db.options().max_connections).contains(&rest.max), "{rest:?}");
    assert!(rest.open >= 1 && rest.open <= rest.max, "{rest:?}");
    assert_eq!((rest.waiting, rest.failing), (0, false), "{rest:?}");
}

/// Erasing a thread while a writer keeps appending to it: every call succeeds or conflicts,
/// and the thread ends either fully erased or consistent.
pub async fn delete_during_writes(db: &Database) {
    let store = Arc::new(db.checkpointer());
    let id = format!("{}:erase-race", ns());
    let writer = {
        let store = store.clone();
        let id = id.clone();
        tokio::spawn(async move {
            for _ in 0..300 {
                let next = store.latest(&id).await.unwrap().map_or(1, |c| c.version + 1);
                let mut cp = sample(&id, next, RunStatus::Completed);
                cp.run.idempotency_key = Some(format!("k{next}"));
                match store.put(&cp).await {
                    Ok(()) | Err(CheckpointError::Conflict { .. }) => {}
                    Err(other) => panic!("a put racing an erasure must succeed or conflict, got {other:?}"),
                }
            }
        })
    };
    for _ in 0..30 {
        store.delete_thread(&id).await.expect("erasure must not fail under concurrent writes");
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    match store.thread(&id).await.unwrap() {
        None => {
            assert_eq!(count_rows(db, "checkpoints", &id).await, 0);
            assert_eq!(count_rows(db, "idempotency_keys", &id).await, 0);
        }
        Some(t) => {
            let latest = store.latest(&id).await.unwrap().expect("a thread has a checkpoint");
            assert_eq!(latest.version, t.version);
            let keys = count_rows(db, "idempotency_keys", &id).await;
            assert!(keys >= 1 && keys as u64 <= t.version, "keys {keys} for version {}", t.version);
        }
    }
    assert!(store.delete_thread(&id).await.unwrap() || store.thread(&id).await.unwrap().is_none());
    assert_eq!(count_rows(db, "checkpoints", &id).await, 0);
    assert_eq!(count_rows(db, "idempotency_keys", &id).await, 0);
    assert_eq!(count_rows(db, "threads", &id).await, 0);
}

/// Rows of `table` belonging to `ticket_id`.
pub async fn count_ticket_rows(db: &Database, table: &str, ticket_id: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table} WHERE ticket_id = $1"));
    match db.pool() {
        DbPool::Sqlite(pool) => sqlx::query_scalar(sql).bind(ticket_id).fetch_one(pool).await,
        DbPool::Postgres(pool) => sqlx::query_scalar(sql).bind(ticket_id).fetch_one(pool).await,
    }
    .unwrap()
}

fn at(ms: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

pub fn ticket(customer_id: &str, ticket_id: &str, status: &str, completed_ms: u64) -> CompletedTicket {
    CompletedTicket {
        ticket_id: ticket_id.to_owned(),
        customer_id: customer_id.to_owned(),
        thread_id: format!("{customer_id}:{ticket_id}"),
        status: status.to_owned(),
        recommended_action: if status == "open" { "escalate_human" } else { "auto_respond" }.to_owned(),
        urgency: "high".into(),
        ticket_type: "billing".into(),
        subject: "Charged twice — ¿por qué?".into(),
        summary: "Customer was charged twice for March".into(),
        suggested_response: "I understand your concern about the double charge...".into(),
        relevant_articles: vec!["kb_002".into(), "kb_015".into()],
        language: "es".into(),
        result: serde_json::json!({
            "urgency": "high",
            "extracted_info": {"product_area": "billing", "issue_type": "refund_request", "sentiment": "frustrated"},
            "recommended_action": "auto_respond",
            "relevant_articles": ["kb_002", "kb_015"],
            "confidence": 0.87,
        }),
        run_id: format!("run-{ticket_id}"),
        kb_results: serde_json::json!([
            {"article_id": "kb_002", "title": "Duplicate charges", "score": 7.25},
            {"article_id": "kb_015", "title": "Refunds — ¿cuándo?", "score": 3.5},
        ]),
        created_at: at(completed_ms - 60_000),
        completed_at: at(completed_ms),
    }
}

pub fn messages(n: u32) -> Vec<TicketMessage> {
    (1..=n)
        .map(|seq| TicketMessage {
            seq,
            role: if seq % 2 == 1 { "customer" } else { "assistant" }.into(),
            text: format!("message {seq}: héllo"),
            // Customer messages carry their English translation; replies have none.
            english_text: if seq % 2 == 1 { format!("message {seq}: hello") } else { String::new() },
            language: "es".into(),
            created_at: at(1_700_000_000_000 + u64::from(seq)),
        })
        .collect()
}

/// Round trip, idempotent re-saves and existence checks of completed tickets.
pub async fn tickets_round_trip(db: &Database) {
    let customer = format!("C-{}", ns());
    let id = format!("TKT-{}", ns());
    assert!(!db.ticket_exists(&id).await.unwrap());
    assert!(db.get_ticket(&id).await.unwrap().is_none());
    let t = ticket(&customer, &id, "resolved", 1_700_000_100_000);
    let mut msgs = messages(3);
    msgs.reverse(); // stored by seq whatever the order given
    db.save_completed_ticket(&t, &msgs).await.unwrap();
    assert!(db.ticket_exists(&id).await.unwrap());
    let (got, got_msgs) = db.get_ticket(&id).await.unwrap().expect("saved ticket");
    assert_eq!(got, t, "a ticket reads back exactly as saved");
    assert_eq!(got_msgs, messages(3), "messages read back in seq order");

    // Saving the same ticket again (a retry) changes nothing and duplicates nothing.
    db.save_completed_ticket(&t, &msgs).await.unwrap();
    assert_eq!(count_ticket_rows(db, "tickets", &id).await, 1);
    assert_eq!(count_ticket_rows(db, "ticket_messages", &id).await, 3);
    assert_eq!(db.get_ticket(&id).await.unwrap().unwrap(), (t.clone(), messages(3)));

    // A later save of the same ticket updates it in place and upserts messages by seq.
    let mut reopened = ticket(&customer, &id, "open", 1_700_000_200_000);
    reopened.result = serde_json::json!({"recommended_action": "escalate_human"});
    reopened.relevant_articles = Vec::new();
    reopened.run_id = "run-escalation".into();
    reopened.kb_results = serde_json::json!([]);
    let mut more = messages(4);
    more[0].text = "edited".into();
    db.save_completed_ticket(&reopened, &more[..1]).await.unwrap();
    db.save_completed_ticket(&reopened, &more[3..]).await.unwrap();
    assert_eq!(count_ticket_rows(db, "tickets", &id).await, 1);
    assert_eq!(count_ticket_rows(db, "ticket_messages", &id).await, 4);
    let (got, got_msgs) = db.get_ticket(&id).await.unwrap().unwrap();
    assert_eq!(got.created_at, t.created_at, "a re-saved ticket keeps its first created_at");
    assert_eq!(got, CompletedTicket { created_at: t.created_at, ..reopened });
    assert_eq!(got_msgs, more);
}

/// Listing by customer and status, newest first, in pages; customers never see each other's.
pub async fn tickets_listing(db: &Database) {
    let run = ns();
    let (a, b) = (format!("A-{run}"), format!("B-{run}"));
    // Completion times: t3 and t4 tie, so ticket_id breaks the tie.
    let spec = [
        ("t1", "resolved", 1_000u64),
        ("t2", "open", 2_000),
        ("t3", "resolved", 3_000),
        ("t4", "open", 3_000),
        ("t5", "resolved", 5_000),
    ];
    for (id, status, ms) in spec {
        db.save_completed_ticket(&ticket(&a, &format!("{a}-{id}"), status, 1_700_000_000_000 + ms), &messages(1))
            .await
            .unwrap();
    }
    for id in ["t1", "t2"] {
        db.save_completed_ticket(&ticket(&b, &format!("{b}-{id}"), "resolved", 1_700_000_009_000), &[]).await.unwrap();
    }
    let ids = |tickets: &[CompletedTicket]| tickets.iter().map(|t| t.ticket_id.clone()).collect::<Vec<_>>();
    let expect = |names: &[&str], customer: &str| names.iter().map(|n| format!("{customer}-{n}")).collect::<Vec<_>>();

    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let (page, next) = db.list_tickets(&a, None, after.as_ref(), 2).await.unwrap();
        assert!(page.len() <= 2, "a page respects its limit");
        assert!(page.iter().all(|t| t.customer_id == a), "only the customer's own tickets");
        seen.extend(ids(&page));
        pages += 1;
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, expect(&["t5", "t4", "t3", "t2", "t1"], &a), "newest first, every ticket once");
    assert_eq!(pages, 3);

    let (open, next) = db.list_tickets(&a, Some("open"), None, 10).await.unwrap();
    assert_eq!(ids(&open), expect(&["t4", "t2"], &a));
    assert!(next.is_none());
    let (first, next) = db.list_tickets(&a, Some("resolved"), None, 1).await.unwrap();
    assert_eq!(ids(&first), expect(&["t5"], &a));
    let (rest, last) = db.list_tickets(&a, Some("resolved"), next.as_ref(), 10).await.unwrap();
    assert_eq!(ids(&rest), expect(&["t3", "t1"], &a));
    assert!(last.is_none());

    let (theirs, _) = db.list_tickets(&b, None, None, 10).await.unwrap();
    assert_eq!(ids(&theirs), expect(&["t2", "t1"], &b), "customer B sees only its own tickets");
    let (none, next) = db.list_tickets(&format!("nobody-{run}"), None, None, 10).await.unwrap();
    assert!(none.is_empty() && next.is_none());
    let (none, _) = db.list_tickets(&b, Some("open"), None, 10).await.unwrap();
    assert!(none.is_empty());
    // A limit of 0 means 1.
    assert_eq!(db.list_tickets(&a, None, None, 0).await.unwrap().0.len(), 1);
}

/// Concurrent saves of the same ticket (retries racing): one row, no duplicate messages.
pub async fn tickets_concurrent_saves(db: &Database) {
    let id = format!("TKT-{}", ns());
    let t = ticket("C-race", &id, "resolved", 1_700_000_000_000);
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (db, t) = (db.clone(), t.clone());
        handles.push(tokio::spawn(async move { db.save_completed_ticket(&t, &messages(5)).await }));
    }
    for h in handles {
        h.await.unwrap().expect("concurrent saves of one ticket all succeed");
    }
    assert_eq!(count_ticket_rows(db, "tickets", &id).await, 1);
    assert_eq!(count_ticket_rows(db, "ticket_messages", &id).await, 5);
}

/// Triage requests by idempotency key: first record wins (with its fingerprint), scoped per
/// customer.
pub async fn triage_requests(db: &Database) {
    let (a, b) = (format!("A-{}", ns()), format!("B-{}", ns()));
    assert_eq!(db.find_triage_request(&a, "req-1").await.unwrap(), None);
    db.record_triage_request(&a, "req-1", Some("fp-1"), r#"{"ticket_id":"TKT-1"}"#).await.unwrap();
    db.record_triage_request(&a, "req-1", Some("fp-2"), r#"{"ticket_id":"TKT-2"}"#).await.unwrap();
    let found = db.find_triage_request(&a, "req-1").await.unwrap().expect("recorded");
    assert_eq!(found.output, r#"{"ticket_id":"TKT-1"}"#);
    assert_eq!(found.fingerprint.as_deref(), Some("fp-1"), "the first record's fingerprint is kept");
    assert_eq!(db.find_triage_request(&b, "req-1").await.unwrap(), None, "keys are scoped to their customer");
    db.record_triage_request(&b, "req-0", None, "{}").await.unwrap();
    assert_eq!(db.find_triage_request(&b, "req-0").await.unwrap().unwrap().fingerprint, None);
}

/// Claims on triage requests' keys: one holder at a time (of many racing, exactly one wins),
/// renewed and released by that holder only, and taken over once it goes unrenewed.
pub async fn triage_claims(db: &Database) {
    use frontdesk_store::TriageClaim;
    let (a, b) = (format!("A-{}", ns()), format!("B-{}", ns()));
    let claim = |customer: String, holder: &'static str, now: i64| {
        let db = db.clone();
        async move { db.claim_triage_request(&customer, "req-1", "fp-1", holder, now, now - 30_000).await.unwrap() }
    };
    assert_eq!(claim(a.clone(), "h1", 100_000).await, TriageClaim::Claimed);
    assert_eq!(claim(a.clone(), "h2", 100_001).await, TriageClaim::Held { fingerprint: "fp-1".into() });
    assert_eq!(claim(b.clone(), "h2", 100_001).await, TriageClaim::Claimed, "keys are scoped to their customer");
    assert!(!db.renew_triage_claim(&a, "req-1", "h2", 110_000).await.unwrap(), "only the holder renews");
    assert!(db.renew_triage_claim(&a, "req-1", "h1", 110_000).await.unwrap());
    // 30 s after the renewal, not after the claim, it is stale.
    assert_eq!(claim(a.clone(), "h2", 135_000).await, TriageClaim::Held { fingerprint: "fp-1".into() });
    assert_eq!(claim(a.clone(), "h2", 140_001).await, TriageClaim::Claimed, "an unrenewed claim is taken over");
    assert!(!db.renew_triage_claim(&a, "req-1", "h1", 140_002).await.unwrap(), "its old holder lost it");
    db.release_triage_claim(&a, "req-1", "h1").await.unwrap();
    assert_eq!(claim(a.clone(), "h3", 140_003).await, TriageClaim::Held { fingerprint: "fp-1".into() }, "not h1's");
    db.release_triage_claim(&a, "req-1", "h2").await.unwrap();
    assert_eq!(claim(a.clone(), "h3", 140_004).await, TriageClaim::Claimed);

    let c = format!("C-{}", ns());
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let (db, c) = (db.clone(), c.clone());
            tokio::spawn(async move {
                db.claim_triage_request(&c, "req-1", "fp-1", &format!("r{i}"), 1_000_000, 970_000).await.unwrap()
            })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        if racer.await.unwrap() == TriageClaim::Claimed {
            won += 1;
        }
    }
    assert_eq!(won, 1, "of requests racing for one key, one holds it");
}
