//! PostgreSQL: the conformance suite and the store's own checks on a real server.
//!
//! Set `FRONTDESK_TEST_POSTGRES_URL` (for example the URL printed by
//! `scripts/ensure-postgres.sh`); each run creates a fresh database next to the one in the
//! URL and drops it afterwards. Without the URL the tests are skipped, unless
//! `FRONTDESK_REQUIRE_POSTGRES=1`, which makes them fail.

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use frontdesk_runtime::{conformance, Checkpointer, RunStatus};
use frontdesk_store::{scratch::ScratchDatabase, sqlx, Database, DbKind, StoreError, StoreOptions};

/// The server URL, or `None` when the tests are to be skipped.
fn server_url() -> Option<String> {
    match std::env::var("FRONTDESK_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
        _ if std::env::var("FRONTDESK_REQUIRE_POSTGRES").as_deref() == Ok("1") => panic!(
            "FRONTDESK_REQUIRE_POSTGRES=1 but FRONTDESK_TEST_POSTGRES_URL is not set; \
             start a server with scripts/ensure-postgres.sh and export the URL it prints"
        ),
        _ => {
            eprintln!("skipped: FRONTDESK_TEST_POSTGRES_URL not set");
            None
        }
    }
}

/// A fresh database on the test server and a store on it with `options`, or `None` when the
/// tests are skipped. Hold on to the `ScratchDatabase`: dropping it drops the database.
async fn fresh_store(options: StoreOptions) -> Option<(ScratchDatabase, Database)> {
    let server = server_url()?;
    let fresh = ScratchDatabase::create(&server, "t").await.unwrap();
    let db = Database::connect(fresh.url(), options).await.unwrap();
    Some((fresh, db))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_conformance_and_store_checks() {
    let Some(server) = server_url() else { return };
    let fresh = ScratchDatabase::create(&server, "t").await.unwrap();
    for retention in [1, 3] {
        let db = Database::connect(fresh.url(), StoreOptions { max_connections: 8, checkpoint_retention: retention })
            .await
            .unwrap();
        assert_eq!(db.kind(), DbKind::Postgres);
        conformance::run_all(Arc::new(db.checkpointer())).await;
        eprintln!("conformance, retention {retention}: {:?}", db.write_batches());
        common::retention_prunes(&db).await;
        db.close().await;
    }
    // Reconnecting migrates nothing twice; two pools contend on the same rows.
    let a = Database::connect(fresh.url(), StoreOptions { max_connections: 8, checkpoint_retention: 2 }).await.unwrap();
    let b = Database::connect(fresh.url(), StoreOptions { max_connections: 8, checkpoint_retention: 2 }).await.unwrap();
    common::contended_increments(vec![Arc::new(a.checkpointer()), Arc::new(b.checkpointer())], 16, 15).await;
    // Migration 0010: states are compressed with lz4 where the server offers it (the test server
    // scripts/ensure-postgres.sh installs does).
    let (offered, compression): (bool, String) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM pg_settings \
                        WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)), \
                attcompression::text \
         FROM pg_attribute WHERE attrelid = 'checkpoints'::regclass AND attname = 'state'",
    )
    .fetch_one(a.postgres_pool().unwrap())
    .await
    .unwrap();
    assert_eq!(compression, if offered { "l" } else { "" }, "lz4 where offered, else none set (pglz)");
    common::intake_round_trip(&a).await;
    common::tickets_round_trip(&a).await;
    common::tickets_listing(&a).await;
    common::tickets_concurrent_saves(&a).await;
    common::triage_requests(&a).await;
    common::triage_claims(&a).await;
    common::delete_during_writes(&a).await;
    let mean = common::put_latency(&a.checkpointer(), 2010).await;
    eprintln!("postgres put: mean {mean:?}");
    common::pool_stats_at_rest(&a).await;
    a.close().await;
    b.close().await;
}

/// Group commit: puts waiting together share a transaction and keep their own outcomes; a
/// failed commit fails its whole batch; a refused write fails alone. With one pooled
/// connection, holding it keeps the write queue waiting while the puts queue up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_group_commit() {
    let Some((_fresh, db)) = fresh_store(StoreOptions { max_connections: 1, checkpoint_retention: 1 }).await else {
        return;
    };
    let pool = db.postgres_pool().unwrap().clone();
    sqlx::raw_sql(
        "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
           BEGIN RAISE EXCEPTION 'poisoned checkpoint'; END $$; \
         CREATE CONSTRAINT TRIGGER poison AFTER INSERT ON checkpoints DEFERRABLE INITIALLY DEFERRED \
           FOR EACH ROW WHEN (NEW.thread_id LIKE '%:poison%') EXECUTE FUNCTION poison(); \
         CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ \
           BEGIN RAISE EXCEPTION 'refused checkpoint'; END $$; \
         CREATE TRIGGER refuse BEFORE INSERT ON checkpoints \
           FOR EACH ROW WHEN (NEW.thread_id LIKE '%:refused%') EXECUTE FUNCTION refuse()",
    )
    .execute(&pool)
    .await
    .unwrap();
    let hold = || async { pool.acquire().await.unwrap() };
    common::one_batch_keeps_each_outcome(&db, hold).await;
    common::a_thread_twice_in_one_batch(&db, hold).await;
    common::a_failed_commit_fails_its_whole_batch(&db, hold).await;
    common::a_refused_write_fails_alone(&db, hold).await;
    common::writes_are_observed(&db, hold).await;
    common::pool_stats_at_rest(&db).await;
    db.close().await;
}

