//! Redis: the conformance suite and the store's own checks on a real server.
//!
//! Set `FRONTDESK_TEST_REDIS_URL` (for example the URL printed by `scripts/ensure-redis.sh`);
//! every test uses its own random key prefix and deletes its keys afterwards. Without the URL
//! the tests that need a server are skipped, unless `FRONTDESK_REQUIRE_REDIS=1`, which makes
//! them fail.

mod common;

use std::{
    collections::BTreeSet,
    sync::Arc,
    time::{Duration, Instant},
};

use frontdesk_runtime::{conformance, conformance::sample, CheckpointError, Checkpointer, RunStatus, ThreadQuery};
use frontdesk_store::{
    redis::{self, aio::ConnectionManager},
    RedisCheckpointer, RedisOptions, StoreError,
};

/// The server URL, or `None` when the tests are to be skipped.
fn server_url() -> Option<String> {
    match std::env::var("FRONTDESK_TEST_REDIS_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
        _ if std::env::var("FRONTDESK_REQUIRE_REDIS").as_deref() == Ok("1") => panic!(
            "FRONTDESK_REQUIRE_REDIS=1 but FRONTDESK_TEST_REDIS_URL is not set; \
             start a server with scripts/ensure-redis.sh and export the URL it prints"
        ),
        _ => {
            eprintln!("skipped: FRONTDESK_TEST_REDIS_URL not set");
            None
        }
    }
}

/// A random key prefix on the test server; its keys are deleted when it is dropped.
struct Prefix {
    url: String,
    prefix: String,
    raw: ConnectionManager,
}

impl Prefix {
    async fn new(url: &str) -> Prefix {
        let client = redis::Client::open(url).unwrap();
        let raw = ConnectionManager::new(client).await.expect("connect to FRONTDESK_TEST_REDIS_URL");
        Prefix { url: url.to_owned(), prefix: format!("fdtest-{}", uuid::Uuid::new_v4().simple()), raw }
    }

    fn options(&self, retention: usize) -> RedisOptions {
        RedisOptions { key_prefix: self.prefix.clone(), retention }
    }

    async fn store(&self, retention: usize) -> RedisCheckpointer {
        RedisCheckpointer::connect(&self.url, self.options(retention)).await.unwrap()
    }

    /// Runs `command` with `args` behind the store's back, as an operator or a bug would.
    async fn raw_command(&self, command: &str, args: &[&str]) {
        let _: () = redis::cmd(command).arg(args).query_async(&mut self.raw.clone()).await.unwrap();
    }

    /// Every key matching `pattern`, sorted.
    async fn scan(&self, pattern: &str) -> Vec<String> {
        let mut conn = self.raw.clone();
        let mut cursor = 0u64;
        let mut keys = BTreeSet::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.into_iter().collect()
    }

    async fn all_keys(&self) -> Vec<String> {
        self.scan(&format!("{}:*", self.prefix)).await
    }
}

/// Deletes the prefix's keys, also when the test panicked (on a blocking connection: `Drop`
/// cannot await).
impl Drop for Prefix {
    fn drop(&mut self) {
        let Ok(mut conn) = redis::Client::open(self.url.as_str()).and_then(|c| c.get_connection()) else { return };
        let mut cursor = 0u64;
        loop {
            let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{}:*", self.prefix))
                .arg("COUNT")
                .arg(1000)
                .query(&mut conn)
            else {
                return;
            };
            if !keys.is_empty() {
                let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&keys).query(&mut conn);
            }
            if next == 0 {
                return;
            }
            cursor = next;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_conformance() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    for retention in [1, 3] {
        let store = p.store(retention).await;
        assert_eq!(store.retention(), retention);
        assert_eq!(store.key_prefix(), p.prefix);
        conformance::run_all(Arc::new(store)).await;
    }
}

/// Keys follow `{prefix}:checkpoint:{customer_id}:{ticket_id}:{version}` and friends, so a
/// `SCAN` for a customer finds exactly its active tickets.
#[tokio::test]
async fn redis_keys_follow_the_documented_pattern() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = p.store(2).await;
    for v in 1..=3 {
        let mut cp = sample("C001:TKT-AAAA0001", v, if v == 3 { RunStatus::Completed } else { RunStatus::Running });
        cp.run.idempotency_key = Some(format!("turn-{v}"));
        store.put(&cp).await.unwrap();
    }
    store.put(&sample("C001:TKT-BBBB0002", 1, RunStatus::Running)).await.unwrap();
    store.put(&sample("C0010:TKT-CCCC0003", 1, RunStatus::Running)).await.unwrap();
    store.put(&sample("C002:TKT-DDDD0004", 1, RunStatus::Running)).await.unwrap();

