//! The workflows Frontdesk hosts. Each is data on the one graph runtime: a typed state, nodes
//! that call models through [`frontdesk_llm::LlmClient`], prompts, a graph and a config file.
//!
//! Nothing here knows about gRPC or SQL: the service crate converts to and from the wire, and
//! stores reach workflows only through the runtime's `Checkpointer` and the small traits
//! defined here (such as [`intake::Submitter`]).

pub mod conversation;
pub mod error;
pub mod idempotency;
pub mod intake;
pub mod investigation;
pub mod llm_node;
pub mod message;
pub mod page_token;
pub mod research;
pub mod service_call;
pub mod tenant;
pub(crate) mod text_index;
pub mod tool_loop;
pub mod triage;

pub use conversation::{ConversationView, ConversationWorkflow, TurnHandle, TurnOptions, TurnOutcome};
pub use error::WorkflowError;
pub use message::{Message, Role};
pub use tenant::Tenant;
