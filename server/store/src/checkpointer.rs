//! [`SqlCheckpointer`]: the runtime's [`Checkpointer`] on SQLite or PostgreSQL.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, SystemTime},
};

use async_trait::async_trait;
use frontdesk_runtime::{
    Checkpoint, CheckpointError, Checkpointer, IdempotentRun, Pending, RunMarker, RunStatus, ThreadHead, ThreadPage,
    ThreadQuery, ThreadSummary, UnfinishedRun,
};
use sqlx::{PgConnection, SqliteConnection};

use crate::{db::rollback_quietly, from_ms, leased, on_pool, on_reader, to_ms, Database, DbPool};

/// Checkpoints in SQL. A `put` is a compare-and-set on `threads.version`: on SQLite one batch
/// of statements (one round trip to the write connection), on PostgreSQL a single statement
/// whose data-modifying CTEs only write when the conditional update (or insert-if-absent, for
/// version 1) of the thread row succeeds. Concurrent puts to one database are committed
/// together, in one transaction, each keeping its own outcome (`group_commit.rs`); a put
/// with none beside it is its own transaction, in one round trip.
#[derive(Debug, Clone)]
pub struct SqlCheckpointer {
    db: Database,
    retention: i64,
}

impl SqlCheckpointer {
    /// Keeps the newest `db.options().checkpoint_retention` checkpoints per thread.
    pub fn new(db: Database) -> Self {
        let retention = i64::try_from(db.options().checkpoint_retention.max(1)).unwrap_or(i64::MAX);
        Self { db, retention }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }
}

macro_rules! checkpoint_columns {
    () => {
        "workflow, version, state, next_node, pending, run_id, idempotency_key, fingerprint, run_status, step, output, \
         created_at_ms, run_owner"
    };
}

const LATEST: &str =
    concat!("SELECT ", checkpoint_columns!(), " FROM checkpoints WHERE thread_id = $1 ORDER BY version DESC LIMIT 1");
/// The newest checkpoint found through its thread row, whose version names it, with the
/// thread's creation time: `latest` and `thread` in one read.
const HEAD: &str = "SELECT t.created_at_ms AS thread_created_at_ms, c.workflow, c.version, c.state, c.next_node, \
     c.pending, c.run_id, c.idempotency_key, c.fingerprint, c.run_status, c.step, c.output, c.created_at_ms, c.run_owner \
     FROM threads t JOIN checkpoints c ON c.thread_id = t.thread_id AND c.version = t.version WHERE t.thread_id = $1";
const HISTORY: &str =
    concat!("SELECT ", checkpoint_columns!(), " FROM checkpoints WHERE thread_id = $1 ORDER BY version DESC LIMIT $2");
const FIND_KEY: &str =
    "SELECT run_id, version, status, output, fingerprint FROM idempotency_keys WHERE thread_id = $1 AND key = $2";
const THREAD: &str =
    "SELECT thread_id, workflow, version, created_at_ms, updated_at_ms FROM threads WHERE thread_id = $1";
/// `$1` exclusive lower bound (`after`), `$2`..`$3` the prefix's range, `$4` workflow.
const LIST: &str = "SELECT thread_id, workflow, version, created_at_ms, updated_at_ms FROM threads \
     WHERE ($1 IS NULL OR thread_id > $1) AND ($2 IS NULL OR thread_id >= $2) \
     AND ($3 IS NULL OR thread_id < $3) AND ($4 IS NULL OR workflow = $4) \
     ORDER BY thread_id LIMIT $5";
const UNFINISHED: &str = "SELECT thread_id FROM threads WHERE status = 'running' ORDER BY thread_id";
/// The same threads with their newest checkpoint's workflow, run and owner, found through the
/// thread row's version as in `HEAD`.
const UNFINISHED_RUNS: &str = "SELECT t.thread_id, c.workflow, c.run_id, c.run_owner FROM threads t \
     JOIN checkpoints c ON c.thread_id = t.thread_id AND c.version = t.version \
     WHERE t.status = 'running' AND c.run_status = 'running' ORDER BY t.thread_id";
const VERSION: &str = "SELECT version FROM threads WHERE thread_id = $1";
const PG_DELETE: &str = "SELECT frontdesk_delete_thread($1)";
/// The same erasure committed without waiting for the WAL flush: `set_config(..., true)` sets
/// `synchronous_commit` for this statement's own transaction only.
const PG_DELETE_UNSYNCED: &str =
    "SELECT deleted FROM set_config('synchronous_commit', 'off', true), frontdesk_delete_thread($1) AS deleted";

// Replica leases. SQLite keeps the expiry in milliseconds since the epoch by the clock of the
// process that renews (`$2`), and readers compare it with their own clock; PostgreSQL uses the
// database's clock for both (`$2` is the ttl in milliseconds), so replicas with skewed clocks
// agree.
const SQLITE_RENEW_LEASE: &str = "INSERT INTO replica_leases (replica, expires_at_ms) VALUES ($1, $2) \
     ON CONFLICT (replica) DO UPDATE SET expires_at_ms = excluded.expires_at_ms";
const SQLITE_LEASE_EXPIRY: &str = "SELECT expires_at_ms FROM replica_leases WHERE replica = $1";
const PG_RENEW_LEASE: &str = "INSERT INTO replica_leases (replica, expires_at) \
     VALUES ($1, now() + $2::float8 * interval '1 millisecond') \
     ON CONFLICT (replica) DO UPDATE SET expires_at = EXCLUDED.expires_at";
/// Microseconds left, by the database's clock; no row once expired.
const PG_LEASE_REMAINING: &str = "SELECT (extract(epoch FROM expires_at - now()) * 1000000)::bigint \
     FROM replica_leases WHERE replica = $1 AND expires_at > now()";
