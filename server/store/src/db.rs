use std::{fmt, str::FromStr, sync::Arc, time::Duration};

use sqlx::{
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPool, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous},
};

use crate::{error::redact, SqlCheckpointer, StoreError};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");

/// How long [`Database::connect`] keeps retrying a refused connection, and how long any
/// operation waits for a pooled connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a SQLite statement waits for another process's write lock.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Pool size (at least 1). A `sqlite::memory:` database always uses one connection.
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
    pool: DbPool,
    options: StoreOptions,
    /// Serialises this process's SQLite write transactions so that they queue here instead
    /// of in SQLite's busy handler, which sleeps in steps of milliseconds. Other processes
    /// are still handled by the busy timeout.
    write_lock: Arc<tokio::sync::Mutex<()>>,
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
        let pool = match scheme.as_str() {
            "sqlite" => DbPool::Sqlite(connect_sqlite(url, options, acquire_timeout).await?),
            "postgres" | "postgresql" => DbPool::Postgres(connect_postgres(url, options, acquire_timeout).await?),
            _ => return Err(StoreError::UnsupportedUrl { url: redact(url) }),
        };
        let db = Database { pool, options, write_lock: Arc::new(tokio::sync::Mutex::new(())) };
        if let Err(e) = db.migrate().await {
            db.close().await;
            return Err(e);
        }
        Ok(db)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let kind = self.kind();
        match &self.pool {
            DbPool::Sqlite(pool) => SQLITE_MIGRATIONS.run(pool).await,
            DbPool::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await,
        }
        .map_err(|source| StoreError::Migrate { kind, source })
    }

    pub fn kind(&self) -> DbKind {
        match self.pool {
            DbPool::Sqlite(_) => DbKind::Sqlite,
            DbPool::Postgres(_) => DbKind::Postgres,
        }
    }

    /// The options in effect (after clamping to their minimums).
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    pub fn pool(&self) -> &DbPool {
        &self.pool
    }

    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.pool {
            DbPool::Sqlite(pool) => Some(pool),
            DbPool::Postgres(_) => None,
        }
    }

    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.pool {
            DbPool::Postgres(pool) => Some(pool),
            DbPool::Sqlite(_) => None,
        }
    }

    /// A checkpointer on this database, keeping `options().checkpoint_retention` checkpoints.
    pub fn checkpointer(&self) -> SqlCheckpointer {
        SqlCheckpointer::new(self.clone())
    }

    /// Closes every connection of the pool (shared by all clones) and waits for them. Later
    /// operations fail with [`StoreError::Query`] / `CheckpointError::Unavailable`.
    pub async fn close(&self) {
        match &self.pool {
            DbPool::Sqlite(pool) => pool.close().await,
            DbPool::Postgres(pool) => pool.close().await,
        }
    }

    /// Held by SQLite write transactions of this process; `None` on Postgres, whose row locks
    /// serialise writers.
    pub(crate) async fn write_guard(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.pool {
            DbPool::Sqlite(_) => Some(self.write_lock.lock().await),
            DbPool::Postgres(_) => None,
        }
    }
}

async fn connect_sqlite(url: &str, options: StoreOptions, acquire_timeout: Duration) -> Result<SqlitePool, StoreError> {
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
        if let Some(dir) = connect.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir { path: dir.to_owned(), source })?;
        }
        pool = pool.max_connections(options.max_connections);
    }
    pool.connect_with(connect).await.map_err(|source| StoreError::Connect {
        kind: DbKind::Sqlite,
        url: redact(url),
        source,
    })
}

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
        .connect_with(connect)
        .await
        .map_err(|source| StoreError::Connect { kind: DbKind::Postgres, url: redact(url), source })
}
