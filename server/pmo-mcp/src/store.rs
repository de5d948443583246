//! The PMO data in SQLite: the service catalog and other settings, projects, technicians,
//! customers, tasks, bookings and ended calls.
//!
//! Every operation a tool runs is one method here. Its errors ([`PmoError`]) are the tool errors
//! the caller sees: each says what was wrong and, where it can, what to do instead.

use std::{path::PathBuf, str::FromStr, time::Duration};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{
    migrate::Migrator,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow},
    Row,
};

static MIGRATIONS: Migrator = sqlx::migrate!("./migrations");

/// The settings category of the service catalog.
pub const SERVICE_CATEGORY: &str = "dl__service_category";
/// The settings category of the booking time slots.
pub const TIME_SLOT: &str = "dl__time_slot";

const CUSTOMER: &str = "CUS";
const TASK: &str = "TSK";
const PROJECT: &str = "PRJ";
const BOOKING: &str = "BKG";

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("invalid database URL {url:?} (expected sqlite://PATH or sqlite::memory:)")]
    InvalidUrl {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("the directory {path:?} of the database file does not exist")]
    MissingDir { path: PathBuf },
    #[error("cannot open the database {url:?}")]
    Connect {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot migrate the database {url:?}")]
    Migrate {
        url: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

/// A tool's failure, reported to the caller as a tool error (`isError: true`). The message is
/// written for the model placing the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmoError {
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: &'static str, reason: String },
    #[error("unknown settings category {category:?}; known categories: {}", known.join(", "))]
    UnknownCategory { category: String, known: Vec<String> },
    #[error("unknown entity_type {entity_type:?}; use \"project\" or \"task\"")]
    UnknownEntityType { entity_type: String },
    #[error("customer_get needs a phone or a customer_id")]
    MissingLookupKey,
    #[error("no customer found with {key}; create one with customer_create")]
    CustomerNotFound { key: String },
    #[error(
        "a customer with phone {phone} already exists ({customer_id}); use customer_get to fetch it instead of creating a new one"
    )]
    DuplicatePhone { phone: String, customer_id: String },
    #[error("unknown service_category {category:?}; use one of: {} (see setting_list with category \"dl__service_category\")", known.join(", "))]
    UnknownServiceCategory { category: String, known: Vec<String> },
    #[error("no task {task_id}; create it with task_create first")]
    TaskNotFound { task_id: String },
    #[error("unknown technician {technician:?}; technicians: {}", known.join(", "))]
    UnknownTechnician { technician: String, known: Vec<String> },
    #[error("unknown time_slot {time_slot:?}; use one of: {}", known.join(", "))]
    UnknownTimeSlot { time_slot: String, known: Vec<String> },
    #[error("{date} is in the past; book today ({today}) or later")]
    DateInPast { date: String, today: String },
    #[error(
        "{technician} is already booked on {date} at {time_slot}; choose another time_slot, date or technician{}",
        free_hint(free_slots)
    )]
    SlotTaken { technician: String, date: String, time_slot: String, free_slots: Vec<String> },
    #[error(
        "no {category} technician is free on {date} at {time_slot}; choose another time_slot or date{}",
        free_hint(free_slots)
    )]
    NoTechnicianFree { category: String, date: String, time_slot: String, free_slots: Vec<String> },
    #[error("the PMO database failed; try again later")]
    Database(#[from] sqlx::Error),
}