const RELEASE_LEASE: &str = "DELETE FROM replica_leases WHERE replica = $1";

// The writes, in both dialects with the same binds (see `bind_write!`): $1 thread_id,
// $2 workflow, $3 version, $4 created_at_ms, $5 run status, $6 state, $7 next_node,
// $8 pending, $9 run_id, $10 idempotency_key, $11 step, $12 output, $13 whether to record
// the key, $14 prune checkpoints up to this version, $15 the request's fingerprint,
// $16 the run's owner (replica).
//
// The compare-and-set on the thread row: insert-if-absent for version 1, else a conditional
// update from version - 1. Either returns a row only when it won.
macro_rules! insert_thread {
    () => {
        "INSERT INTO threads (thread_id, workflow, version, created_at_ms, updated_at_ms, status) \
         VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (thread_id) DO NOTHING RETURNING version"
    };
}
macro_rules! update_thread {
    () => {
        "UPDATE threads SET workflow = $2, version = $3, updated_at_ms = $4, status = $5 \
         WHERE thread_id = $1 AND version = $3 - 1 RETURNING version"
    };
}

// SQLite: one batch of statements per write (one trip to the write connection's worker
// thread). `changes()` is the row count of the previous statement, so the checkpoint is
// inserted only after a won compare-and-set, and the key only after the checkpoint; a lost
// compare-and-set writes nothing. Pruning runs only when the thread is now at this version
// (after a loss at the very same version it would delete exactly what the winner already
// deleted, i.e. nothing). A write alone is a whole `BEGIN IMMEDIATE` .. `COMMIT` transaction
// in that one trip; in a group commit the transaction is around the batch.
macro_rules! sqlite_put_tail {
    () => {
        "; INSERT INTO checkpoints (thread_id, version, workflow, state, next_node, pending, run_id, \
             idempotency_key, fingerprint, run_status, step, output, created_at_ms, run_owner) \
           SELECT $1, $3, $2, $6, $7, $8, $9, $10, $15, $5, $11, $12, $4, $16 WHERE changes() = 1; \
         INSERT INTO idempotency_keys (thread_id, key, run_id, version, status, output, fingerprint) \
           SELECT $1, $10, $9, $3, $5, $12, $15 WHERE $13 AND changes() = 1 \
           ON CONFLICT (thread_id, key) DO UPDATE SET run_id = excluded.run_id, version = excluded.version, \
             status = excluded.status, output = excluded.output, fingerprint = excluded.fingerprint; \
         DELETE FROM checkpoints WHERE thread_id = $1 AND version <= $14 \
           AND EXISTS (SELECT 1 FROM threads WHERE thread_id = $1 AND version = $3)"
    };
}
const SQLITE_PUT_FIRST: &str = concat!("BEGIN IMMEDIATE; ", insert_thread!(), sqlite_put_tail!(), "; COMMIT");
const SQLITE_PUT_NEXT: &str = concat!("BEGIN IMMEDIATE; ", update_thread!(), sqlite_put_tail!(), "; COMMIT");
/// The same writes inside a group commit's transaction.
const SQLITE_BATCHED_PUT_FIRST: &str = concat!(insert_thread!(), sqlite_put_tail!());
const SQLITE_BATCHED_PUT_NEXT: &str = concat!(update_thread!(), sqlite_put_tail!());
/// Erases a thread in one batch; returns a row when the thread existed. `BEGIN IMMEDIATE`
/// takes the write lock first, so no put of another process interleaves.
const SQLITE_DELETE: &str = "BEGIN IMMEDIATE; DELETE FROM checkpoints WHERE thread_id = $1; \
     DELETE FROM idempotency_keys WHERE thread_id = $1; \
     DELETE FROM threads WHERE thread_id = $1 RETURNING 1; COMMIT";

