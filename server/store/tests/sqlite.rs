//! SQLite: the conformance suite on a file and in memory, plus pruning, contention,
//! durability across reconnects, intake submissions, completed tickets and the investigation
//! store.

mod common;

use std::{sync::Arc, time::Duration};

use frontdesk_runtime::{conformance, conformance::sample, Checkpointer, RunStatus};
use frontdesk_store::{Database, DbKind, StoreError, StoreOptions};

fn options(retention: usize) -> StoreOptions {
    StoreOptions { max_connections: 4, checkpoint_retention: retention }
}

async fn file_db(dir: &tempfile::TempDir, retention: usize) -> Database {
    let url = format!("sqlite://{}", dir.path().join("frontdesk.db").display());
    Database::connect(&url, options(retention)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_file_retention_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    assert_eq!(db.kind(), DbKind::Sqlite);
    conformance::run_all(Arc::new(db.checkpointer())).await;
    eprintln!("conformance on a file: {:?}", db.write_batches());
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_file_retention_3() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 3).await;
    conformance::run_all(Arc::new(db.checkpointer())).await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_in_memory() {
    let db = Database::connect("sqlite::memory:", options(2)).await.unwrap();
    conformance::run_all(Arc::new(db.checkpointer())).await;
    common::retention_prunes(&db).await;
    common::intake_round_trip(&db).await;
}

#[tokio::test]
async fn memory_databases_are_private() {
    let a = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    let b = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    a.checkpointer().put(&sample("only-in-a", 1, RunStatus::Running)).await.unwrap();
    assert!(b.checkpointer().latest("only-in-a").await.unwrap().is_none());
}

/// A put that fails in the middle of its batch (here: a trigger aborts the idempotency-key
/// insert, after the compare-and-set and the checkpoint insert ran) must roll back what the
/// batch did and leave the write connection outside any transaction.
#[tokio::test]
async fn failed_write_rolls_back_and_the_writer_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let store = db.checkpointer();
    store.put(&sample("t", 1, RunStatus::Running)).await.unwrap();
    let pool = db.sqlite_pool().unwrap();
    frontdesk_store::sqlx::query(
        "CREATE TRIGGER refuse_keys BEFORE INSERT ON idempotency_keys BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    .execute(pool)
    .await
    .unwrap();

    let mut keyed = sample("t", 2, RunStatus::Completed);
    keyed.run.idempotency_key = Some("k".into());
    store.put(&keyed).await.expect_err("the trigger refuses the key");
    assert_eq!(store.latest("t").await.unwrap().unwrap().version, 1, "the checkpoint insert was rolled back");
    assert_eq!(store.thread("t").await.unwrap().unwrap().version, 1, "the compare-and-set was rolled back");

    // A transaction left open would make this BEGIN IMMEDIATE fail.
    store.put(&sample("t", 2, RunStatus::Completed)).await.unwrap();
    assert_eq!(store.latest("t").await.unwrap().unwrap().version, 2);
    db.close().await;
}

/// A write transaction whose caller goes away between its BEGIN and its COMMIT (a cancelled
/// `DeleteConversation`) must not leave the write connection inside it: the writes that follow
/// would be acknowledged, stay invisible to every other connection, and be rolled back with it.
/// Here the delete's `BEGIN IMMEDIATE` waits on another connection's lock while its caller
/// gives up; once the lock is free, sqlx's worker runs the BEGIN and, with nobody to answer,
/// none of the batch's other statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_transaction_cut_off_by_its_caller_is_rolled_back_before_the_next_write() {
    use frontdesk_store::sqlx::{Connection, SqliteConnection};
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let store = db.checkpointer();
    store.put(&sample("kept", 1, RunStatus::Completed)).await.unwrap();
    let url = format!("sqlite://{}", dir.path().join("frontdesk.db").display());
    let mut other = SqliteConnection::connect(&url).await.unwrap();
    frontdesk_store::sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut other).await.unwrap();

    let cut_off = tokio::time::timeout(Duration::from_millis(300), store.delete_thread("kept")).await;
    assert!(cut_off.is_err(), "the delete waits for the other connection's lock");
    frontdesk_store::sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    // SQLite's busy handler retries every 100 ms or less by now; give the abandoned BEGIN time
    // to take the lock.
    tokio::time::sleep(Duration::from_millis(600)).await;

    db.record_triage_request("C001", "key-1", Some("fp"), "{}").await.unwrap();
    store.put(&sample("next", 1, RunStatus::Completed)).await.unwrap();
    let seen: i64 = frontdesk_store::sqlx::query_scalar("SELECT count(*) FROM triage_requests WHERE key = 'key-1'")
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert_eq!(seen, 1, "an acknowledged write is committed, visible to another connection");
    let threads: Vec<String> = frontdesk_store::sqlx::query_scalar("SELECT thread_id FROM threads ORDER BY thread_id")
        .fetch_all(&mut other)
        .await
        .unwrap();
    assert_eq!(threads, ["kept", "next"], "the cut-off delete was rolled back, the put after it committed");
    db.close().await;
}

