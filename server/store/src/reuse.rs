//! Pooled connections kept checked out between operations that completed.
//!
//! sqlx tests every connection that goes back to its pool with a ping: one more round trip per
//! operation, to the server on PostgreSQL and to the connection's worker thread on SQLite. On
//! the hot path (a checkpoint put, a thread erase) that round trip competes with the next
//! operation for the server and the CPU. A connection whose operation completed needs no test:
//! sqlx makes the next statement on a connection first read whatever the last one left unread,
//! exactly what the ping does. So a [`Lease`] whose operation succeeded puts its connection in
//! [`Reuse`], and the next lease takes it from there; a lease whose operation failed, or whose
//! future was dropped half-way, hands its connection back to sqlx, whose ping sorts it out.
//!
//! A kept connection bypasses the pool's queue, so it is kept only while no lease is waiting
//! in that queue; otherwise it goes back to the pool, which hands it to the first waiter (else
//! the waiters would starve while the kept connections go round). Connections do not stay out
//! of the pool for good either: one that has been idle here for [`MAX_IDLE`] or out of the pool
//! for [`MAX_OUT`] goes back, so the pool's idle timeout and maximum lifetime still apply. At
//! most `max_connections - 1` are out at once through here, so code that uses the pool directly
//! (migrations, WAL checkpoints, tests, benchmarks) can always get a connection; with a single
//! connection (`sqlite::memory:`) nothing is kept.
//!
//! A server database can go away and come back (a restart, a failover). The first operation
//! that fails marks the database *suspect* ([`Reuse::check_connections`] enables this, for
//! PostgreSQL): until an operation succeeds again, nothing is kept, every connection is pinged
//! before it is leased (a dead one is closed and the next tried), and a lease waits at most
//! [`SUSPECT_ACQUIRE_TIMEOUT`] for a connection. So while the database is down an operation
//! fails within about a second, rather than after the pool's whole acquire timeout spent
//! retrying refused connections, and once it is back the first operation gets a live
//! connection, rather than one of the connections the outage broke (`test_before_acquire` is
//! off, so sqlx would hand those out unchecked, each failing one more operation).

use std::{
    ops::{Deref, DerefMut},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Mutex,
    },
    time::{Duration, Instant},
};

use sqlx::{pool::PoolConnection, Pool};

/// How long a connection may wait here for its next lease before it goes back to the pool.
const MAX_IDLE: Duration = Duration::from_secs(30);
/// How long a connection may be out of the pool in all before it goes back.
const MAX_OUT: Duration = Duration::from_secs(300);
/// How long a lease waits for a connection (pinging included) while the database is suspect.
/// Callers are told to retry after a second (`RetryInfo` of `STORE_UNAVAILABLE`).
pub(crate) const SUSPECT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(1);

struct Kept<DB: sqlx::Database> {
    conn: PoolConnection<DB>,
    /// When it was taken from the pool.
    out_since: Instant,
    /// When its last lease ended.
    idle_since: Instant,
}

pub(crate) struct Reuse<DB: sqlx::Database> {
    pool: Pool<DB>,
    kept: Mutex<Vec<Kept<DB>>>,
    capacity: usize,
    /// Connections taken from the pool through here and not given back (leased or kept).
    out: AtomicUsize,
    /// Leases waiting in the pool's queue.
    waiting: AtomicUsize,
    /// Whether failures mark the database suspect (see the module docs).
    check_connections: bool,
    /// Set by a failed operation or acquire; cleared by the next success.
    suspect: AtomicBool,
}

impl<DB: sqlx::Database> std::fmt::Debug for Reuse<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map_or(0, |kept| kept.len());
        f.debug_struct("Reuse").field("kept", &kept).field("capacity", &self.capacity).finish()
    }
}

impl<DB: sqlx::Database> Reuse<DB> {
    pub(crate) fn new(pool: Pool<DB>) -> Self {
        let max_connections = pool.options().get_max_connections();
        let capacity = usize::try_from(max_connections.saturating_sub(1)).unwrap_or(0);
        Self {
            pool,
            kept: Mutex::new(Vec::with_capacity(capacity)),
            capacity,
            out: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            check_connections: false,
            suspect: AtomicBool::new(false),
        }
    }

    /// Checks connections after a failure, for a database that can go away and come back
    /// (see the module docs).
    pub(crate) fn check_connections(mut self) -> Self {
        self.check_connections = true;
        self
    }