// PostgreSQL: one statement, one round trip, atomic on its own. The data-modifying CTEs
// select from `cas`, so they write only when the compare-and-set won. Returns the number of
// rows `cas` produced: 1 when it won, 0 when it lost (and nothing was written).
//
// The new checkpoint overwrites the oldest one retention drops (`recycled`) and is inserted
// only when there is none (a new thread, or one with fewer than `retention` checkpoints); the
// rest of the dropped ones are deleted. An update puts the new row version on the old one's
// page when it fits (migration 0011 leaves room), and the next write to the thread, reading
// that page, prunes the version before, so a thread's checkpoints keep their pages. Inserting
// instead appends every version at the table's end and leaves the deleted ones in pages
// nothing reads again, for vacuum to find: W1's table as written was four to seven times its
// size after `VACUUM FULL` that way (docs/architecture.md, "Retention").
macro_rules! pg_put_tail {
    () => {
        "), oldest AS ( \
            SELECT min(version) AS version FROM checkpoints WHERE thread_id = $1 AND version <= $14 \
         ), recycled AS ( \
            UPDATE checkpoints SET version = $3, workflow = $2, state = $6, next_node = $7, pending = $8, \
                run_id = $9, idempotency_key = $10, fingerprint = $15, run_status = $5, step = $11, output = $12, \
                created_at_ms = $4, run_owner = $16 \
            WHERE thread_id = $1 AND version = (SELECT version FROM oldest) AND EXISTS (SELECT 1 FROM cas) \
            RETURNING 1 \
         ), cp AS ( \
            INSERT INTO checkpoints (thread_id, version, workflow, state, next_node, pending, run_id, \
                idempotency_key, fingerprint, run_status, step, output, created_at_ms, run_owner) \
            SELECT $1, $3, $2, $6, $7, $8, $9, $10, $15, $5, $11, $12, $4, $16 FROM cas \
            WHERE NOT EXISTS (SELECT 1 FROM recycled) \
         ), idem AS ( \
            INSERT INTO idempotency_keys (thread_id, key, run_id, version, status, output, fingerprint) \
            SELECT $1, $10, $9, $3, $5, $12, $15 FROM cas WHERE $13 \
            ON CONFLICT (thread_id, key) DO UPDATE SET run_id = EXCLUDED.run_id, version = EXCLUDED.version, \
                status = EXCLUDED.status, output = EXCLUDED.output, fingerprint = EXCLUDED.fingerprint \
         ), pruned AS ( \
            DELETE FROM checkpoints WHERE thread_id = $1 AND version <= $14 \
                AND version > (SELECT version FROM oldest) AND EXISTS (SELECT 1 FROM cas) \
         ) \
         SELECT count(*) FROM cas"
    };
}
const PG_PUT_FIRST: &str = concat!("WITH cas AS (", insert_thread!(), pg_put_tail!());
const PG_PUT_NEXT: &str = concat!("WITH cas AS (", update_thread!(), pg_put_tail!());
/// A group commit's writes to distinct threads as one statement: the same compare-and-set and
/// the same writes as `PG_PUT_FIRST` / `PG_PUT_NEXT`, for every write at once, from one array
/// per column (`$1`..`$16` in the order of `bind_write!`). Returns the thread ids whose
/// compare-and-set won. A thread may appear only once: the sub-statements all read the
/// snapshot the statement started with, so a second write to a thread would not see the first.
/// The writes are bound in thread id order, and a batch of at most `MAX_BATCH` rows is joined to
/// `threads` by its primary key (a nested loop over the input), so rows are locked in that
/// order; were two batches still to wait for each other, PostgreSQL would abort one (a deadlock
/// is the database's error, so that batch's writes are retried one by one).
const PG_PUT_BATCH: &str = "WITH input AS ( \
        SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::bytea[], \
            $7::text[], $8::text[], $9::text[], $10::text[], $11::int8[], $12::text[], $13::bool[], \
            $14::int8[], $15::text[], $16::text[]) \
          AS i (thread_id, workflow, version, created_at_ms, status, state, next_node, pending, run_id, \
            key, step, output, record_key, prune_through, fingerprint, owner) \
     ), inserted AS ( \
        INSERT INTO threads (thread_id, workflow, version, created_at_ms, updated_at_ms, status) \
        SELECT thread_id, workflow, version, created_at_ms, created_at_ms, status FROM input \
        WHERE version = 1 ORDER BY thread_id \
        ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id \
     ), updated AS ( \
        UPDATE threads t SET workflow = i.workflow, version = i.version, updated_at_ms = i.created_at_ms, \
            status = i.status \
        FROM input i WHERE t.thread_id = i.thread_id AND i.version > 1 AND t.version = i.version - 1 \
        RETURNING t.thread_id \
     ), won AS ( \
        SELECT * FROM input WHERE thread_id IN (SELECT thread_id FROM inserted UNION ALL SELECT thread_id FROM updated) \
     ), oldest AS ( \
        SELECT c.thread_id, min(c.version) AS version FROM checkpoints c \
        JOIN won w ON c.thread_id = w.thread_id AND c.version <= w.prune_through GROUP BY c.thread_id \
     ), recycled AS ( \
        UPDATE checkpoints c SET version = w.version, workflow = w.workflow, state = w.state, \
            next_node = w.next_node, pending = w.pending, run_id = w.run_id, idempotency_key = w.key, \
            fingerprint = w.fingerprint, run_status = w.status, step = w.step, output = w.output, \
            created_at_ms = w.created_at_ms, run_owner = w.owner \
        FROM won w JOIN oldest o ON o.thread_id = w.thread_id \
        WHERE c.thread_id = w.thread_id AND c.version = o.version \
        RETURNING c.thread_id \
     ), cp AS ( \
        INSERT INTO checkpoints (thread_id, version, workflow, state, next_node, pending, run_id, \
            idempotency_key, fingerprint, run_status, step, output, created_at_ms, run_owner) \
        SELECT thread_id, version, workflow, state, next_node, pending, run_id, key, fingerprint, status, \
            step, output, created_at_ms, owner FROM won WHERE thread_id NOT IN (SELECT thread_id FROM recycled) \
     ), idem AS ( \
        INSERT INTO idempotency_keys (thread_id, key, run_id, version, status, output, fingerprint) \
        SELECT thread_id, key, run_id, version, status, output, fingerprint FROM won WHERE record_key \
        ON CONFLICT (thread_id, key) DO UPDATE SET run_id = EXCLUDED.run_id, version = EXCLUDED.version, \
            status = EXCLUDED.status, output = EXCLUDED.output, fingerprint = EXCLUDED.fingerprint \
     ), pruned AS ( \
        DELETE FROM checkpoints c USING won w JOIN oldest o ON o.thread_id = w.thread_id \
        WHERE c.thread_id = w.thread_id AND c.version <= w.prune_through AND c.version > o.version \
     ) \
     SELECT thread_id FROM won";
/// The versions of the threads in `$1` (absent threads have no row).
const PG_VERSIONS: &str = "SELECT thread_id, version FROM threads WHERE thread_id = ANY($1)";

/// Binds a [`Write`] as `$1`..`$16` of the put statements.
macro_rules! bind_write {
    ($query:expr, $w:expr) => {
        $query
            .bind($w.thread_id.as_str())
            .bind($w.workflow.as_str())
            .bind($w.version)
            .bind($w.created_at_ms)
            .bind($w.status)
            .bind($w.state.as_slice())
            .bind($w.next.as_deref())
            .bind($w.pending.as_deref())
            .bind($w.run_id.as_str())
            .bind($w.key.as_deref())
            .bind($w.step)
            .bind($w.output.as_deref())
            .bind($w.record_key)
            .bind($w.prune_through)
            .bind($w.fingerprint.as_deref())
            .bind($w.owner.as_deref())
    };
}

