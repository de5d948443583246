//! The Frontdesk gRPC contract (`frontdesk.v1`), generated from `proto/` by `build.rs`.
//!
//! Server and client crates depend on this one so that both sides compile against the same
//! messages; nothing here holds behaviour.

pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("frontdesk.v1");
}

/// Encoded `FileDescriptorSet` of every `frontdesk.v1` file, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("frontdesk_descriptor");
