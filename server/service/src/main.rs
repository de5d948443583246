//! `frontdesk-server`: hosts Frontdesk's workflows over gRPC.

// mimalloc rather than the system allocator: a run allocates and frees many small strings and
// JSON values (prompts, events, checkpoints), and the W2 benchmark executes ~18 % fewer
// instructions per ticket with it (bench/HISTORY.md, "2026-11-23 20:00").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::{io::Write, net::SocketAddr, path::PathBuf, process::ExitCode, str::FromStr};

use clap::{Parser, Subcommand, ValueEnum};
use frontdesk_server::{
    admin::{self, Export},
    app::{App, Overrides as Injected},
    auth::{keys, Scopes},
    config::{Config, Overrides},
    telemetry,
};
use frontdesk_workflows::Tenant;

/// Frontdesk: LLM multi-agent workflows as durable graphs, over gRPC.
///
/// Configuration is layered: compiled defaults, then the TOML file given with --config, then
/// FRONTDESK__SECTION__KEY environment variables (for example FRONTDESK__DATABASE__URL or
/// FRONTDESK__LIMITS__MAX_TEXT_CHARS), then the flags below. docs/configuration.md lists every
/// key; --print-config shows the effective configuration (secrets redacted).
#[derive(Debug, Parser)]
#[command(name = "frontdesk-server", version, about, long_about)]
struct Args {
    /// TOML configuration file.
    #[arg(long, env = "FRONTDESK_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Database URL: sqlite://PATH (the default, sqlite://data/frontdesk.db) or postgres://...
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Model provider: auto (the default: openai when --model or an endpoint is set, else local), local
    /// (the embedded offline model), openai (any OpenAI-compatible endpoint) or scripted (test double).
    #[arg(long, value_name = "PROVIDER")]
    model_provider: Option<String>,
    /// Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:11434/v1 for Ollama.
    #[arg(long, value_name = "URL")]
    model_base_url: Option<String>,
    /// Model name, e.g. gpt-4o-mini or llama3.1:8b.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Reply script for the scripted provider (tests and demos only).
    #[arg(long, value_name = "FILE")]
    model_script: Option<PathBuf>,
    /// Log format: text or json.
    #[arg(long, value_name = "FORMAT")]
    log_format: Option<String>,
    /// Print the effective configuration as TOML (secrets redacted) and exit; --config loads
    /// the printed file back.
    #[arg(long)]
    print_config: bool,
    /// Run a one-off command on the configured database instead of serving.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Import HR data for the investigation workflow: users.csv, roles.csv,
    /// role_authorisations.csv, authorisations.csv, sickLeave.csv, vacation.csv and
    /// hr_mutations.csv of DIR (columns in config/investigation/README.md). Validated first,
    /// written in one transaction; importing again updates rows in place.
    ImportHrData {
        /// Directory with the seven CSV files, such as config/investigation.
        dir: PathBuf,
    },
    /// Write the investigation workflow's audit trail or pending actions as CSV to stdout.
    Export {
        #[arg(value_enum)]
        what: ExportWhat,
    },
    /// Create, list and revoke API keys (docs/operations.md, "API keys").
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key. Prints the key on stdout, alone on one line: it is shown this once only.
    Create {
        /// The tenant the key acts for: 1 to 63 characters of a-z 0-9 _ -.
        #[arg(long, value_parser = Tenant::new)]
        tenant: Tenant,
        /// Comma-separated `<service>:<access>` scopes, such as conversation:write,triage:read;
        /// the service conversation, triage, investigation, research, workflow or *, the access
        /// read, write or admin.
        #[arg(long, value_parser = Scopes::from_str)]
        scopes: Scopes,
        /// A label for people, such as who holds the key.
        #[arg(long, default_value = "")]
        name: String,
    },
    /// List keys, newest first, revoked ones included (never their secrets).
    List {
        /// Only this tenant's keys.
        #[arg(long, value_parser = Tenant::new)]
        tenant: Option<Tenant>,
    },
    /// Revoke a key. Running servers refuse it within auth.cache_secs.
    Revoke {
        /// The key's id: the 16 hex characters after `fdk_`, as `keys list` shows them.
        key_id: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExportWhat {
    /// Every investigation's audit trail, by investigation and position.
    Audit,
    /// Every pending action (the mocked notifications), awaiting or answered.
    PendingActions,
}

impl Args {
    fn overrides(&self) -> Overrides {
        let mut o = Overrides { listen: self.listen, ..Overrides::default() };
        let set = |map: &mut serde_json::Map<String, serde_json::Value>, key: &str, value: Option<String>| {
            if let Some(value) = value {
                map.insert(key.to_owned(), serde_json::Value::String(value));
            }
        };
        set(&mut o.database, "url", self.database_url.clone());
        set(&mut o.model, "provider", self.model_provider.clone());
        set(&mut o.model, "base_url", self.model_base_url.clone());
        set(&mut o.model, "model", self.model.clone());
        set(&mut o.model, "script_file", self.model_script.as_ref().map(|p| p.display().to_string()));
        set(&mut o.log, "format", self.log_format.clone());
        o
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = match Config::load(args.config.as_deref(), &args.overrides()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("frontdesk-server: {}", report(&error));
            return ExitCode::from(2);
        }
    };
    if args.print_config {
        print!("{}", config.to_toml());
        return ExitCode::SUCCESS;
    }
    if let Some(command) = &args.command {
        return run_command(&config, command).await;
    }
    telemetry::init(&config.log);
    let app = match App::build(config, Injected::default()).await {
        Ok(app) => app,
        Err(error) => {
            tracing::error!(error = %report(&error), "cannot start");
            eprintln!("frontdesk-server: {}", report(&error));
            return ExitCode::FAILURE;
        }
    };
    match app.serve(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("frontdesk-server: {}", report(&error));
            ExitCode::FAILURE
        }
    }
}

async fn run_command(config: &Config, command: &Command) -> ExitCode {
    let done = match command {
        Command::ImportHrData { dir } => admin::import_hr_data(config, dir).await.map(|counts| {
            eprintln!("frontdesk-server: imported {counts:?}");
        }),
        Command::Export { what } => {
            let what = match what {
                ExportWhat::Audit => Export::Audit,
                ExportWhat::PendingActions => Export::PendingActions,
            };
            admin::export(config, what, std::io::stdout().lock()).await
        }
        Command::Keys { command } => return run_keys(config, command).await,
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("frontdesk-server: {}", report(&error));
            ExitCode::FAILURE
        }
    }
}