#[derive(sqlx::FromRow)]
struct CheckpointRow {
    workflow: String,
    version: i64,
    state: Vec<u8>,
    next_node: Option<String>,
    pending: Option<String>,
    run_id: String,
    idempotency_key: Option<String>,
    fingerprint: Option<String>,
    run_status: String,
    step: i64,
    output: Option<String>,
    created_at_ms: i64,
    run_owner: Option<String>,
}

#[derive(sqlx::FromRow)]
struct HeadRow {
    thread_created_at_ms: i64,
    #[sqlx(flatten)]
    checkpoint: CheckpointRow,
}

#[derive(sqlx::FromRow)]
struct ThreadRow {
    thread_id: String,
    workflow: String,
    version: i64,
    created_at_ms: i64,
    updated_at_ms: i64,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    run_id: String,
    version: i64,
    status: String,
    output: Option<String>,
    fingerprint: Option<String>,
}

/// A stored value outside its domain.
#[derive(Debug, thiserror::Error)]
#[error("column {column} holds an invalid value {value:?}")]
struct InvalidColumn {
    column: &'static str,
    value: String,
}

fn corrupt(thread_id: &str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> CheckpointError {
    CheckpointError::Corrupt { thread_id: thread_id.to_owned(), source: source.into() }
}

/// Decoding failures are corrupt data; everything else means the store is unavailable.
fn db_error(thread_id: &str) -> impl FnOnce(sqlx::Error) -> CheckpointError + '_ {
    move |e| match e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => corrupt(thread_id, e),
        e => CheckpointError::Unavailable(Box::new(e)),
    }
}

fn version_from(thread_id: &str, column: &'static str, v: i64) -> Result<u64, CheckpointError> {
    u64::try_from(v).map_err(|_| corrupt(thread_id, InvalidColumn { column, value: v.to_string() }))
}

fn status_from(thread_id: &str, column: &'static str, s: &str) -> Result<RunStatus, CheckpointError> {
    RunStatus::parse(s).ok_or_else(|| corrupt(thread_id, InvalidColumn { column, value: s.to_owned() }))
}

impl CheckpointRow {
    fn into_checkpoint(self, thread_id: &str) -> Result<Checkpoint, CheckpointError> {
        let pending = match self.pending {
            Some(json) => Pending::decode(&json).map_err(|e| corrupt(thread_id, e))?,
            None => Pending::default(),
        };
        let step = u32::try_from(self.step).map_err(|_| {
            corrupt(thread_id, InvalidColumn { column: "checkpoints.step", value: self.step.to_string() })
        })?;
        Ok(Checkpoint {
            thread_id: thread_id.to_owned(),
            workflow: self.workflow,
            version: version_from(thread_id, "checkpoints.version", self.version)?,
            state: self.state,
            next: self.next_node,
            pending,
            run: RunMarker {
                run_id: self.run_id,
                idempotency_key: self.idempotency_key,
                fingerprint: self.fingerprint,
                status: status_from(thread_id, "checkpoints.run_status", &self.run_status)?,
                step,
                output: self.output,
                owner: self.run_owner,
            },
            created_at: from_ms(self.created_at_ms),
        })
    }
}

impl ThreadRow {
    fn into_summary(self) -> Result<ThreadSummary, CheckpointError> {
        let version = version_from(&self.thread_id, "threads.version", self.version)?;
        Ok(ThreadSummary {
            workflow: self.workflow,
            version,
            created_at: from_ms(self.created_at_ms),
            updated_at: from_ms(self.updated_at_ms),
            thread_id: self.thread_id,
        })
    }
}

/// A checkpoint flattened into bind values. Owned: it waits in the write queue
/// ([`crate::group_commit`]) while its caller waits for the answer.
#[derive(Debug)]
pub(crate) struct Write {
    thread_id: String,
    workflow: String,
    version: i64,
    created_at_ms: i64,
    status: &'static str,
    state: Vec<u8>,
    next: Option<String>,
    pending: Option<String>,
    run_id: String,
    key: Option<String>,
    fingerprint: Option<String>,
    step: i64,
    output: Option<String>,
    /// The replica whose run wrote the checkpoint.
    owner: Option<String>,
    /// The key is recorded when its run completes or pauses.
    record_key: bool,
    /// Checkpoints up to this version are pruned (none when below 1).
    prune_through: i64,
}

impl Write {
    fn new(cp: &Checkpoint, retention: i64) -> Result<Self, CheckpointError> {
        let version = i64::try_from(cp.version).map_err(|_| {
            corrupt(&cp.thread_id, InvalidColumn { column: "checkpoints.version", value: cp.version.to_string() })
        })?;
        let pending = cp.pending.encode().map_err(|e| corrupt(&cp.thread_id, e))?;
        Ok(Write {
            thread_id: cp.thread_id.clone(),
            workflow: cp.workflow.clone(),
            version,
            created_at_ms: to_ms(cp.created_at),
            status: cp.run.status.as_str(),
            state: cp.state.clone(),
            next: cp.next.clone(),
            pending,
            run_id: cp.run.run_id.clone(),
            key: cp.run.idempotency_key.clone(),
            fingerprint: cp.run.fingerprint.clone(),
            step: i64::from(cp.run.step),
            output: cp.run.output.clone(),
            owner: cp.run.owner.clone(),
            record_key: cp.run.idempotency_key.is_some()
                && matches!(cp.run.status, RunStatus::Completed | RunStatus::Interrupted),
            prune_through: version.saturating_sub(retention),
        })
    }

