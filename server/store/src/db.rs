use std::{
    fmt,
    str::FromStr,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};

use frontdesk_runtime::CheckpointError;
use sqlx::{
    migrate::{MigrateError, Migrator},
    pool::PoolConnection,
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous},
    Connection, Postgres, Sqlite, SqliteConnection,
};
use tokio::sync::{Mutex, MutexGuard};

use crate::{
    checkpointer::Write,
    error::redact,
    group_commit::{WriteBatchStats, WriteObserver, WriteQueue},
    reuse::{Lease, Reuse},
    SqlCheckpointer, StoreError,
};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// How long [`Database::connect`] keeps retrying a refused connection, and how long any
/// operation waits for a pooled connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a SQLite statement waits for another process's write lock.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How often opening or migrating a SQLite file is tried again (see `again_after_a_moment`).
const SQLITE_RETRIES: u32 = 5;

/// Write transactions between two background WAL checkpoints of a SQLite file: a few hundred
/// WAL pages, far under the writer's own threshold. At every 1,000, a steady moderate load
/// (10,000 conversations at 473 turns/s, about one write per transaction) still reached that
/// threshold every few seconds, because a passive checkpoint racing the writes never finishes
/// the WAL, so the writer's own checkpoint stalled commits for up to a quarter of a second (p99
/// 32-46 ms added per turn against 7-11 ms at every 100). At saturation the two are alike.
const WAL_CHECKPOINT_EVERY: u32 = 100;
/// WAL pages past which the writer restarts the WAL before its next write (about 16 MB).
/// Passive checkpoints alone never restart it while writes keep coming, and at every 100 writes
/// one is running most of the time, so the writer's own checkpoint finds the checkpoint lock
/// taken and gives up: the WAL grew to 40-80 MB in a 4,000-turn W1 run.
const WAL_RESTART_PAGES: i64 = 4000;
/// The write connection's own automatic checkpoint, in WAL pages: a backstop above
/// [`WAL_RESTART_PAGES`] for when the background checkpoints fall behind (see [`WalCheckpoints`]).
const WRITER_AUTOCHECKPOINT_PAGES: &str = "10000";
/// The size, in bytes, the write connection cuts the WAL file back to when the WAL restarts
/// (32 MiB, twice what [`WAL_RESTART_PAGES`] takes): a file that grew while a checkpoint was
/// slow (a busy disk) does not keep that size for the life of the process.
const WAL_FILE_LIMIT_BYTES: &str = "33554432";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Pool size (at least 1). A SQLite file has one more connection, its writer; a
    /// `sqlite::memory:` database always uses exactly one connection.
    pub max_connections: u32,
    /// Checkpoints kept per thread, newest first (at least 1; the newest is never pruned).
    pub checkpoint_retention: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self { max_connections: 8, checkpoint_retention: 1 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DbKind {
    Sqlite,
    Postgres,
}

impl DbKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
        }
    }
}

impl fmt::Display for DbKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The connection pool of a [`Database`].
#[derive(Debug, Clone)]
pub enum DbPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A migrated database behind a connection pool. Cheap to clone; clones share the pool.
#[derive(Debug, Clone)]
pub struct Database {
    conns: Connections,
    options: StoreOptions,
    /// Where checkpoint writes wait to be committed together (see [`crate::group_commit`]).
    pub(crate) writes: Arc<WriteQueue>,
}

/// A [`Database`]'s connection pool at one moment. On a SQLite file the write connection is
/// not among them: it is a connection of its own, and its queue is [`WriteBatchStats::waiting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// `database.max_connections`.
    pub max: u32,
    /// Connections open now.
    pub open: u32,
    /// Open connections no operation holds (kept for the next one included).
    pub idle: u32,
    /// Operations waiting for a connection, all of them taken.
    pub waiting: usize,
    /// The last operation failed (PostgreSQL): connections are checked before use until one
    /// succeeds. It stays set while the database is down.
    pub failing: bool,
}