/// The connection the write queue needs next, held by the test: on `sqlite::memory:` the
/// writer is the pool's only connection.
async fn hold_memory_writer(db: &Database) -> impl Send {
    db.sqlite_pool().unwrap().acquire().await.unwrap()
}

async fn sqlite_exec(db: &Database, sql: &'static str) {
    frontdesk_store::sqlx::raw_sql(sql).execute(db.sqlite_pool().unwrap()).await.unwrap();
}

/// Puts waiting together are committed in one transaction, each with its own outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn puts_waiting_together_commit_together() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    common::one_batch_keeps_each_outcome(&db, || hold_memory_writer(&db)).await;
    common::a_thread_twice_in_one_batch(&db, || hold_memory_writer(&db)).await;
}

/// A commit that fails answers every caller of its batch with the error. The check that
/// fails is a deferred foreign key, verified at `COMMIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_commit_fails_every_put_of_its_batch() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    sqlite_exec(
        &db,
        "CREATE TABLE poison_parent (id INTEGER PRIMARY KEY); \
         CREATE TABLE poison_child (parent INTEGER REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED); \
         CREATE TRIGGER poison AFTER INSERT ON checkpoints WHEN NEW.thread_id LIKE '%:poison%' \
           BEGIN INSERT INTO poison_child VALUES (42); END",
    )
    .await;
    common::a_failed_commit_fails_its_whole_batch(&db, || hold_memory_writer(&db)).await;
}

/// A `sqlite::memory:` database that refuses checkpoints of threads whose id contains
/// `:refused`.
async fn refusing_memory_db() -> Database {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    sqlite_exec(
        &db,
        "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints WHEN NEW.thread_id LIKE '%:refused%' \
           BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    .await;
    db
}

/// A write that fails on its own in a batch fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_put_fails_alone_in_its_batch() {
    let db = refusing_memory_db().await;
    common::a_refused_write_fails_alone(&db, || hold_memory_writer(&db)).await;
}

/// The write observer hears of each write's outcome and wait; the pool reports itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_are_observed_and_the_pool_reports_itself() {
    let db = refusing_memory_db().await;
    common::writes_are_observed(&db, || hold_memory_writer(&db)).await;
    common::pool_stats_at_rest(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let file = file_db(&dir, 1).await;
    common::pool_stats_at_rest(&file).await;
    file.close().await;
}

/// On a file, puts that queue while the writer waits for the database's write lock (here held
/// by another connection) are committed in far fewer transactions than puts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn puts_on_a_file_are_committed_in_batches() {
    use frontdesk_store::sqlx::{sqlite::SqliteConnectOptions, ConnectOptions};

    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let mut other = SqliteConnectOptions::new().filename(dir.path().join("frontdesk.db")).connect().await.unwrap();
    frontdesk_store::sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut other).await.unwrap();
    let writes: Vec<_> = (0..40).map(|i| sample(&format!("file-batch-{i:02}"), 1, RunStatus::Running)).collect();
    let (results, stats) = common::put_together(&db, other, writes.clone()).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert!(stats.batches < 40 && stats.largest > 1, "40 puts waiting together share transactions: {stats:?}");
    let store = db.checkpointer();
    for cp in &writes {
        assert_eq!(store.latest(&cp.thread_id).await.unwrap().as_ref(), Some(cp));
    }
    db.close().await;
}

/// The write queue's task runs on the runtime of the put that started it. A put on another
/// runtime, while that one sits idle, is answered all the same.
#[test]
fn puts_from_another_runtime_are_answered() {
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = runtime();
    let db = first.block_on(async {
        let db = file_db(&dir, 1).await;
        db.checkpointer().put(&sample("runtimes", 1, RunStatus::Running)).await.unwrap();
        db
    });
    let second = runtime();
    second.block_on(async {
        let (store, next) = (db.checkpointer(), sample("runtimes", 2, RunStatus::Running));
        tokio::time::timeout(std::time::Duration::from_secs(10), store.put(&next)).await.expect("answered").unwrap();
        assert_eq!(store.latest("runtimes").await.unwrap().unwrap().version, 2);
    });
    // sqlx hands a released pool connection back on a task of the runtime that released it: one
    // the first runtime released may wait there until that runtime is gone, and closing the
    // pool waits for every connection.
    drop(first);
    second.block_on(db.close());
}

