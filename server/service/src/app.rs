//! Wiring: store, model, workflows and the gRPC server, from a [`Config`].

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use frontdesk_api::v1::{
    conversation_service_server::ConversationServiceServer, workflow_service_server::WorkflowServiceServer,
};
use frontdesk_llm::{
    ChatModel, JsonLinesCallLog, LlmClient, OpenAiConfig, OpenAiProvider, PriceTable, RetryPolicy, ScriptedModel,
    TracingCallLog,
};
use frontdesk_runtime::{Checkpointer, RunRegistry, RunRetention, RunnerConfig};
use frontdesk_store::{Database, StoreOptions};
use frontdesk_workflows::conversation::ConversationLimits;
use tokio::{
    net::TcpListener,
    sync::{oneshot, watch},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;
use tonic::{service::Routes, transport::server::TcpIncoming};
use tonic_health::ServingStatus;
use tracing::{error, info, warn};

use crate::{
    auth::{keys::ApiKeys, AuthLayer, AuthPolicy, KeyVerifier, MethodTable},
    calllog::{LlmCallLedger, SqlCallLog},
    config::{CallLogMode, Config, ModelProvider},
    grpc::{
        conversation::{self, ConversationApi},
        request_limit::RequestLimitLayer,
        workflow::{self, WorkflowApi},
    },
    metrics::Metrics,
    registry::Registry,
    workflows::{BuildError, Parts, Wiring, WORKFLOWS},
};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database (database.url)")]
    Database(#[source] frontdesk_store::StoreError),
    #[error(
        "no model endpoint is configured: set --model (and --model-base-url for a local OpenAI-compatible server, \
         or OPENAI_API_KEY for OpenAI); see README.md"
    )]
    NoModel,
    #[error("cannot set up the model provider")]
    Model(#[source] frontdesk_llm::LlmError),
    #[error("the scripted model provider needs model.script_file")]
    NoScript,
    #[error("cannot open the llm call log file {path} (model.call_log_file)")]
    CallLogFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the embedded model file {path} is missing: run scripts/ensure-model.sh to fetch it (or set \
         model.local_path), or configure a model endpoint with --model (see README.md)"
    )]
    NoLocalModel { path: String },
    #[error("this frontdesk-server was built without the `local` feature (the embedded model): configure a model endpoint with --model")]
    LocalNotBuilt,
    #[error(transparent)]
    Workflow(#[from] BuildError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the built-in gRPC contract does not decode")]
    Contract(#[source] prost::DecodeError),
    #[error("cannot build gRPC reflection")]
    Reflection(#[source] tonic_reflection::server::Error),
    #[error("cannot take replica {replica}'s lease in the database (runs.replica_id)")]
    Lease {
        replica: String,
        #[source]
        source: frontdesk_runtime::CheckpointError,
    },
    #[error("cannot set up TLS")]
    Tls(#[source] crate::tls::TlsError),
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("gRPC server failed")]
    Transport(#[source] tonic::transport::Error),
    #[error("server task panicked")]
    Panicked,
}

/// Parts a caller may supply instead of building them from config (tests, embedding).
#[derive(Default)]
pub struct Overrides {
    pub model: Option<Arc<dyn ChatModel>>,
    /// Parts of individual workflows, such as `workflows::intake::UseSubmitter`.
    pub parts: Parts,
}

/// Everything a running server needs, built and validated.
pub struct App {
    config: Config,
    registry: Arc<Registry>,
    database: Database,
    llm_calls: Arc<LlmCallLedger>,
    model_name: String,
    /// This replica's id: the owner in its runs' checkpoints and the key of its lease.
    replica: Arc<str>,
    lease_ttl: Duration,
    /// `None`: plaintext.
    tls: Option<Arc<crate::tls::ServerTls>>,
    /// Set when `metrics.listen` is.
    metrics: Option<Arc<Metrics>>,
}

/// `host:port`: stable across restarts of the same process, so a restarted replica takes its
/// own interrupted runs back at once. With an ephemeral port (0) the port says nothing, so a
/// random suffix keeps two such processes on one host apart.
fn default_replica_id(listen: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "frontdesk".to_owned());
    match listen.port() {
        0 => format!("{host}:{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        port => format!("{host}:{port}"),
    }
}

impl App {
    pub async fn build(config: Config, overrides: Overrides) -> Result<App, StartError> {
        // Certificates first: a bad file stops start-up before the database or any MCP server
        // is touched.
        let tls = crate::tls::ServerTls::from_config(&config.tls).map_err(StartError::Tls)?;
        let database = Database::connect(
            &config.database.url,
            StoreOptions {
                max_connections: config.database.max_connections,
                checkpoint_retention: config.database.checkpoint_retention,
            },
        )
        .await
        .map_err(StartError::Database)?;
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(database.checkpointer());

        let model = match overrides.model {
            Some(model) => model,
            None => model_from_config(&config)?,
        };
        let model_name = model.model_name().to_owned();
        let mut llm = LlmClient::new(model)
            .with_retry(RetryPolicy { max_attempts: config.model.max_attempts.max(1), ..RetryPolicy::default() })
            .with_prices(PriceTable { models: config.model.prices.clone() });
        let full_prompts = config.model.call_log == CallLogMode::Full;
        let mut sql_log = None;
        if config.model.call_log != CallLogMode::Off {
            llm = llm.with_call_log(Arc::new(TracingCallLog::new(full_prompts)));
            let log = SqlCallLog::start(database.clone(), full_prompts);
            llm = llm.with_call_log(log.clone());
            sql_log = Some(log);
            if let Some(path) = &config.model.call_log_file {
                let file = JsonLinesCallLog::open(path, full_prompts)
                    .map_err(|source| StartError::CallLogFile { path: path.display().to_string(), source })?;
                info!(path = %path.display(), full_prompts, "llm calls are logged to a JSON lines file");
                llm = llm.with_call_log(Arc::new(file));
            }
        } else if let Some(path) = &config.model.call_log_file {
            warn!(
                path = %path.display(),
                "model.call_log_file is set but model.call_log is off: nothing is written there"
            );
        }

        let runs_config = &config.runs;
        let mut runs = RunRegistry::new(RunRetention {
            max_events: runs_config.max_events,
            keep_finished: runs_config.keep_finished,
            keep_finished_for: Duration::from_secs(runs_config.keep_finished_secs),
        })
        .with_max_active(runs_config.max_active);
        // Only when served: every run's events pass through the observer.
        let metrics = config.metrics.listen.map(|_| Arc::new(Metrics::new()));
        if let Some(metrics) = &metrics {
            runs = runs.with_observer(metrics.clone());
            database.set_write_observer(metrics.clone()).expect("the database was opened above, with no observer");
        }
        let runs = Arc::new(runs);
        let llm_calls = Arc::new(LlmCallLedger::new(database.clone(), sql_log));
        let replica: Arc<str> = match &runs_config.replica_id {
            Some(id) => id.as_str().into(),
            None => default_replica_id(config.listen).into(),
        };
        let limits = &config.limits;
        let runner_config = RunnerConfig {
            event_buffer: limits.event_buffer.max(1),
            node_timeout: Duration::from_secs(limits.node_timeout_secs),
            run_timeout: Duration::from_secs(limits.run_timeout_secs),
            takeover_after: Duration::from_secs(limits.node_timeout_secs + 10),
            replica: Some(replica.clone()),
            lease_ttl: Duration::from_secs(runs_config.lease_secs.max(1)),
            recovery_concurrency: runs_config.recovery_concurrency.max(1),
            max_takeovers: runs_config.max_takeovers,
        };
        let conversation_limits = ConversationLimits {
            max_text_chars: limits.max_text_chars,
            max_turns: limits.max_turns,
            max_state_bytes: limits.max_conversation_bytes,
        };
        let wiring = Wiring {
            database: &database,
            checkpointer: &checkpointer,
            llm: &llm,
            runs: &runs,
            runner_config: &runner_config,
            conversation_limits: &conversation_limits,
            checkpoint_retention: config.database.checkpoint_retention,
            parts: &overrides.parts,
        };
        let mut workflows = Vec::with_capacity(WORKFLOWS.len());
        for workflow in WORKFLOWS {
            workflows.push(workflow.build(config.workflows.section(workflow.name()), &wiring).await?);
        }
        let registry = Registry::new(workflows, checkpointer, runs);

        let lease_ttl = runner_config.lease_ttl;
        Ok(App {
            config,
            registry: Arc::new(registry),
            database,
            llm_calls,
            model_name,
            replica,
            lease_ttl,
            tls,
            metrics,
        })
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Binds the configured address and serves until `shutdown` resolves, then waits (up to
    /// the grace period) for in-flight runs to commit.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), StartError> {
        let listener = TcpListener::bind(self.config.listen)
            .await
            .map_err(|source| StartError::Bind { addr: self.config.listen, source })?;
        let running = self.serve_on(listener).await?;
        shutdown.await;
        info!("shutdown requested; finishing in-flight turns");
        if let Err(error) = running.shutdown().await {
            error!(%error, "server stopped with an error");
        }
        Ok(())
    }

    /// Serves on an already-bound listener (tests bind `127.0.0.1:0`).
    pub async fn serve_on(self, listener: TcpListener) -> Result<RunningServer, StartError> {
        let addr = listener.local_addr().map_err(|source| StartError::Bind { addr: self.config.listen, source })?;
        let tls = self.tls.clone();
        let max_bytes = self.config.limits.max_message_bytes;
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<ConversationServiceServer<ConversationApi>>().await;
        health.set_serving::<WorkflowServiceServer<WorkflowApi>>().await;
        let reflection_v1 = reflection().build_v1().map_err(StartError::Reflection)?;
        let reflection_v1alpha = reflection().build_v1alpha().map_err(StartError::Reflection)?;

        let mut routes = Routes::builder();
        routes
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(
                ConversationServiceServer::new(ConversationApi::new(self.registry.clone(), self.llm_calls.clone()))
                    .max_decoding_message_size(max_bytes),
            )
            .add_service(
                WorkflowServiceServer::new(WorkflowApi::new(self.registry.clone(), self.llm_calls.clone()))
                    .max_decoding_message_size(max_bytes),
            );
        let mut scoped = vec![&conversation::ACCESS, &workflow::ACCESS];
        for hosted in self.registry.workflows() {
            if let Some(access) = hosted.add_service(&mut routes, max_bytes) {
                health.set_service_status(access.service, ServingStatus::Serving).await;
                scoped.push(access);
            }
        }
        let methods = MethodTable::new(scoped);
        let rpc_metrics = crate::metrics::RpcMetricsLayer::new(self.metrics.clone(), methods.paths());
        let runs =
            crate::quota::run_paths(frontdesk_api::FILE_DESCRIPTOR_SET, &methods).map_err(StartError::Contract)?;
        let quotas =
            crate::quota::quota_layer(&self.config.quotas, runs, self.config.auth.open_services.iter().cloned());
        let auth = Arc::new(self.auth_policy(addr, methods));

        // Before the runs: recovery's runs are counted too.
        let metrics_stop = CancellationToken::new();
        let metrics = match (&self.metrics, self.config.metrics.listen) {
            (Some(metrics), Some(listen)) => {
                let listener =
                    TcpListener::bind(listen).await.map_err(|source| StartError::Bind { addr: listen, source })?;
                let bound = listener.local_addr().map_err(|source| StartError::Bind { addr: listen, source })?;
                let runs = self.registry.runs().clone();
                let served =
                    crate::metrics::serve(listener, metrics.clone(), runs, self.database.clone(), metrics_stop.clone());
                Some((bound, served))
            }
            _ => None,
        };

        // The lease first: recovery and takeover scans on other replicas read it to tell this
        // replica's runs from abandoned ones.
        let lease = CancellationToken::new();
        let renewals = self
            .registry
            .runs()
            .keep_leases(self.replica.clone(), self.lease_ttl, lease.clone())
            .await
            .map_err(|source| StartError::Lease { replica: self.replica.to_string(), source })?;
        let scans = CancellationToken::new();
        let scan_every = Duration::from_secs(self.config.runs.takeover_scan_secs.max(1));
        let (recovered_tx, recovered) = watch::channel(false);
        let scanner = tokio::spawn(take_over_abandoned_runs(
            self.registry.clone(),
            self.replica.clone(),
            scan_every,
            scans.clone(),
            recovered_tx,
        ));

        info!(
            %addr,
            database = %self.database.kind(),
            model = %self.model_name,
            replica = %self.replica,
            "frontdesk-server listening"
        );
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let router = tonic::transport::Server::builder()
            // Outermost: calls refused by the layers inside count too.
            .layer(rpc_metrics)
            .layer(AuthLayer::new(auth))
            // Inside auth: quotas are the caller's tenant's.
            .layer(quotas)
            .layer(RequestLimitLayer::new(max_bytes))
            .add_routes(routes.routes());
        let stopped = async {
            let _ = stop_rx.await;
        };
        let task = match tls {
            // TCP_NODELAY: a stream's small frames (an event, a result) go out at once instead of
            // waiting for the client's delayed ACK (about 40 ms per turn on Linux otherwise).
            None => tokio::spawn(
                router.serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), stopped),
            ),
            // TLS connections, TCP_NODELAY set likewise (tls.rs).
            Some(tls) => tokio::spawn(router.serve_with_incoming_shutdown(tls.incoming(listener), stopped)),
        };
        let (metrics_addr, metrics_task) = metrics.unzip();
        Ok(RunningServer {
            addr,
            metrics_addr,
            metrics_stop,
            metrics_task,
            stop: stop_tx,
            task,
            registry: self.registry,
            database: self.database,
            llm_calls: self.llm_calls,
            grace: Duration::from_secs(self.config.shutdown_grace_secs),
            replica: self.replica,
            lease,
            renewals,
            scans,
            scanner,
            recovered,
        })
    }
}

impl App {
    /// Keys when `auth` asks for them on `addr` (the address actually bound); the server warns
    /// when it runs open on a non-loopback address.
    fn auth_policy(&self, addr: SocketAddr, methods: MethodTable) -> AuthPolicy {
        let auth = &self.config.auth;
        let verifier = if auth.keys_required(addr) {
            let keys = ApiKeys::new(self.database.clone(), Duration::from_secs(auth.cache_secs));
            info!(open_services = ?auth.open_services, "api keys required (authorization: Bearer <key>)");
            Some(Arc::new(keys) as Arc<dyn KeyVerifier>)
        } else {
            if !addr.ip().is_loopback() {
                warn!(%addr, "auth.mode is none: anyone who reaches this address can read and change every tenant's data");
            }
            None
        };
        AuthPolicy { verifier, open_services: auth.open_services.iter().cloned().collect(), methods }
    }
}

/// Finishes the runs a crash of this replica interrupted (at once, start-up recovery), then
/// every `every` takes over the runs of replicas whose lease has expired, until `stop`. Runs of
/// live replicas are left alone; the compare-and-set on every checkpoint lets only one replica
/// continue a run when two scan at once.
async fn take_over_abandoned_runs(
    registry: Arc<Registry>,
    replica: Arc<str>,
    every: Duration,
    stop: CancellationToken,
    recovered: watch::Sender<bool>,
) {
    match registry.recover().await {
        Ok(0) => {}
        Ok(n) => info!(runs = n, "finished runs interrupted by a crash"),
        Err(error) => error!(%error, "crash recovery failed"),
    }
    recovered.send_replace(true);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match registry.take_over(&replica).await {
            Ok(n) => {
                if n > 0 {
                    info!(runs = n, "finished runs taken over from a replica whose lease expired");
                }
                failing = false;
            }
            Err(error) if !failing => {
                warn!(%error, "takeover scan failed; retrying");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

/// What reflection (v1 and v1alpha alike) describes: the contract, health, and the
/// `google.rpc` error details (`ErrorInfo`, `BadRequest`, `RetryInfo`, `Status`). Without the
/// last, a reflection client such as grpcurl cannot decode the details every error carries and
/// shows them as base64. tonic-types ships their descriptors (as `status.proto` and
/// `error_details.proto`, with the `google.protobuf` files they import), so nothing is vendored.
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(frontdesk_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
}

/// The model the configuration names (also used by the accuracy example).
pub fn model_from_config(config: &Config) -> Result<Arc<dyn ChatModel>, StartError> {
    let model = &config.model;
    match model.effective_provider() {
        ModelProvider::Local => local_model(model),
        ModelProvider::Openai | ModelProvider::Auto => {
            let azure = match (&model.azure_endpoint, &model.azure_deployment) {
                (Some(endpoint), Some(deployment)) => Some(frontdesk_llm::AzureConfig {
                    endpoint: endpoint.clone(),
                    deployment: deployment.clone(),
                    api_version: model.azure_api_version.clone().unwrap_or_else(|| "2024-10-21".into()),
                }),
                _ => None,
            };
            if model.model.is_empty() && azure.is_none() {
                return Err(StartError::NoModel);
            }
            let provider = OpenAiProvider::new(OpenAiConfig {
                base_url: model.base_url.clone(),
                api_key: model.api_key.clone(),
                model: model.model.clone(),
                azure,
                request_timeout: Duration::from_secs(model.request_timeout_secs),
            })
            .map_err(StartError::Model)?;
            Ok(Arc::new(provider))
        }
        ModelProvider::Scripted => {
            let path = model.script_file.as_ref().ok_or(StartError::NoScript)?;
            warn!(script = %path.display(), "using the SCRIPTED test model: replies are canned, not generated");
            // Nobody reads a served model's request log; kept, it would grow with every call.
            Ok(Arc::new(ScriptedModel::from_json_file(path).map_err(StartError::Model)?.without_request_log()))
        }
    }
}

/// The embedded model (provider `local`), loaded on the calling thread (about a second).
#[cfg(feature = "local")]
fn local_model(model: &crate::config::ModelConfig) -> Result<Arc<dyn ChatModel>, StartError> {
    use frontdesk_llm::{LocalConfig, LocalModel};
    let path = model.local_model_path();
    if !path.is_file() {
        return Err(StartError::NoLocalModel { path: path.display().to_string() });
    }
    let mut local = LocalConfig::new(path);
    local.context = model.local_context;
    local.threads = model.local_threads;
    local.cache_sequences = model.local_cache_sequences;
    let loaded = LocalModel::load(local).map_err(StartError::Model)?;
    let info = loaded.info();
    info!(
        model = %loaded.model_name(),
        path = %info.path.display(),
        description = %info.description,
        parameters = info.parameters,
        context = info.context,
        threads = info.threads,
        load_ms = info.load_time.as_millis() as u64,
        "using the EMBEDDED offline model (provider local, llama.cpp on the CPU); configure --model for an endpoint"
    );
    warn!(
        "the embedded model is a tiny base model: its replies are always valid for the workflow's schema and \
         arrive offline, but its routing, extraction and wording are far below a hosted model; fine for \
         development, demos and tests, not for production"
    );
    Ok(Arc::new(loaded))
}

#[cfg(not(feature = "local"))]
fn local_model(_model: &crate::config::ModelConfig) -> Result<Arc<dyn ChatModel>, StartError> {
    Err(StartError::LocalNotBuilt)
}

/// A server running on its own task.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// Where `GET /metrics` is served, when `metrics.listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Stops the metrics listener, last: a scrape during the drain still answers.
    metrics_stop: CancellationToken,
    metrics_task: Option<JoinHandle<()>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
    registry: Arc<Registry>,
    database: Database,
    llm_calls: Arc<LlmCallLedger>,
    grace: Duration,
    replica: Arc<str>,
    /// Stops the lease renewals: only once this replica's runs have ended, so that no other
    /// replica takes over a run still going here.
    lease: CancellationToken,
    renewals: JoinHandle<()>,
    /// Stops the takeover scans, first: a stopping replica takes no new runs on.
    scans: CancellationToken,
    scanner: JoinHandle<()>,
    /// True once start-up recovery has finished (run in the background: calls are served
    /// meanwhile).
    recovered: watch::Receiver<bool>,
}

impl RunningServer {
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Waits until start-up recovery has finished: the runs a crash of this replica left
    /// behind are resumed (or repaired) by then. Calls are served before it, so an embedder or
    /// a test that must not race that recovery waits here first.
    pub async fn recovered(&self) {
        let mut recovered = self.recovered.clone();
        // An error means the scanner ended (shutdown), which ends the wait too.
        let _ = recovered.wait_for(|done| *done).await;
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Stops accepting calls, waits (up to the grace period) for in-flight runs to commit,
    /// stops the runs still going (they resume from their last checkpoints on the next start or
    /// another replica; their callers, and open watches, get `UNAVAILABLE SHUTTING_DOWN`),
    /// gives the streams a moment to reach the callers, then closes the database.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        /// Enough for finished streams to flush; idle keep-alive connections would otherwise
        /// hold the server open for the whole grace period.
        const DRAIN: Duration = Duration::from_secs(2);
        let _ = self.stop.send(());
        self.scans.cancel();
        if tokio::time::timeout(self.grace, self.registry.runs().wait_idle()).await.is_err() {
            warn!(
                runs = self.registry.runs().active_runs(),
                "runs still active after the grace period; stopping them where they are"
            );
        }
        // Also when every run ended: what follows runs on its own (a watch) ends here.
        self.registry.runs().stop();
        // A stopped run writes nothing more; its caller's status is on its way once it ended.
        let _ = tokio::time::timeout(DRAIN, self.registry.runs().wait_idle()).await;
        // A scan still resuming runs is abandoned with them: their checkpoints keep them for the
        // next replica.
        self.scanner.abort();
        self.lease.cancel();
        let _ = self.renewals.await;
        let result = match tokio::time::timeout(DRAIN, self.task).await {
            Ok(Ok(result)) => result.map_err(ServeError::Transport),
            Ok(Err(_)) => Err(ServeError::Panicked),
            Err(_) => Ok(()),
        };
        // Runs stopped past the grace period are left running in their checkpoints: with the
        // lease gone, another replica takes them over at its next scan instead of after expiry.
        self.registry.runs().release_leases(&self.replica).await;
        // The calls of the runs that just finished, before the database closes under them.
        if let Some(log) = self.llm_calls.log() {
            if !log.flushed(DRAIN).await {
                warn!("llm calls still queued at shutdown are not recorded in the database");
            }
        }
        self.database.close().await;
        self.metrics_stop.cancel();
        if let Some(task) = self.metrics_task {
            let _ = tokio::time::timeout(DRAIN, task).await;
        }
        result
    }
}
