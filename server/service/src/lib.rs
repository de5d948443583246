//! The Frontdesk server: configuration, the gRPC adapters and the wiring of runtime, store,
//! models and workflows. `main.rs` is a thin shell over [`app::App`], which tests build and serve
//! in-process on `127.0.0.1:0` ([`app::App::serve_on`]).

pub mod admin;
pub mod app;
pub mod auth;
pub mod calllog;
pub mod config;
pub mod convert;
pub mod error;
pub mod grpc;
pub mod metrics;
pub mod quota;
pub mod registry;
pub mod telemetry;
pub mod tls;
pub mod workflows;