#[tokio::test]
async fn retention_prunes_rows() {
    for retention in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let db = file_db(&dir, retention).await;
        common::retention_prunes(&db).await;
    }
}

/// A restart with a lower retention: the next write drops every excess checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_retention_drops_the_excess() {
    let dir = tempfile::tempdir().unwrap();
    let (wide, narrow) = (file_db(&dir, 3).await, file_db(&dir, 1).await);
    common::a_lower_retention_drops_the_excess(&wide, &narrow, || async {}).await;
    wide.close().await;
    narrow.close().await;
}

#[tokio::test]
async fn retention_is_at_least_one() {
    let db = Database::connect("sqlite::memory:", options(0)).await.unwrap();
    assert_eq!(db.options().checkpoint_retention, 1);
    common::retention_prunes(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_one_file() {
    let dir = tempfile::tempdir().unwrap();
    // Two pools on the same file: writers contend in this process and in SQLite's lock.
    let a = file_db(&dir, 2).await;
    let b = file_db(&dir, 2).await;
    let stores = vec![Arc::new(a.checkpointer()), Arc::new(b.checkpointer())];
    common::contended_increments(stores, 16, 15).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn erasure_racing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 2).await;
    common::delete_during_writes(&db).await;
}

#[tokio::test]
async fn data_survives_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let id = "C001:reconnect";
    let mut last = sample(id, 3, RunStatus::Interrupted);
    {
        let db = file_db(&dir, 3).await;
        let store = db.checkpointer();
        store.put(&sample(id, 1, RunStatus::Running)).await.unwrap();
        store.put(&sample(id, 2, RunStatus::Running)).await.unwrap();
        last.run.idempotency_key = Some("turn-7".into());
        last.run.output = Some(r#"{"asked":true}"#.into());
        last.pending = conformance::sample_pending();
        store.put(&last).await.unwrap();
        store.put(&sample("C001:other", 1, RunStatus::Running)).await.unwrap();
        db.close().await;
        assert!(store.latest(id).await.is_err(), "a closed database is unavailable");
    }
    let db = file_db(&dir, 3).await;
    let store = db.checkpointer();
    assert_eq!(store.latest(id).await.unwrap(), Some(last.clone()));
    assert_eq!(store.history(id, 10).await.unwrap().len(), 3);
    let key = store.find_idempotent(id, "turn-7").await.unwrap().unwrap();
    assert_eq!((key.version, key.status), (3, RunStatus::Interrupted));
    assert_eq!(store.thread(id).await.unwrap().unwrap().version, 3);
    assert_eq!(store.unfinished_threads().await.unwrap(), vec!["C001:other".to_owned()]);
    store.put(&sample(id, 4, RunStatus::Completed)).await.unwrap();
    assert_eq!(store.latest(id).await.unwrap().unwrap().version, 4);
}

#[tokio::test]
async fn intake_submissions_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    common::intake_round_trip(&db).await;
}

/// Replicas starting together on one new file both migrate it; neither fails to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_starting_together_on_one_new_file_both_migrate_it() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = tokio::join!(file_db(&dir, 1), file_db(&dir, 1), file_db(&dir, 1));
        a.checkpointer().put(&sample("t", 1, RunStatus::Completed)).await.unwrap();
        assert_eq!(c.checkpointer().latest("t").await.unwrap().unwrap().version, 1);
        for db in [a, b, c] {
            db.close().await;
        }
    }
}

#[tokio::test]
async fn creates_a_missing_file_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    // The directory exists; the file does not (directories are never created, see below).
    let path = dir.path().join("frontdesk.db");
    let db = Database::connect(&format!("sqlite://{}", path.display()), options(1)).await.unwrap();
    assert!(path.exists());
    let pool = db.sqlite_pool().unwrap();
    let mode: String = frontdesk_store::sqlx::query_scalar("PRAGMA journal_mode").fetch_one(pool).await.unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = frontdesk_store::sqlx::query_scalar("PRAGMA foreign_keys").fetch_one(pool).await.unwrap();
    assert_eq!(fk, 1);
    let sync: i64 = frontdesk_store::sqlx::query_scalar("PRAGMA synchronous").fetch_one(pool).await.unwrap();
    assert_eq!(sync, 1, "synchronous=NORMAL");
}

