//! Chat messages as conversational workflows keep them in state.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    System,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: Role,
    pub text: String,
    /// The node that wrote an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Self { id: new_id(), role: Role::User, text: text.into(), node: None, at_ms: now_ms() }
    }

    pub fn assistant(node: &str, text: impl Into<String>) -> Self {
        Self { id: new_id(), role: Role::Assistant, text: text.into(), node: Some(node.to_owned()), at_ms: now_ms() }
    }
}

fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}