    let pre = &p.prefix;
    let keys = p.scan(&format!("{pre}:checkpoint:C001:*")).await;
    assert_eq!(
        keys,
        vec![
            format!("{pre}:checkpoint:C001:TKT-AAAA0001:2"),
            format!("{pre}:checkpoint:C001:TKT-AAAA0001:3"),
            format!("{pre}:checkpoint:C001:TKT-BBBB0002:1"),
        ],
        "a customer's scan finds its retained checkpoints and nobody else's"
    );
    let tickets: BTreeSet<&str> =
        keys.iter().map(|k| k.rsplit(':').nth(1).unwrap()).collect::<BTreeSet<_>>().into_iter().collect();
    assert_eq!(tickets, BTreeSet::from(["TKT-AAAA0001", "TKT-BBBB0002"]));
    assert_eq!(store.checkpoint_key("C001:TKT-AAAA0001", 3), keys[1]);

    let mut conn = p.raw.clone();
    let thread: std::collections::HashMap<String, String> =
        redis::cmd("HGETALL").arg(format!("{pre}:thread:C001:TKT-AAAA0001")).query_async(&mut conn).await.unwrap();
    assert_eq!(thread["version"], "3");
    assert_eq!(thread["workflow"], "conformance");
    assert_eq!(thread["status"], "completed");
    assert!(thread["created_at"].parse::<i64>().unwrap() <= thread["updated_at"].parse::<i64>().unwrap());
    let state: Vec<u8> = redis::cmd("HGET").arg(&keys[1]).arg("state").query_async(&mut conn).await.unwrap();
    assert_eq!(state, sample("x", 3, RunStatus::Completed).state, "state bytes are stored as they are");
    let idem: Vec<String> =
        redis::cmd("HKEYS").arg(format!("{pre}:idem:C001:TKT-AAAA0001")).query_async(&mut conn).await.unwrap();
    assert_eq!(idem, vec!["turn-3"], "only completed or interrupted runs record their key");
    let threads: Vec<String> =
        redis::cmd("ZRANGEBYLEX").arg(format!("{pre}:threads")).arg("-").arg("+").query_async(&mut conn).await.unwrap();
    // Byte order: '0' sorts before ':'.
    assert_eq!(threads, vec!["C0010:TKT-CCCC0003", "C001:TKT-AAAA0001", "C001:TKT-BBBB0002", "C002:TKT-DDDD0004"]);
    assert_eq!(
        store.unfinished_threads().await.unwrap(),
        vec!["C0010:TKT-CCCC0003", "C001:TKT-BBBB0002", "C002:TKT-DDDD0004"],
        "running threads, ordered by id"
    );

