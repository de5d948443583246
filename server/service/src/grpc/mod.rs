//! gRPC adapters: validate, convert proto to domain, call, convert back. No logic lives here.

pub mod conversation;
pub mod triage;
pub mod workflow;

/// Page sizes: 0 means the default, anything above the maximum is clamped.
pub(crate) fn page_size(requested: i32) -> Result<usize, tonic::Status> {
    const DEFAULT: usize = 50;
    const MAX: usize = 500;
    match requested {
        0 => Ok(DEFAULT),
        n if n < 0 => Err(crate::error::invalid_argument("page_size", "must not be negative")),
        n => Ok((n as usize).min(MAX)),
    }
}

pub(crate) fn optional(s: String) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}