    fn conflict(&self, actual: Option<i64>) -> CheckpointError {
        CheckpointError::Conflict {
            thread_id: self.thread_id.clone(),
            expected: u64::try_from(self.version).unwrap_or(0).saturating_sub(1),
            actual: actual.and_then(|v| u64::try_from(v).ok()).unwrap_or(0),
        }
    }
}

/// One write in a transaction of its own, in one round trip (see `SQLITE_PUT_FIRST`).
async fn put_sqlite_on(conn: &mut SqliteConnection, w: &Write) -> Result<(), CheckpointError> {
    let won = w.version >= 1 && {
        let sql = if w.version == 1 { SQLITE_PUT_FIRST } else { SQLITE_PUT_NEXT };
        // Every statement of the batch runs (fetch_all); only the compare-and-set returns a row.
        match bind_write!(sqlx::query(sql), w).fetch_all(&mut *conn).await {
            Ok(rows) => !rows.is_empty(),
            Err(e) => {
                rollback_quietly(conn).await;
                return Err(db_error(&w.thread_id)(e));
            }
        }
    };
    if won {
        return Ok(());
    }
    let actual = sqlx::query_scalar(VERSION).bind(&w.thread_id).fetch_optional(&mut *conn).await;
    Err(w.conflict(actual.map_err(db_error(&w.thread_id))?))
}

/// How a group commit went wrong, when it did.
#[derive(Debug)]
enum BatchFailure {
    /// One write's statements failed (the database refused them); the transaction was rolled
    /// back, the connection works. The writes are retried one by one, so that write fails
    /// alone.
    Write(sqlx::Error),
    /// The transaction itself failed (`BEGIN`, `COMMIT`, the connection): every write of the
    /// batch is answered with this error.
    Batch(sqlx::Error),
}

/// Commits `writes` on the SQLite write connection: two or more in one transaction, one
/// result per write, in order. A lost compare-and-set fails its own write only.
pub(crate) async fn put_sqlite_batch(
    conn: &mut SqliteConnection,
    writes: &[&Write],
) -> Vec<Result<(), CheckpointError>> {
    if let [w] = writes {
        return vec![put_sqlite_on(conn, w).await];
    }
    match sqlite_transaction(conn, writes).await {
        Ok(results) => results,
        Err(BatchFailure::Write(error)) => {
            tracing::debug!(%error, writes = writes.len(), "a write failed in a group commit; writing the batch one by one");
            let mut results = Vec::with_capacity(writes.len());
            for w in writes {
                results.push(put_sqlite_on(conn, w).await);
            }
            results
        }
        Err(BatchFailure::Batch(error)) => failed_batch(writes.len(), error),
    }
}

async fn sqlite_transaction(
    conn: &mut SqliteConnection,
    writes: &[&Write],
) -> Result<Vec<Result<(), CheckpointError>>, BatchFailure> {
    // Plain statements rather than sqlx's transactions: sqlx would count a transaction that
    // SQLite rolled back by itself as still open, and refuse the next `BEGIN IMMEDIATE`.
    if let Err(e) = sqlx::Executor::execute(&mut *conn, "BEGIN IMMEDIATE").await {
        // As after a single write's failure: whatever the writer was left in ends here.
        rollback_quietly(conn).await;
        return Err(BatchFailure::Batch(e));
    }
    let mut results = Vec::with_capacity(writes.len());
    for w in writes {
        let won = w.version >= 1 && {
            let sql = if w.version == 1 { SQLITE_BATCHED_PUT_FIRST } else { SQLITE_BATCHED_PUT_NEXT };
            match bind_write!(sqlx::query(sql), w).fetch_all(&mut *conn).await {
                Ok(rows) => !rows.is_empty(),
                Err(e) => {
                    rollback_quietly(conn).await;
                    return Err(statement_failure(e));
                }
            }
        };
        if won {
            results.push(Ok(()));
            continue;
        }
        // Read inside the transaction: it sees the batch's own writes, one of which may be
        // the one that beat this write.
        match sqlx::query_scalar(VERSION).bind(&w.thread_id).fetch_optional(&mut *conn).await {
            Ok(actual) => results.push(Err(w.conflict(actual))),
            Err(e) => {
                rollback_quietly(conn).await;
                return Err(statement_failure(e));
            }
        }
    }
    if let Err(e) = sqlx::Executor::execute(&mut *conn, "COMMIT").await {
        rollback_quietly(conn).await;
        return Err(BatchFailure::Batch(e));
    }
    Ok(results)
}

/// A statement's error: the database's own (the connection answered) fails that write alone;
/// anything else fails the batch.
fn statement_failure(e: sqlx::Error) -> BatchFailure {
    match e {
        sqlx::Error::Database(_) => BatchFailure::Write(e),
        e => BatchFailure::Batch(e),
    }
}

/// The same failure for each of `n` writes.
pub(crate) fn failed_batch(n: usize, error: sqlx::Error) -> Vec<Result<(), CheckpointError>> {
    let error = Arc::new(error);
    (0..n).map(|_| Err(CheckpointError::Unavailable(Box::new(BatchFailed(error.clone()))))).collect()
}

