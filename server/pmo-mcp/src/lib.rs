//! A small PMO (project-management office) MCP server for Frontdesk's `service_call` workflow:
//! a service catalog and other settings, projects and tasks, customers, technician bookings and
//! call records in SQLite, served as seven MCP tools over stdio or streamable HTTP.
//!
//! The binary `frontdesk-pmo-mcp` (see `README.md`) runs it; [`PmoServer`] is the MCP handler
//! and [`Store`] the database behind it.

pub mod server;
pub mod store;

pub use server::PmoServer;
pub use store::{OpenError, PmoError, Store};

/// The names of the tools the server offers, in the order it lists them.
pub const TOOL_NAMES: [&str; 7] = [
    "call_hangup",
    "customer_create",
    "customer_get",
    "entity_list",
    "person_calendar_book",
    "setting_list",
    "task_create",
];