/// A restart with a lower retention: the next write drops every excess checkpoint, alone and
/// in a group commit's statement, which overwrites the oldest and deletes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_lower_retention_drops_the_excess() {
    let Some(server) = server_url() else { return };
    let fresh = ScratchDatabase::create(&server, "t").await.unwrap();
    let wide =
        Database::connect(fresh.url(), StoreOptions { max_connections: 2, checkpoint_retention: 3 }).await.unwrap();
    let narrow =
        Database::connect(fresh.url(), StoreOptions { max_connections: 1, checkpoint_retention: 1 }).await.unwrap();
    let pool = narrow.postgres_pool().unwrap().clone();
    let stats =
        common::a_lower_retention_drops_the_excess(&wide, &narrow, || async { pool.acquire().await.unwrap() }).await;
    assert_eq!(stats.batches, 1, "the two writes were one group commit: {stats:?}");
    wide.close().await;
    narrow.close().await;
}

/// Writes overwrite the checkpoint retention drops, so a thread's row versions stay on its
/// page and the table as written stays within a small multiple of its size after `VACUUM
/// FULL` (2.0 when measured). Inserting each checkpoint and deleting the one before left 9.7
/// times that (dead rows in pages no write reads again, and TOAST chunks of every state), until
/// vacuum; so did the overwrite without migration 0011's page settings, and inserting with them
/// 11.7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_writes_leave_the_table_compact() {
    let Some((_fresh, db)) = fresh_store(StoreOptions { max_connections: 2, checkpoint_retention: 1 }).await else {
        return;
    };
    let store = db.checkpointer();
    // W1's shape: one thread after another, states growing to 3.9 KB that compress to about
    // half (the first half varies, the second is zeros), an output on every other write.
    let mut seed = 0x5EED_u64;
    for t in 0..200 {
        let thread = format!("compact-{t:03}");
        for v in 1..=20u64 {
            let mut cp = conformance::sample(&thread, v, RunStatus::Running);
            let len = 195 * v as usize;
            cp.state = (0..len)
                .map(|i| {
                    if i < len / 2 {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        (seed >> 56) as u8
                    } else {
                        0
                    }
                })
                .collect();
            if v % 2 == 0 {
                cp.run.output = Some("o".repeat(600));
            }
            store.put(&cp).await.unwrap();
        }
    }
    let pool = db.postgres_pool().unwrap();
    let size = || async {
        sqlx::query_scalar::<_, i64>("SELECT pg_total_relation_size('checkpoints')").fetch_one(pool).await.unwrap()
    };
    let written = size().await;
    sqlx::query("VACUUM FULL checkpoints").execute(pool).await.unwrap();
    let compacted = size().await;
    assert!(written as f64 <= compacted as f64 * 4.0, "{written} B as written, {compacted} B after VACUUM FULL");
    eprintln!("checkpoints: {written} B as written, {compacted} B after VACUUM FULL");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_investigation_store() {
    let Some((_fresh, db)) = fresh_store(StoreOptions::default()).await else { return };
    common::investigation::run_all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn postgres_llm_calls() {
    let Some((_fresh, db)) = fresh_store(StoreOptions::default()).await else { return };
    common::llm_calls::run_all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn postgres_api_keys() {
    let Some((_fresh, db)) = fresh_store(StoreOptions::default()).await else { return };
    common::api_keys::run_all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn unreachable_postgres_fails_fast() {
    let start = Instant::now();
    let err = Database::connect_with_timeout(
        "postgres://postgres:hunter2@127.0.0.1:1/frontdesk",
        StoreOptions::default(),
        Duration::from_millis(500),
    )
    .await
    .expect_err("connecting to a closed port must fail");
    let elapsed = start.elapsed();
    assert!(matches!(err, StoreError::Connect { kind: DbKind::Postgres, .. }), "{err:?}");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    let message = err.to_string();
    assert!(!message.contains("hunter2"), "the password must not appear in errors: {message}");
    assert!(std::error::Error::source(&err).is_some(), "the cause is kept");
}

/// A scratch database is gone once dropped (explicitly or by going out of scope) and stays when
/// kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scratch_databases_are_dropped_unless_kept() {
    let Some(server) = server_url() else { return };
    async fn exists(server: &str, name: &str) -> bool {
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(server).await.unwrap();
        let found: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut admin)
            .await
            .unwrap();
        found
    }

    let dropped = ScratchDatabase::create(&server, "scratch").await.unwrap();
    let name = dropped.name().to_owned();
    // Sessions still open on it do not stop the drop.
    let db = Database::connect(dropped.url(), StoreOptions::default()).await.unwrap();
    assert!(exists(&server, &name).await);
    dropped.drop_database().await.unwrap();
    assert!(!exists(&server, &name).await);
    drop(db);

    let scoped = ScratchDatabase::create(&server, "scratch").await.unwrap();
    let name = scoped.name().to_owned();
    drop(scoped);
    assert!(!exists(&server, &name).await);

    let kept = ScratchDatabase::create(&server, "scratch").await.unwrap();
    let name = kept.name().to_owned();
    let url = kept.keep();
    assert!(url.ends_with(&name));
    assert!(exists(&server, &name).await);
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&server).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)"))).execute(&mut admin).await.unwrap();
}