/// What a [`Database`]'s operations run on. The checkpoint write queue's task holds a clone of
/// its own: it must not hold the queue, whose last handle dropped ends the task.
#[derive(Debug, Clone)]
pub(crate) struct Connections {
    pool: DbPool,
    /// How this process writes to SQLite (`None` on PostgreSQL, whose row locks serialise
    /// writers). Write transactions queue here instead of in SQLite's busy handler, which
    /// sleeps in steps of milliseconds; other processes are still handled by the busy timeout.
    sqlite_writer: Option<Arc<SqliteWriter>>,
    /// Pool connections kept between operations, so they skip sqlx's ping on release.
    reuse: Arc<Reused>,
}

/// The [`Reuse`] of the pool's kind.
#[derive(Debug)]
enum Reused {
    Sqlite(Reuse<Sqlite>),
    Postgres(Reuse<Postgres>),
}

/// The one place SQLite write transactions run.
#[derive(Debug)]
struct SqliteWriter {
    how: WriterConn,
    /// Set while a write transaction given as raw SQL runs on the connection (see
    /// [`SqliteWriteGuard::transaction_started`]). sqlx runs such a batch's statements on its
    /// worker thread and stops after the statement whose result nobody waits for any more, so a
    /// caller dropped between `BEGIN` and `COMMIT` (a cancelled request) leaves the connection
    /// inside the transaction, holding the file's write lock. Found set, the next writer rolls
    /// that transaction back first; otherwise its own writes would run, and be acknowledged,
    /// inside it and be rolled back with it.
    unfinished: AtomicBool,
}

#[derive(Debug)]
enum WriterConn {
    /// A file database: a connection of its own, outside the pool. Writes skip the pool's
    /// hand-off, and the writer's page cache stays valid between writes because nothing else
    /// in this process writes (a pooled connection's cache is dropped whenever another
    /// connection has written since its last use). `conn` is `None` once closed.
    Dedicated { conn: Mutex<Option<SqliteConnection>>, wal: WalCheckpoints },
    /// `sqlite::memory:`: the database exists only on the pool's single connection, so
    /// writes take that one, in turn.
    Pooled(Mutex<()>),
}

/// WAL checkpoints of a SQLite file, mostly off the write path. SQLite's automatic checkpoint
/// runs in the commit that crosses its threshold (1,000 pages) and syncs the database file
/// there, stalling that write, and every write queued behind it, for milliseconds. Here every
/// [`WAL_CHECKPOINT_EVERY`]th write transaction starts a passive checkpoint on a pool
/// connection instead, which copies the WAL into the database beside the writer without
/// blocking it. Racing the writes, such a checkpoint never copies the whole WAL, so the WAL
/// never restarts, and the writer's own checkpoint finds the checkpoint lock taken by the next
/// one and gives up. So once one finds [`WAL_RESTART_PAGES`] in the WAL, the writer itself
/// checkpoints between two write transactions (see [`Connections::sqlite_writer`]), when no
/// background one is running: with no write racing it, it copies the rest (the pages of the
/// last hundred writes or so) and syncs, and the next write starts the WAL from its
/// beginning. Writes queued meanwhile wait about a millisecond. The writer's automatic
/// checkpoint stays at ten times SQLite's threshold ([`WRITER_AUTOCHECKPOINT_PAGES`]) as a
/// backstop. Durability is unchanged: a commit is in the WAL either way, and a checkpoint only
/// moves it.
#[derive(Debug, Default)]
struct WalCheckpoints {
    writes: AtomicU32,
    /// One checkpoint at a time: a slow one is not queued behind.
    running: Arc<AtomicBool>,
    /// Set by a background checkpoint that found the WAL at [`WAL_RESTART_PAGES`]; taken by
    /// the writer.
    restart: Arc<AtomicBool>,
}