/// The error of a group commit, given to every write of its batch.
#[derive(Debug, thiserror::Error)]
#[error("the batch of checkpoint writes holding this one failed")]
struct BatchFailed(#[source] Arc<sqlx::Error>);

async fn delete_sqlite(db: &Database, thread_id: &str) -> Result<bool, CheckpointError> {
    let mut conn = db.sqlite_writer().await.map_err(db_error(thread_id))?;
    // Called from requests, which can be cancelled between the batch's BEGIN and its COMMIT.
    conn.transaction_started();
    let deleted = match sqlx::query(SQLITE_DELETE).bind(thread_id).fetch_all(&mut *conn).await {
        Ok(rows) => Ok(!rows.is_empty()),
        Err(e) => {
            rollback_quietly(&mut conn).await;
            Err(db_error(thread_id)(e))
        }
    };
    conn.transaction_ended();
    deleted
}

async fn delete_postgres(db: &Database, thread_id: &str, synced: bool) -> Result<bool, CheckpointError> {
    // One round trip; the function (migration 0003) locks the thread row before deleting.
    let sql = if synced { PG_DELETE } else { PG_DELETE_UNSYNCED };
    leased!(db.postgres_lease(), conn => sqlx::query_scalar(sql).bind(thread_id).fetch_one(conn).await)
        .map_err(db_error(thread_id))
}

/// Commits `writes` on a PostgreSQL connection: two or more in one transaction, one result
/// per write, in order. Also says whether the connection is known to work (the lease's
/// outcome, see [`crate::reuse`]).
pub(crate) async fn put_postgres_batch(
    conn: &mut PgConnection,
    writes: &[&Write],
) -> (Vec<Result<(), CheckpointError>>, bool) {
    if let [w] = writes {
        let result = put_postgres_on(conn, w).await;
        // A lost compare-and-set completed its statements: the connection is fine.
        let fine = matches!(result, Ok(()) | Err(CheckpointError::Conflict { .. }));
        return (vec![result], fine);
    }
    match postgres_transaction(conn, writes).await {
        Ok(results) => (results, true),
        Err(BatchFailure::Write(error)) => {
            tracing::debug!(%error, writes = writes.len(), "a write failed in a group commit; writing the batch one by one");
            let mut results = Vec::with_capacity(writes.len());
            let mut fine = true;
            for w in writes {
                let result = put_postgres_on(conn, w).await;
                fine &= matches!(result, Ok(()) | Err(CheckpointError::Conflict { .. }));
                results.push(result);
            }
            (results, fine)
        }
        Err(BatchFailure::Batch(error)) => {
            let fine = matches!(error, sqlx::Error::Database(_));
            (failed_batch(writes.len(), error), fine)
        }
    }
}

async fn postgres_transaction(
    conn: &mut PgConnection,
    writes: &[&Write],
) -> Result<Vec<Result<(), CheckpointError>>, BatchFailure> {
    let mut results: Vec<Option<Result<(), CheckpointError>>> = writes.iter().map(|_| None).collect();
    let mut tx = sqlx::Connection::begin(conn).await.map_err(BatchFailure::Batch)?;
    for round in rounds(writes) {
        let outcome = async {
            let won = put_postgres_round(&mut tx, writes, &round).await?;
            let lost: Vec<&str> =
                round.iter().map(|&i| writes[i].thread_id.as_str()).filter(|t| !won.contains(*t)).collect();
            // Read inside the transaction: it sees the batch's own writes as well, one of which
            // may be the one that beat a write of this round.
            let versions: HashMap<String, i64> = if lost.is_empty() {
                HashMap::new()
            } else {
                sqlx::query_as(PG_VERSIONS).bind(&lost).fetch_all(&mut *tx).await?.into_iter().collect()
            };
            Ok::<_, sqlx::Error>((won, versions))
        }
        .await;
        let (won, versions) = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                let failure = statement_failure(e);
                if let BatchFailure::Write(_) = failure {
                    tx.rollback().await.map_err(BatchFailure::Batch)?;
                }
                // Otherwise dropping the transaction rolls it back, if the connection still can.
                return Err(failure);
            }
        };
        for i in round {
            let w = writes[i];
            results[i] = Some(if won.contains(&w.thread_id) {
                Ok(())
            } else {
                Err(w.conflict(versions.get(&w.thread_id).copied()))
            });
        }
    }
    tx.commit().await.map_err(BatchFailure::Batch)?;
    Ok(results.into_iter().map(|r| r.expect("every write of the batch ran")).collect())
}

/// The batch's writes in rounds that each hold a thread at most once: round k holds the k-th
/// write of every thread, so writes to one thread keep their queue order, and each round is in
/// thread id order (the order its statement locks rows in). Under load a batch is one round: a
/// run's next write waits for the answer to its last.
fn rounds(writes: &[&Write]) -> Vec<Vec<usize>> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        let k = seen.entry(w.thread_id.as_str()).or_insert(0);
        if *k == rounds.len() {
            rounds.push(Vec::new());
        }
        rounds[*k].push(i);
        *k += 1;
    }
    for round in &mut rounds {
        round.sort_by(|&a, &b| writes[a].thread_id.cmp(&writes[b].thread_id));
    }
    rounds
}

/// Runs `PG_PUT_BATCH` for one round; returns the threads whose compare-and-set won. A write
/// below version 1 loses without a statement, as a write alone does.
async fn put_postgres_round(
    conn: &mut PgConnection,
    writes: &[&Write],
    round: &[usize],
) -> Result<HashSet<String>, sqlx::Error> {
    let round: Vec<&Write> = round.iter().map(|&i| writes[i]).filter(|w| w.version >= 1).collect();
    if round.is_empty() {
        return Ok(HashSet::new());
    }
    macro_rules! column {
        ($field:ident) => {
            round.iter().map(|w| w.$field).collect::<Vec<_>>()
        };
        ($field:ident, $as:ident) => {
            round.iter().map(|w| w.$field.$as()).collect::<Vec<_>>()
        };
    }
    let won: Vec<String> = sqlx::query_scalar(PG_PUT_BATCH)
        .bind(column!(thread_id, as_str))
        .bind(column!(workflow, as_str))
        .bind(column!(version))
        .bind(column!(created_at_ms))
        .bind(column!(status))
        .bind(column!(state, as_slice))
        .bind(column!(next, as_deref))
        .bind(column!(pending, as_deref))
        .bind(column!(run_id, as_str))
        .bind(column!(key, as_deref))
        .bind(column!(step))
        .bind(column!(output, as_deref))
        .bind(column!(record_key))
        .bind(column!(prune_through))
        .bind(column!(fingerprint, as_deref))
        .bind(column!(owner, as_deref))
        .fetch_all(conn)
        .await?;
    Ok(won.into_iter().collect())
}