    let page = store
        .list_threads(&ThreadQuery { prefix: Some("C001:".into()), limit: 10, ..Default::default() })
        .await
        .unwrap();
    let ids: Vec<_> = page.threads.iter().map(|t| t.thread_id.as_str()).collect();
    assert_eq!(ids, vec!["C001:TKT-AAAA0001", "C001:TKT-BBBB0002"]);
    // `after` before the prefix starts at the prefix; after its end, nothing.
    let page = store
        .list_threads(&ThreadQuery {
            prefix: Some("C001:".into()),
            after: Some("A".into()),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.threads[0].thread_id, "C001:TKT-AAAA0001");
    assert_eq!(page.next_after.as_deref(), Some("C001:TKT-AAAA0001"));
    let page = store
        .list_threads(&ThreadQuery {
            prefix: Some("C001:".into()),
            after: Some("D".into()),
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(page.threads.is_empty() && page.next_after.is_none());
}

/// Two connections (as two replicas would have) race on one thread: every increment survives
/// and losers only ever see conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_concurrent_writers() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let stores = vec![Arc::new(p.store(2).await), Arc::new(p.store(2).await)];
    common::contended_increments(stores.clone(), 16, 15).await;

    // Eight writers of the same version: exactly one wins, on whichever connection.
    let id = "C001:TKT-RACE";
    stores[0].put(&sample(id, 1, RunStatus::Running)).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = stores[w % 2].clone();
        let mut cp = sample(id, 2, RunStatus::Completed);
        cp.run.run_id = format!("writer-{w}");
        tasks.push(tokio::spawn(async move { store.put(&cp).await.map(|()| w) }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(w) => winners.push(w),
            Err(CheckpointError::Conflict { expected: 1, actual: 2, .. }) => {}
            Err(other) => panic!("losers must see a conflict at version 2, got {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(stores[1].latest(id).await.unwrap().unwrap().run.run_id, format!("writer-{}", winners[0]));
    assert!(stores[0].unfinished_threads().await.unwrap().iter().all(|t| t != id));
}

#[tokio::test]
async fn redis_delete_removes_every_key() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = p.store(3).await;
    let id = "C001:TKT-DELETE01";
    for v in 1..=5 {
        let mut cp = sample(id, v, if v % 2 == 0 { RunStatus::Completed } else { RunStatus::Running });
        cp.run.idempotency_key = Some(format!("k{v}"));
        store.put(&cp).await.unwrap();
    }
    let keys = p.all_keys().await;
    let pre = &p.prefix;
    assert_eq!(
        keys,
        vec![
            format!("{pre}:checkpoint:{id}:3"),
            format!("{pre}:checkpoint:{id}:4"),
            format!("{pre}:checkpoint:{id}:5"),
            format!("{pre}:idem:{id}"),
            format!("{pre}:running"),
            format!("{pre}:thread:{id}"),
            format!("{pre}:threads"),
        ]
    );
    assert!(store.delete_thread(id).await.unwrap());
    assert_eq!(p.all_keys().await, Vec::<String>::new(), "deleting the only thread leaves no key behind");
    assert!(!store.delete_thread(id).await.unwrap());

    // Other threads are untouched.
    store.put(&sample("C001:TKT-KEEP", 1, RunStatus::Running)).await.unwrap();
    store.put(&sample(id, 1, RunStatus::Running)).await.unwrap();
    assert!(store.delete_thread(id).await.unwrap());
    assert_eq!(store.unfinished_threads().await.unwrap(), vec!["C001:TKT-KEEP"]);
    assert!(p.all_keys().await.iter().all(|k| !k.contains(id)));
}

/// The running threads are listed a page at a time (1,000 ids a script call): more than two
/// pages of them, with finished threads among them, come back once each, in id order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_unfinished_runs_spans_pages() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = Arc::new(p.store(1).await);
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..2_600 {
        let store = store.clone();
        writes.spawn(async move {
            let status = if i % 13 == 0 { RunStatus::Completed } else { RunStatus::Running };
            store.put(&sample(&format!("C{i:05}:T"), 1, status)).await.unwrap();
        });
    }
    writes.join_all().await;
    let runs = store.unfinished_runs().await.unwrap();
    let expected: Vec<String> = (0..2_600).filter(|i| i % 13 != 0).map(|i| format!("C{i:05}:T")).collect();
    assert_eq!(runs.iter().map(|r| r.thread_id.clone()).collect::<Vec<_>>(), expected);
    assert!(runs.iter().all(|r| r.workflow == "conformance" && !r.run_id.is_empty()));
}

/// Erasing a thread while a writer keeps appending to it: every call succeeds or conflicts,
/// and the thread ends either fully erased or consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_delete_during_writes() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = Arc::new(p.store(2).await);
    let id = "C001:TKT-ERASE";
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for _ in 0..300 {
                let next = store.latest(id).await.unwrap().map_or(1, |c| c.version + 1);
                let mut cp = sample(id, next, RunStatus::Completed);
                cp.run.idempotency_key = Some(format!("k{next}"));
                match store.put(&cp).await {
                    Ok(()) | Err(CheckpointError::Conflict { .. }) => {}
                    Err(other) => panic!("a put racing an erasure must succeed or conflict, got {other:?}"),
                }
            }
        })
    };
    for _ in 0..30 {
        store.delete_thread(id).await.expect("erasure must not fail under concurrent writes");
        tokio::task::yield_now().await;
    }
    writer.await.unwrap();
    if let Some(t) = store.thread(id).await.unwrap() {
        let latest = store.latest(id).await.unwrap().expect("a thread has a checkpoint");
        assert_eq!(latest.version, t.version);
        let retained = p.scan(&format!("{}:checkpoint:{id}:*", p.prefix)).await.len() as u64;
        assert_eq!(retained, t.version.min(2));
    }
    store.delete_thread(id).await.unwrap();
    assert_eq!(p.all_keys().await, Vec::<String>::new());
}