impl WalCheckpoints {
    /// Counts a write transaction; starts a checkpoint every [`WAL_CHECKPOINT_EVERY`]th.
    fn count_write(&self, pool: &SqlitePool) {
        let n = self.writes.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        if !n.is_multiple_of(WAL_CHECKPOINT_EVERY) || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.running.store(false, Ordering::Release);
            return;
        };
        let (pool, running, restart) = (pool.clone(), self.running.clone(), self.restart.clone());
        runtime.spawn(async move {
            // Dropped unfinished too, when the runtime shuts down under it.
            let _running = ClearOnDrop(&running);
            let started = std::time::Instant::now();
            match passive_checkpoint(&pool).await {
                Ok((_, wal_pages, copied)) => {
                    let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    tracing::debug!(wal_pages, copied, took_us, "sqlite wal checkpoint");
                    if wal_pages >= WAL_RESTART_PAGES {
                        restart.store(true, Ordering::Release);
                    }
                }
                Err(e) if pool.is_closed() => tracing::debug!(error = %e, "sqlite wal checkpoint after close"),
                Err(e) => tracing::warn!(error = %e, "sqlite wal checkpoint failed; the next one retries"),
            }
        });
    }

    /// On the writer, between two write transactions: when a background checkpoint asked for
    /// it and none is running, copies the rest of the WAL, so that the next write starts the WAL
    /// from its beginning. Passive too: it waits for no reader, and one that still needs old
    /// pages only keeps the WAL from restarting this time (the next background checkpoint asks
    /// again). A failure is logged the same way.
    async fn restart_if_asked(&self, writer: &mut SqliteConnection) {
        if !self.restart.load(Ordering::Acquire) || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        // The caller may be cancelled while this runs (a request whose client went away):
        // `running` must still be cleared, or no background checkpoint would start again.
        let _running = ClearOnDrop(&self.running);
        self.restart.store(false, Ordering::Release);
        let started = std::time::Instant::now();
        match passive_checkpoint(writer).await {
            Ok((busy, wal_pages, copied)) => {
                let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tracing::debug!(busy, wal_pages, copied, took_us, "sqlite wal checkpoint on the writer")
            }
            Err(e) => tracing::warn!(error = %e, "sqlite wal checkpoint on the writer failed; a later one retries"),
        }
    }
}

/// One `PRAGMA wal_checkpoint(PASSIVE)`: it copies what no reader still needs and takes no lock
/// a writer waits for. Returns SQLite's (busy, pages in the WAL, pages copied).
async fn passive_checkpoint<'c>(
    on: impl sqlx::Executor<'c, Database = Sqlite>,
) -> Result<(i64, i64, i64), sqlx::Error> {
    sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(on).await
}

/// Clears its flag when dropped, whether the holder finished or was cancelled.
struct ClearOnDrop<'a>(&'a AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Exclusive use of the SQLite write connection; dereferences to it. Callers open and end
/// their own transactions on it and roll back on error (see [`rollback_quietly`]): the next
/// writer must find the connection outside any transaction. A transaction given as raw SQL
/// (`BEGIN IMMEDIATE; ...; COMMIT`, or its statements one by one) is bracketed by
/// [`transaction_started`](Self::transaction_started) and
/// [`transaction_ended`](Self::transaction_ended), so that one whose caller went away in the
/// middle is rolled back before the next writer gets the connection. (sqlx's own
/// `Transaction` needs neither: dropped, it queues its rollback.)
pub(crate) struct SqliteWriteGuard<'a> {
    conn: WriteConn<'a>,
    unfinished: &'a AtomicBool,
}

