//! Frontdesk's storage: SQL (SQLite, a file or memory for tests, and PostgreSQL) and Redis.
//!
//! [`Database`] opens a pool and migrates the schema (`migrations/sqlite`,
//! `migrations/postgres`); [`SqlCheckpointer`] implements the runtime's
//! [`Checkpointer`](frontdesk_runtime::Checkpointer) on it; [`intake`] holds the workflow
//! layer's intake submissions, [`tickets`] the completed triage tickets and [`investigation`]
//! the investigation workflow's HR data, investigations, audit trail and pending actions
//! (imported from and exported to CSV), [`llm_calls`] the structured log of model calls and
//! [`api_keys`] the server's API keys (a salted hash of each secret, never the secret). Queries are built at run time with binds (no
//! compile-time checked macros), in one SQL text for both dialects wherever they agree. [`RedisCheckpointer`] implements the same trait on a Redis server
//! (the triage design's store for active tickets; see [`redis_checkpointer`] for its keys).
//!
//! Tests: `cargo test -p frontdesk-store` runs the runtime's conformance suite and the store's
//! own checks on SQLite files and memory. The PostgreSQL tests need a server:
//! `export FRONTDESK_TEST_POSTGRES_URL="$(scripts/ensure-postgres.sh | tail -n1)"`; each run
//! creates and drops its own database there. Without the URL they are skipped, unless
//! `FRONTDESK_REQUIRE_POSTGRES=1` (CI), which makes them fail. Likewise the Redis tests:
//! `export FRONTDESK_TEST_REDIS_URL="$(scripts/ensure-redis.sh | tail -n1)"` (each run uses
//! its own random key prefix and deletes its keys) and `FRONTDESK_REQUIRE_REDIS=1`.

pub mod api_keys;
mod checkpointer;
mod db;
mod error;
mod group_commit;
pub mod intake;
pub mod investigation;
pub mod llm_calls;
pub mod redis_checkpointer;
mod reuse;
pub mod scratch;
pub mod tickets;

pub use api_keys::{ApiKeyRecord, ApiKeyRow};
pub use checkpointer::SqlCheckpointer;
pub use db::{Database, DbKind, DbPool, PoolStats, StoreOptions, DEFAULT_ACQUIRE_TIMEOUT};
pub use error::{redact_url_password, StoreError};
pub use group_commit::{WriteBatchStats, WriteObserver, WriteOutcome};
pub use intake::{NewSubmission, Submission};
pub use investigation::{
    write_audit_csv, write_pending_actions_csv, Absence, AbsenceKind, ActionCursor, AuditRow, HrDataProblem,
    HrMutationRow, HrRole, HrUser, ImportCounts, InvestigationCursor, InvestigationRow, PendingActionRow,
    RoleAuthorisation, UserAuthorisation, CHANGE_INVESTIGATION_PENDING, PENDING_ACTION_ANSWERED,
};
pub use llm_calls::{LlmCallRow, LlmCallTotals, MAX_LLM_CALLS_PER_INSERT};
pub use redis_checkpointer::{RedisCheckpointer, RedisOptions};
pub use tickets::{
    CompletedTicket, TicketCursor, TicketMessage, TriageClaim, TriageRequestRecord, TICKET_OPEN, TICKET_RESOLVED,
};

/// The redis client this crate is built on, for callers that need raw commands.
pub use redis;
/// The sqlx this crate is built on, for modules that need the pools directly.
pub use sqlx;

/// Runs `$body` with `$conn` bound to a pool connection of either dialect (`&mut
/// SqliteConnection` or `&mut PgConnection`), for queries whose text and binds are the same in
/// both. `$body` is a `Result<_, sqlx::Error>`; on success the connection is kept for the next
/// operation without sqlx's ping ([`reuse`]).
macro_rules! on_pool {
    ($db:expr, $conn:ident => $body:expr) => {
        match $db.pool() {
            $crate::db::DbPool::Sqlite(_) => $crate::leased!($db.sqlite_lease(), $conn => $body),
            $crate::db::DbPool::Postgres(_) => $crate::leased!($db.postgres_lease(), $conn => $body),
        }
    };
}
pub(crate) use on_pool;

/// [`on_pool!`] for one short read-only statement on a [`Database`]: on SQLite it runs on the
/// write connection instead when that is idle ([`Database::idle_sqlite_writer`]), whose page
/// cache is still valid. Not for scans, which would hold the writes up.
macro_rules! on_reader {
    ($db:expr, $conn:ident => $body:expr) => {
        match $db.idle_sqlite_writer() {
            Some(mut writer) => {
                let $conn = &mut *writer;
                $body
            }
            None => $crate::on_pool!($db, $conn => $body),
        }
    };
}
pub(crate) use on_reader;

/// Runs `$body` with `$conn` bound to the connection of `$lease` (a future of a
/// [`reuse::Lease`]), and settles the lease with `$body`'s outcome. A failure to lease
/// becomes `$body`'s error type by `From<sqlx::Error>`.
macro_rules! leased {
    ($lease:expr, $conn:ident => $body:expr) => {
        match $lease.await {
            Ok(mut lease) => {
                let result = {
                    let $conn = &mut *lease;
                    $body
                };
                lease.settle(result.is_ok());
                result
            }
            Err(e) => Err(e.into()),
        }
    };
}
pub(crate) use leased;

/// Runs `$body` with `$exec` bound to where this process writes: the SQLite write connection
/// (`&mut SqliteConnection`, held until `$body` is done) or a PostgreSQL pool connection
/// (`&mut PgConnection`). For single statements, which commit on their own.
macro_rules! on_writer {
    ($db:expr, $exec:ident => $body:expr) => {
        match $db.pool() {
            $crate::db::DbPool::Sqlite(_) => match $db.sqlite_writer().await {
                Ok(mut conn) => {
                    let $exec = &mut *conn;
                    $body
                }
                Err(e) => Err(e),
            },
            $crate::db::DbPool::Postgres(_) => $crate::leased!($db.postgres_lease(), $exec => $body),
        }
    };
}
pub(crate) use on_writer;

/// Milliseconds since the Unix epoch (negative before it), as stored.
pub(crate) fn to_ms(t: std::time::SystemTime) -> i64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// The inverse of [`to_ms`].
pub(crate) fn from_ms(ms: i64) -> std::time::SystemTime {
    let d = std::time::Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        std::time::UNIX_EPOCH + d
    } else {
        std::time::UNIX_EPOCH - d
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn millisecond_round_trip() {
        for ms in [0i64, 1, 1_700_000_000_123, -1, -86_400_000] {
            assert_eq!(to_ms(from_ms(ms)), ms);
        }
        assert_eq!(to_ms(UNIX_EPOCH + Duration::from_micros(1_999)), 1);
    }
}