/// Retention prunes old checkpoints, also when a store reopens with a smaller retention.
#[tokio::test]
async fn redis_retention() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let id = "C001:TKT-RETAIN";
    let pattern = format!("{}:checkpoint:{id}:*", p.prefix);
    let wide = p.store(3).await;
    for v in 1..=5 {
        wide.put(&sample(id, v, RunStatus::Running)).await.unwrap();
        assert_eq!(p.scan(&pattern).await.len(), v.min(3) as usize);
    }
    let versions = |h: Vec<frontdesk_runtime::Checkpoint>| h.iter().map(|c| c.version).collect::<Vec<_>>();
    assert_eq!(versions(wide.history(id, 100).await.unwrap()), vec![5, 4, 3]);
    assert_eq!(versions(wide.history(id, 2).await.unwrap()), vec![5, 4]);
    assert!(wide.history(id, 0).await.unwrap().is_empty());
    let narrow = p.store(1).await;
    narrow.put(&sample(id, 6, RunStatus::Running)).await.unwrap();
    assert_eq!(p.scan(&pattern).await, vec![format!("{}:checkpoint:{id}:6", p.prefix)]);
    assert_eq!(versions(wide.history(id, 100).await.unwrap()), vec![6]);
}

#[tokio::test]
async fn redis_corrupt_data_is_reported() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = p.store(1).await;
    let id = "C001:TKT-CORRUPT";
    store.put(&sample(id, 1, RunStatus::Running)).await.unwrap();
    p.raw_command("HSET", &[&store.checkpoint_key(id, 1), "status", "exploded"]).await;
    assert!(matches!(store.latest(id).await, Err(CheckpointError::Corrupt { .. })));
    assert!(matches!(store.head(id).await, Err(CheckpointError::Corrupt { .. })));
    p.raw_command("HSET", &[&format!("{}:thread:{id}", p.prefix), "version", "x"]).await;
    assert!(matches!(store.thread(id).await, Err(CheckpointError::Corrupt { .. })));
    let put = store.put(&sample(id, 2, RunStatus::Running)).await;
    assert!(matches!(put, Err(CheckpointError::Corrupt { .. })), "{put:?}");

    // head() reads the thread's creation time beside the checkpoint, in one script.
    let dated = "C001:TKT-CORRUPT-DATE";
    store.put(&sample(dated, 1, RunStatus::Running)).await.unwrap();
    let thread_key = format!("{}:thread:{dated}", p.prefix);
    p.raw_command("HSET", &[&thread_key, "created_at", "yesterday"]).await;
    assert!(matches!(store.head(dated).await, Err(CheckpointError::Corrupt { .. })));
    p.raw_command("HDEL", &[&thread_key, "created_at"]).await;
    assert!(matches!(store.head(dated).await, Err(CheckpointError::Corrupt { .. })));
}

#[tokio::test]
async fn unreachable_redis_fails_fast() {
    let start = Instant::now();
    let err = RedisCheckpointer::connect_with_timeout(
        "redis://:hunter2@127.0.0.1:1/0",
        RedisOptions::default(),
        Duration::from_millis(500),
    )
    .await
    .expect_err("connecting to a closed port must fail");
    let elapsed = start.elapsed();
    assert!(matches!(err, StoreError::RedisConnect { .. }), "{err:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    let message = err.to_string();
    assert!(!message.contains("hunter2"), "the password must not appear in errors: {message}");
    assert!(std::error::Error::source(&err).is_some(), "the cause is kept");

    let err = RedisCheckpointer::connect("mysql://localhost/x", RedisOptions::default()).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidRedisUrl { .. }), "{err:?}");
}

/// Mean `put` latency (2 KiB state, retention 1). Informational; run with
/// `cargo test -p frontdesk-store --release --test redis -- --nocapture put_latency`.
#[tokio::test]
async fn redis_put_latency() {
    let Some(url) = server_url() else { return };
    let p = Prefix::new(&url).await;
    let store = p.store(1).await;
    let mean = common::put_latency(&store, 2010).await;
    eprintln!("redis put: mean {mean:?}");
    assert!(mean < Duration::from_millis(20), "put is far too slow: {mean:?}");

    // Throughput with 16 writers on their own threads, sharing the one multiplexed connection.
    let store = Arc::new(store);
    let start = Instant::now();
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for v in 1..=200 {
                    store.put(&sample(&format!("C{t}:TKT-TPUT"), v, RunStatus::Running)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    eprintln!("redis put: 16 writers x 200 in {elapsed:?} ({:.0} puts/s)", 3200.0 / elapsed.as_secs_f64());
}