enum WriteConn<'a> {
    Dedicated(MutexGuard<'a, Option<SqliteConnection>>),
    Pooled(#[allow(dead_code)] MutexGuard<'a, ()>, PoolConnection<Sqlite>),
}

impl SqliteWriteGuard<'_> {
    /// A raw-SQL transaction is about to begin on the connection.
    pub(crate) fn transaction_started(&self) {
        self.unfinished.store(true, Ordering::Release);
    }

    /// The raw-SQL transaction begun after [`transaction_started`](Self::transaction_started)
    /// committed or was rolled back.
    pub(crate) fn transaction_ended(&self) {
        self.unfinished.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for SqliteWriteGuard<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        match &self.conn {
            // Constructed only while the connection is open (see `Database::sqlite_writer`).
            WriteConn::Dedicated(conn) => conn.as_ref().expect("writer is open"),
            WriteConn::Pooled(_, conn) => conn,
        }
    }
}

impl std::ops::DerefMut for SqliteWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match &mut self.conn {
            WriteConn::Dedicated(conn) => conn.as_mut().expect("writer is open"),
            WriteConn::Pooled(_, conn) => conn,
        }
    }
}

/// Ends whatever transaction a failed write left open on the writer. Errors are ignored: the
/// usual one is "no transaction is active" (the failure happened before `BEGIN` took effect,
/// or SQLite already rolled back).
pub(crate) async fn rollback_quietly(conn: &mut SqliteConnection) {
    if let Err(e) = sqlx::Executor::execute(conn, "ROLLBACK").await {
        tracing::debug!(error = %e, "rollback after a failed sqlite write");
    }
}

impl Database {
    /// Opens and migrates the database at `url`:
    ///
    /// * `sqlite://path/to/file.db` (also `sqlite:path`): created with its directory when
    ///   missing; WAL journal, `synchronous=NORMAL`, a busy timeout, foreign keys on.
    /// * `sqlite::memory:`: a private in-memory database on a single connection (tests).
    /// * `postgres://user:password@host:port/db` (also `postgresql://`).
    ///
    /// A database that cannot be reached within [`DEFAULT_ACQUIRE_TIMEOUT`] is an error.
    pub async fn connect(url: &str, options: StoreOptions) -> Result<Database, StoreError> {
        Self::connect_with_timeout(url, options, DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// [`Database::connect`] with the time to wait for a connection (at connect, how long a
    /// refused connection is retried; afterwards, how long an operation waits for the pool).
    pub async fn connect_with_timeout(
        url: &str,
        options: StoreOptions,
        acquire_timeout: Duration,
    ) -> Result<Database, StoreError> {
        let options = StoreOptions {
            max_connections: options.max_connections.max(1),
            checkpoint_retention: options.checkpoint_retention.max(1),
        };
        let scheme = url.split(':').next().unwrap_or_default().to_ascii_lowercase();
        let (pool, sqlite_writer) = match scheme.as_str() {
            "sqlite" => {
                let (pool, writer) = connect_sqlite(url, options, acquire_timeout).await?;
                let how = match writer {
                    Some(conn) => {
                        WriterConn::Dedicated { conn: Mutex::new(Some(conn)), wal: WalCheckpoints::default() }
                    }
                    None => WriterConn::Pooled(Mutex::new(())),
                };
                (DbPool::Sqlite(pool), Some(Arc::new(SqliteWriter { how, unfinished: AtomicBool::new(false) })))
            }
            "postgres" | "postgresql" => {
                (DbPool::Postgres(connect_postgres(url, options, acquire_timeout).await?), None)
            }
            _ => return Err(StoreError::UnsupportedUrl { url: redact(url) }),
        };
        let reuse = Arc::new(match &pool {
            DbPool::Sqlite(pool) => Reused::Sqlite(Reuse::new(pool.clone())),
            // A server can go away and come back; a SQLite file cannot.
            DbPool::Postgres(pool) => Reused::Postgres(Reuse::new(pool.clone()).check_connections()),
        });
        let db = Database { conns: Connections { pool, sqlite_writer, reuse }, options, writes: Arc::default() };
        if let Err(e) = db.migrate().await {
            db.close().await;
            return Err(e);
        }
        Ok(db)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let kind = self.kind();
        match &self.conns.pool {
            DbPool::Sqlite(pool) => {
                // sqlx takes no lock around SQLite migrations (PostgreSQL's are under an advisory
                // lock): two processes starting on one file at once both find a migration to
                // apply, and the one that loses the race for the write lock fails ("table ...
                // already exists"). Run again, the migrations find it applied.
                let lost_a_race =
                    |e: &MigrateError| matches!(e, MigrateError::Execute(_) | MigrateError::ExecuteMigration(..));
                again_after_a_moment(|| SQLITE_MIGRATIONS.run(pool), lost_a_race).await
            }
            DbPool::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await,
        }
        .map_err(|source| StoreError::Migrate { kind, source })
    }

    pub fn kind(&self) -> DbKind {
        self.conns.kind()
    }

    /// The options in effect (after clamping to their minimums).
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    pub fn pool(&self) -> &DbPool {
        &self.conns.pool
    }

    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.conns.pool {
            DbPool::Sqlite(pool) => Some(pool),
            DbPool::Postgres(_) => None,
        }
    }

    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.conns.pool {
            DbPool::Postgres(pool) => Some(pool),
            DbPool::Sqlite(_) => None,
        }
    }