    /// Connections kept here for the next lease, and leases waiting in the pool's queue.
    pub(crate) fn idle_and_waiting(&self) -> (usize, usize) {
        let kept = self.kept.lock().map_or(0, |kept| kept.len());
        (kept, self.waiting.load(Ordering::Relaxed))
    }

    /// Whether the last operation or acquire failed (only with [`Reuse::check_connections`]).
    pub(crate) fn is_suspect(&self) -> bool {
        self.suspect.load(Ordering::Acquire)
    }

    fn set_suspect(&self, suspect: bool) {
        if self.check_connections && self.suspect.swap(suspect, Ordering::AcqRel) != suspect {
            if suspect {
                tracing::warn!("a database operation failed; checking connections until one succeeds");
            } else {
                tracing::info!("database operations succeed again");
            }
        }
    }

    /// A connection for one operation: the most recently used kept one, else one from the pool.
    pub(crate) async fn lease(&self) -> Result<Lease<'_, DB>, sqlx::Error> {
        if self.is_suspect() {
            return self.checked_lease().await;
        }
        let now = Instant::now();
        loop {
            let Some(kept) = self.kept.lock().expect("kept connections poisoned").pop() else { break };
            if now.duration_since(kept.idle_since) < MAX_IDLE {
                return Ok(Lease { reuse: self, conn: Some(kept.conn), out_since: kept.out_since });
            }
            // Outside the lock: sqlx pings it on a task of its own and pools it.
            self.give_back(kept.conn);
        }
        let waiting = Waiting::count(&self.waiting);
        let acquired = self.pool.acquire().await;
        drop(waiting);
        let conn = acquired.inspect_err(|_| self.set_suspect(true))?;
        self.out.fetch_add(1, Ordering::AcqRel);
        Ok(Lease { reuse: self, conn: Some(conn), out_since: now })
    }

    /// A lease while the database is suspect: a pinged connection within
    /// [`SUSPECT_ACQUIRE_TIMEOUT`], dead ones closed on the way, or `PoolTimedOut`.
    async fn checked_lease(&self) -> Result<Lease<'_, DB>, sqlx::Error> {
        // Kept connections may be dead as well: the pool pings each as it takes it back.
        self.release_all();
        let attempt = async {
            loop {
                let waiting = Waiting::count(&self.waiting);
                let acquired = self.pool.acquire().await;
                drop(waiting);
                let mut conn = acquired?;
                self.out.fetch_add(1, Ordering::AcqRel);
                let out_since = Instant::now();
                // A lease counted out and dropped (the timeout below) gives the connection back.
                let mut lease = Lease { reuse: self, conn: Some(conn), out_since };
                match sqlx::Connection::ping(&mut *lease).await {
                    Ok(()) => return Ok(lease),
                    Err(error) => {
                        tracing::debug!(%error, "closing a pooled connection that failed its ping");
                        conn = lease.conn.take().expect("lease is open");
                        self.out.fetch_sub(1, Ordering::AcqRel);
                        // Closed rather than pooled: the pool opens a new one for the next try.
                        conn.close_on_drop();
                        drop(conn);
                    }
                }
            }
        };
        match tokio::time::timeout(SUSPECT_ACQUIRE_TIMEOUT, attempt).await {
            Ok(Ok(lease)) => {
                self.set_suspect(false);
                Ok(lease)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(sqlx::Error::PoolTimedOut),
        }
    }

    /// Keeps the connection of a lease that succeeded, or gives it back to the pool.
    fn keep(&self, conn: PoolConnection<DB>, out_since: Instant) {
        let now = Instant::now();
        let give_back = self.pool.is_closed()
            || now.duration_since(out_since) >= MAX_OUT
            || self.waiting.load(Ordering::Acquire) > 0
            || self.out.load(Ordering::Acquire) > self.capacity;
        if !give_back {
            let mut kept = self.kept.lock().expect("kept connections poisoned");
            if kept.len() < self.capacity {
                kept.push(Kept { conn, out_since, idle_since: now });
                return;
            }
        }
        self.give_back(conn);
    }

    /// Returns a connection to the pool: sqlx pings it and queues it for the next waiter.
    fn give_back(&self, conn: PoolConnection<DB>) {
        self.out.fetch_sub(1, Ordering::AcqRel);
        drop(conn);
    }

    /// Hands every kept connection back to the pool (before the pool is closed).
    pub(crate) fn release_all(&self) {
        let kept = std::mem::take(&mut *self.kept.lock().expect("kept connections poisoned"));
        for kept in kept {
            self.give_back(kept.conn);
        }
    }
}

