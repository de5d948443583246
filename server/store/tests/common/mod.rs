//! Checks shared by the SQLite and PostgreSQL tests, beyond the runtime's conformance suite.
#![allow(dead_code)]

use std::{
    sync::Arc,
    time::{Duration, Instant, UNIX_EPOCH},
};

use frontdesk_runtime::{conformance::sample, CheckpointError, Checkpointer, RunStatus};
use frontdesk_store::{sqlx, Database, DbPool, NewSubmission, SqlCheckpointer};

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

/// `tasks` writers (spread over the given stores) each commit `per_task` increments of one
/// thread by read-modify-write with retries on conflict. No increment may be lost and every
/// failure must be a conflict.
pub async fn contended_increments(stores: Vec<Arc<SqlCheckpointer>>, tasks: usize, per_task: u64) {
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
pub async fn put_latency(store: &SqlCheckpointer, writes: u64) -> Duration {
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