    /// A checkpointer on this database, keeping `options().checkpoint_retention` checkpoints.
    pub fn checkpointer(&self) -> SqlCheckpointer {
        SqlCheckpointer::new(self.clone())
    }

    /// How checkpoint writes have been committed so far (see [`WriteBatchStats`]).
    pub fn write_batches(&self) -> WriteBatchStats {
        self.writes.stats()
    }

    /// Tells `observer` how every later checkpoint write ends (all clones' writes). The first
    /// observer set stays: `Err` gives back one set after it.
    pub fn set_write_observer(&self, observer: Arc<dyn WriteObserver>) -> Result<(), Arc<dyn WriteObserver>> {
        self.writes.set_observer(observer)
    }

    /// The connection pool now (see [`PoolStats`]).
    pub fn pool_stats(&self) -> PoolStats {
        let (max, open, pool_idle) = match &self.conns.pool {
            DbPool::Sqlite(pool) => (pool.options().get_max_connections(), pool.size(), pool.num_idle()),
            DbPool::Postgres(pool) => (pool.options().get_max_connections(), pool.size(), pool.num_idle()),
        };
        let ((kept, waiting), failing) = match self.conns.reuse.as_ref() {
            Reused::Sqlite(reuse) => (reuse.idle_and_waiting(), reuse.is_suspect()),
            Reused::Postgres(reuse) => (reuse.idle_and_waiting(), reuse.is_suspect()),
        };
        let idle = u32::try_from(pool_idle.saturating_add(kept)).unwrap_or(u32::MAX).min(open);
        PoolStats { max, open, idle, waiting, failing }
    }

    /// Commits one checkpoint write together with whatever other writes of this database are
    /// waiting (see [`crate::group_commit`]); answers once the transaction holding it ended.
    pub(crate) async fn put_checkpoint(&self, write: Write) -> Result<(), CheckpointError> {
        self.writes.put(&self.conns, write).await
    }

    /// Closes every connection (shared by all clones) and waits for them. Later operations
    /// fail with [`StoreError::Query`] / `CheckpointError::Unavailable`.
    pub async fn close(&self) {
        if let Some(SqliteWriter { how: WriterConn::Dedicated { conn, .. }, .. }) = self.conns.sqlite_writer.as_deref()
        {
            if let Some(conn) = conn.lock().await.take() {
                if let Err(e) = conn.close().await {
                    tracing::warn!(error = %e, "closing the sqlite writer connection");
                }
            }
        }
        match self.conns.reuse.as_ref() {
            Reused::Sqlite(reuse) => reuse.release_all(),
            Reused::Postgres(reuse) => reuse.release_all(),
        }
        match &self.conns.pool {
            DbPool::Sqlite(pool) => pool.close().await,
            DbPool::Postgres(pool) => pool.close().await,
        }
    }