/// `keys create|list|revoke`: 0 when done, 1 when it failed or the key to revoke is unknown, 2
/// for a key id of the wrong form (a bad tenant or scope list is refused by clap, also with 2).
async fn run_keys(config: &Config, command: &KeysCommand) -> ExitCode {
    let failed = |error: &dyn std::error::Error| {
        eprintln!("frontdesk-server: {}", report(error));
        ExitCode::FAILURE
    };
    match command {
        KeysCommand::Create { tenant, scopes, name } => match admin::create_key(config, tenant, scopes, name).await {
            Ok(created) => {
                let mut stdout = std::io::stdout().lock();
                if let Err(error) = writeln!(stdout, "{}", created.key.expose()).and_then(|()| stdout.flush()) {
                    return failed(&error);
                }
                eprintln!(
                    "frontdesk-server: key {} for tenant {tenant}, scopes {scopes}; store it now: it cannot be shown again",
                    created.key.key_id()
                );
                ExitCode::SUCCESS
            }
            Err(error) => failed(&error),
        },
        KeysCommand::List { tenant } => match admin::list_keys(config, tenant.as_ref()).await {
            Ok(keys) => match admin::write_keys_table(&keys, std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => failed(&error),
            },
            Err(error) => failed(&error),
        },
        KeysCommand::Revoke { key_id } => {
            if !keys::is_key_id(key_id) {
                // Not echoed: a whole key given by mistake would put its secret on the screen.
                eprintln!(
                    "frontdesk-server: KEY_ID must be a key id, the 16 lowercase hex characters after `fdk_` \
                     (`frontdesk-server keys list` shows them), not the key itself"
                );
                return ExitCode::from(2);
            }
            match admin::revoke_key(config, key_id).await {
                Ok(true) => {
                    eprintln!(
                        "frontdesk-server: key {key_id} revoked; running servers refuse it within {} s (auth.cache_secs)",
                        config.auth.cache_secs
                    );
                    ExitCode::SUCCESS
                }
                Ok(false) => {
                    eprintln!("frontdesk-server: no key {key_id}");
                    ExitCode::FAILURE
                }
                Err(error) => failed(&error),
            }
        }
    }
}

/// The error and its chain of causes on one line.
fn report(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
