//! The service-call workflow (docs/workflows/service-call.md): a customer-service phone call run
//! as a node flow that a configuration file defines (`config::AgentConfig`). Each configured
//! node is a graph node run by the reply agent, the MCP agent (tool or extraction nodes) or the
//! internal no-op; after each, the navigator picks the next. A customer message runs nodes until
//! a reply node has answered, or the call ends.
//!
//! ```text
//! START → receive ──(current node)──▶ <configured node> → navigator ──(next node)──▶ <configured node> ...
//!                                                           └─ a reply was given, or the call ended → END
//! ```

mod call;
pub mod config;
pub mod context;
pub mod nodes;
pub mod tokens;

pub use call::{build, CallDeps, CallSpec, CallState, CallUpdate, CallView, DESCRIPTION, NAME, WELCOME};
pub use nodes::{ToolFailure, ToolProvider, ToolReply};