    /// See [`Connections::sqlite_lease`].
    pub(crate) async fn sqlite_lease(&self) -> Result<Lease<'_, Sqlite>, sqlx::Error> {
        self.conns.sqlite_lease().await
    }

    /// See [`Connections::postgres_lease`].
    pub(crate) async fn postgres_lease(&self) -> Result<Lease<'_, Postgres>, sqlx::Error> {
        self.conns.postgres_lease().await
    }

    /// See [`Connections::sqlite_writer`].
    pub(crate) async fn sqlite_writer(&self) -> Result<SqliteWriteGuard<'_>, sqlx::Error> {
        self.conns.sqlite_writer().await
    }

    /// The SQLite write connection, for one short read, when nothing waits for it: no put is
    /// queued or committing and nothing holds the connection. A read there finds the pages it
    /// needs in that connection's cache, which this process's own writes keep valid; a pool
    /// connection drops its whole cache whenever another connection has written since its last
    /// read, so on a database that is written between reads (every turn writes) it reads the
    /// pages from the file again. Under load a put is nearly always waiting, and reads stay on
    /// the pool, where they run beside the writes. `None` on PostgreSQL and `sqlite::memory:`.
    pub(crate) fn idle_sqlite_writer(&self) -> Option<SqliteWriteGuard<'_>> {
        if !self.writes.is_idle() {
            return None;
        }
        self.conns.idle_sqlite_writer()
    }
}

impl Connections {
    pub(crate) fn kind(&self) -> DbKind {
        match self.pool {
            DbPool::Sqlite(_) => DbKind::Sqlite,
            DbPool::Postgres(_) => DbKind::Postgres,
        }
    }

    pub(crate) fn pool(&self) -> &DbPool {
        &self.pool
    }

    /// A SQLite pool connection for one operation (see [`crate::reuse`]).
    ///
    /// # Panics
    /// On a PostgreSQL database (a programming error: callers match on the pool first).
    pub(crate) async fn sqlite_lease(&self) -> Result<Lease<'_, Sqlite>, sqlx::Error> {
        match self.reuse.as_ref() {
            Reused::Sqlite(reuse) => reuse.lease().await,
            Reused::Postgres(_) => panic!("sqlite_lease called on a postgres database"),
        }
    }

    /// A PostgreSQL pool connection for one operation (see [`crate::reuse`]).
    ///
    /// # Panics
    /// On a SQLite database (a programming error: callers match on the pool first).
    pub(crate) async fn postgres_lease(&self) -> Result<Lease<'_, Postgres>, sqlx::Error> {
        match self.reuse.as_ref() {
            Reused::Postgres(reuse) => reuse.lease().await,
            Reused::Sqlite(_) => panic!("postgres_lease called on a sqlite database"),
        }
    }

    /// The dedicated SQLite write connection if nothing holds or waits for it (tokio's mutex
    /// is fair, so this never overtakes a waiting writer), without counting a write. `None` on
    /// PostgreSQL, on `sqlite::memory:`, and once closed.
    pub(crate) fn idle_sqlite_writer(&self) -> Option<SqliteWriteGuard<'_>> {
        let Some(SqliteWriter { how: WriterConn::Dedicated { conn, .. }, unfinished }) = self.sqlite_writer.as_deref()
        else {
            return None;
        };
        // A transaction left open is for the next writer to end; a read must not see into it.
        let conn = conn.try_lock().ok().filter(|conn| conn.is_some() && !unfinished.load(Ordering::Acquire))?;
        Some(SqliteWriteGuard { conn: WriteConn::Dedicated(conn), unfinished })
    }

    /// The SQLite write connection, once the writes queued before this one are done.
    ///
    /// # Panics
    /// On a PostgreSQL database (a programming error: callers match on the pool first).
    pub(crate) async fn sqlite_writer(&self) -> Result<SqliteWriteGuard<'_>, sqlx::Error> {
        let (DbPool::Sqlite(pool), Some(writer)) = (&self.pool, self.sqlite_writer.as_deref()) else {
            panic!("sqlite_writer called on a {} database", self.kind());
        };
        let SqliteWriter { how, unfinished } = writer;
        let mut guard = match how {
            WriterConn::Dedicated { conn, wal } => {
                let mut conn = conn.lock().await;
                let Some(writer) = conn.as_mut() else {
                    return Err(sqlx::Error::PoolClosed);
                };
                end_unfinished(writer, unfinished).await;
                wal.restart_if_asked(writer).await;
                wal.count_write(pool);
                return Ok(SqliteWriteGuard { conn: WriteConn::Dedicated(conn), unfinished });
            }
            WriterConn::Pooled(lock) => {
                let turn = lock.lock().await;
                SqliteWriteGuard { conn: WriteConn::Pooled(turn, pool.acquire().await?), unfinished }
            }
        };
        end_unfinished(&mut guard, unfinished).await;
        Ok(guard)
    }
}