/// One caller counted in a count of waiting callers until it stops waiting, also when its
/// future is dropped while it waits: here a lease in the pool's queue, in
/// [`crate::group_commit`] a put waiting for its answer.
pub(crate) struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    pub(crate) fn count(waiting: &'a AtomicUsize) -> Self {
        waiting.fetch_add(1, Ordering::AcqRel);
        Waiting(waiting)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<DB: sqlx::Database> Drop for Reuse<DB> {
    fn drop(&mut self) {
        let kept = std::mem::take(self.kept.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()));
        // sqlx returns a dropped pool connection on a spawned task, which needs a runtime. After
        // the runtime is gone, close the connections here instead.
        if tokio::runtime::Handle::try_current().is_err() {
            for kept in kept {
                drop(kept.conn.detach());
            }
        }
    }
}

/// A connection on loan for one operation; dereferences to the connection. Call
/// [`Lease::settle`] with whether the operation succeeded; a lease dropped without it gives
/// its connection back to the pool, which tests it.
pub(crate) struct Lease<'a, DB: sqlx::Database> {
    reuse: &'a Reuse<DB>,
    conn: Option<PoolConnection<DB>>,
    out_since: Instant,
}

impl<DB: sqlx::Database> Lease<'_, DB> {
    /// Ends the lease: a connection whose operation succeeded is kept for the next lease.
    pub(crate) fn settle(mut self, succeeded: bool) {
        self.reuse.set_suspect(!succeeded);
        if let Some(conn) = self.conn.take() {
            if succeeded {
                self.reuse.keep(conn, self.out_since);
            } else {
                self.reuse.give_back(conn);
            }
        }
    }
}

/// A lease dropped unsettled (its future was dropped half-way) gives its connection back to
/// the pool, whose ping finds out what state it is in.
impl<DB: sqlx::Database> Drop for Lease<'_, DB> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.reuse.give_back(conn);
        }
    }
}

impl<DB: sqlx::Database> Deref for Lease<'_, DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        // `conn` is taken only by `settle`, which consumes the lease.
        self.conn.as_ref().expect("lease is open")
    }
}

