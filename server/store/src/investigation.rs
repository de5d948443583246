//! The investigation workflow's data: HR data imported from CSV files (users, roles, what roles
//! and users are authorised for, sick leave, vacation, and the mutations to investigate), the
//! investigations themselves, their audit trail and the actions pending on people. Plain data
//! access; the workflow layer decides what an investigation finds.
//!
//! The CSV files and their columns are described in `config/investigation/README.md`, which
//! ships a sample. [`write_audit_csv`] and [`write_pending_actions_csv`] export rows as CSV.
//!
//! Investigations are kept per tenant: their ids here (`investigation_id`, an action's
//! `action_id`) are storage keys, `<tenant>/<id>` or, for the default tenant, the id alone.
//! Listings for one tenant take a [`KeyScope`]; HR data is shared.

use std::{collections::HashMap, io::Write, path::Path, time::SystemTime};

use sqlx::{Connection, SqliteConnection};

use crate::{
    checkpointer::prefix_end, db::rollback_quietly, from_ms, leased, on_pool, on_writer, to_ms, Database, DbPool,
    StoreError,
};

/// [`HrMutationRow::change_investigation`] of a mutation nobody has investigated yet: what an
/// import gives a new mutation whose cell is empty.
pub const CHANGE_INVESTIGATION_PENDING: &str = "Pending";
/// [`PendingActionRow::status`] set by [`Database::answer_pending_action`].
pub const PENDING_ACTION_ANSWERED: &str = "answered";

/// A person of the HR data (`users.csv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct HrUser {
    pub user_id: String,
    pub name: String,
    pub email: String,
    pub department: String,
    /// The manager's `user_id`; `None` for people nobody manages.
    pub manager_id: Option<String>,
    /// The person's role ([`HrRole`]); `None` for people without one.
    pub role_id: Option<String>,
}

/// A role (`roles.csv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct HrRole {
    pub role_id: String,
    pub name: String,
    pub description: String,
}

/// What holding a role allows: `access_level` in `system` (`role_authorisations.csv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct RoleAuthorisation {
    pub role_id: String,
    pub system: String,
    pub access_level: String,
}

/// A grant made to one user directly, beside those of their role (`authorisations.csv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct UserAuthorisation {
    pub user_id: String,
    pub system: String,
    pub access_level: String,
    /// `YYYY-MM-DD`.
    pub granted_on: String,
    /// `YYYY-MM-DD`, the last day the grant holds; `None` when it does not expire.
    pub expires_on: Option<String>,
}

/// Which absences: `sickLeave.csv` or `vacation.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AbsenceKind {
    SickLeave,
    Vacation,
}

/// A period a user was away, both dates (`YYYY-MM-DD`) included.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct Absence {
    pub user_id: String,
    pub start_date: String,
    pub end_date: String,
}

/// A change made in an access-controlled system, to be investigated (`hr_mutations.csv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct HrMutationRow {
    pub mutation_id: String,
    /// Who made the change.
    pub changer_id: String,
    /// Whose record was changed.
    pub target_user_id: String,
    pub system: String,
    /// The access level the change needs.
    pub access_level: String,
    pub change_type: String,
    pub description: String,
    /// RFC 3339 in UTC, e.g. `2025-11-10T09:00:00Z`.
    pub changed_at: String,
    /// The workflow's status of the change ([`CHANGE_INVESTIGATION_PENDING`] at first).
    pub change_investigation: String,
}

/// An investigation of a mutation (times at millisecond precision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvestigationRow {
    pub investigation_id: String,
    pub mutation_id: String,
    pub status: String,
    /// The final report as JSON, once there is one.
    pub report_json: Option<String>,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
}

/// One entry of an investigation's audit trail (`at` at millisecond precision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub investigation_id: String,
    /// Position in the investigation's trail; an entry written again at the same position
    /// replaces the earlier one.
    pub seq: u32,
    /// Ties together the entries of one request across investigations.
    pub correlation_id: String,
    pub at: SystemTime,
    /// Who or what acted: a node, a person, the system.
    pub actor: String,
    pub kind: String,
    /// The investigation's status before and after, for entries that changed it.
    pub status_from: Option<String>,
    pub status_to: Option<String>,
    /// The entry's details as JSON.
    pub entry_json: String,
}

/// A question the workflow put to a person, and their reply (times at millisecond precision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingActionRow {
    pub action_id: String,
    pub investigation_id: String,
    pub mutation_id: String,
    /// The `user_id` of the person asked.
    pub recipient_id: String,
    /// Why they are asked (the changer, their manager, ...).
    pub recipient_role: String,
    pub subject: String,
    pub body: String,
    /// [`PENDING_ACTION_ANSWERED`] once answered; otherwise whatever the workflow set.
    pub status: String,
    /// The reply as JSON, once answered.
    pub reply_json: Option<String>,
    pub created_at: SystemTime,
    pub answered_at: Option<SystemTime>,
}

/// Rows read from each file by [`Database::import_hr_data`] (whether they were new, changed or
/// already there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportCounts {
    pub users: usize,
    pub roles: usize,
    pub role_authorisations: usize,
    pub authorisations: usize,
    pub sick_leave: usize,
    pub vacation: usize,
    pub mutations: usize,
}

/// Whose investigations a listing returns, by the `investigation_id` (a storage key) of its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScope<'a> {
    /// Every tenant's (operator tools).
    All,
    /// Keys without a `/`: the default tenant's.
    Unprefixed,
    /// Keys that start with this prefix, such as `acme/`: that tenant's (an empty prefix is
    /// every key).
    Prefix(&'a str),
}

impl KeyScope<'_> {
    /// The binds of a scope's conditions (see [`scoped!`]): the keys' range (inclusive start,
    /// exclusive end) and the `NOT LIKE` pattern that excludes prefixed keys. A range rather
    /// than `LIKE 'acme/%'` spares escaping `_` and `%`; the key columns sort by bytes
    /// (`COLLATE "C"` on PostgreSQL, SQLite's default).
    fn binds(self) -> (Option<String>, Option<String>, Option<&'static str>) {
        match self {
            KeyScope::All | KeyScope::Prefix("") => (None, None, None),
            KeyScope::Unprefixed => (None, None, Some("%/%")),
            KeyScope::Prefix(prefix) => (Some(prefix.to_owned()), prefix_end(prefix), None),
        }
    }
}

/// Where a page of [`Database::list_investigations`] ends: the last investigation's creation
/// time and id. Typed, like [`TicketCursor`](crate::TicketCursor): encoding it for clients is
/// the workflow layer's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvestigationCursor {
    pub created_at_ms: i64,
    pub investigation_id: String,
}

/// Where a page of [`Database::list_pending_actions_in`] ends: its last action's creation time
/// and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCursor {
    pub created_at_ms: i64,
    pub action_id: String,
}