/// Rolls back the raw-SQL transaction a cancelled writer left open, if any (see
/// [`SqliteWriter::unfinished`]). The flag is cleared only after the rollback, so a writer
/// cancelled in the middle of this leaves it for the next one.
async fn end_unfinished(conn: &mut SqliteConnection, unfinished: &AtomicBool) {
    if unfinished.load(Ordering::Acquire) {
        tracing::warn!("rolling back a sqlite write transaction whose caller went away before it ended");
        rollback_quietly(conn).await;
        unfinished.store(false, Ordering::Release);
    }
}

/// The read pool, and for a file the dedicated write connection.
async fn connect_sqlite(
    url: &str,
    options: StoreOptions,
    acquire_timeout: Duration,
) -> Result<(SqlitePool, Option<SqliteConnection>), StoreError> {
    let invalid = |source| StoreError::InvalidUrl { kind: DbKind::Sqlite, url: redact(url), source };
    let memory = url.contains(":memory:") || url.contains("mode=memory");
    let mut connect =
        SqliteConnectOptions::from_str(url).map_err(invalid)?.foreign_keys(true).busy_timeout(SQLITE_BUSY_TIMEOUT);
    let mut pool = SqlitePoolOptions::new().acquire_timeout(acquire_timeout).test_before_acquire(false);
    if memory {
        // The database lives as long as a connection to it: keep exactly one, forever.
        pool = pool.max_connections(1).min_connections(1).idle_timeout(None).max_lifetime(None);
    } else {
        connect =
            connect.create_if_missing(true).journal_mode(SqliteJournalMode::Wal).synchronous(SqliteSynchronous::Normal);
        // SQLite creates the file but not its directory; say which directory is missing rather
        // than pass on SQLite's "unable to open database file".
        if let Some(dir) = connect.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(StoreError::MissingDir { path: dir.to_owned() });
            }
        }
        pool = pool.max_connections(options.max_connections);
    }
    let failed = |source| StoreError::Connect { kind: DbKind::Sqlite, url: redact(url), source };
    // The writer connects first: it creates the file and switches it to WAL before the pool's
    // connections open it.
    let writer = if memory {
        None
    } else {
        // Most WAL checkpoints run beside it (`WalCheckpoints`). Pool connections keep the
        // default: of writes they only run the migrations at start-up.
        let writer = connect
            .clone()
            .pragma("wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES)
            .pragma("journal_size_limit", WAL_FILE_LIMIT_BYTES);
        Some(again_after_a_moment(|| SqliteConnection::connect_with(&writer), is_busy).await.map_err(failed)?)
    };
    let pool = again_after_a_moment(|| pool.clone().connect_with(connect.clone()), is_busy).await.map_err(failed)?;
    Ok((pool, writer))
}

/// SQLITE_BUSY. Opening a new file switches it to WAL, which takes an exclusive lock that SQLite
/// does not wait for, so processes opening one new file together (replicas starting at once)
/// can find it held for the moment that takes.
fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.code().as_deref() == Some("5"))
}