fn free_hint(free_slots: &[String]) -> String {
    if free_slots.is_empty() {
        " (no slot is free that day)".to_owned()
    } else {
        format!(" (free that day: {})", free_slots.join(", "))
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> PmoError {
    PmoError::InvalidArgument { field, reason: reason.into() }
}

/// One entry of a settings category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Setting {
    /// The value to pass to other tools (e.g. `plumbing` as a task's service_category).
    pub code: String,
    /// The display name.
    pub name: String,
    pub description: String,
}

/// The entries of one settings category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SettingList {
    pub category: String,
    pub entries: Vec<Setting>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Project {
    /// `PRJ-...`.
    pub id: String,
    pub name: String,
    /// planned, active or completed.
    pub status: String,
    pub description: String,
    pub manager: Option<String>,
    pub start_date: Option<String>,
    pub due_date: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Customer {
    /// `CUS-...`.
    pub id: String,
    pub name: String,
    pub phone: String,
    pub email: Option<String>,
    pub address: Option<String>,
    pub created_at: String,
}

/// How urgent a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
// Inline in the tool's schema: no `$ref` for the model to follow.
#[schemars(inline)]
pub enum Priority {
    Low,
    #[default]
    Medium,
    High,
    Urgent,
}

impl Priority {
    fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Medium => "medium",
            Priority::High => "high",
            Priority::Urgent => "urgent",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Task {
    /// `TSK-...`.
    pub id: String,
    /// The customer who asked for it; none for internal project work.
    pub customer_id: Option<String>,
    pub project_id: Option<String>,
    /// A `dl__service_category` code.
    pub service_category: String,
    pub description: String,
    pub priority: String,
    pub address: Option<String>,
    /// open, scheduled, in_progress or done.
    pub status: String,
    pub created_at: String,
}

/// A project or a task, as `entity_list` returns them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Entity {
    Project(Project),
    Task(Task),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EntityList {
    /// `project` or `task`.
    pub entity_type: String,
    pub count: usize,
    pub items: Vec<Entity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Booking {
    /// `BKG-...`.
    pub id: String,
    pub task_id: String,
    /// YYYY-MM-DD.
    pub date: String,
    pub time_slot: String,
    pub technician: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hangup {
    /// Always true: the call is ended.
    pub ended: bool,
    pub call_session_id: String,
    /// The reason recorded when the call first ended.
    pub reason: Option<String>,
    /// True when the call had already been ended by an earlier call_hangup.
    pub already_ended: bool,
    pub ended_at: String,
}

/// A new customer.
#[derive(Debug, Clone, Default)]
pub struct NewCustomer {
    pub name: String,
    pub phone: String,
    pub email: Option<String>,
    pub address: Option<String>,
}

/// A new customer task.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub customer_id: String,
    pub service_category: String,
    pub description: String,
    pub priority: Option<Priority>,
    pub address: Option<String>,
}

/// A booking of a technician for a task.
#[derive(Debug, Clone, Default)]
pub struct NewBooking {
    pub task_id: String,
    pub date: String,
    pub time_slot: String,
    pub technician: Option<String>,
}

/// The PMO database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating if missing) and migrates `sqlite://PATH`, or a fresh `sqlite::memory:`
    /// database. Either way the seed data (service catalog, time slots, technicians, projects) is
    /// there once this returns.
    pub async fn open(url: &str) -> Result<Store, OpenError> {
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let mut connect = SqliteConnectOptions::from_str(url)
            .map_err(|source| OpenError::InvalidUrl { url: url.to_owned(), source })?
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let mut pool = SqlitePoolOptions::new();
        if memory {
            // The database lives as long as its connection: keep exactly one, forever.
            pool = pool.max_connections(1).min_connections(1).idle_timeout(None).max_lifetime(None);
        } else {
            connect = connect.create_if_missing(true).journal_mode(SqliteJournalMode::Wal);
            if let Some(dir) = connect.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return Err(OpenError::MissingDir { path: dir.to_owned() });
                }
            }
            pool = pool.max_connections(4);
        }
        let pool =
            pool.connect_with(connect).await.map_err(|source| OpenError::Connect { url: url.to_owned(), source })?;
        MIGRATIONS.run(&pool).await.map_err(|source| OpenError::Migrate { url: url.to_owned(), source })?;
        Ok(Store { pool })
    }

    /// Closes the connections.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The entries of a settings category, in display order.
    pub async fn setting_list(&self, category: &str) -> Result<SettingList, PmoError> {
        let category = category.trim();
        let rows =
            sqlx::query("SELECT code, name, description FROM settings WHERE category = ? ORDER BY sort_order, code")
                .bind(category)
                .fetch_all(&self.pool)
                .await?;
        if rows.is_empty() {
            let known = sqlx::query_scalar("SELECT DISTINCT category FROM settings ORDER BY category")
                .fetch_all(&self.pool)
                .await?;
            return Err(PmoError::UnknownCategory { category: category.to_owned(), known });
        }
        let entries = rows
            .iter()
            .map(|row| Setting { code: row.get("code"), name: row.get("name"), description: row.get("description") })
            .collect();
        Ok(SettingList { category: category.to_owned(), entries })
    }

    /// Projects or tasks, optionally only those whose text fields contain `filter` (ignoring case).
    pub async fn entity_list(&self, entity_type: &str, filter: Option<&str>) -> Result<EntityList, PmoError> {
        let kind = entity_type.trim().to_ascii_lowercase();
        let pattern = filter.map(str::trim).filter(|f| !f.is_empty()).map(like_pattern);
        let (entity_type, items) = match kind.as_str() {
            "project" | "projects" => {
                let rows = sqlx::query(
                    "SELECT seq, name, status, description, manager, start_date, due_date FROM projects \
                     WHERE ?1 IS NULL OR lower(name || ' ' || status || ' ' || description || ' ' || \
                     coalesce(manager, '') || ' ' || printf('PRJ-%05d', seq)) LIKE ?1 ESCAPE '\\' \
                     ORDER BY seq",
                )
                .bind(pattern)
                .fetch_all(&self.pool)
                .await?;
                ("project", rows.iter().map(|row| Entity::Project(project(row))).collect::<Vec<_>>())
            }
            "task" | "tasks" => {
                let rows = sqlx::query(
                    "SELECT * FROM tasks \
                     WHERE ?1 IS NULL OR lower(description || ' ' || status || ' ' || priority || ' ' || \
                     service_category || ' ' || coalesce(address, '') || ' ' || printf('TSK-%05d', seq) || ' ' || \
                     CASE WHEN customer_seq IS NULL THEN '' ELSE printf('CUS-%05d', customer_seq) END || ' ' || \
                     CASE WHEN project_seq IS NULL THEN '' ELSE printf('PRJ-%05d', project_seq) END) LIKE ?1 ESCAPE '\\' \
                     ORDER BY seq",
                )
                .bind(pattern)
                .fetch_all(&self.pool)
                .await?;
                ("task", rows.iter().map(|row| Entity::Task(task(row))).collect())
            }
            _ => return Err(PmoError::UnknownEntityType { entity_type: entity_type.to_owned() }),
        };
        Ok(EntityList { entity_type: entity_type.to_owned(), count: items.len(), items })
    }

    /// Creates a customer; a phone number already on file is [`PmoError::DuplicatePhone`].
    pub async fn customer_create(&self, new: NewCustomer) -> Result<Customer, PmoError> {
        let name = required("name", &new.name)?;
        let phone = required("phone", &new.phone)?;
        let phone_key = phone_key(phone)?;
        let email = optional(new.email.as_deref());
        if let Some(email) = email {
            validate_email(email)?;
        }
        let address = optional(new.address.as_deref());
        let inserted = sqlx::query(
            "INSERT INTO customers (name, phone, phone_key, email, address) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (phone_key) DO NOTHING RETURNING *",
        )
        .bind(name)
        .bind(phone)
        .bind(&phone_key)
        .bind(email)
        .bind(address)
        .fetch_optional(&self.pool)
        .await?;
        match inserted {
            Some(row) => Ok(customer(&row)),
            None => {
                let existing = self.customer_by_phone_key(&phone_key).await?;
                Err(PmoError::DuplicatePhone {
                    phone: phone.to_owned(),
                    customer_id: existing.map(|c| c.id).unwrap_or_default(),
                })
            }
        }
    }

    /// A customer by id, or else by phone number (written any way).
    pub async fn customer_get(&self, phone: Option<&str>, customer_id: Option<&str>) -> Result<Customer, PmoError> {
        if let Some(id) = optional(customer_id) {
            let Some(seq) = parse_id(CUSTOMER, id) else {
                return Err(invalid("customer_id", format!("{id:?} is not a customer id (they look like CUS-00001)")));
            };
            let row = sqlx::query("SELECT * FROM customers WHERE seq = ?").bind(seq).fetch_optional(&self.pool).await?;
            return row.map(|row| customer(&row)).ok_or(PmoError::CustomerNotFound { key: format!("id {id}") });
        }
        let Some(phone) = optional(phone) else {
            return Err(PmoError::MissingLookupKey);
        };
        let key = phone_key(phone)?;
        self.customer_by_phone_key(&key).await?.ok_or(PmoError::CustomerNotFound { key: format!("phone {phone}") })
    }

    async fn customer_by_phone_key(&self, key: &str) -> Result<Option<Customer>, PmoError> {
        let row =
            sqlx::query("SELECT * FROM customers WHERE phone_key = ?").bind(key).fetch_optional(&self.pool).await?;
        Ok(row.map(|row| customer(&row)))
    }

    /// Creates an open task for a customer; the address defaults to the customer's.
    pub async fn task_create(&self, new: NewTask) -> Result<Task, PmoError> {
        let customer_id = required("customer_id", &new.customer_id)?;
        let description = required("description", &new.description)?;
        let requested_category = required("service_category", &new.service_category)?;
        let customer = self.customer_get(None, Some(customer_id)).await?;
        let category = self.service_category(requested_category).await?;
        let address = optional(new.address.as_deref()).map(str::to_owned).or(customer.address);
        let priority = new.priority.unwrap_or_default();
        let seq = parse_id(CUSTOMER, &customer.id).expect("an id this store made");
        let row = sqlx::query(
            "INSERT INTO tasks (customer_seq, service_category, description, priority, address) \
             VALUES (?, ?, ?, ?, ?) RETURNING *",
        )
        .bind(seq)
        .bind(&category)
        .bind(description)
        .bind(priority.as_str())
        .bind(address)
        .fetch_one(&self.pool)
        .await?;
        Ok(task(&row))
    }

    /// The code of a service category given by code or display name, ignoring case.
    async fn service_category(&self, requested: &str) -> Result<String, PmoError> {
        let code: Option<String> = sqlx::query_scalar(
            "SELECT code FROM settings WHERE category = ?1 AND (lower(code) = lower(?2) OR lower(name) = lower(?2))",
        )
        .bind(SERVICE_CATEGORY)
        .bind(requested)
        .fetch_optional(&self.pool)
        .await?;
        match code {
            Some(code) => Ok(code),
            None => Err(PmoError::UnknownServiceCategory {
                category: requested.to_owned(),
                known: self.setting_codes(SERVICE_CATEGORY).await?,
            }),
        }
    }

    async fn setting_codes(&self, category: &str) -> Result<Vec<String>, PmoError> {
        Ok(sqlx::query_scalar("SELECT code FROM settings WHERE category = ? ORDER BY sort_order, code")
            .bind(category)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Books a technician for a task. Without a technician, the first free one whose specialty is
    /// the task's service category is booked. The task becomes `scheduled`.
    pub async fn book(&self, new: NewBooking) -> Result<Booking, PmoError> {
        let task_id = required("task_id", &new.task_id)?;
        let date = required("date", &new.date)?;
        let requested_slot = required("time_slot", &new.time_slot)?;
        let today = today();
        validate_date(date)?;
        if date < today.as_str() {
            return Err(PmoError::DateInPast { date: date.to_owned(), today });
        }
        let Some(task_seq) = parse_id(TASK, task_id) else {
            return Err(invalid("task_id", format!("{task_id:?} is not a task id (they look like TSK-00001)")));
        };
        let category: Option<String> = sqlx::query_scalar("SELECT service_category FROM tasks WHERE seq = ?")
            .bind(task_seq)
            .fetch_optional(&self.pool)
            .await?;
        let Some(category) = category else {
            return Err(PmoError::TaskNotFound { task_id: task_id.to_owned() });
        };
        let slots = self.setting_codes(TIME_SLOT).await?;
        let Some(slot) = slots.iter().find(|s| s.eq_ignore_ascii_case(&requested_slot.replace(' ', ""))).cloned()
        else {
            return Err(PmoError::UnknownTimeSlot { time_slot: requested_slot.to_owned(), known: slots });
        };
        let technician = match optional(new.technician.as_deref()) {
            Some(requested) => {
                let name: Option<String> =
                    sqlx::query_scalar("SELECT name FROM technicians WHERE lower(name) = lower(?)")
                        .bind(requested)
                        .fetch_optional(&self.pool)
                        .await?;
                match name {
                    Some(name) => name,
                    None => {
                        let known = sqlx::query_scalar("SELECT name FROM technicians ORDER BY name")
                            .fetch_all(&self.pool)
                            .await?;
                        return Err(PmoError::UnknownTechnician { technician: requested.to_owned(), known });
                    }
                }
            }
            None => {
                let free: Option<String> = sqlx::query_scalar(
                    "SELECT name FROM technicians t WHERE specialty = ? AND NOT EXISTS \
                     (SELECT 1 FROM bookings b WHERE b.technician = t.name AND b.date = ? AND b.time_slot = ?) \
                     ORDER BY name LIMIT 1",
                )
                .bind(&category)
                .bind(date)
                .bind(&slot)
                .fetch_optional(&self.pool)
                .await?;
                match free {
                    Some(name) => name,
                    None => {
                        return Err(PmoError::NoTechnicianFree {
                            free_slots: self.free_slots_of_specialty(&category, date, &slots).await?,
                            category,
                            date: date.to_owned(),
                            time_slot: slot,
                        })
                    }
                }
            }
        };
        let inserted = sqlx::query(
            "INSERT INTO bookings (task_seq, date, time_slot, technician) VALUES (?, ?, ?, ?) \
             ON CONFLICT (technician, date, time_slot) DO NOTHING RETURNING *",
        )
        .bind(task_seq)
        .bind(date)
        .bind(&slot)
        .bind(&technician)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = inserted else {
            return Err(PmoError::SlotTaken {
                free_slots: self.free_slots_of(&technician, date, &slots).await?,
                technician,
                date: date.to_owned(),
                time_slot: slot,
            });
        };
        sqlx::query("UPDATE tasks SET status = 'scheduled' WHERE seq = ? AND status = 'open'")
            .bind(task_seq)
            .execute(&self.pool)
            .await?;
        Ok(Booking {
            id: format_id(BOOKING, row.get("seq")),
            task_id: format_id(TASK, row.get("task_seq")),
            date: row.get("date"),
            time_slot: row.get("time_slot"),
            technician: row.get("technician"),
            created_at: row.get("created_at"),
        })
    }

    async fn free_slots_of(&self, technician: &str, date: &str, slots: &[String]) -> Result<Vec<String>, PmoError> {
        let taken: Vec<String> = sqlx::query_scalar("SELECT time_slot FROM bookings WHERE technician = ? AND date = ?")
            .bind(technician)
            .bind(date)
            .fetch_all(&self.pool)
            .await?;
        Ok(slots.iter().filter(|s| !taken.contains(s)).cloned().collect())
    }

    async fn free_slots_of_specialty(
        &self,
        specialty: &str,
        date: &str,
        slots: &[String],
    ) -> Result<Vec<String>, PmoError> {
        let mut free = Vec::new();
        for slot in slots {
            let any: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM technicians t WHERE specialty = ? AND NOT EXISTS \
                 (SELECT 1 FROM bookings b WHERE b.technician = t.name AND b.date = ? AND b.time_slot = ?) LIMIT 1",
            )
            .bind(specialty)
            .bind(date)
            .bind(slot)
            .fetch_optional(&self.pool)
            .await?;
            if any.is_some() {
                free.push(slot.clone());
            }
        }
        Ok(free)
    }

    /// Records the end of a call. Ending it again changes nothing and says so.
    pub async fn call_hangup(&self, call_session_id: &str, reason: Option<&str>) -> Result<Hangup, PmoError> {
        let id = required("call_session_id", call_session_id)?;
        let inserted = sqlx::query("INSERT INTO calls (call_session_id, reason) VALUES (?, ?) ON CONFLICT DO NOTHING")
            .bind(id)
            .bind(optional(reason))
            .execute(&self.pool)
            .await?
            .rows_affected();
        let row = sqlx::query("SELECT reason, ended_at FROM calls WHERE call_session_id = ?")
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
        Ok(Hangup {
            ended: true,
            call_session_id: id.to_owned(),
            reason: row.get("reason"),
            already_ended: inserted == 0,
            ended_at: row.get("ended_at"),
        })
    }
}

fn project(row: &SqliteRow) -> Project {
    Project {
        id: format_id(PROJECT, row.get("seq")),
        name: row.get("name"),
        status: row.get("status"),
        description: row.get("description"),
        manager: row.get("manager"),
        start_date: row.get("start_date"),
        due_date: row.get("due_date"),
    }
}

fn customer(row: &SqliteRow) -> Customer {
    Customer {
        id: format_id(CUSTOMER, row.get("seq")),
        name: row.get("name"),
        phone: row.get("phone"),
        email: row.get("email"),
        address: row.get("address"),
        created_at: row.get("created_at"),
    }
}

fn task(row: &SqliteRow) -> Task {
    Task {
        id: format_id(TASK, row.get("seq")),
        customer_id: row.get::<Option<i64>, _>("customer_seq").map(|seq| format_id(CUSTOMER, seq)),
        project_id: row.get::<Option<i64>, _>("project_seq").map(|seq| format_id(PROJECT, seq)),
        service_category: row.get("service_category"),
        description: row.get("description"),
        priority: row.get("priority"),
        address: row.get("address"),
        status: row.get("status"),
        created_at: row.get("created_at"),
    }
}

fn format_id(prefix: &str, seq: i64) -> String {
    format!("{prefix}-{seq:05}")
}

/// The sequence number of `PREFIX-00042` (any case, any number of zeros), or of a bare `42`.
fn parse_id(prefix: &str, id: &str) -> Option<i64> {
    let id = id.trim();
    let digits = match id.split_once('-') {
        Some((p, digits)) if p.eq_ignore_ascii_case(prefix) => digits,
        Some(_) => return None,
        None => id,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&seq| seq > 0)
}

/// A `LIKE` pattern matching `needle` anywhere, ignoring case (`\` escapes).
fn like_pattern(needle: &str) -> String {
    let mut pattern = String::from("%");
    for c in needle.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

fn required<'a>(field: &'static str, value: &'a str) -> Result<&'a str, PmoError> {
    let value = value.trim();
    if value.is_empty() {
        Err(invalid(field, "it must not be empty"))
    } else {
        Ok(value)
    }
}

fn optional(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// The digits of a phone number: `+1 (555) 010-2000` and `15550102000` are one number.
fn phone_key(phone: &str) -> Result<String, PmoError> {
    if let Some(c) = phone.chars().find(|c| !(c.is_ascii_digit() || " +-().".contains(*c))) {
        return Err(invalid("phone", format!("{phone:?} has the character {c:?}; give digits only")));
    }
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    if !(7..=15).contains(&digits.len()) {
        return Err(invalid("phone", format!("{phone:?} has {} digits; a phone number has 7 to 15", digits.len())));
    }
    Ok(digits)
}

fn validate_email(email: &str) -> Result<(), PmoError> {
    let valid = match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty() && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.')
        }
        None => false,
    };
    if valid && !email.contains(char::is_whitespace) && email.matches('@').count() == 1 {
        Ok(())
    } else {
        Err(invalid("email", format!("{email:?} is not an email address")))
    }
}

/// A real calendar date written `YYYY-MM-DD`.
fn validate_date(date: &str) -> Result<(), PmoError> {
    let bad = || invalid("date", format!("{date:?} is not a date written YYYY-MM-DD"));
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let number = |s: &str| s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse::<u32>().ok()).flatten();
    let (Some(year), Some(month), Some(day)) = (number(&date[0..4]), number(&date[5..7]), number(&date[8..10])) else {
        return Err(bad());
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if year < 1970 || day == 0 || day > days {
        return Err(bad());
    }
    Ok(())
}

/// Today's date (UTC), `YYYY-MM-DD`.
fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day number counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_other_kinds() {
        assert_eq!(format_id(CUSTOMER, 7), "CUS-00007");
        assert_eq!(parse_id(CUSTOMER, "CUS-00007"), Some(7));
        assert_eq!(parse_id(CUSTOMER, " cus-7 "), Some(7));
        assert_eq!(parse_id(CUSTOMER, "7"), Some(7));
        assert_eq!(parse_id(CUSTOMER, "TSK-00007"), None);
        assert_eq!(parse_id(CUSTOMER, "CUS-"), None);
        assert_eq!(parse_id(CUSTOMER, "CUS-0"), None);
        assert_eq!(parse_id(CUSTOMER, "CUS-x1"), None);
    }

    #[test]
    fn phone_numbers_are_compared_by_their_digits() {
        assert_eq!(phone_key("+1 (555) 010-2000").unwrap(), "15550102000");
        assert_eq!(phone_key("15550102000").unwrap(), "15550102000");
        assert!(matches!(phone_key("555-01"), Err(PmoError::InvalidArgument { field: "phone", .. })));
        assert!(matches!(phone_key("call me"), Err(PmoError::InvalidArgument { field: "phone", .. })));
    }

    #[test]
    fn dates_must_be_real_calendar_dates() {
        for good in ["2099-01-15", "2028-02-29", "2000-02-29", "2099-12-31"] {
            validate_date(good).unwrap();
        }
        for bad in ["2099-1-15", "2099/01/15", "2099-13-01", "2099-02-29", "1900-02-29", "2099-04-31", "tomorrow"] {
            assert!(validate_date(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn civil_dates_from_day_numbers() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_000), (2024, 10, 4));
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("HVAC"), "%hvac%");
        assert_eq!(like_pattern("50%_off"), "%50\\%\\_off%");
    }

    #[test]
    fn emails() {
        validate_email("ana@example.com").unwrap();
        for bad in ["ana", "ana@", "@example.com", "ana@example", "a b@example.com", "a@b@c.com"] {
            assert!(validate_email(bad).is_err(), "{bad}");
        }
    }

    async fn store() -> Store {
        Store::open("sqlite::memory:").await.unwrap()
    }

    #[tokio::test]
    async fn seeded_catalog_and_projects() {
        let store = store().await;
        let catalog = store.setting_list(SERVICE_CATEGORY).await.unwrap();
        let names: Vec<_> = catalog.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["Plumbing", "Electrical", "HVAC", "Landscaping", "General Maintenance"]);
        assert!(matches!(store.setting_list("nope").await, Err(PmoError::UnknownCategory { .. })));
        let projects = store.entity_list("projects", None).await.unwrap();
        assert_eq!(projects.count, 4);
        let active = store.entity_list("project", Some("ACTIVE")).await.unwrap();
        assert_eq!(active.count, 2);
        let riverside = store.entity_list("task", Some("riverside")).await.unwrap();
        assert_eq!(riverside.count, 2);
        assert!(matches!(store.entity_list("invoice", None).await, Err(PmoError::UnknownEntityType { .. })));
    }

    #[tokio::test]
    async fn customers_tasks_bookings_and_calls() {
        let store = store().await;
        let ana = store
            .customer_create(NewCustomer {
                name: "Ana Lopez".into(),
                phone: "+1 555 010 2000".into(),
                email: Some("ana@example.com".into()),
                address: Some("4 Oak Lane".into()),
            })
            .await
            .unwrap();
        assert_eq!(ana.id, "CUS-00001");
        let duplicate = store
            .customer_create(NewCustomer { name: "Ana L".into(), phone: "15550102000".into(), ..Default::default() })
            .await
            .unwrap_err();
        assert!(duplicate.to_string().contains("CUS-00001") && duplicate.to_string().contains("customer_get"));
        assert_eq!(
            store.customer_get(Some("(555) 010-2000 "), None).await.unwrap_err().to_string(),
            "no customer found with phone (555) 010-2000; create one with customer_create"
        );
        assert_eq!(store.customer_get(Some("1-555-010-2000"), None).await.unwrap(), ana);

        let task = store
            .task_create(NewTask {
                customer_id: ana.id.clone(),
                service_category: "plumbing".into(),
                description: "Kitchen sink leaks".into(),
                priority: Some(Priority::Urgent),
                address: None,
            })
            .await
            .unwrap();
        assert_eq!((task.id.as_str(), task.address.as_deref()), ("TSK-00006", Some("4 Oak Lane")));

        let book = |technician: Option<&str>| NewBooking {
            task_id: task.id.clone(),
            date: "2099-01-15".into(),
            time_slot: "08:00-10:00".into(),
            technician: technician.map(str::to_owned),
        };
        let first = store.book(book(None)).await.unwrap();
        assert_eq!(first.technician, "Alex Rivera");
        let second = store.book(book(None)).await.unwrap();
        assert_eq!(second.technician, "Casey Kim");
        let none_free = store.book(book(None)).await.unwrap_err();
        assert!(matches!(none_free, PmoError::NoTechnicianFree { .. }), "{none_free}");
        let taken = store.book(book(Some("alex rivera"))).await.unwrap_err();
        assert!(matches!(taken, PmoError::SlotTaken { .. }), "{taken}");
        assert!(taken.to_string().contains("10:00-12:00"), "{taken}");
        let tasks = store.entity_list("task", Some(&task.id)).await.unwrap();
        assert!(matches!(&tasks.items[..], [Entity::Task(t)] if t.status == "scheduled"));

        let first = store.call_hangup("call-1", Some("resolved")).await.unwrap();
        assert!(first.ended && !first.already_ended);
        let again = store.call_hangup("call-1", Some("other")).await.unwrap();
        assert!(again.ended && again.already_ended);
        assert_eq!(again.reason.as_deref(), Some("resolved"));
    }
}
