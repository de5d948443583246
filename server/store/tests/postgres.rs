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

/// An investigation write the database refuses, in a statement or at its commit, fails alone:
/// the connection takes the next transaction (on SQLite, where sqlx's own transactions would
/// not, see `an_investigation_write_sqlite_rolled_back_leaves_the_writer_usable`). One pooled
/// connection, so every write uses the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_investigation_write_refused_leaves_the_connection_usable() {
    let Some((_fresh, db)) = fresh_store(StoreOptions { max_connections: 1, checkpoint_retention: 1 }).await else {
        return;
    };
    sqlx::raw_sql(
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$; \
         CREATE TRIGGER boom BEFORE INSERT ON investigation_audit \
           FOR EACH ROW WHEN (NEW.kind = 'boom') EXECUTE FUNCTION boom(); \
         CREATE CONSTRAINT TRIGGER late AFTER INSERT ON investigation_audit DEFERRABLE INITIALLY DEFERRED \
           FOR EACH ROW WHEN (NEW.kind = 'late') EXECUTE FUNCTION boom()",
    )
    .execute(db.postgres_pool().unwrap())
    .await
    .unwrap();
    for refused in ["boom", "late"] {
        let entries = [
            common::investigation::audit_entry("inv-1", 1, "note"),
            common::investigation::audit_entry("inv-1", 2, refused),
        ];
        db.upsert_audit_entries(&entries).await.expect_err(refused);
        assert!(db.audit_trail("inv-1", None).await.unwrap().is_empty(), "{refused}: nothing was saved");
    }
    db.upsert_audit_entries(&[common::investigation::audit_entry("inv-1", 1, "note")]).await.unwrap();
    assert_eq!(db.audit_trail("inv-1", None).await.unwrap().len(), 1);
    db.import_hr_data(&common::investigation::sample_dir()).await.unwrap();
    db.close().await;
}

/// A put that loses a race to a concurrent writer is a conflict whatever isolation the server
/// would give the store's sessions by default. The compare-and-set relies on READ COMMITTED:
/// a put that waited for the winner's row lock (or, for a new thread, its key) re-reads the
/// row and finds it taken. Under REPEATABLE READ or SERIALIZABLE it would fail with a
/// serialization error instead, which callers are told is the store being unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_lost_race_is_a_conflict_whatever_the_default_isolation() {
    use frontdesk_runtime::CheckpointError;
    use sqlx::{Connection, PgConnection};
    let Some(server) = server_url() else { return };
    // Set as the database's default, and as a startup option of the URL.
    for (isolation, in_url) in [("serializable", false), ("repeatable read", true)] {
        let fresh = ScratchDatabase::create(&server, "t").await.unwrap();
        let mut winner = PgConnection::connect(fresh.url()).await.unwrap();
        let url = if in_url {
            format!("{}?options[default_transaction_isolation]={}", fresh.url(), isolation.replace(' ', "%20"))
        } else {
            let sql = format!("ALTER DATABASE {} SET default_transaction_isolation = '{isolation}'", fresh.name());
            sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut winner).await.unwrap();
            fresh.url().to_owned()
        };
        let options = StoreOptions { max_connections: 2, checkpoint_retention: 1 };
        // Two databases, two write queues: both puts are in flight at once.
        let (a, b) = (Database::connect(&url, options).await.unwrap(), Database::connect(&url, options).await.unwrap());
        let mut probe = PgConnection::connect(&url).await.unwrap();
        let default: String = sqlx::query_scalar("SHOW transaction_isolation").fetch_one(&mut probe).await.unwrap();
        assert_eq!(default, isolation, "the server's default for other sessions is unchanged");
        a.checkpointer().put(&conformance::sample("raced", 1, RunStatus::Running)).await.unwrap();
        // The winner holds the thread's row and the new thread's key until it commits.
        sqlx::raw_sql(
            "BEGIN; UPDATE threads SET version = 2 WHERE thread_id = 'raced'; \
             INSERT INTO threads (thread_id, workflow, version, created_at_ms, updated_at_ms, status) \
             VALUES ('new', 'conformance', 1, 0, 0, 'running')",
        )
        .execute(&mut winner)
        .await
        .unwrap();
        let next = tokio::spawn({
            let store = a.checkpointer();
            async move { store.put(&conformance::sample("raced", 2, RunStatus::Running)).await }
        });
        let first = tokio::spawn({
            let store = b.checkpointer();
            async move { store.put(&conformance::sample("new", 1, RunStatus::Running)).await }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
            )
            .bind(fresh.name())
            .fetch_one(&mut probe)
            .await
            .unwrap();
            if waiting == 2 {
                break;
            }
            assert!(Instant::now() < deadline, "{isolation}: both puts wait for the winner ({waiting} do)");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sqlx::raw_sql("COMMIT").execute(&mut winner).await.unwrap();

        let next = next.await.unwrap();
        assert!(
            matches!(next, Err(CheckpointError::Conflict { expected: 1, actual: 2, .. })),
            "{isolation}: the next version lost: {next:?}"
        );
        let first = first.await.unwrap();
        assert!(
            matches!(first, Err(CheckpointError::Conflict { expected: 0, actual: 1, .. })),
            "{isolation}: the first version lost: {first:?}"
        );
        let pinned: String =
            sqlx::query_scalar("SHOW transaction_isolation").fetch_one(a.postgres_pool().unwrap()).await.unwrap();
        assert_eq!(pinned, "read committed", "{isolation}: the store's sessions");
        a.close().await;
        b.close().await;
    }
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
