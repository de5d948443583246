//! The Frontdesk gRPC contract (`frontdesk.v1`), generated from `proto/` by `build.rs`.
//!
//! Server and client crates depend on this one so that both sides compile against the same
//! messages and spell the protocol's status codes alike ([`code_name`]); nothing here holds
//! behaviour.

pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("frontdesk.v1");
}

/// Encoded `FileDescriptorSet` of every `frontdesk.v1` file, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("frontdesk_descriptor");

/// The canonical upper-case name of a gRPC status code, such as `NOT_FOUND`: what the CLI
/// prints and the server's metrics label calls with.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}