/// Runs `op` again, after a growing moment, while it fails in a way `passing` says goes by
/// (up to [`SQLITE_RETRIES`] times): what processes starting together on one SQLite file run
/// into (see `is_busy` and `Database::migrate`).
async fn again_after_a_moment<T, E, F>(mut op: impl FnMut() -> F, passing: impl Fn(&E) -> bool) -> Result<T, E>
where
    F: std::future::Future<Output = Result<T, E>>,
{
    let mut retries: u32 = 0;
    loop {
        match op().await {
            Err(e) if passing(&e) && retries < SQLITE_RETRIES => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(50 * u64::from(retries))).await;
            }
            done => return done,
        }
    }
}

/// Run on every PostgreSQL connection when it opens. The writes assume READ COMMITTED: a put
/// that waited for a concurrent winner's row lock, or its new thread's key, re-reads the row and
/// loses its compare-and-set with a conflict. Under REPEATABLE READ or SERIALIZABLE it would
/// fail with a serialization error instead, reported as the store being unavailable; a server,
/// database or role default (or the URL's `options`) may set either. A `SET` rather than a
/// startup option (`PgConnectOptions::options`): poolers such as PgBouncer refuse startup
/// options they do not track, and this costs one round trip per connection opened.
const PG_SESSION: &str = "SET default_transaction_isolation = 'read committed'";

async fn connect_postgres(url: &str, options: StoreOptions, acquire_timeout: Duration) -> Result<PgPool, StoreError> {
    let connect = PgConnectOptions::from_str(url).map_err(|source| StoreError::InvalidUrl {
        kind: DbKind::Postgres,
        url: redact(url),
        source,
    })?;
    PgPoolOptions::new()
        .max_connections(options.max_connections)
        .acquire_timeout(acquire_timeout)
        // Skips a round trip per acquire on the hot path. sqlx still pings every connection
        // when it goes back to the pool and discards the broken ones.
        .test_before_acquire(false)
        .after_connect(|conn, _| Box::pin(async move { sqlx::Executor::execute(conn, PG_SESSION).await.map(drop) }))
        .connect_with(connect)
        .await
        .map_err(|source| StoreError::Connect { kind: DbKind::Postgres, url: redact(url), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer-side checkpoint whose caller is cancelled still leaves `running` clear, so
    /// background checkpoints go on starting.
    #[tokio::test]
    async fn a_cancelled_writer_checkpoint_does_not_stop_the_background_ones() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("wal.db").display());
        let options = SqliteConnectOptions::from_str(&url).unwrap().create_if_missing(true);
        let mut writer = SqliteConnection::connect_with(&options.journal_mode(SqliteJournalMode::Wal)).await.unwrap();
        sqlx::query("CREATE TABLE t (b BLOB)").execute(&mut writer).await.unwrap();
        let wal = WalCheckpoints::default();
        let mut cancelled = 0;
        for _ in 0..20 {
            // A megabyte in the WAL, so the checkpoint copies pages and syncs: its answer cannot
            // come back while it is first polled, unless that poll is preempted in between.
            sqlx::query("INSERT INTO t VALUES (randomblob(1000000))").execute(&mut writer).await.unwrap();
            wal.restart.store(true, Ordering::Release);
            // Polled once (it sends the checkpoint to the connection's worker thread), then
            // dropped while it waits for the answer.
            if tokio::time::timeout(Duration::ZERO, wal.restart_if_asked(&mut writer)).await.is_err() {
                cancelled += 1;
            }
            assert!(!wal.running.load(Ordering::Acquire), "running is clear after the checkpoint, cancelled or not");
            assert!(!wal.restart.load(Ordering::Acquire), "the request was taken; the next passive one asks again");
        }
        assert!(cancelled > 0, "no checkpoint was still waiting for its answer when dropped");
        sqlx::Connection::close(writer).await.unwrap();
    }
}