#[tokio::test]
async fn bad_urls_are_errors() {
    let err = Database::connect("mysql://localhost/x", options(1)).await.unwrap_err();
    assert!(matches!(err, StoreError::UnsupportedUrl { .. }), "{err:?}");
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be: cannot be opened.
    let err = Database::connect(&format!("sqlite://{}", dir.path().display()), options(1)).await.unwrap_err();
    assert!(matches!(err, StoreError::Connect { .. } | StoreError::Migrate { .. }), "{err:?}");
}

/// A database's directory is never created: a typo in the path is an error naming the directory.
#[tokio::test]
async fn a_missing_directory_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexistent").join("dir");
    let err = Database::connect(&format!("sqlite://{}/fd.db", missing.display()), options(1)).await.unwrap_err();
    assert!(matches!(err, StoreError::MissingDir { ref path } if *path == missing), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
    assert!(!dir.path().join("nonexistent").exists(), "no directory was created");
}

/// Mean `put` latency (2 KiB state, retention 1). Informational; run with
/// `cargo test -p frontdesk-store --release --test sqlite -- --nocapture put_latency`.
#[tokio::test]
async fn put_latency() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let mean = common::put_latency(&db.checkpointer(), 2010).await;
    eprintln!("sqlite (file, WAL, synchronous=NORMAL) put: mean {mean:?}");
    assert!(mean < std::time::Duration::from_millis(20), "put is far too slow: {mean:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tickets_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    common::tickets_round_trip(&db).await;
    common::tickets_listing(&db).await;
    common::tickets_concurrent_saves(&db).await;
    common::triage_requests(&db).await;
    common::triage_claims(&db).await;
}

#[tokio::test]
async fn tickets_in_memory() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    common::tickets_round_trip(&db).await;
    common::tickets_listing(&db).await;
    common::tickets_concurrent_saves(&db).await;
}

#[tokio::test]
async fn tickets_survive_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let t = common::ticket("C001", "TKT-1A2B3C4D", "open", 1_700_000_000_000);
    {
        let db = file_db(&dir, 1).await;
        db.save_completed_ticket(&t, &common::messages(2)).await.unwrap();
        db.close().await;
    }
    let db = file_db(&dir, 1).await;
    assert_eq!(db.get_ticket("TKT-1A2B3C4D").await.unwrap(), Some((t, common::messages(2))));
}

/// WAL checkpoints run beside the writer rather than in its commits (where they stall the
/// commit for an fsync): pages reach the database file long before the writer's own automatic
/// checkpoint (10,000 pages) would copy them, and the writer's threshold is that backstop.
#[tokio::test]
async fn the_wal_is_checkpointed_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let store = db.checkpointer();
    let db_file = dir.path().join("frontdesk.db");
    let before = std::fs::metadata(&db_file).unwrap().len();
    // 1,500 threads of one 3 KB checkpoint each: ~3,000 WAL pages, under the writer's threshold,
    // and past the first background checkpoints (every 100 writes).
    for i in 0..1500 {
        let mut cp = sample(&format!("wal-{i:04}"), 1, RunStatus::Running);
        cp.state = vec![b'x'; 3000];
        store.put(&cp).await.unwrap();
    }
    // Generous: it returns as soon as the pages are there, and a busy machine (a CI run beside
    // it) can hold the background checkpoints up for seconds.
    let copied = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let now = std::fs::metadata(&db_file).unwrap().len();
            if now >= before + (2 << 20) {
                return now;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the checkpoints beside the writer copied the WAL into the database file");
    assert!(copied > before);
    let writer_threshold: i64 = frontdesk_store::sqlx::query_scalar("PRAGMA wal_autocheckpoint")
        .fetch_one(db.sqlite_pool().unwrap())
        .await
        .unwrap();
    assert_eq!(writer_threshold, 1000, "pool connections keep SQLite's default");
    assert_eq!(store.latest("wal-1499").await.unwrap().unwrap().state.len(), 3000);
    db.close().await;
}