impl<DB: sqlx::Database> DerefMut for Lease<'_, DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn.as_mut().expect("lease is open")
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{sqlite::SqlitePoolOptions, Sqlite, SqliteConnection};

    use super::*;

    async fn file_pool(max: u32) -> (Pool<Sqlite>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("reuse.db").display());
        (SqlitePoolOptions::new().max_connections(max).connect(&url).await.unwrap(), dir)
    }

    /// Which connection this is: SQLite's per-connection temp schema tells them apart.
    async fn mark(conn: &mut SqliteConnection, name: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE TEMP TABLE {name} (x)"))).execute(conn).await.unwrap();
    }

    async fn has_mark(conn: &mut SqliteConnection, name: &str) -> bool {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM temp.sqlite_master WHERE name = ?")
            .bind(name)
            .fetch_one(conn)
            .await
            .unwrap();
        n == 1
    }

    #[tokio::test]
    async fn a_settled_lease_keeps_its_connection_for_the_next() {
        let (pool, _dir) = file_pool(4).await;
        let reuse = Reuse::new(pool.clone());
        let mut lease = reuse.lease().await.unwrap();
        mark(&mut lease, "first").await;
        lease.settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 1);
        let mut lease = reuse.lease().await.unwrap();
        assert!(has_mark(&mut lease, "first").await, "the kept connection is leased again");
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        lease.settle(true);
    }

    #[tokio::test]
    async fn a_failed_or_dropped_lease_goes_back_to_the_pool() {
        let (pool, _dir) = file_pool(4).await;
        let reuse = Reuse::new(pool.clone());
        let lease = reuse.lease().await.unwrap();
        lease.settle(false);
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        let lease = reuse.lease().await.unwrap();
        drop(lease);
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        // Both went back to sqlx (after its ping, on a task of its own).
        tokio::time::timeout(Duration::from_secs(5), async {
            while pool.num_idle() < 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("connections returned to the pool");
    }

    #[tokio::test]
    async fn a_failure_makes_the_database_suspect_until_a_checked_lease_succeeds() {
        let (pool, _dir) = file_pool(4).await;
        let plain = Reuse::new(pool.clone());
        plain.lease().await.unwrap().settle(false);
        assert!(!plain.is_suspect(), "only with check_connections");

        let reuse = Reuse::new(pool.clone()).check_connections();
        reuse.lease().await.unwrap().settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 1);
        reuse.lease().await.unwrap().settle(false);
        assert!(reuse.is_suspect());
        // A suspect database keeps nothing and pings what it leases; a live connection clears it.
        let mut lease = reuse.lease().await.unwrap();
        assert!(!reuse.is_suspect(), "the ping succeeded");
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        let one: i64 = sqlx::query_scalar("SELECT 1").fetch_one(&mut *lease).await.unwrap();
        assert_eq!(one, 1);
        lease.settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 1, "kept again");

        // A closed pool: the checked lease fails at once rather than waiting.
        reuse.lease().await.unwrap().settle(false);
        reuse.release_all();
        pool.close().await;
        let started = Instant::now();
        assert!(reuse.lease().await.is_err());
        assert!(started.elapsed() <= SUSPECT_ACQUIRE_TIMEOUT + Duration::from_millis(500));
        assert_eq!(reuse.out.load(Ordering::Acquire), 0, "nothing counted out");
    }

    #[tokio::test]
    async fn one_connection_always_stays_with_the_pool() {
        let (pool, _dir) = file_pool(2).await;
        let reuse = Reuse::new(pool.clone());
        let a = reuse.lease().await.unwrap();
        let b = reuse.lease().await.unwrap();
        a.settle(true);
        b.settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 1, "at most max_connections - 1 are kept");
        // So a direct user of the pool gets a connection.
        let direct = tokio::time::timeout(Duration::from_secs(5), pool.acquire()).await;
        assert!(direct.expect("not starved").is_ok());

        let (single, _dir) = file_pool(1).await;
        let reuse = Reuse::new(single.clone());
        reuse.lease().await.unwrap().settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 0, "a single-connection pool keeps nothing");
    }

    #[tokio::test]
    async fn release_all_and_a_closed_pool_keep_nothing() {
        let (pool, _dir) = file_pool(4).await;
        let reuse = Reuse::new(pool.clone());
        reuse.lease().await.unwrap().settle(true);
        reuse.release_all();
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        let lease = reuse.lease().await.unwrap();
        // Closing waits for the leased connection, so it runs beside the lease.
        let closing = tokio::spawn({
            let pool = pool.clone();
            async move { pool.close().await }
        });
        while !pool.is_closed() {
            tokio::task::yield_now().await;
        }
        lease.settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 0);
        closing.await.unwrap();
    }

    #[test]
    fn kept_connections_are_closed_when_dropped_after_their_runtime() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (reuse, _dir) = runtime.block_on(async {
            let (pool, dir) = file_pool(4).await;
            let reuse = Reuse::new(pool);
            reuse.lease().await.unwrap().settle(true);
            (reuse, dir)
        });
        drop(runtime);
        // sqlx would panic spawning its return-to-pool task here; the connection is closed instead.
        drop(reuse);
    }
    /// Leases waiting in the pool's queue get connections even while other leases keep
    /// finishing: a kept connection would otherwise never reach the queue, and the waiters
    /// would time out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_waiting_in_the_pool_are_not_starved() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("reuse.db").display());
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(3))
            .connect(&url)
            .await
            .unwrap();
        let reuse = std::sync::Arc::new(Reuse::new(pool.clone()));
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let reuse = reuse.clone();
                tokio::spawn(async move {
                    for _ in 0..50 {
                        let mut lease = reuse.lease().await.expect("a connection within the acquire timeout");
                        let one: i64 = sqlx::query_scalar("SELECT 1").fetch_one(&mut *lease).await.unwrap();
                        assert_eq!(one, 1);
                        // An operation that waits, as a database round trip does.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        lease.settle(true);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_lease_given_up_in_the_queue_is_no_longer_counted_as_waiting() {
        let (pool, _dir) = file_pool(2).await;
        let reuse = Reuse::new(pool);
        let a = reuse.lease().await.unwrap();
        let b = reuse.lease().await.unwrap();
        let gave_up = tokio::time::timeout(Duration::from_millis(50), reuse.lease()).await;
        assert!(gave_up.is_err(), "both connections are leased");
        assert_eq!(reuse.waiting.load(Ordering::Acquire), 0);
        a.settle(true);
        b.settle(true);
        assert_eq!(reuse.kept.lock().unwrap().len(), 1, "kept again once nobody waits");
    }
}
