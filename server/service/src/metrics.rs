//! Prometheus metrics: every gRPC call by method and status ([`RpcMetricsLayer`]), and what the
//! runs of every workflow do (runs, nodes, model and tool calls), read from the runtime's events
//! ([`RunObserver`]); served as OpenMetrics text on `GET /metrics` at `metrics.listen` (off
//! unless set; docs/operations.md, "Metrics").
//!
//! Labels name methods, workflows, nodes, model-call purposes, tools and error reasons: all of
//! them come from the code and the workflows' configuration, never from a request or a model's
//! reply (a tool the model named that its node does not offer is `unknown`), so the series stay
//! few whatever the traffic. Nothing of a tenant, thread or run is a label.

use std::sync::Arc;
use std::time::Duration;

use frontdesk_runtime::{Event, EventKind, FailureKind, LlmCallInfo, RunObserver, RunRegistry};
use frontdesk_store::{Database, WriteObserver, WriteOutcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::{net::TcpListener, runtime::RuntimeMetrics};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::{classify, reason_name};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkflowLabels {
    workflow: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StartedLabels {
    workflow: String,
    /// `true` for a run that answers an interrupt or continues one a stopped process left.
    resumed: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndedLabels {
    workflow: String,
    /// `completed`, `interrupted` (paused at an interrupt) or `failed`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    workflow: String,
    /// The `ErrorReason` name, as `RunFailed.reason` carries it.
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    workflow: String,
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeReasonLabels {
    workflow: String,
    node: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    workflow: String,
    purpose: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallOutcomeLabels {
    workflow: String,
    purpose: String,
    /// `ok` or `failed`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    workflow: String,
    purpose: String,
    /// `prompt` or `completion`.
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    workflow: String,
    tool: String,
    /// `ok` or `error`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    /// `committed`, `conflict` (a lost compare-and-set) or `failed`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    /// `busy` (held by an operation) or `idle`.
    state: &'static str,
}

/// Histogram buckets in seconds, 1 ms to about 9 minutes: a node that only updates the state
/// and a run waiting minutes on a slow model both land inside the range.
fn seconds_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Histogram buckets in seconds for a checkpoint write, 50 us to about 1.6 s: a SQLite commit
/// with nothing queued takes a tenth of a millisecond, a PostgreSQL one a WAL flush.
fn commit_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.00005, 2.0, 16))
}

/// A family of histograms with [`seconds_buckets`].
fn histograms<L: Clone + std::hash::Hash + Eq>() -> Family<L, Histogram, fn() -> Histogram> {
    Family::new_with_constructor(seconds_buckets)
}

/// The process's metrics. Cheap to share; recording takes a family's read lock and an atomic.
pub struct Metrics {
    registry: Registry,
    runs_started: Family<StartedLabels, Counter>,
    runs_ended: Family<EndedLabels, Counter>,
    run_failures: Family<ReasonLabels, Counter>,
    run_duration: Family<EndedLabels, Histogram, fn() -> Histogram>,
    node_duration: Family<NodeLabels, Histogram, fn() -> Histogram>,
    node_retries: Family<NodeReasonLabels, Counter>,
    node_failures: Family<NodeReasonLabels, Counter>,
    interrupts: Family<WorkflowLabels, Counter>,
    llm_calls: Family<CallOutcomeLabels, Counter>,
    llm_duration: Family<CallLabels, Histogram, fn() -> Histogram>,
    llm_tokens: Family<TokenLabels, Counter>,
    llm_cost: Family<WorkflowLabels, Counter<f64>>,
    tool_calls: Family<ToolLabels, Counter>,
    runs_active: Gauge,
    checkpoint_writes: Counter,
    checkpoint_transactions: Counter,
    checkpoint_write_duration: Family<WriteLabels, Histogram, fn() -> Histogram>,
    checkpoint_writes_waiting: Gauge,
    database_connections: Family<ConnectionLabels, Gauge>,
    database_connections_max: Gauge,
    database_acquires_waiting: Gauge,
    database_failing: Gauge,
    runtime_workers: Gauge,
    runtime_alive_tasks: Gauge,
    runtime_global_queue_depth: Gauge,
    runtime_busy: Counter<f64>,
    rpcs: Family<RpcLabels, Counter>,
    rpc_duration: Family<MethodLabels, Histogram, fn() -> Histogram>,
    /// Held while the counters read at a scrape catch up, so two scrapes never add twice.
    scrape: std::sync::Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut metrics = Metrics {
            registry: Registry::with_prefix("frontdesk"),
            runs_started: Family::default(),
            runs_ended: Family::default(),
            run_failures: Family::default(),
            run_duration: histograms(),
            node_duration: histograms(),
            node_retries: Family::default(),
            node_failures: Family::default(),
            interrupts: Family::default(),
            llm_calls: Family::default(),
            llm_duration: histograms(),
            llm_tokens: Family::default(),
            llm_cost: Family::default(),
            tool_calls: Family::default(),
            runs_active: Gauge::default(),
            checkpoint_writes: Counter::default(),
            checkpoint_transactions: Counter::default(),
            checkpoint_write_duration: Family::new_with_constructor(commit_buckets),
            checkpoint_writes_waiting: Gauge::default(),
            database_connections: Family::default(),
            database_connections_max: Gauge::default(),
            database_acquires_waiting: Gauge::default(),
            database_failing: Gauge::default(),
            runtime_workers: Gauge::default(),
            runtime_alive_tasks: Gauge::default(),
            runtime_global_queue_depth: Gauge::default(),
            runtime_busy: Counter::default(),
            rpcs: Family::default(),
            rpc_duration: histograms(),
            scrape: std::sync::Mutex::new(()),
        };
        // Disjoint fields: the registry is borrowed mutably beside the metrics it registers.
        let registry = &mut metrics.registry;
        registry.register("runs_started", "Runs started or resumed in this process", metrics.runs_started.clone());
        registry.register(
            "runs_ended",
            "Runs ended in this process: completed, paused at an interrupt, or failed",
            metrics.runs_ended.clone(),
        );
        registry.register("run_failures", "Failed runs by error reason", metrics.run_failures.clone());
        registry.register(
            "run_duration_seconds",
            "Time from a run's start (or takeover) in this process to its end",
            metrics.run_duration.clone(),
        );
        registry.register("node_duration_seconds", "Time a node took, retries included", metrics.node_duration.clone());
        registry.register(
            "node_retries",
            "Node attempts that failed and were retried, by error reason",
            metrics.node_retries.clone(),
        );
        registry.register(
            "node_failures",
            "Nodes that failed for good and sent the run down its workflow's failure route",
            metrics.node_failures.clone(),
        );
        registry.register(
            "interrupts_raised",
            "Interrupts raised (a run waiting on a person)",
            metrics.interrupts.clone(),
        );
        registry.register(
            "llm_calls",
            "Model calls by purpose; failed ones too (invalid replies, refusals, exhausted retries)",
            metrics.llm_calls.clone(),
        );
        registry.register(
            "llm_call_duration_seconds",
            "Model call time, its retries and repair attempt included",
            metrics.llm_duration.clone(),
        );
        registry.register(
            "llm_tokens",
            "Tokens of model calls, failed calls' billed replies included",
            metrics.llm_tokens.clone(),
        );
        registry.register(
            "llm_cost_usd",
            "Cost of model calls from the configured price table",
            metrics.llm_cost.clone(),
        );
        registry.register("tool_calls", "Tool calls (MCP and workflow tools) by outcome", metrics.tool_calls.clone());
        registry.register("runs_active", "Runs executing in this process now", metrics.runs_active.clone());
        registry.register(
            "checkpoint_writes",
            "Checkpoint writes this process committed to its database",
            metrics.checkpoint_writes.clone(),
        );
        registry.register(
            "checkpoint_transactions",
            "Transactions those writes took: fewer than writes when concurrent writes were committed together",
            metrics.checkpoint_transactions.clone(),
        );
        registry.register(
            "checkpoint_write_duration_seconds",
            "Time a run waited for a checkpoint write: the queue, the batch's statements and its commit",
            metrics.checkpoint_write_duration.clone(),
        );
        registry.register(
            "checkpoint_writes_waiting",
            "Checkpoint writes waiting for their commit now",
            metrics.checkpoint_writes_waiting.clone(),
        );
        registry.register(
            "database_connections",
            "Open pool connections by state (a SQLite file's write connection is not pooled)",
            metrics.database_connections.clone(),
        );
        registry.register(
            "database_connections_max",
            "The pool's limit, database.max_connections",
            metrics.database_connections_max.clone(),
        );
        registry.register(
            "database_acquires_waiting",
            "Operations waiting for a pool connection, every one taken",
            metrics.database_acquires_waiting.clone(),
        );
        registry.register(
            "database_failing",
            "1 from a failed database operation until one succeeds (PostgreSQL): held at 1, the database is down",
            metrics.database_failing.clone(),
        );
        registry.register(
            "runtime_workers",
            "Worker threads of the async runtime that runs the server",
            metrics.runtime_workers.clone(),
        );
        registry.register(
            "runtime_alive_tasks",
            "Tasks alive on the runtime: streams, runs, connections",
            metrics.runtime_alive_tasks.clone(),
        );
        registry.register(
            "runtime_global_queue_depth",
            "Tasks waiting in the runtime's shared queue for a worker",
            metrics.runtime_global_queue_depth.clone(),
        );
        registry.register(
            "runtime_worker_busy_seconds",
            "Time the runtime's workers spent running tasks, all workers together",
            metrics.runtime_busy.clone(),
        );
        registry.register("grpc_requests", "gRPC calls by method and status code", metrics.rpcs.clone());
        registry.register(
            "grpc_request_duration_seconds",
            "gRPC call time, a stream's until its status",
            metrics.rpc_duration.clone(),
        );
        metrics
    }

    /// The metrics as OpenMetrics text, with what `runs`, `database` and `runtime` count read
    /// now.
    pub fn encode(&self, runs: &RunRegistry, database: &Database, runtime: &RuntimeMetrics) -> String {
        let _scrape = self.scrape.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.runs_active.set(gauge(runs.active_runs()));
        // The store counts as it commits, whether or not metrics are on; these catch up.
        let batches = database.write_batches();
        self.checkpoint_writes.inc_by(batches.writes.saturating_sub(self.checkpoint_writes.get()));
        self.checkpoint_transactions.inc_by(batches.batches.saturating_sub(self.checkpoint_transactions.get()));
        self.checkpoint_writes_waiting.set(gauge(batches.waiting));
        let pool = database.pool_stats();
        let busy = pool.open.saturating_sub(pool.idle);
        self.database_connections.get_or_create(&ConnectionLabels { state: "busy" }).set(busy.into());
        self.database_connections.get_or_create(&ConnectionLabels { state: "idle" }).set(pool.idle.into());
        self.database_connections_max.set(pool.max.into());
        self.database_acquires_waiting.set(gauge(pool.waiting));
        self.database_failing.set(pool.failing.into());
        let workers = runtime.num_workers();
        self.runtime_workers.set(gauge(workers));
        self.runtime_alive_tasks.set(gauge(runtime.num_alive_tasks()));
        self.runtime_global_queue_depth.set(gauge(runtime.global_queue_depth()));
        let busy: f64 = (0..workers).map(|w| runtime.worker_total_busy_duration(w).as_secs_f64()).sum();
        self.runtime_busy.inc_by((busy - self.runtime_busy.get()).max(0.0));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    fn llm_call(&self, workflow: &str, info: &LlmCallInfo) {
        let LlmCallInfo { model: _, purpose, usage, latency, attempts: _, error } = info;
        let outcome = if error.is_some() { "failed" } else { "ok" };
        self.llm_calls
            .get_or_create(&CallOutcomeLabels { workflow: workflow.to_owned(), purpose: purpose.clone(), outcome })
            .inc();
        self.llm_duration
            .get_or_create(&CallLabels { workflow: workflow.to_owned(), purpose: purpose.clone() })
            .observe(latency.as_secs_f64());
        for (r#type, tokens) in [("prompt", usage.prompt_tokens), ("completion", usage.completion_tokens)] {
            self.llm_tokens
                .get_or_create(&TokenLabels { workflow: workflow.to_owned(), purpose: purpose.clone(), r#type })
                .inc_by(tokens);
        }
        if usage.cost_usd > 0.0 {
            self.llm_cost.get_or_create(&WorkflowLabels { workflow: workflow.to_owned() }).inc_by(usage.cost_usd);
        }
    }

    fn ended(&self, workflow: &str, outcome: &'static str, elapsed: Duration) {
        let labels = EndedLabels { workflow: workflow.to_owned(), outcome };
        self.runs_ended.get_or_create(&labels).inc();
        self.run_duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }
}

fn gauge(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl WriteObserver for Metrics {
    fn checkpoint_written(&self, outcome: WriteOutcome, waited: Duration) {
        let outcome = match outcome {
            WriteOutcome::Committed => "committed",
            WriteOutcome::Conflict => "conflict",
            WriteOutcome::Failed => "failed",
        };
        self.checkpoint_write_duration.get_or_create(&WriteLabels { outcome }).observe(waited.as_secs_f64());
    }
}

fn reason(kind: FailureKind) -> &'static str {
    reason_name(classify(kind).1)
}

impl RunObserver for Metrics {
    fn observe(&self, workflow: &str, event: &Event, elapsed: Duration) {
        let node = || event.node.as_deref().unwrap_or_default().to_owned();
        match &event.kind {
            EventKind::RunStarted { resumed, .. } => {
                self.runs_started
                    .get_or_create(&StartedLabels { workflow: workflow.to_owned(), resumed: *resumed })
                    .inc();
            }
            EventKind::NodeFinished { duration, .. } => {
                self.node_duration
                    .get_or_create(&NodeLabels { workflow: workflow.to_owned(), node: node() })
                    .observe(duration.as_secs_f64());
            }
            EventKind::NodeRetrying { kind, .. } => {
                let labels = NodeReasonLabels { workflow: workflow.to_owned(), node: node(), reason: reason(*kind) };
                self.node_retries.get_or_create(&labels).inc();
            }
            EventKind::NodeFailed { kind, .. } => {
                let labels = NodeReasonLabels { workflow: workflow.to_owned(), node: node(), reason: reason(*kind) };
                self.node_failures.get_or_create(&labels).inc();
            }
            EventKind::InterruptRaised { .. } => {
                self.interrupts.get_or_create(&WorkflowLabels { workflow: workflow.to_owned() }).inc();
            }
            EventKind::LlmCall(info) => self.llm_call(workflow, info),
            // The name is the workflow's own tool, or one its configuration offers: the tool
            // loop, which knows what a node offers, streams a made-up one as `UNKNOWN_TOOL`.
            EventKind::ToolReturned { name, is_error, .. } => {
                let outcome = if *is_error { "error" } else { "ok" };
                self.tool_calls
                    .get_or_create(&ToolLabels { workflow: workflow.to_owned(), tool: name.clone(), outcome })
                    .inc();
            }
            EventKind::RunFinished { .. } => self.ended(workflow, "completed", elapsed),
            EventKind::Interrupted { .. } => self.ended(workflow, "interrupted", elapsed),
            EventKind::RunFailed { kind, .. } => {
                self.ended(workflow, "failed", elapsed);
                self.run_failures
                    .get_or_create(&ReasonLabels { workflow: workflow.to_owned(), reason: reason(*kind) })
                    .inc();
            }
            // Counted where they end (node durations, tool outcomes), or not worth a series.
            EventKind::NodeStarted { .. }
            | EventKind::TasksDispatched { .. }
            | EventKind::TaskFinished { .. }
            | EventKind::TokenDelta { .. }
            | EventKind::ToolCalled { .. } => {}
        }
    }
}

/// Serves `GET /metrics` on `listener` until `stop`; any other path is 404.
pub fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    runs: Arc<RunRegistry>,
    database: Database,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    use axum::{http::header, routing::get, Router};
    let addr = listener.local_addr().ok();
    let router = Router::new().route(
        "/metrics",
        get(move || {
            let (metrics, runs, database) = (metrics.clone(), runs.clone(), database.clone());
            async move {
                // The runtime serving this scrape is the server's: one for the whole process.
                let runtime = tokio::runtime::Handle::current().metrics();
                (
                    [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    metrics.encode(&runs, &database, &runtime),
                )
            }
        }),
    );
    info!(addr = ?addr, "metrics served on /metrics");
    tokio::spawn(async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        if let Err(error) = served {
            warn!(%error, "the metrics listener stopped");
        }
    })
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    /// `package.Service/Method` of the contract; `other` for health checks, reflection and
    /// paths no service serves (a label per unknown path would let any caller add series).
    method: String,
    /// The gRPC status code's name, such as `OK` or `INVALID_ARGUMENT`.
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

/// Counts every gRPC call by method and status code, and times it (a stream until its status).
/// Outermost, so calls refused by authentication, quotas or the size limit count too. A no-op
/// without metrics.
#[derive(Clone)]
pub struct RpcMetricsLayer {
    metrics: Option<Arc<Metrics>>,
    methods: Arc<std::collections::HashSet<String>>,
}

impl RpcMetricsLayer {
    /// `methods`: the contract's paths (`/package.Service/Method`) that get a label of their own.
    pub fn new<'a>(metrics: Option<Arc<Metrics>>, methods: impl IntoIterator<Item = &'a str>) -> Self {
        Self { metrics, methods: Arc::new(methods.into_iter().map(str::to_owned).collect()) }
    }
}

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct RpcMetrics<S> {
    inner: S,
    layer: RpcMetricsLayer,
}

/// Records one call's status once: where it is known, or as `CANCELLED` if the body is dropped
/// first (the caller went away mid-stream).
struct Recorder {
    metrics: Arc<Metrics>,
    method: String,
    started: std::time::Instant,
    done: bool,
}

impl Recorder {
    fn record(&mut self, code: tonic::Code) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let method = std::mem::take(&mut self.method);
        self.metrics
            .rpc_duration
            .get_or_create(&MethodLabels { method: method.clone() })
            .observe(self.started.elapsed().as_secs_f64());
        self.metrics.rpcs.get_or_create(&RpcLabels { method, code: frontdesk_api::code_name(code) }).inc();
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.record(tonic::Code::Cancelled);
    }
}

/// A response body that records the call's status from its trailers.
struct StatusBody {
    inner: tonic::body::Body,
    recorder: Recorder,
}

impl http_body::Body for StatusBody {
    type Data = <tonic::body::Body as http_body::Body>::Data;
    type Error = <tonic::body::Body as http_body::Body>::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let code = tonic::Status::from_header_map(trailers).map_or(tonic::Code::Unknown, |s| s.code());
                    self.recorder.record(code);
                }
            }
            std::task::Poll::Ready(Some(Err(status))) => self.recorder.record(status.code()),
            // Ended without trailers: no status reached the caller.
            std::task::Poll::Ready(None) => self.recorder.record(tonic::Code::Unknown),
            std::task::Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl<S, B> tower::Service<http::Request<B>> for RpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(metrics) = self.layer.metrics.clone() else {
            return Box::pin(self.inner.call(request));
        };
        let path = request.uri().path();
        let method = match self.layer.methods.contains(path) {
            true => path.trim_start_matches('/').to_owned(),
            false => "other".to_owned(),
        };
        let mut recorder = Recorder { metrics, method, started: std::time::Instant::now(), done: false };
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            // A status known before any message (every refusal, and tonic's own errors) is a
            // trailers-only response: in the headers.
            if let Some(status) = tonic::Status::from_header_map(response.headers()) {
                recorder.record(status.code());
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            Ok(http::Response::from_parts(parts, tonic::body::Body::new(StatusBody { inner: body, recorder })))
        })
    }
}