/// The compare-and-set of one write: `None` when it won, else the thread's version as this
/// connection now reads it (`Some(None)` for no thread).
async fn postgres_cas(conn: &mut PgConnection, w: &Write) -> Result<Option<Option<i64>>, sqlx::Error> {
    let won = w.version >= 1 && {
        let sql = if w.version == 1 { PG_PUT_FIRST } else { PG_PUT_NEXT };
        let cas: i64 = bind_write!(sqlx::query_scalar(sql), w).fetch_one(&mut *conn).await?;
        cas == 1
    };
    if won {
        return Ok(None);
    }
    // The winner has committed by now (the loser waited for its row lock or key), so a fresh
    // read sees the version that beat us.
    Ok(Some(sqlx::query_scalar(VERSION).bind(&w.thread_id).fetch_optional(conn).await?))
}

async fn put_postgres_on(conn: &mut PgConnection, w: &Write) -> Result<(), CheckpointError> {
    match postgres_cas(conn, w).await.map_err(db_error(&w.thread_id))? {
        None => Ok(()),
        Some(actual) => Err(w.conflict(actual)),
    }
}

/// A lease's ttl in whole milliseconds, as stored.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// The smallest string greater than every string that starts with `prefix`, if any (the
/// exclusive end of a prefix's key range).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[async_trait]
impl Checkpointer for SqlCheckpointer {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let row: Option<CheckpointRow> = on_reader!(self.db, conn => {
            sqlx::query_as(LATEST).bind(thread_id).fetch_optional(conn).await
        })
        .map_err(db_error(thread_id))?;
        row.map(|r| r.into_checkpoint(thread_id)).transpose()
    }

    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        self.db.put_checkpoint(Write::new(checkpoint, self.retention)?).await
    }

    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<CheckpointRow> = on_pool!(self.db, conn => {
            sqlx::query_as(HISTORY).bind(thread_id).bind(limit).fetch_all(conn).await
        })
        .map_err(db_error(thread_id))?;
        rows.into_iter().map(|r| r.into_checkpoint(thread_id)).collect()
    }

    async fn find_idempotent(&self, thread_id: &str, key: &str) -> Result<Option<IdempotentRun>, CheckpointError> {
        let row: Option<KeyRow> = on_reader!(self.db, conn => {
            sqlx::query_as(FIND_KEY).bind(thread_id).bind(key).fetch_optional(conn).await
        })
        .map_err(db_error(thread_id))?;
        row.map(|r| {
            Ok(IdempotentRun {
                version: version_from(thread_id, "idempotency_keys.version", r.version)?,
                status: status_from(thread_id, "idempotency_keys.status", &r.status)?,
                run_id: r.run_id,
                output: r.output,
                fingerprint: r.fingerprint,
            })
        })
        .transpose()
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadSummary>, CheckpointError> {
        let row: Option<ThreadRow> = on_reader!(self.db, conn => {
            sqlx::query_as(THREAD).bind(thread_id).fetch_optional(conn).await
        })
        .map_err(db_error(thread_id))?;
        row.map(ThreadRow::into_summary).transpose()
    }

    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, CheckpointError> {
        let row: Option<HeadRow> = on_reader!(self.db, conn => {
            sqlx::query_as(HEAD).bind(thread_id).fetch_optional(conn).await
        })
        .map_err(db_error(thread_id))?;
        row.map(|r| {
            let checkpoint = r.checkpoint.into_checkpoint(thread_id)?;
            Ok(ThreadHead { created_at: from_ms(r.thread_created_at_ms), checkpoint })
        })
        .transpose()
    }

    async fn list_threads(&self, query: &ThreadQuery) -> Result<ThreadPage, CheckpointError> {
        let limit = query.limit.max(1);
        let prefix = query.prefix.as_deref().filter(|p| !p.is_empty());
        let prefix_end = prefix.and_then(prefix_end);
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
        let rows: Vec<ThreadRow> = on_pool!(self.db, conn => {
            sqlx::query_as(LIST)
                .bind(query.after.as_deref())
                .bind(prefix)
                .bind(prefix_end.as_deref())
                .bind(query.workflow.as_deref())
                .bind(fetch)
                .fetch_all(conn)
                .await
        })
        .map_err(db_error(""))?;
        let more = rows.len() > limit;
        let threads = rows.into_iter().take(limit).map(ThreadRow::into_summary).collect::<Result<Vec<_>, _>>()?;
        let next_after = if more { threads.last().map(|t| t.thread_id.clone()) } else { None };
        Ok(ThreadPage { threads, next_after })
    }

    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError> {
        on_pool!(self.db, conn => sqlx::query_scalar(UNFINISHED).fetch_all(conn).await).map_err(db_error(""))
    }

    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, CheckpointError> {
        let rows: Vec<(String, String, String, Option<String>)> =
            on_pool!(self.db, conn => sqlx::query_as(UNFINISHED_RUNS).fetch_all(conn).await).map_err(db_error(""))?;
        Ok(rows
            .into_iter()
            .map(|(thread_id, workflow, run_id, owner)| UnfinishedRun { thread_id, workflow, run_id, owner })
            .collect())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        match self.db.pool() {
            DbPool::Sqlite(_) => delete_sqlite(&self.db, thread_id).await,
            DbPool::Postgres(_) => delete_postgres(&self.db, thread_id, true).await,
        }
    }

    /// PostgreSQL skips the WAL flush at commit (`synchronous_commit = off` for the delete's
    /// transaction only). SQLite is unchanged: in WAL mode with `synchronous = NORMAL` no
    /// commit waits for a flush.
    async fn delete_thread_unsynced(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        match self.db.pool() {
            DbPool::Sqlite(_) => delete_sqlite(&self.db, thread_id).await,
            DbPool::Postgres(_) => delete_postgres(&self.db, thread_id, false).await,
        }
    }

    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError> {
        match self.db.pool() {
            DbPool::Sqlite(_) => {
                let expires_at_ms = to_ms(SystemTime::now()).saturating_add(ttl_ms(ttl));
                let mut conn = self.db.sqlite_writer().await.map_err(db_error(""))?;
                let query = sqlx::query(SQLITE_RENEW_LEASE).bind(replica).bind(expires_at_ms);
                query.execute(&mut *conn).await.map_err(db_error(""))?;
            }
            DbPool::Postgres(_) => {
                leased!(self.db.postgres_lease(), conn => {
                    sqlx::query(PG_RENEW_LEASE).bind(replica).bind(ttl_ms(ttl)).execute(conn).await
                })
                .map_err(db_error(""))?;
            }
        }
        Ok(())
    }

    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError> {
        match self.db.pool() {
            DbPool::Sqlite(_) => {
                let expires_at_ms: Option<i64> = leased!(self.db.sqlite_lease(), conn => {
                    sqlx::query_scalar(SQLITE_LEASE_EXPIRY).bind(replica).fetch_optional(conn).await
                })
                .map_err(db_error(""))?;
                let left = expires_at_ms.map(|expires| expires.saturating_sub(to_ms(SystemTime::now())));
                Ok(left.filter(|&ms| ms > 0).map(|ms| Duration::from_millis(ms.unsigned_abs())))
            }
            DbPool::Postgres(_) => {
                let left: Option<i64> = leased!(self.db.postgres_lease(), conn => {
                    sqlx::query_scalar(PG_LEASE_REMAINING).bind(replica).fetch_optional(conn).await
                })
                .map_err(db_error(""))?;
                Ok(left.filter(|&us| us > 0).map(|us| Duration::from_micros(us.unsigned_abs())))
            }
        }
    }

    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError> {
        match self.db.pool() {
            DbPool::Sqlite(_) => {
                let mut conn = self.db.sqlite_writer().await.map_err(db_error(""))?;
                sqlx::query(RELEASE_LEASE).bind(replica).execute(&mut *conn).await.map_err(db_error(""))?;
            }
            DbPool::Postgres(_) => {
                leased!(self.db.postgres_lease(), conn => {
                    sqlx::query(RELEASE_LEASE).bind(replica).execute(conn).await
                })
                .map_err(db_error(""))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use frontdesk_runtime::{conformance::sample, Checkpointer, RunStatus};

    use super::prefix_end;
    use crate::{Database, StoreOptions};

    /// A point read borrows the write connection only while nothing holds it and no put waits,
    /// and never waits for it: with the writer held by a write, the read goes to the pool and
    /// answers at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn point_reads_borrow_only_an_idle_writer() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("frontdesk.db").display());
        let db = Database::connect(&url, StoreOptions { max_connections: 4, checkpoint_retention: 2 }).await.unwrap();
        let store = db.checkpointer();
        store.put(&sample("t", 1, RunStatus::Running)).await.unwrap();
        assert!(db.writes.is_idle(), "the put was answered");
        assert!(db.idle_sqlite_writer().is_some(), "nothing holds or waits for the writer");
        assert_eq!(store.head("t").await.unwrap().unwrap().checkpoint.version, 1);

        let held = db.sqlite_writer().await.unwrap();
        assert!(db.idle_sqlite_writer().is_none(), "the writer is held");
        let put = tokio::spawn({
            let store = db.checkpointer();
            async move { store.put(&sample("t", 2, RunStatus::Running)).await }
        });
        tokio::time::timeout(Duration::from_secs(5), async {
            while db.writes.is_idle() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the put is counted as waiting");
        let read = tokio::time::timeout(Duration::from_secs(5), store.head("t"))
            .await
            .expect("a read does not wait for a held writer")
            .unwrap()
            .unwrap();
        assert_eq!(read.checkpoint.version, 1, "the held writer has committed nothing newer");
        drop(held);
        put.await.unwrap().unwrap();
        assert!(db.writes.is_idle(), "the answered put is no longer counted");
        assert!(db.idle_sqlite_writer().is_some());
        assert_eq!(store.head("t").await.unwrap().unwrap().checkpoint.version, 2);
        db.close().await;
    }

    /// A caller that stops waiting for its put is no longer counted, so reads go back to the
    /// idle writer.
    #[tokio::test]
    async fn a_dropped_put_is_no_longer_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("frontdesk.db").display());
        let db = Database::connect(&url, StoreOptions { max_connections: 2, checkpoint_retention: 1 }).await.unwrap();
        let held = db.sqlite_writer().await.unwrap();
        let store = db.checkpointer();
        let checkpoint = sample("t", 1, RunStatus::Running);
        let put = tokio::time::timeout(Duration::from_millis(50), store.put(&checkpoint));
        assert!(put.await.is_err(), "the writer is held");
        assert!(db.writes.is_idle());
        drop(held);
        db.close().await;
    }

    #[test]
    fn prefix_ranges() {
        assert_eq!(prefix_end("C001:").as_deref(), Some("C001;"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        assert_eq!(prefix_end(""), None);
    }
}
