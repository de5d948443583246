//! The MCP server: the seven PMO tools over a [`Store`].
//!
//! A tool that cannot do what it was asked returns a tool error (`isError: true`) whose text says
//! why and what to do instead; only a call the protocol itself rejects (an unknown tool) is a
//! JSON-RPC error. Arguments that do not fit a tool's schema are tool errors too (rmcp reports
//! them as such).

use std::time::Duration;

use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{Implementation, ServerCapabilities, ServerConfig},
    service::RequestContext,
    tool, tool_handler, tool_router, Json, RoleServer, ServerHandler,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::store::{
    Booking, Customer, EntityList, Hangup, NewBooking, NewCustomer, NewTask, PmoError, Priority, SettingList, Store,
    Task,
};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SettingListArgs {
    /// The settings category: `dl__service_category` (the service catalog), `dl__time_slot`
    /// (booking time slots) or `dl__task_priority`.
    pub category: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EntityListArgs {
    /// `project` or `task`.
    pub entity_type: String,
    /// Only entities whose id, name, description, status, category, priority or address contains
    /// this text (ignoring case).
    #[serde(default)]
    pub filter: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CustomerCreateArgs {
    /// The customer's full name.
    pub name: String,
    /// The customer's phone number (unique: one customer per number).
    pub phone: String,
    #[serde(default)]
    pub email: Option<String>,
    /// The service address.
    #[serde(default)]
    pub address: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CustomerGetArgs {
    /// The caller's phone number, written any way.
    #[serde(default)]
    pub phone: Option<String>,
    /// A customer id such as `CUS-00001`; takes precedence over the phone.
    #[serde(default)]
    pub customer_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskCreateArgs {
    /// The customer the work is for (`CUS-...`).
    pub customer_id: String,
    /// A `dl__service_category` code or name, e.g. `plumbing` or `HVAC`.
    pub service_category: String,
    /// What is wrong and what the customer asks for.
    pub description: String,
    /// How urgent the work is; `medium` when not given.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Where the work is; the customer's address when not given.
    #[serde(default)]
    pub address: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PersonCalendarBookArgs {
    /// The task to book a visit for (`TSK-...`).
    pub task_id: String,
    /// The visit's date, `YYYY-MM-DD`, today or later.
    pub date: String,
    /// A `dl__time_slot` code such as `08:00-10:00`.
    pub time_slot: String,
    /// A technician's name; when not given, the first free technician of the task's service
    /// category is booked.
    #[serde(default)]
    pub technician: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CallHangupArgs {
    /// The phone call's session id.
    pub call_session_id: String,
    /// Why the call ends, e.g. `resolved` or `caller_request`.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `customer_create`'s and `customer_get`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CustomerResult {
    pub customer: Customer,
}

/// `task_create`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TaskResult {
    pub task: Task,
}

/// `person_calendar_book`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BookingResult {
    pub booking: Booking,
}

/// The PMO MCP server. Cheap to clone: every clone shares the store.
#[derive(Debug, Clone)]
pub struct PmoServer {
    store: Store,
    latency: Duration,
    tool_router: ToolRouter<PmoServer>,
}

impl PmoServer {
    pub fn new(store: Store) -> Self {
        PmoServer { store, latency: Duration::ZERO, tool_router: Self::tool_router() }
    }

    /// Makes every tool call wait this long before it runs, as a slow back end would (for
    /// testing clients' timeouts and cancellation). A call cancelled while it waits does nothing.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Waits out the configured latency; `Err` when the caller cancels the request meanwhile.
    async fn delay(&self, tool: &str, ctx: &RequestContext<RoleServer>) -> Result<(), String> {
        if self.latency.is_zero() {
            return Ok(());
        }
        tokio::select! {
            () = tokio::time::sleep(self.latency) => Ok(()),
            () = ctx.ct.cancelled() => {
                tracing::info!(tool, "call cancelled by the client before it ran");
                Err("the call was cancelled".to_owned())
            }
        }
    }
}

/// The text of a tool error, logged (to stderr) on its way out.
fn tool_error(tool: &str, error: PmoError) -> String {
    match &error {
        PmoError::Database(source) => tracing::error!(tool, error = %source, "database failure"),
        _ => tracing::info!(tool, %error, "tool error"),
    }
    error.to_string()
}

#[tool_router]
impl PmoServer {
    #[tool(
        description = "List the entries of a settings category. `dl__service_category` is the service catalog \
                       (the service_category codes task_create takes); `dl__time_slot` lists the booking time slots.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn setting_list(
        &self,
        Parameters(args): Parameters<SettingListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<SettingList>, String> {
        self.delay("setting_list", &ctx).await?;
        self.store.setting_list(&args.category).await.map(Json).map_err(|e| tool_error("setting_list", e))
    }

    #[tool(
        description = "List projects or tasks, optionally filtered by a text they contain.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn entity_list(
        &self,
        Parameters(args): Parameters<EntityListArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<EntityList>, String> {
        self.delay("entity_list", &ctx).await?;
        self.store
            .entity_list(&args.entity_type, args.filter.as_deref())
            .await
            .map(Json)
            .map_err(|e| tool_error("entity_list", e))
    }

    #[tool(
        description = "Create a customer and return it with its id. One customer per phone number: \
                       look the caller up with customer_get first.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn customer_create(
        &self,
        Parameters(args): Parameters<CustomerCreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<CustomerResult>, String> {
        self.delay("customer_create", &ctx).await?;
        let new = NewCustomer { name: args.name, phone: args.phone, email: args.email, address: args.address };
        let customer = self.store.customer_create(new).await.map_err(|e| tool_error("customer_create", e))?;
        Ok(Json(CustomerResult { customer }))
    }

    #[tool(
        description = "Find a customer by phone number or customer_id.",
        annotations(read_only_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn customer_get(
        &self,
        Parameters(args): Parameters<CustomerGetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<CustomerResult>, String> {
        self.delay("customer_get", &ctx).await?;
        let customer = self
            .store
            .customer_get(args.phone.as_deref(), args.customer_id.as_deref())
            .await
            .map_err(|e| tool_error("customer_get", e))?;
        Ok(Json(CustomerResult { customer }))
    }

    #[tool(
        description = "Create a service task (a work order) for a customer and return it with its id.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn task_create(
        &self,
        Parameters(args): Parameters<TaskCreateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<TaskResult>, String> {
        self.delay("task_create", &ctx).await?;
        let new = NewTask {
            customer_id: args.customer_id,
            service_category: args.service_category,
            description: args.description,
            priority: args.priority,
            address: args.address,
        };
        let task = self.store.task_create(new).await.map_err(|e| tool_error("task_create", e))?;
        Ok(Json(TaskResult { task }))
    }

    #[tool(
        description = "Book a technician's visit for a task on a date and time slot; return the booking with its \
                       id. A technician already booked at that time is an error that lists the free slots.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn person_calendar_book(
        &self,
        Parameters(args): Parameters<PersonCalendarBookArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<BookingResult>, String> {
        self.delay("person_calendar_book", &ctx).await?;
        let new = NewBooking {
            task_id: args.task_id,
            date: args.date,
            time_slot: args.time_slot,
            technician: args.technician,
        };
        let booking = self.store.book(new).await.map_err(|e| tool_error("person_calendar_book", e))?;
        Ok(Json(BookingResult { booking }))
    }

    #[tool(
        description = "End the phone call. Hanging up a call that has already ended changes nothing.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn call_hangup(
        &self,
        Parameters(args): Parameters<CallHangupArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<Hangup>, String> {
        self.delay("call_hangup", &ctx).await?;
        let hangup = self.store.call_hangup(&args.call_session_id, args.reason.as_deref()).await;
        let hangup = hangup.map_err(|e| tool_error("call_hangup", e))?;
        tracing::info!(call_session_id = %hangup.call_session_id, already_ended = hangup.already_ended, "call ended");
        Ok(Json(hangup))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PmoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("frontdesk-pmo-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "PMO tools for a customer-service call: look the caller up (customer_get), create them if new \
                 (customer_create), open a task (task_create, service categories from setting_list \
                 dl__service_category), book a technician (person_calendar_book, slots from setting_list \
                 dl__time_slot) and end the call (call_hangup).",
            )
    }
}