/// What is wrong with a file of HR data or one of its rows (the source of
/// [`StoreError::HrData`], which names the file and the line).
#[derive(Debug, thiserror::Error)]
pub enum HrDataProblem {
    /// Missing, unreadable, not UTF-8, or a row with another number of cells than the header.
    #[error("cannot read it as CSV")]
    Unreadable(#[source] csv::Error),
    #[error("the header has no column {column:?}")]
    MissingColumn { column: &'static str },
    /// A column this file does not have, most likely a misspelt one.
    #[error("the header has an unknown column {column:?}")]
    UnknownColumn { column: String },
    #[error("the header has column {column:?} twice")]
    RepeatedColumn { column: String },
    /// A required cell is empty.
    #[error("{column} is empty")]
    Empty { column: &'static str },
    #[error("{column} {value:?} is not a date (YYYY-MM-DD)")]
    NotADate { column: &'static str, value: String },
    #[error("{column} {value:?} is not an RFC 3339 time in UTC (YYYY-MM-DDTHH:MM:SSZ)")]
    NotATime { column: &'static str, value: String },
    #[error("{end_column} {end} is before {start_column} {start}")]
    EndsBeforeStart { start_column: &'static str, start: String, end_column: &'static str, end: String },
    /// The row's key was already on an earlier line: importing both would keep only the last.
    #[error("the key ({key}) was already on line {first_line}")]
    RepeatedKey { key: String, first_line: u64 },
}

// --- Queries. One text for both dialects throughout. ---

const UPSERT_USER: &str = "INSERT INTO hr_users (user_id, name, email, department, manager_id, role_id) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id) DO UPDATE SET name = excluded.name, \
     email = excluded.email, department = excluded.department, manager_id = excluded.manager_id, \
     role_id = excluded.role_id";
const UPSERT_ROLE: &str = "INSERT INTO hr_roles (role_id, name, description) VALUES ($1, $2, $3) \
     ON CONFLICT (role_id) DO UPDATE SET name = excluded.name, description = excluded.description";
/// Every column is the key: a row present already is all there is to it.
const UPSERT_ROLE_AUTHORISATION: &str = "INSERT INTO hr_role_authorisations (role_id, system, access_level) \
     VALUES ($1, $2, $3) ON CONFLICT (role_id, system, access_level) DO NOTHING";
const UPSERT_AUTHORISATION: &str = "INSERT INTO hr_authorisations \
     (user_id, system, access_level, granted_on, expires_on) VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (user_id, system, access_level) DO UPDATE SET granted_on = excluded.granted_on, \
     expires_on = excluded.expires_on";
macro_rules! upsert_absence {
    ($table:literal) => {
        concat!(
            "INSERT INTO ",
            $table,
            " (user_id, start_date, end_date) VALUES ($1, $2, $3) \
             ON CONFLICT (user_id, start_date) DO UPDATE SET end_date = excluded.end_date"
        )
    };
}
const UPSERT_SICK_LEAVE: &str = upsert_absence!("hr_sick_leave");
const UPSERT_VACATION: &str = upsert_absence!("hr_vacation");
macro_rules! mutation_columns {
    () => {
        "mutation_id, changer_id, target_user_id, system, access_level, change_type, description, changed_at, \
         change_investigation"
    };
}
/// A known mutation keeps its `change_investigation`: an investigation may be running on it.
const UPSERT_MUTATION: &str = concat!(
    "INSERT INTO hr_mutations (",
    mutation_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (mutation_id) DO UPDATE SET \
     changer_id = excluded.changer_id, target_user_id = excluded.target_user_id, system = excluded.system, \
     access_level = excluded.access_level, change_type = excluded.change_type, \
     description = excluded.description, changed_at = excluded.changed_at"
);
const INSERT_MUTATION: &str = concat!(
    "INSERT INTO hr_mutations (",
    mutation_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (mutation_id) DO NOTHING"
);
/// `$sql` with a mutation's columns bound as `$1`..`$9`, in [`mutation_columns`] order, for
/// either dialect.
macro_rules! mutation_query {
    ($sql:expr, $m:expr) => {
        sqlx::query($sql)
            .bind(&$m.mutation_id)
            .bind(&$m.changer_id)
            .bind(&$m.target_user_id)
            .bind(&$m.system)
            .bind(&$m.access_level)
            .bind(&$m.change_type)
            .bind(&$m.description)
            .bind(&$m.changed_at)
            .bind(&$m.change_investigation)
    };
}
const SET_CHANGE_INVESTIGATION: &str = "UPDATE hr_mutations SET change_investigation = $2 WHERE mutation_id = $1";
/// Stops at the first row of each table instead of counting them all.
const HR_ROWS: &str = "SELECT (SELECT count(*) FROM (SELECT 1 FROM hr_users LIMIT 1) u) \
     + (SELECT count(*) FROM (SELECT 1 FROM hr_mutations LIMIT 1) m)";

const GET_USER: &str = "SELECT user_id, name, email, department, manager_id, role_id FROM hr_users WHERE user_id = $1";
const LIST_USERS: &str = "SELECT user_id, name, email, department, manager_id, role_id FROM hr_users ORDER BY user_id";
const GET_ROLE: &str = "SELECT role_id, name, description FROM hr_roles WHERE role_id = $1";
const ROLE_AUTHORISATIONS: &str = "SELECT role_id, system, access_level FROM hr_role_authorisations \
     WHERE role_id = $1 ORDER BY system, access_level";
const USER_AUTHORISATIONS: &str = "SELECT user_id, system, access_level, granted_on, expires_on \
     FROM hr_authorisations WHERE user_id = $1 ORDER BY system, access_level";
const SICK_LEAVE: &str =
    "SELECT user_id, start_date, end_date FROM hr_sick_leave WHERE user_id = $1 ORDER BY start_date";
const VACATION: &str = "SELECT user_id, start_date, end_date FROM hr_vacation WHERE user_id = $1 ORDER BY start_date";
const GET_MUTATION: &str = concat!("SELECT ", mutation_columns!(), " FROM hr_mutations WHERE mutation_id = $1");
const LIST_MUTATIONS: &str = concat!("SELECT ", mutation_columns!(), " FROM hr_mutations ORDER BY mutation_id");

macro_rules! investigation_columns {
    () => {
        "investigation_id, mutation_id, status, report_json, created_at_ms, updated_at_ms"
    };
}
/// A re-saved investigation keeps its first `created_at`; everything else is replaced.
const UPSERT_INVESTIGATION: &str = concat!(
    "INSERT INTO investigations (",
    investigation_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (investigation_id) DO UPDATE SET \
     mutation_id = excluded.mutation_id, status = excluded.status, report_json = excluded.report_json, \
     updated_at_ms = excluded.updated_at_ms"
);
const GET_INVESTIGATION: &str =
    concat!("SELECT ", investigation_columns!(), " FROM investigations WHERE investigation_id = $1");
/// The conditions of a [`KeyScope`] on the `investigation_id` column, its binds numbered from
/// `$n`: the range's start, its end, the pattern of keys to exclude.
macro_rules! scoped {
    ($from:literal, $to:literal, $exclude:literal) => {
        concat!(
            "($",
            $from,
            " IS NULL OR investigation_id >= $",
            $from,
            ") AND ($",
            $to,
            " IS NULL OR investigation_id < $",
            $to,
            ") AND ($",
            $exclude,
            " IS NULL OR investigation_id NOT LIKE $",
            $exclude,
            ")"
        )
    };
}
/// Newest first; `$2`/`$3` the (created_at_ms, investigation_id) of the last row of the
/// previous page; `$5`..`$7` the scope.
const LIST_INVESTIGATIONS: &str = concat!(
    "SELECT ",
    investigation_columns!(),
    " FROM investigations WHERE ($1 IS NULL OR status = $1) \
     AND ($2 IS NULL OR created_at_ms < $2 OR (created_at_ms = $2 AND investigation_id < $3)) AND ",
    scoped!("5", "6", "7"),
    " ORDER BY created_at_ms DESC, investigation_id DESC LIMIT $4"
);

macro_rules! audit_columns {
    () => {
        "investigation_id, seq, correlation_id, at_ms, actor, kind, status_from, status_to, entry_json"
    };
}
/// Keyed by position: an entry written again (a node re-run after a crash) replaces the first.
const UPSERT_AUDIT: &str = concat!(
    "INSERT INTO investigation_audit (",
    audit_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (investigation_id, seq) DO UPDATE SET \
     correlation_id = excluded.correlation_id, at_ms = excluded.at_ms, actor = excluded.actor, \
     kind = excluded.kind, status_from = excluded.status_from, status_to = excluded.status_to, \
     entry_json = excluded.entry_json"
);
const AUDIT_TRAIL: &str = concat!(
    "SELECT ",
    audit_columns!(),
    " FROM investigation_audit WHERE investigation_id = $1 AND ($2 IS NULL OR seq > $2) ORDER BY seq"
);
/// `$2`..`$4` the scope.
const AUDIT_BY_CORRELATION: &str = concat!(
    "SELECT ",
    audit_columns!(),
    " FROM investigation_audit WHERE correlation_id = $1 AND ",
    scoped!("2", "3", "4"),
    " ORDER BY at_ms, investigation_id, seq"
);
const AUDIT_ALL: &str =
    concat!("SELECT ", audit_columns!(), " FROM investigation_audit ORDER BY investigation_id, seq");

macro_rules! action_columns {
    () => {
        "action_id, investigation_id, mutation_id, recipient_id, recipient_role, subject, body, status, \
         reply_json, created_at_ms, answered_at_ms"
    };
}
/// A re-saved action keeps its first `created_at`; everything else is replaced.
const UPSERT_ACTION: &str = concat!(
    "INSERT INTO pending_actions (",
    action_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (action_id) DO UPDATE SET \
     investigation_id = excluded.investigation_id, mutation_id = excluded.mutation_id, \
     recipient_id = excluded.recipient_id, recipient_role = excluded.recipient_role, \
     subject = excluded.subject, body = excluded.body, status = excluded.status, \
     reply_json = excluded.reply_json, answered_at_ms = excluded.answered_at_ms"
);
const ANSWER_ACTION: &str =
    "UPDATE pending_actions SET status = $2, reply_json = $3, answered_at_ms = $4 WHERE action_id = $1";
const GET_ACTION: &str = concat!("SELECT ", action_columns!(), " FROM pending_actions WHERE action_id = $1");
/// `$3`..`$5` the scope.
const LIST_ACTIONS: &str = concat!(
    "SELECT ",
    action_columns!(),
    " FROM pending_actions WHERE ($1 IS NULL OR recipient_id = $1) AND ($2 IS NULL OR status = $2) AND ",
    scoped!("3", "4", "5"),
    " ORDER BY created_at_ms, action_id"
);
/// A page of [`LIST_ACTIONS`]: `$6`/`$7` the (created_at_ms, action_id) of the last action of
/// the previous page, `$8` the rows to fetch.
const LIST_ACTIONS_PAGE: &str = concat!(
    "SELECT ",
    action_columns!(),
    " FROM pending_actions WHERE ($1 IS NULL OR recipient_id = $1) AND ($2 IS NULL OR status = $2) AND ",
    scoped!("3", "4", "5"),
    " AND ($6 IS NULL OR created_at_ms > $6 OR (created_at_ms = $6 AND action_id > $7))",
    " ORDER BY created_at_ms, action_id LIMIT $8"
);

// --- Stored rows, as the database returns them. ---

#[derive(sqlx::FromRow)]
struct StoredInvestigation {
    investigation_id: String,
    mutation_id: String,
    status: String,
    report_json: Option<String>,
    created_at_ms: i64,
    updated_at_ms: i64,
}

impl StoredInvestigation {
    fn into_row(self) -> InvestigationRow {
        InvestigationRow {
            investigation_id: self.investigation_id,
            mutation_id: self.mutation_id,
            status: self.status,
            report_json: self.report_json,
            created_at: from_ms(self.created_at_ms),
            updated_at: from_ms(self.updated_at_ms),
        }
    }
}

#[derive(sqlx::FromRow)]
struct StoredAudit {
    investigation_id: String,
    seq: i64,
    correlation_id: String,
    at_ms: i64,
    actor: String,
    kind: String,
    status_from: Option<String>,
    status_to: Option<String>,
    entry_json: String,
}

impl StoredAudit {
    fn into_row(self) -> Result<AuditRow, StoreError> {
        Ok(AuditRow {
            seq: u32::try_from(self.seq)
                .map_err(|e| StoreError::Corrupt { what: "investigation_audit.seq", source: Box::new(e) })?,
            investigation_id: self.investigation_id,
            correlation_id: self.correlation_id,
            at: from_ms(self.at_ms),
            actor: self.actor,
            kind: self.kind,
            status_from: self.status_from,
            status_to: self.status_to,
            entry_json: self.entry_json,
        })
    }
}

fn audit_rows(rows: Vec<StoredAudit>) -> Result<Vec<AuditRow>, StoreError> {
    rows.into_iter().map(StoredAudit::into_row).collect()
}

#[derive(sqlx::FromRow)]
struct StoredAction {
    action_id: String,
    investigation_id: String,
    mutation_id: String,
    recipient_id: String,
    recipient_role: String,
    subject: String,
    body: String,
    status: String,
    reply_json: Option<String>,
    created_at_ms: i64,
    answered_at_ms: Option<i64>,
}

impl StoredAction {
    fn into_row(self) -> PendingActionRow {
        PendingActionRow {
            action_id: self.action_id,
            investigation_id: self.investigation_id,
            mutation_id: self.mutation_id,
            recipient_id: self.recipient_id,
            recipient_role: self.recipient_role,
            subject: self.subject,
            body: self.body,
            status: self.status,
            reply_json: self.reply_json,
            created_at: from_ms(self.created_at_ms),
            answered_at: self.answered_at_ms.map(from_ms),
        }
    }
}

/// Runs `$body` (a block of statements on `$tx`, a `&mut` connection of either dialect inside
/// a transaction, ending in a `Result<_, sqlx::Error>`) in one write transaction: committed when
/// the block succeeds, rolled back when it fails. On SQLite it runs on the write connection and
/// begins `IMMEDIATE`, taking the write lock up front: a deferred transaction that writes later
/// fails at once with SQLITE_BUSY if another process wrote meanwhile, where `BEGIN IMMEDIATE`
/// waits in the busy timeout.
///
/// On SQLite the transaction is plain statements, as the checkpoint writes' are, not sqlx's
/// `Transaction`: SQLite rolls a transaction back by itself on some errors (SQLITE_FULL,
/// SQLITE_IOERR, SQLITE_NOMEM, a trigger's `RAISE(ROLLBACK)`), sqlx's `ROLLBACK` then fails,
/// and sqlx goes on counting the transaction as open, refusing every later `begin_with` on the
/// write connection until the process restarts. PostgreSQL never ends a transaction on its own,
/// and sqlx's count there is given back even when its `COMMIT` or `ROLLBACK` fails (the
/// dropped `Transaction` queues another `ROLLBACK`), so that side keeps sqlx's transactions.
macro_rules! in_write_transaction {
    ($db:expr, $tx:ident => $body:block) => {
        match $db.pool() {
            DbPool::Sqlite(_) => match $db.sqlite_writer().await {
                Ok(mut conn) => {
                    // A caller cancelled between the BEGIN and the COMMIT leaves the transaction
                    // for the next writer to roll back.
                    conn.transaction_started();
                    let result = match sqlx::Executor::execute(&mut *conn, "BEGIN IMMEDIATE").await {
                        Ok(_) => {
                            let result = {
                                let $tx = &mut *conn;
                                async $body.await
                            };
                            finish_sqlite(&mut conn, result).await
                        }
                        Err(e) => {
                            rollback_quietly(&mut conn).await;
                            Err(e)
                        }
                    };
                    conn.transaction_ended();
                    result
                }
                Err(e) => Err(e),
            },
            DbPool::Postgres(_) => leased!($db.postgres_lease(), conn => match conn.begin().await {
                Ok(mut transaction) => {
                    let result = {
                        let $tx = &mut *transaction;
                        async $body.await
                    };
                    finish(transaction, result).await
                }
                Err(e) => Err(e),
            }),
        }
    };
}

/// Commits the SQLite write transaction `in_write_transaction!` began when `result` is a
/// success; otherwise, or when the commit fails, rolls it back, ignoring the error of a
/// transaction SQLite already ended, so that the next writer finds the connection outside any
/// transaction. `result`'s error, or the commit's, is the one reported.
async fn finish_sqlite<T>(conn: &mut SqliteConnection, result: Result<T, sqlx::Error>) -> Result<T, sqlx::Error> {
    let result = match result {
        Ok(value) => sqlx::Executor::execute(&mut *conn, "COMMIT").await.map(|_| value),
        Err(e) => Err(e),
    };
    if result.is_err() {
        rollback_quietly(conn).await;
    }
    result
}

/// Commits `transaction` (PostgreSQL's) when `result` is a success, rolls it back otherwise.
/// The rollback is explicit, not left to the drop, so that the connection is outside any
/// transaction when its lease ends; should it fail, `result`'s error is still the one reported.
async fn finish<DB: sqlx::Database, T>(
    transaction: sqlx::Transaction<'_, DB>,
    result: Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    match result {
        Ok(value) => transaction.commit().await.map(|()| value),
        Err(e) => {
            if let Err(rollback) = transaction.rollback().await {
                tracing::debug!(error = %rollback, "rollback after a failed investigation write");
            }
            Err(e)
        }
    }
}

/// Everything [`Database::import_hr_data`] read, validated, before any of it is written.
struct HrData {
    users: Vec<HrUser>,
    roles: Vec<HrRole>,
    role_authorisations: Vec<RoleAuthorisation>,
    authorisations: Vec<UserAuthorisation>,
    sick_leave: Vec<Absence>,
    vacation: Vec<Absence>,
    mutations: Vec<HrMutationRow>,
}

impl HrData {
    /// Reads the seven files; the first bad one stops the reading.
    fn read(source: &Source<'_>) -> Result<HrData, StoreError> {
        Ok(HrData {
            users: read_csv(source, "users.csv")?,
            roles: read_csv(source, "roles.csv")?,
            role_authorisations: read_csv(source, "role_authorisations.csv")?,
            authorisations: read_csv(source, "authorisations.csv")?,
            sick_leave: read_csv(source, "sickLeave.csv")?,
            vacation: read_csv(source, "vacation.csv")?,
            mutations: read_csv(source, "hr_mutations.csv")?,
        })
    }

    fn counts(&self) -> ImportCounts {
        ImportCounts {
            users: self.users.len(),
            roles: self.roles.len(),
            role_authorisations: self.role_authorisations.len(),
            authorisations: self.authorisations.len(),
            sick_leave: self.sick_leave.len(),
            vacation: self.vacation.len(),
            mutations: self.mutations.len(),
        }
    }
}

impl Database {
    /// Imports the HR data of `dir`: `users.csv`, `roles.csv`, `role_authorisations.csv`,
    /// `authorisations.csv`, `sickLeave.csv`, `vacation.csv` and `hr_mutations.csv` (columns in
    /// `config/investigation/README.md`), all required. Every file is read and validated
    /// first; a bad one is a [`StoreError::HrData`] naming the file and line, and then nothing
    /// is written. Then every row is upserted in one transaction, so readers see the old data
    /// or the new, never a mix.
    ///
    /// Importing again is safe: rows are updated in place. A known mutation keeps its
    /// `change_investigation` (an investigation may be running on it); a new one takes the
    /// file's, or [`CHANGE_INVESTIGATION_PENDING`] when the cell is empty. Rows that a file no
    /// longer lists are kept: an import never deletes.
    ///
    /// The files are read synchronously, on the calling task: they are small exports, imported
    /// at start-up or on an operator's request.
    pub async fn import_hr_data(&self, dir: &Path) -> Result<ImportCounts, StoreError> {
        self.import(HrData::read(&Source::Dir(dir))?).await
    }

    /// [`Database::import_hr_data`] of files held in memory, as `(file name, CSV text)` (the
    /// sample data a binary ships); a missing file is an error like a missing one on disk.
    pub async fn import_hr_csv(&self, files: &[(&str, &str)]) -> Result<ImportCounts, StoreError> {
        self.import(HrData::read(&Source::Texts(files))?).await
    }

    async fn import(&self, data: HrData) -> Result<ImportCounts, StoreError> {
        in_write_transaction!(self, tx => {
            for u in &data.users {
                sqlx::query(UPSERT_USER)
                    .bind(&u.user_id)
                    .bind(&u.name)
                    .bind(&u.email)
                    .bind(&u.department)
                    .bind(u.manager_id.as_deref())
                    .bind(u.role_id.as_deref())
                    .execute(&mut *tx)
                    .await?;
            }
            for r in &data.roles {
                sqlx::query(UPSERT_ROLE).bind(&r.role_id).bind(&r.name).bind(&r.description).execute(&mut *tx).await?;
            }
            for a in &data.role_authorisations {
                sqlx::query(UPSERT_ROLE_AUTHORISATION)
                    .bind(&a.role_id)
                    .bind(&a.system)
                    .bind(&a.access_level)
                    .execute(&mut *tx)
                    .await?;
            }
            for a in &data.authorisations {
                sqlx::query(UPSERT_AUTHORISATION)
                    .bind(&a.user_id)
                    .bind(&a.system)
                    .bind(&a.access_level)
                    .bind(&a.granted_on)
                    .bind(a.expires_on.as_deref())
                    .execute(&mut *tx)
                    .await?;
            }
            for (sql, absences) in [(UPSERT_SICK_LEAVE, &data.sick_leave), (UPSERT_VACATION, &data.vacation)] {
                for a in absences {
                    sqlx::query(sql).bind(&a.user_id).bind(&a.start_date).bind(&a.end_date).execute(&mut *tx).await?;
                }
            }
            for m in &data.mutations {
                mutation_query!(UPSERT_MUTATION, m).execute(&mut *tx).await?;
            }
            Ok(())
        })
        .map_err(StoreError::query("import HR data"))?;
        Ok(data.counts())
    }

    /// Whether there is no HR data yet: no users and no mutations.
    pub async fn hr_data_is_empty(&self) -> Result<bool, StoreError> {
        let rows: i64 = on_pool!(self, conn => sqlx::query_scalar(HR_ROWS).fetch_one(conn).await)
            .map_err(StoreError::query("check for HR data"))?;
        Ok(rows == 0)
    }

    /// The user `user_id`, if the HR data has them.
    pub async fn hr_user(&self, user_id: &str) -> Result<Option<HrUser>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(GET_USER).bind(user_id).fetch_optional(conn).await)
            .map_err(StoreError::query("get HR user"))
    }

    /// Every user, by `user_id`.
    pub async fn hr_users(&self) -> Result<Vec<HrUser>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(LIST_USERS).fetch_all(conn).await)
            .map_err(StoreError::query("list HR users"))
    }

    /// The role `role_id`, if the HR data has it.
    pub async fn hr_role(&self, role_id: &str) -> Result<Option<HrRole>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(GET_ROLE).bind(role_id).fetch_optional(conn).await)
            .map_err(StoreError::query("get HR role"))
    }

    /// What the role `role_id` allows, by system and access level; empty for an unknown role.
    pub async fn role_authorisations(&self, role_id: &str) -> Result<Vec<RoleAuthorisation>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(ROLE_AUTHORISATIONS).bind(role_id).fetch_all(conn).await)
            .map_err(StoreError::query("list role authorisations"))
    }

    /// The grants made to `user_id` directly (expired ones included: the caller compares the
    /// dates), by system and access level. Their role's grants are [`Self::role_authorisations`].
    pub async fn user_authorisations(&self, user_id: &str) -> Result<Vec<UserAuthorisation>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(USER_AUTHORISATIONS).bind(user_id).fetch_all(conn).await)
            .map_err(StoreError::query("list user authorisations"))
    }

    /// The sick leave or vacation of `user_id`, by start date.
    pub async fn absences(&self, kind: AbsenceKind, user_id: &str) -> Result<Vec<Absence>, StoreError> {
        let sql = match kind {
            AbsenceKind::SickLeave => SICK_LEAVE,
            AbsenceKind::Vacation => VACATION,
        };
        on_pool!(self, conn => sqlx::query_as(sql).bind(user_id).fetch_all(conn).await)
            .map_err(StoreError::query("list absences"))
    }

    /// The mutation `mutation_id`, if known.
    pub async fn hr_mutation(&self, mutation_id: &str) -> Result<Option<HrMutationRow>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(GET_MUTATION).bind(mutation_id).fetch_optional(conn).await)
            .map_err(StoreError::query("get HR mutation"))
    }

    /// Every mutation, by `mutation_id` (compared as text).
    pub async fn hr_mutations(&self) -> Result<Vec<HrMutationRow>, StoreError> {
        on_pool!(self, conn => sqlx::query_as(LIST_MUTATIONS).fetch_all(conn).await)
            .map_err(StoreError::query("list HR mutations"))
    }

    /// Records a new mutation, `change_investigation` included. Returns `false`, and writes
    /// nothing, when a mutation with its id exists already.
    pub async fn insert_hr_mutation(&self, mutation: &HrMutationRow) -> Result<bool, StoreError> {
        let inserted = on_writer!(self, exec => {
            mutation_query!(INSERT_MUTATION, mutation).execute(exec).await.map(|r| r.rows_affected())
        })
        .map_err(StoreError::query("insert HR mutation"))?;
        Ok(inserted > 0)
    }

    /// Sets the workflow's status of mutation `mutation_id`. Returns whether the mutation exists.
    pub async fn set_change_investigation(&self, mutation_id: &str, status: &str) -> Result<bool, StoreError> {
        let updated = on_writer!(self, exec => {
            sqlx::query(SET_CHANGE_INVESTIGATION).bind(mutation_id).bind(status).execute(exec).await.map(|r| r.rows_affected())
        })
        .map_err(StoreError::query("set change investigation"))?;
        Ok(updated > 0)
    }

    /// Saves an investigation. Saving it again replaces it but keeps its first `created_at`,
    /// so its place in [`Self::list_investigations`] never moves.
    pub async fn upsert_investigation(&self, investigation: &InvestigationRow) -> Result<(), StoreError> {
        on_writer!(self, exec => {
            sqlx::query(UPSERT_INVESTIGATION)
                .bind(&investigation.investigation_id)
                .bind(&investigation.mutation_id)
                .bind(&investigation.status)
                .bind(investigation.report_json.as_deref())
                .bind(to_ms(investigation.created_at))
                .bind(to_ms(investigation.updated_at))
                .execute(exec)
                .await
                .map(drop)
        })
        .map_err(StoreError::query("save investigation"))
    }

    /// The investigation `investigation_id`, if saved.
    pub async fn investigation(&self, investigation_id: &str) -> Result<Option<InvestigationRow>, StoreError> {
        let row: Option<StoredInvestigation> = on_pool!(self, conn => {
            sqlx::query_as(GET_INVESTIGATION).bind(investigation_id).fetch_optional(conn).await
        })
        .map_err(StoreError::query("get investigation"))?;
        Ok(row.map(StoredInvestigation::into_row))
    }

    /// Investigations, most recently created first (ties by id, descending), optionally only
    /// those with `status`. Pass the returned cursor as `after` for the next page; it is `None`
    /// on the last page. `limit` is at least 1.
    pub async fn list_investigations(
        &self,
        status: Option<&str>,
        after: Option<&InvestigationCursor>,
        limit: usize,
    ) -> Result<(Vec<InvestigationRow>, Option<InvestigationCursor>), StoreError> {
        self.list_investigations_in(KeyScope::All, status, after, limit).await
    }

    /// [`Self::list_investigations`] of the investigations in `scope`.
    pub async fn list_investigations_in(
        &self,
        scope: KeyScope<'_>,
        status: Option<&str>,
        after: Option<&InvestigationCursor>,
        limit: usize,
    ) -> Result<(Vec<InvestigationRow>, Option<InvestigationCursor>), StoreError> {
        let limit = limit.max(1);
        let (from, to, exclude) = scope.binds();
        // One row more than the page, to know whether another page follows.
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
        let rows: Vec<StoredInvestigation> = on_pool!(self, conn => {
            sqlx::query_as(LIST_INVESTIGATIONS)
                .bind(status)
                .bind(after.map(|c| c.created_at_ms))
                .bind(after.map(|c| c.investigation_id.as_str()))
                .bind(fetch)
                .bind(from.as_deref())
                .bind(to.as_deref())
                .bind(exclude)
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("list investigations"))?;
        let more = rows.len() > limit;
        let page: Vec<InvestigationRow> = rows.into_iter().take(limit).map(StoredInvestigation::into_row).collect();
        let next = if more {
            page.last().map(|i| InvestigationCursor {
                created_at_ms: to_ms(i.created_at),
                investigation_id: i.investigation_id.clone(),
            })
        } else {
            None
        };
        Ok((page, next))
    }

    /// Saves audit entries in one transaction, each by its (investigation, `seq`): an entry
    /// saved again at the same position (a node re-run after a crash) replaces the earlier one
    /// instead of duplicating it.
    pub async fn upsert_audit_entries(&self, entries: &[AuditRow]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        in_write_transaction!(self, tx => {
            for e in entries {
                sqlx::query(UPSERT_AUDIT)
                    .bind(&e.investigation_id)
                    .bind(i64::from(e.seq))
                    .bind(&e.correlation_id)
                    .bind(to_ms(e.at))
                    .bind(&e.actor)
                    .bind(&e.kind)
                    .bind(e.status_from.as_deref())
                    .bind(e.status_to.as_deref())
                    .bind(&e.entry_json)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(())
        })
        .map_err(StoreError::query("save audit entries"))
    }

    /// The audit trail of an investigation in `seq` order; with `after_seq`, only the entries
    /// after it (to follow a trail as it grows).
    pub async fn audit_trail(
        &self,
        investigation_id: &str,
        after_seq: Option<u32>,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let rows: Vec<StoredAudit> = on_pool!(self, conn => {
            sqlx::query_as(AUDIT_TRAIL)
                .bind(investigation_id)
                .bind(after_seq.map(i64::from))
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("get audit trail"))?;
        audit_rows(rows)
    }

    /// Every audit entry of `correlation_id`, whatever its investigation, in time order (ties
    /// by investigation, then `seq`).
    pub async fn audit_by_correlation(&self, correlation_id: &str) -> Result<Vec<AuditRow>, StoreError> {
        self.audit_by_correlation_in(KeyScope::All, correlation_id).await
    }

    /// [`Self::audit_by_correlation`] of the investigations in `scope`.
    pub async fn audit_by_correlation_in(
        &self,
        scope: KeyScope<'_>,
        correlation_id: &str,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let (from, to, exclude) = scope.binds();
        let rows: Vec<StoredAudit> = on_pool!(self, conn => {
            sqlx::query_as(AUDIT_BY_CORRELATION)
                .bind(correlation_id)
                .bind(from.as_deref())
                .bind(to.as_deref())
                .bind(exclude)
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("get audit by correlation"))?;
        audit_rows(rows)
    }

    /// Every audit entry, by investigation then `seq` (for exports: see [`write_audit_csv`]).
    pub async fn audit_all(&self) -> Result<Vec<AuditRow>, StoreError> {
        let rows: Vec<StoredAudit> = on_pool!(self, conn => sqlx::query_as(AUDIT_ALL).fetch_all(conn).await)
            .map_err(StoreError::query("get every audit entry"))?;
        audit_rows(rows)
    }

    /// Saves a pending action. Saving it again replaces it but keeps its first `created_at`.
    pub async fn upsert_pending_action(&self, action: &PendingActionRow) -> Result<(), StoreError> {
        on_writer!(self, exec => {
            sqlx::query(UPSERT_ACTION)
                .bind(&action.action_id)
                .bind(&action.investigation_id)
                .bind(&action.mutation_id)
                .bind(&action.recipient_id)
                .bind(&action.recipient_role)
                .bind(&action.subject)
                .bind(&action.body)
                .bind(&action.status)
                .bind(action.reply_json.as_deref())
                .bind(to_ms(action.created_at))
                .bind(action.answered_at.map(to_ms))
                .execute(exec)
                .await
                .map(drop)
        })
        .map_err(StoreError::query("save pending action"))
    }

    /// Records the reply (JSON) to action `action_id`, answered `at`: its status becomes
    /// [`PENDING_ACTION_ANSWERED`]. Returns `false` for an unknown action. Answering again
    /// replaces the reply; whether a second answer is allowed is the workflow's decision.
    pub async fn answer_pending_action(
        &self,
        action_id: &str,
        reply_json: &str,
        at: SystemTime,
    ) -> Result<bool, StoreError> {
        let updated = on_writer!(self, exec => {
            sqlx::query(ANSWER_ACTION)
                .bind(action_id)
                .bind(PENDING_ACTION_ANSWERED)
                .bind(reply_json)
                .bind(to_ms(at))
                .execute(exec)
                .await
                .map(|r| r.rows_affected())
        })
        .map_err(StoreError::query("answer pending action"))?;
        Ok(updated > 0)
    }

    /// The pending action `action_id`, if saved.
    pub async fn pending_action(&self, action_id: &str) -> Result<Option<PendingActionRow>, StoreError> {
        let row: Option<StoredAction> = on_pool!(self, conn => {
            sqlx::query_as(GET_ACTION).bind(action_id).fetch_optional(conn).await
        })
        .map_err(StoreError::query("get pending action"))?;
        Ok(row.map(StoredAction::into_row))
    }

    /// Pending actions, oldest first (ties by id), optionally only those of `recipient_id`
    /// and/or with `status`.
    pub async fn pending_actions(
        &self,
        recipient_id: Option<&str>,
        status: Option<&str>,
    ) -> Result<Vec<PendingActionRow>, StoreError> {
        self.pending_actions_in(KeyScope::All, recipient_id, status).await
    }

    /// [`Self::pending_actions`] of the investigations in `scope`.
    pub async fn pending_actions_in(
        &self,
        scope: KeyScope<'_>,
        recipient_id: Option<&str>,
        status: Option<&str>,
    ) -> Result<Vec<PendingActionRow>, StoreError> {
        let (from, to, exclude) = scope.binds();
        let rows: Vec<StoredAction> = on_pool!(self, conn => {
            sqlx::query_as(LIST_ACTIONS)
                .bind(recipient_id)
                .bind(status)
                .bind(from.as_deref())
                .bind(to.as_deref())
                .bind(exclude)
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("list pending actions"))?;
        Ok(rows.into_iter().map(StoredAction::into_row).collect())
    }

    /// A page of [`Self::pending_actions_in`]: at most `limit` actions after `after`, oldest
    /// first, and where the next page starts (`None` on the last page).
    pub async fn list_pending_actions_in(
        &self,
        scope: KeyScope<'_>,
        recipient_id: Option<&str>,
        status: Option<&str>,
        after: Option<&ActionCursor>,
        limit: usize,
    ) -> Result<(Vec<PendingActionRow>, Option<ActionCursor>), StoreError> {
        let limit = limit.max(1);
        let (from, to, exclude) = scope.binds();
        // One row more than the page, to know whether another page follows.
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
        let rows: Vec<StoredAction> = on_pool!(self, conn => {
            sqlx::query_as(LIST_ACTIONS_PAGE)
                .bind(recipient_id)
                .bind(status)
                .bind(from.as_deref())
                .bind(to.as_deref())
                .bind(exclude)
                .bind(after.map(|c| c.created_at_ms))
                .bind(after.map(|c| c.action_id.as_str()))
                .bind(fetch)
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("list pending actions"))?;
        let more = rows.len() > limit;
        let page: Vec<PendingActionRow> = rows.into_iter().take(limit).map(StoredAction::into_row).collect();
        let next = if more {
            page.last().map(|a| ActionCursor { created_at_ms: to_ms(a.created_at), action_id: a.action_id.clone() })
        } else {
            None
        };
        Ok((page, next))
    }
}

// --- CSV export. ---

const AUDIT_HEADER: [&str; 9] =
    ["investigation_id", "seq", "correlation_id", "at", "actor", "kind", "status_from", "status_to", "entry_json"];
const ACTION_HEADER: [&str; 11] = [
    "action_id",
    "investigation_id",
    "mutation_id",
    "recipient_id",
    "recipient_role",
    "subject",
    "body",
    "status",
    "reply_json",
    "created_at",
    "answered_at",
];

/// Writes audit entries as CSV to `out`: a header row (`investigation_id, seq, correlation_id,
/// at, actor, kind, status_from, status_to, entry_json`), then one row per entry in the order
/// given. Times are RFC 3339 in UTC with milliseconds; `None` is an empty cell; cells holding
/// commas, quotes or line breaks are quoted.
pub fn write_audit_csv<W: Write>(rows: &[AuditRow], out: W) -> Result<(), StoreError> {
    let failed = |source| StoreError::CsvExport { what: "audit entries", source };
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(AUDIT_HEADER).map_err(failed)?;
    for r in rows {
        writer
            .write_record([
                r.investigation_id.as_str(),
                &r.seq.to_string(),
                &r.correlation_id,
                &rfc3339(r.at),
                &r.actor,
                &r.kind,
                r.status_from.as_deref().unwrap_or(""),
                r.status_to.as_deref().unwrap_or(""),
                &r.entry_json,
            ])
            .map_err(failed)?;
    }
    writer.flush().map_err(|e| failed(e.into()))
}

/// Writes pending actions as CSV to `out`: a header row (`action_id, investigation_id,
/// mutation_id, recipient_id, recipient_role, subject, body, status, reply_json, created_at,
/// answered_at`), then one row per action in the order given, formatted as in
/// [`write_audit_csv`].
pub fn write_pending_actions_csv<W: Write>(rows: &[PendingActionRow], out: W) -> Result<(), StoreError> {
    let failed = |source| StoreError::CsvExport { what: "pending actions", source };
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(ACTION_HEADER).map_err(failed)?;
    for r in rows {
        writer
            .write_record([
                r.action_id.as_str(),
                &r.investigation_id,
                &r.mutation_id,
                &r.recipient_id,
                &r.recipient_role,
                &r.subject,
                &r.body,
                &r.status,
                r.reply_json.as_deref().unwrap_or(""),
                &rfc3339(r.created_at),
                &r.answered_at.map(rfc3339).unwrap_or_default(),
            ])
            .map_err(failed)?;
    }
    writer.flush().map_err(|e| failed(e.into()))
}

/// `t` as RFC 3339 in UTC at millisecond precision, e.g. `2025-11-10T09:00:00.000Z`. Written
/// here rather than taken from a date crate: it is the only date arithmetic the store does.
fn rfc3339(t: SystemTime) -> String {
    const DAY_MS: i64 = 86_400_000;
    let ms = to_ms(t);
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    let (secs, millis) = (in_day / 1000, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`: eras of 400 years, each starting on March 1st so leap days fall last).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // 0 = March
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // In range by construction: day 1..=31, month 1..=12.
    (year, month as u32, day as u32)
}

// --- CSV import. ---

/// A row type of one of the HR files.
trait HrRecord: Sized {
    /// The file's columns, the names its header must use (in any order).
    const COLUMNS: &'static [&'static str];
    /// The row from its cells, in [`Self::COLUMNS`] order.
    fn parse(cells: &Cells<'_>) -> Result<Self, HrDataProblem>;
    /// The row's primary key, as shown in a [`HrDataProblem::RepeatedKey`].
    fn key(&self) -> String;
}

/// The cells of one CSV row, addressed by their position in [`HrRecord::COLUMNS`].
struct Cells<'a> {
    record: &'a csv::StringRecord,
    /// Where each of `columns` is in the record.
    index: &'a [usize],
    columns: &'static [&'static str],
}

impl Cells<'_> {
    fn raw(&self, i: usize) -> &str {
        // A non-flexible reader gives every record as many cells as the header.
        self.record.get(self.index[i]).unwrap_or("")
    }

    fn required(&self, i: usize) -> Result<String, HrDataProblem> {
        match self.raw(i) {
            "" => Err(HrDataProblem::Empty { column: self.columns[i] }),
            value => Ok(value.to_owned()),
        }
    }

    fn optional(&self, i: usize) -> Option<String> {
        Some(self.raw(i)).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    fn date(&self, i: usize) -> Result<String, HrDataProblem> {
        let value = self.required(i)?;
        self.check_date(i, value)
    }

    fn optional_date(&self, i: usize) -> Result<Option<String>, HrDataProblem> {
        self.optional(i).map(|value| self.check_date(i, value)).transpose()
    }

    fn check_date(&self, i: usize, value: String) -> Result<String, HrDataProblem> {
        if is_date(&value) {
            Ok(value)
        } else {
            Err(HrDataProblem::NotADate { column: self.columns[i], value })
        }
    }

    fn utc_time(&self, i: usize) -> Result<String, HrDataProblem> {
        let value = self.required(i)?;
        if is_utc_time(&value) {
            Ok(value)
        } else {
            Err(HrDataProblem::NotATime { column: self.columns[i], value })
        }
    }

    /// `end` (column `j`) must not be before `start` (column `i`). Dates compare as text.
    fn ordered(&self, i: usize, start: &str, j: usize, end: &str) -> Result<(), HrDataProblem> {
        if end < start {
            return Err(HrDataProblem::EndsBeforeStart {
                start_column: self.columns[i],
                start: start.to_owned(),
                end_column: self.columns[j],
                end: end.to_owned(),
            });
        }
        Ok(())
    }
}

impl HrRecord for HrUser {
    const COLUMNS: &'static [&'static str] = &["user_id", "name", "email", "department", "manager_id", "role_id"];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        Ok(HrUser {
            user_id: c.required(0)?,
            name: c.required(1)?,
            email: c.required(2)?,
            department: c.required(3)?,
            manager_id: c.optional(4),
            role_id: c.optional(5),
        })
    }

    fn key(&self) -> String {
        self.user_id.clone()
    }
}

impl HrRecord for HrRole {
    const COLUMNS: &'static [&'static str] = &["role_id", "name", "description"];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        Ok(HrRole { role_id: c.required(0)?, name: c.required(1)?, description: c.required(2)? })
    }

    fn key(&self) -> String {
        self.role_id.clone()
    }
}

impl HrRecord for RoleAuthorisation {
    const COLUMNS: &'static [&'static str] = &["role_id", "system", "access_level"];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        Ok(RoleAuthorisation { role_id: c.required(0)?, system: c.required(1)?, access_level: c.required(2)? })
    }

    fn key(&self) -> String {
        format!("{}, {}, {}", self.role_id, self.system, self.access_level)
    }
}

impl HrRecord for UserAuthorisation {
    const COLUMNS: &'static [&'static str] = &["user_id", "system", "access_level", "granted_on", "expires_on"];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        let row = UserAuthorisation {
            user_id: c.required(0)?,
            system: c.required(1)?,
            access_level: c.required(2)?,
            granted_on: c.date(3)?,
            expires_on: c.optional_date(4)?,
        };
        if let Some(expires_on) = &row.expires_on {
            c.ordered(3, &row.granted_on, 4, expires_on)?;
        }
        Ok(row)
    }

    fn key(&self) -> String {
        format!("{}, {}, {}", self.user_id, self.system, self.access_level)
    }
}

impl HrRecord for Absence {
    const COLUMNS: &'static [&'static str] = &["user_id", "start_date", "end_date"];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        let row = Absence { user_id: c.required(0)?, start_date: c.date(1)?, end_date: c.date(2)? };
        c.ordered(1, &row.start_date, 2, &row.end_date)?;
        Ok(row)
    }

    fn key(&self) -> String {
        format!("{}, {}", self.user_id, self.start_date)
    }
}

impl HrRecord for HrMutationRow {
    const COLUMNS: &'static [&'static str] = &[
        "mutation_id",
        "changer_id",
        "target_user_id",
        "system",
        "access_level",
        "change_type",
        "description",
        "changed_at",
        "change_investigation",
    ];

    fn parse(c: &Cells<'_>) -> Result<Self, HrDataProblem> {
        Ok(HrMutationRow {
            mutation_id: c.required(0)?,
            changer_id: c.required(1)?,
            target_user_id: c.required(2)?,
            system: c.required(3)?,
            access_level: c.required(4)?,
            change_type: c.required(5)?,
            description: c.required(6)?,
            changed_at: c.utc_time(7)?,
            change_investigation: c.optional(8).unwrap_or_else(|| CHANGE_INVESTIGATION_PENDING.to_owned()),
        })
    }

    fn key(&self) -> String {
        self.mutation_id.clone()
    }
}

/// Where the HR files are read from.
enum Source<'a> {
    Dir(&'a Path),
    /// `(file name, CSV text)`.
    Texts(&'a [(&'a str, &'a str)]),
}

/// Reads and validates `file`: a header naming exactly `T::COLUMNS`, then rows.
fn read_csv<T: HrRecord>(source: &Source<'_>, file: &str) -> Result<Vec<T>, StoreError> {
    let path = match source {
        Source::Dir(dir) => dir.join(file),
        Source::Texts(_) => std::path::PathBuf::from(file),
    };
    let bad = |line: Option<u64>, problem| StoreError::HrData { file: path.clone(), line, problem };
    let unreadable = |e: csv::Error| bad(e.position().map(csv::Position::line), HrDataProblem::Unreadable(e));
    let input: Box<dyn std::io::Read> = match source {
        // Opening fails for the whole file, never at a line.
        Source::Dir(_) => {
            Box::new(std::fs::File::open(&path).map_err(|e| bad(None, HrDataProblem::Unreadable(e.into())))?)
        }
        Source::Texts(files) => match files.iter().find(|(name, _)| *name == file) {
            Some((_, text)) => Box::new(text.as_bytes()),
            None => {
                let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file among the given ones");
                return Err(bad(None, HrDataProblem::Unreadable(missing.into())));
            }
        },
    };
    // Trimmed: a space after a comma is formatting, not data.
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(input);
    let header = reader.headers().map_err(unreadable)?.clone();
    let index = column_index(&header, T::COLUMNS).map_err(|problem| bad(Some(1), problem))?;
    let mut first_lines: HashMap<String, u64> = HashMap::new();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(unreadable)?;
        let line = record.position().map_or(0, csv::Position::line);
        let row = T::parse(&Cells { record: &record, index: &index, columns: T::COLUMNS })
            .map_err(|problem| bad(Some(line), problem))?;
        let key = row.key();
        if let Some(&first_line) = first_lines.get(&key) {
            return Err(bad(Some(line), HrDataProblem::RepeatedKey { key, first_line }));
        }
        first_lines.insert(key, line);
        rows.push(row);
    }
    Ok(rows)
}

/// Where each of `columns` is in `header`. Every column must be there, once, and no other:
/// an unknown column is most likely a misspelt one whose data would be lost.
fn column_index(header: &csv::StringRecord, columns: &'static [&'static str]) -> Result<Vec<usize>, HrDataProblem> {
    let mut at: Vec<Option<usize>> = vec![None; columns.len()];
    for (position, name) in header.iter().enumerate() {
        let Some(i) = columns.iter().position(|c| *c == name) else {
            return Err(HrDataProblem::UnknownColumn { column: name.to_owned() });
        };
        if at[i].replace(position).is_some() {
            return Err(HrDataProblem::RepeatedColumn { column: name.to_owned() });
        }
    }
    at.into_iter()
        .zip(columns.iter().copied())
        .map(|(position, column)| position.ok_or(HrDataProblem::MissingColumn { column }))
        .collect()
}

/// Whether `s` is a valid `YYYY-MM-DD` date.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(&b[0..4]), digits(&b[5..7]), digits(&b[8..10])) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day)
}

/// Whether `s` is an RFC 3339 time in UTC: `YYYY-MM-DDTHH:MM:SS`, optional fractional seconds,
/// then `Z`. Offsets other than `Z` are refused so that every stored time reads the same way.
fn is_utc_time(s: &str) -> bool {
    let b = s.as_bytes();
    // `get`, not `[..10]`: twenty bytes need not put a character boundary at the tenth (a
    // full-width digit in a CSV cell), and there slicing would panic.
    if b.len() < 20 || !s.get(..10).is_some_and(is_date) || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) = (digits(&b[11..13]), digits(&b[14..16]), digits(&b[17..19])) else {
        return false;
    };
    let fraction_ok = match &b[19..b.len() - 1] {
        [] => true,
        [b'.', rest @ ..] => !rest.is_empty() && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    hour < 24 && minute < 60 && second < 60 && fraction_ok && b[b.len() - 1] == b'Z'
}

/// The number written by ASCII digits `b`; `None` if any is not a digit.
fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |n, d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn scopes_bind_a_tenants_key_range() {
        assert_eq!(KeyScope::Prefix("acme/").binds(), (Some("acme/".into()), Some("acme0".into()), None));
        assert_eq!(KeyScope::Prefix("team_b/").binds().1.as_deref(), Some("team_b0"));
        assert_eq!(KeyScope::Unprefixed.binds(), (None, None, Some("%/%")));
        assert_eq!(KeyScope::All.binds(), (None, None, None));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end(""), None);
    }

    #[test]
    fn formats_rfc3339_in_utc() {
        let at = from_ms;
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_762_765_200_000)), "2025-11-10T09:00:00.000Z");
        assert_eq!(rfc3339(at(1_762_765_200_000 + 86_399_999)), "2025-11-11T08:59:59.999Z");
        assert_eq!(rfc3339(at(-1)), "1969-12-31T23:59:59.999Z");
        // 2024-02-29 (a leap day) and 2000-03-01 (after a 400-year leap day).
        assert_eq!(rfc3339(at(1_709_164_800_000)), "2024-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_868_800_000)), "2000-03-01T00:00:00.000Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_micros(1_999)), "1970-01-01T00:00:00.001Z");
    }

    #[test]
    fn validates_dates_and_times() {
        for ok in ["2025-11-10", "2024-02-29", "2000-02-29", "1999-12-31"] {
            assert!(is_date(ok), "{ok}");
        }
        for bad in ["2025-02-29", "1900-02-29", "2025-13-01", "2025-00-10", "2025-11-00", "2025-11-31", "2025-1-10"] {
            assert!(!is_date(bad), "{bad}");
        }
        for bad in ["25-11-10", "2025/11/10", "2025-11-10T", "２０２５-11-10", "+025-11-10"] {
            assert!(!is_date(bad), "{bad}");
        }
        for ok in ["2025-11-10T09:00:00Z", "2025-11-10T23:59:59.123Z", "2025-11-10T00:00:00.5Z"] {
            assert!(is_utc_time(ok), "{ok}");
        }
        for bad in [
            "2025-11-10T09:00:00",
            "2025-11-10T09:00:00+01:00",
            "2025-11-10 09:00:00Z",
            "2025-11-10T24:00:00Z",
            "2025-11-10T09:60:00Z",
            "2025-11-10T09:00:00.Z",
            "2025-11-31T09:00:00Z",
            "2025-11-10T09:00:00z",
        ] {
            assert!(!is_utc_time(bad), "{bad}");
        }
    }

    /// Checked by length in bytes, a time whose first ten bytes end inside a character must
    /// still be refused, not split there.
    #[test]
    fn a_time_with_wide_characters_is_not_a_time() {
        for bad in ["２０２５-11-10T09:00:00Z", "2025-11-1０T09:00:00Z", "2025-11-10T09:00:00é", "éééééééééééé"]
        {
            assert!(!is_utc_time(bad), "{bad}");
        }
        let csv = "mutation_id,changer_id,target_user_id,system,access_level,change_type,description,changed_at,\
                   change_investigation\nM1,U1,U2,crm,admin,grant,why,２０２５-11-10T09:00:00Z,\n";
        let files = [("hr_mutations.csv", csv)];
        let err = read_csv::<HrMutationRow>(&Source::Texts(&files), "hr_mutations.csv").unwrap_err();
        assert!(
            matches!(
                &err,
                StoreError::HrData { line: Some(2), problem: HrDataProblem::NotATime { column: "changed_at", .. }, .. }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn header_columns_in_any_order_but_exactly() {
        let header = |names: &[&str]| csv::StringRecord::from(names.to_vec());
        let columns = Absence::COLUMNS;
        assert_eq!(column_index(&header(&["end_date", "user_id", "start_date"]), columns).unwrap(), vec![1, 2, 0]);
        assert!(matches!(
            column_index(&header(&["user_id", "start_date"]), columns),
            Err(HrDataProblem::MissingColumn { column: "end_date" })
        ));
        assert!(matches!(
            column_index(&header(&["user_id", "start_date", "end_date", "stat_date"]), columns),
            Err(HrDataProblem::UnknownColumn { column }) if column == "stat_date"
        ));
        assert!(matches!(
            column_index(&header(&["user_id", "start_date", "end_date", "user_id"]), columns),
            Err(HrDataProblem::RepeatedColumn { column }) if column == "user_id"
        ));
    }
}
