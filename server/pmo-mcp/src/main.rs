//! `frontdesk-pmo-mcp`: the PMO MCP server over stdio (the default) or streamable HTTP.
//! Logs go to stderr only: on stdio, stdout is the MCP transport.

use std::{error::Error, net::SocketAddr, process::ExitCode, time::Duration};

use clap::Parser;
use frontdesk_pmo_mcp::{PmoServer, Store};
use rmcp::{
    transport::{
        io::stdio_pipes,
        streamable_http_server::{
            session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
        },
    },
    ServiceExt,
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// A small PMO (project-management office) MCP server: service catalog, projects, customers,
/// tasks, technician bookings and call records in SQLite.
#[derive(Debug, Parser)]
#[command(name = "frontdesk-pmo-mcp", version)]
struct Args {
    /// The database: `sqlite://PATH` (created and migrated if missing) or `sqlite::memory:`, a
    /// fresh in-memory database. Either starts with the seed data.
    #[arg(long, env = "FRONTDESK_PMO_DATABASE", default_value = "sqlite::memory:", value_name = "URL")]
    database: String,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (port 0 picks a free port; the
    /// address is logged as `listening on http://.../mcp`).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// A Host header value accepted over HTTP besides the loopback names (repeatable); needed when
    /// clients reach the server by another name.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    allowed_hosts: Vec<String>,
    /// Delay every tool call by this many milliseconds, as a slow back end would (for testing
    /// clients' timeouts and cancellation).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    latency_ms: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("frontdesk_pmo_mcp=info,rmcp=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let mut message = format!("frontdesk-pmo-mcp: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn Error + Send + Sync>> {
    let store = Store::open(&args.database).await?;
    let server = PmoServer::new(store.clone()).with_latency(Duration::from_millis(args.latency_ms));
    match args.http {
        None => {
            tracing::info!(database = %args.database, "serving MCP over stdio");
            let running = server.serve(stdio_pipes()).await?;
            tokio::select! {
                quit = running.waiting() => { quit?; }
                () = shutdown_signal() => tracing::info!("shutting down on a signal"),
            }
        }
        Some(addr) => {
            let ct = CancellationToken::new();
            let mut config = StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token());
            config.allowed_hosts.extend(args.allowed_hosts);
            let service =
                StreamableHttpService::new(move || Ok(server.clone()), LocalSessionManager::default().into(), config);
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let local = listener.local_addr()?;
            tracing::info!(database = %args.database, "serving MCP over streamable HTTP");
            // A plain line for whoever started the server (and the tests) to find the port.
            eprintln!("frontdesk-pmo-mcp: listening on http://{local}/mcp");
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    shutdown_signal().await;
                    tracing::info!("shutting down on a signal");
                    ct.cancel();
                })
                .await?;
        }
    }
    store.close().await;
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
