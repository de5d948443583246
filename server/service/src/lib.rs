//! The Frontdesk server: configuration, the gRPC adapters and the wiring of runtime, store,
//! models and workflows. `main.rs` is a thin shell over [`app::Server`], which tests start
//! in-process on `127.0.0.1:0`.

pub mod admin;
pub mod app;
pub mod auth;
pub mod calllog;
pub mod config;
pub mod convert;
pub mod error;
pub mod grpc;
pub mod quota;
pub mod registry;
pub mod telemetry;
pub mod tls;
pub mod workflows;