/// Checkpoint writes leave the file about as compact as `VACUUM` would. 200 threads are written
/// the way W1's conversations are: one after another, 20 versions each, retention 1, a state
/// that grows to 3.9 KB and every other write a completed run's output, so the last row of each
/// thread (4.5 KB) spills onto an overflow page, as a W1 conversation's does.
///
/// Rewriting the checkpoint that retention drops as the new one, in place, was tried and fails
/// this (445 pages in use against 270 after `VACUUM`; W1 took 8.4 KB a conversation instead of
/// 4.9): each row keeps a leaf page mostly to itself. Inserting the new row at the table's end
/// and deleting the old packs consecutive rows into shared pages and frees whole pages for reuse
/// (276 against 272).
#[tokio::test]
async fn writes_leave_the_file_compact() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    let store = db.checkpointer();
    let pool = db.sqlite_pool().unwrap();
    for t in 0..200 {
        let thread = format!("compact-{t:03}");
        for v in 1..=20u64 {
            let mut cp = sample(&thread, v, RunStatus::Running);
            cp.state = vec![v as u8; 195 * v as usize];
            if v % 2 == 0 {
                cp.run.output = Some("o".repeat(600));
            }
            store.put(&cp).await.unwrap();
        }
    }
    let pages = |sql: &'static str| async move {
        frontdesk_store::sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await.unwrap()
    };
    frontdesk_store::sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").fetch_all(pool).await.unwrap();
    let written = pages("PRAGMA page_count").await - pages("PRAGMA freelist_count").await;
    frontdesk_store::sqlx::query("VACUUM").execute(pool).await.unwrap();
    let vacuumed = pages("PRAGMA page_count").await;
    assert!(written as f64 <= vacuumed as f64 * 1.25, "{written} pages in use as written, {vacuumed} after VACUUM");
    db.close().await;
}

#[tokio::test]
async fn investigation_store_in_memory() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    common::investigation::run_all(&db).await;
}

/// On a file, writes go through the dedicated writer (the import's `BEGIN IMMEDIATE`
/// transaction included), and the data is still there after a reconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigation_store_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    common::investigation::run_all(&db).await;
    db.close().await;
    let db = file_db(&dir, 1).await;
    assert_eq!(db.hr_mutations().await.unwrap().len(), 9, "the sample, two re-imported and one inserted");
    db.close().await;
}

/// A write transaction that SQLite rolls back by itself (a full disk, an I/O error, a trigger's
/// `RAISE(ROLLBACK)`) fails alone: the writer must take the next transaction. sqlx's own
/// transactions would still count that one as open, and refuse every later `BEGIN IMMEDIATE`
/// on the connection until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_investigation_write_sqlite_rolled_back_leaves_the_writer_usable() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    rolled_back_by_sqlite_then_written(&db).await;
    db.close().await;
    // In memory the writer is the pool's one connection.
    rolled_back_by_sqlite_then_written(&Database::connect("sqlite::memory:", options(1)).await.unwrap()).await;
}

async fn rolled_back_by_sqlite_then_written(db: &Database) {
    let pool = db.sqlite_pool().unwrap();
    frontdesk_store::sqlx::query(
        "CREATE TRIGGER boom BEFORE INSERT ON investigation_audit WHEN NEW.kind = 'boom' \
         BEGIN SELECT RAISE(ROLLBACK, 'boom'); END",
    )
    .execute(pool)
    .await
    .unwrap();
    let entry = |seq, kind| common::investigation::audit_entry("inv-1", seq, kind);

    let err = db.upsert_audit_entries(&[entry(1, "note"), entry(2, "boom")]).await.expect_err("the trigger refuses");
    assert!(matches!(err, StoreError::Query { .. }), "{err:?}");
    assert!(db.audit_trail("inv-1", None).await.unwrap().is_empty(), "the whole transaction was rolled back");

    frontdesk_store::sqlx::query("DROP TRIGGER boom").execute(pool).await.unwrap();
    db.upsert_audit_entries(&[entry(1, "note"), entry(2, "status")]).await.unwrap();
    let kinds: Vec<String> = db.audit_trail("inv-1", None).await.unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["note", "status"]);
    db.import_hr_data(&common::investigation::sample_dir()).await.unwrap();
    db.checkpointer().put(&sample("after", 1, RunStatus::Completed)).await.unwrap();
}

#[test]
fn investigation_csv_exports() {
    common::investigation::csv_exports();
}

#[tokio::test]
async fn llm_calls_in_memory() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    common::llm_calls::run_all(&db).await;
}

#[tokio::test]
async fn llm_calls_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    common::llm_calls::run_all(&db).await;
    db.close().await;
}

#[tokio::test]
async fn api_keys_in_memory() {
    let db = Database::connect("sqlite::memory:", options(1)).await.unwrap();
    common::api_keys::run_all(&db).await;
}

#[tokio::test]
async fn api_keys_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir, 1).await;
    common::api_keys::run_all(&db).await;
    db.close().await;
}
