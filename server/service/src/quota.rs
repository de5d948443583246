//! Per-tenant quotas (`[quotas]`): a request rate and a number of runs in flight.
//!
//! [`QuotaLayer`] sits inside the auth layer, so every call it sees carries the caller's
//! [`Principal`]. Each tenant has a token bucket (GCRA, the `governor` crate) of
//! `requests_per_sec` refilled per second holding `burst`, which every call spends from, and a
//! count of the runs it has in flight, capped at `max_concurrent_runs`. Which calls are runs is
//! the caller's to say (the request paths given to [`QuotaLayer::new`]), so this file names no
//! workflow. A run holds its place for as long as its response stream is open: the place is
//! given back when the stream ends, fails, or is dropped because the client went away. A run
//! that carries on after its caller disconnected (`SubscribeRun` can re-attach to it) no longer
//! counts.
//!
//! A refusal is `RESOURCE_EXHAUSTED` with `ErrorInfo` reason `QUOTA_EXCEEDED`, metadata `quota`
//! and `limit`, and `RetryInfo`: for the rate, when the bucket next has a token; for runs, one
//! second. A call refused for its rate spends no token; a run refused for want of a place has
//! spent one. Calls to `auth.open_services` (health checks) and calls without a principal are
//! never limited, so a busy tenant cannot fail a liveness probe.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    num::NonZeroU32,
    pin::Pin,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex, PoisonError,
    },
    task::{Context, Poll},
    time::Duration,
};

use frontdesk_workflows::Tenant;
use governor::{
    clock::Clock,
    middleware::NoOpMiddleware,
    nanos::Nanos,
    state::{InMemoryState, NotKeyed},
    RateLimiter,
};
use http_body::Frame;
use tonic::body::Body;
use tower::{Layer, Service};

use crate::{
    auth::{Access, MethodTable, Principal},
    config::{QuotasConfig, TenantQuota},
    error::{access_status, AccessError},
};

/// `ErrorInfo.metadata["quota"]` of a refusal by the request rate.
pub const REQUESTS_PER_SEC: &str = "requests_per_sec";
/// `ErrorInfo.metadata["quota"]` of a refusal by the number of runs in flight.
pub const MAX_CONCURRENT_RUNS: &str = "max_concurrent_runs";

/// The retry advice when a tenant has too many runs in flight: when one ends is unknowable,
/// and a second is short against a run and long against a request.
pub const RUN_RETRY: Duration = Duration::from_secs(1);

/// One tenant's limits, overrides applied; 0 is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub requests_per_sec: u32,
    pub burst: u32,
    pub max_concurrent_runs: u32,
}

impl Limits {
    fn of(section: &QuotasConfig) -> Self {
        Limits {
            requests_per_sec: section.requests_per_sec,
            burst: section.burst,
            max_concurrent_runs: section.max_concurrent_runs,
        }
    }

    fn with(self, tenant: &TenantQuota) -> Self {
        Limits {
            requests_per_sec: tenant.requests_per_sec.unwrap_or(self.requests_per_sec),
            burst: tenant.burst.unwrap_or(self.burst),
            max_concurrent_runs: tenant.max_concurrent_runs.unwrap_or(self.max_concurrent_runs),
        }
    }

    fn is_off(&self) -> bool {
        self.requests_per_sec == 0 && self.max_concurrent_runs == 0
    }

    /// The bucket's quota; `None` when the rate is off. A burst of 0 is one second's worth.
    fn bucket(&self) -> Option<governor::Quota> {
        let rate = NonZeroU32::new(self.requests_per_sec)?;
        let burst = NonZeroU32::new(self.burst).unwrap_or(rate);
        Some(governor::Quota::per_second(rate).allow_burst(burst))
    }
}

/// governor's clock on tokio's time: the same instants as the rest of the server, and tests
/// with paused time control the buckets too.
#[derive(Debug, Clone, Copy)]
struct TokioClock {
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

type Bucket = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// What one tenant has used.
struct Usage {
    limits: Limits,
    bucket: Option<Bucket>,
    runs: Arc<AtomicU32>,
}

/// Every tenant's quotas and usage. Tenants are added as they first call; the map holds only
/// tenants that have API keys (plus `default`), so it is never pruned.
pub struct Quotas {
    defaults: Limits,
    overrides: HashMap<String, Limits>,
    off: bool,
    clock: TokioClock,
    tenants: Mutex<HashMap<Tenant, Arc<Usage>>>,
}

impl Quotas {
    pub fn new(config: &QuotasConfig) -> Self {
        let defaults = Limits::of(config);
        let mut overrides = HashMap::new();
        for (name, tenant) in &config.tenants {
            if Tenant::new(name).is_err() {
                tracing::warn!(tenant = %name, "quotas.tenants names no possible tenant; its limits never apply");
            }
            overrides.insert(name.clone(), defaults.with(tenant));
        }
        let off = defaults.is_off() && overrides.values().all(Limits::is_off);
        Quotas {
            defaults,
            overrides,
            off,
            clock: TokioClock { origin: tokio::time::Instant::now() },
            tenants: Mutex::new(HashMap::new()),
        }
    }

    /// True when no tenant has any limit: the layer then checks nothing.
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// `tenant`'s limits: its `quotas.tenants` entry over the section's values.
    pub fn limits(&self, tenant: &Tenant) -> Limits {
        self.overrides.get(tenant.name()).copied().unwrap_or(self.defaults)
    }

    fn usage(&self, tenant: &Tenant) -> Arc<Usage> {
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(usage) = tenants.get(tenant) {
            return usage.clone();
        }
        let limits = self.limits(tenant);
        let usage = Arc::new(Usage {
            limits,
            bucket: limits.bucket().map(|quota| RateLimiter::direct_with_clock(quota, self.clock)),
            runs: Arc::new(AtomicU32::new(0)),
        });
        tenants.insert(tenant.clone(), usage.clone());
        usage
    }

    /// Spends one of `tenant`'s tokens for a call; refused, with the wait until the next token,
    /// when the bucket is empty.
    pub fn check_request(&self, tenant: &Tenant) -> Result<(), AccessError> {
        let usage = self.usage(tenant);
        let Some(bucket) = &usage.bucket else { return Ok(()) };
        bucket.check().map_err(|not_until| AccessError::QuotaExceeded {
            tenant: tenant.name().to_owned(),
            quota: REQUESTS_PER_SEC,
            limit: usage.limits.requests_per_sec,
            // Never zero: a token that came due since the check is still worth a short wait
            // rather than an immediate retry storm.
            retry_after: not_until.wait_time_from(self.clock.now()).max(Duration::from_millis(1)),
        })
    }

    /// Takes one of `tenant`'s run places, held until the permit is dropped; refused when all
    /// are taken.
    pub fn start_run(&self, tenant: &Tenant) -> Result<RunPermit, AccessError> {
        let usage = self.usage(tenant);
        let max = usage.limits.max_concurrent_runs;
        if max == 0 {
            return Ok(RunPermit { runs: None });
        }
        usage.runs.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).map_err(|_| {
            AccessError::QuotaExceeded {
                tenant: tenant.name().to_owned(),
                quota: MAX_CONCURRENT_RUNS,
                limit: max,
                retry_after: RUN_RETRY,
            }
        })?;
        Ok(RunPermit { runs: Some(usage.runs.clone()) })
    }

    /// How many runs `tenant` has in flight (counted only while its limit is on).
    pub fn runs_in_flight(&self, tenant: &Tenant) -> u32 {
        self.usage(tenant).runs.load(Ordering::Acquire)
    }
}

/// One run's place in its tenant's `max_concurrent_runs`, given back on drop.
#[derive(Debug)]
pub struct RunPermit {
    /// `None` when the tenant's run limit is off.
    runs: Option<Arc<AtomicU32>>,
}

impl Drop for RunPermit {
    fn drop(&mut self) {
        if let Some(runs) = self.runs.take() {
            runs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A response body that holds a [`RunPermit`] until the stream is over: its trailers (a gRPC
/// stream's last frame) or end have been read, it failed, or it was dropped. Letting go at the
/// trailers matters: a client that has read them may call again at once, and the server need
/// not poll the body again, or drop it, before that call arrives.
#[derive(Debug)]
pub struct PermitBody<B> {
    inner: B,
    permit: Option<RunPermit>,
}

impl<B> PermitBody<B> {
    pub fn new(inner: B, permit: RunPermit) -> Self {
        PermitBody { inner, permit: Some(permit) }
    }
}

impl<B> http_body::Body for PermitBody<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let over = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
            Poll::Ready(Some(Err(_)) | None) => true,
            Poll::Pending => false,
        };
        if over {
            self.permit = None;
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

/// Which calls the layer limits.
#[derive(Debug, Default)]
struct Selection {
    /// Request paths of the calls that are runs (`/frontdesk.v1.ConversationService/SendMessage`).
    runs: HashSet<String>,
    /// Fully qualified services never limited (`auth.open_services`).
    exempt: HashSet<String>,
}

/// The tower layer enforcing [`Quotas`]. It must sit inside the auth layer, which puts the
/// [`Principal`] it reads into the request.
#[derive(Clone)]
pub struct QuotaLayer {
    quotas: Arc<Quotas>,
    selection: Arc<Selection>,
}

impl QuotaLayer {
    /// `run_paths`: the request paths whose calls are runs (counted against
    /// `max_concurrent_runs`); `exempt_services`: fully qualified services never limited, the
    /// auth layer's open services (which it admits as tenant `default`).
    pub fn new(
        quotas: Arc<Quotas>,
        run_paths: impl IntoIterator<Item = String>,
        exempt_services: impl IntoIterator<Item = String>,
    ) -> Self {
        let selection =
            Selection { runs: run_paths.into_iter().collect(), exempt: exempt_services.into_iter().collect() };
        QuotaLayer { quotas, selection: Arc::new(selection) }
    }

    pub fn quotas(&self) -> &Arc<Quotas> {
        &self.quotas
    }
}

/// The request paths of the calls that are runs: the server-streaming methods in
/// `descriptor_set` (an encoded `FileDescriptorSet`, such as `frontdesk_api::FILE_DESCRIPTOR_SET`)
/// that need write access in `methods`. Those start or advance a run and stream it; streams that
/// only read (`SubscribeRun`, `WatchInvestigation`) attach to runs already counted.
pub fn run_paths(descriptor_set: &[u8], methods: &MethodTable) -> Result<HashSet<String>, prost::DecodeError> {
    let set = <prost_types::FileDescriptorSet as prost::Message>::decode(descriptor_set)?;
    let mut paths = HashSet::new();
    for file in &set.file {
        let package = file.package();
        for service in &file.service {
            let qualified =
                if package.is_empty() { service.name().to_owned() } else { format!("{package}.{}", service.name()) };
            for method in &service.method {
                let path = format!("/{qualified}/{}", method.name());
                let writes = methods.scope_of(&path).is_some_and(|(_, access)| access >= Access::Write);
                if method.server_streaming() && writes {
                    paths.insert(path);
                }
            }
        }
    }
    Ok(paths)
}

/// The layer for `[quotas]`, logging the limits when any is on.
pub fn quota_layer(
    config: &QuotasConfig,
    run_paths: impl IntoIterator<Item = String>,
    exempt_services: impl IntoIterator<Item = String>,
) -> QuotaLayer {
    let quotas = Quotas::new(config);
    if !quotas.is_off() {
        tracing::info!(
            requests_per_sec = config.requests_per_sec,
            burst = config.burst,
            max_concurrent_runs = config.max_concurrent_runs,
            overrides = config.tenants.len(),
            "tenant quotas on"
        );
    }
    QuotaLayer::new(Arc::new(quotas), run_paths, exempt_services)
}

impl<S> Layer<S> for QuotaLayer {
    type Service = Quota<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Quota { inner, quotas: self.quotas.clone(), selection: self.selection.clone() }
    }
}

#[derive(Clone)]
pub struct Quota<S> {
    inner: S,
    quotas: Arc<Quotas>,
    selection: Arc<Selection>,
}

impl<S> Quota<S> {
    /// The call's run permit (`None`: not a run, or not limited), or why it is refused.
    fn admit<B>(&self, request: &http::Request<B>) -> Result<Option<RunPermit>, AccessError> {
        if self.quotas.is_off() {
            return Ok(None);
        }
        let Some(principal) = request.extensions().get::<Principal>() else { return Ok(None) };
        let path = request.uri().path();
        let service = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        if self.selection.exempt.contains(service) {
            return Ok(None);
        }
        self.quotas.check_request(&principal.tenant)?;
        if !self.selection.runs.contains(path) {
            return Ok(None);
        }
        self.quotas.start_run(&principal.tenant).map(Some)
    }
}

impl<S, B> Service<http::Request<B>> for Quota<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match self.admit(&request) {
            Ok(None) => Box::pin(self.inner.call(request)),
            Ok(Some(permit)) => {
                let response = self.inner.call(request);
                Box::pin(async move {
                    let response = response.await?;
                    Ok(response.map(|body| Body::new(PermitBody::new(body, permit))))
                })
            }
            Err(error) => {
                if let AccessError::QuotaExceeded { tenant, quota, limit, retry_after } = &error {
                    tracing::debug!(%tenant, quota, limit, ?retry_after, path = request.uri().path(), "quota exceeded");
                }
                let refusal = access_status(error).into_http();
                Box::pin(async move { Ok(refusal) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use frontdesk_api::v1::ErrorReason;
    use prost::bytes::Bytes;
    use tonic::{Code, Status};
    use tonic_types::StatusExt;

    use super::*;
    use crate::error::reason_name;

    fn config(requests_per_sec: u32, burst: u32, max_concurrent_runs: u32) -> QuotasConfig {
        QuotasConfig { requests_per_sec, burst, max_concurrent_runs, tenants: BTreeMap::new() }
    }

    fn tenant(name: &str) -> Tenant {
        Tenant::new(name).unwrap()
    }

    fn refusal(result: Result<(), AccessError>) -> (&'static str, u32, Duration) {
        match result {
            Err(AccessError::QuotaExceeded { quota, limit, retry_after, .. }) => (quota, limit, retry_after),
            other => panic!("expected a quota refusal, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_holds_burst_and_refills_at_the_rate() {
        let quotas = Quotas::new(&config(2, 4, 0));
        let acme = tenant("acme");
        for _ in 0..4 {
            quotas.check_request(&acme).unwrap();
        }
        let (quota, limit, wait) = refusal(quotas.check_request(&acme));
        assert_eq!((quota, limit), (REQUESTS_PER_SEC, 2));
        assert_eq!(wait, Duration::from_millis(500), "one token every 1/2 s");
        tokio::time::advance(Duration::from_millis(499)).await;
        let (_, _, wait) = refusal(quotas.check_request(&acme));
        assert_eq!(wait, Duration::from_millis(1), "a refused call spends nothing");
        tokio::time::advance(Duration::from_millis(1)).await;
        quotas.check_request(&acme).unwrap();
        refusal(quotas.check_request(&acme));
        tokio::time::advance(Duration::from_secs(10)).await;
        for _ in 0..4 {
            quotas.check_request(&acme).unwrap();
        }
        refusal(quotas.check_request(&acme));
    }

    #[tokio::test(start_paused = true)]
    async fn burst_zero_is_one_seconds_worth() {
        let quotas = Quotas::new(&config(3, 0, 0));
        let acme = tenant("acme");
        for _ in 0..3 {
            quotas.check_request(&acme).unwrap();
        }
        let (_, _, wait) = refusal(quotas.check_request(&acme));
        assert_eq!(wait, Duration::from_nanos(333_333_333));
    }

    #[tokio::test(start_paused = true)]
    async fn each_tenant_has_its_own_bucket_and_overrides() {
        let mut section = config(1, 1, 0);
        section.tenants.insert(
            "big".into(),
            TenantQuota { requests_per_sec: Some(10), burst: None, max_concurrent_runs: Some(2) },
        );
        section.tenants.insert("free".into(), TenantQuota { requests_per_sec: Some(0), ..TenantQuota::default() });
        let quotas = Quotas::new(&section);
        assert_eq!(quotas.limits(&tenant("big")), Limits { requests_per_sec: 10, burst: 1, max_concurrent_runs: 2 });
        quotas.check_request(&tenant("a")).unwrap();
        refusal(quotas.check_request(&tenant("a")));
        quotas.check_request(&tenant("b")).unwrap();
        // `big` keeps the section's burst of 1 at its own rate.
        quotas.check_request(&tenant("big")).unwrap();
        let (quota, limit, wait) = refusal(quotas.check_request(&tenant("big")));
        assert_eq!((quota, limit, wait), (REQUESTS_PER_SEC, 10, Duration::from_millis(100)));
        for _ in 0..100 {
            quotas.check_request(&tenant("free")).unwrap();
        }
    }

    #[test]
    fn quotas_are_off_by_default_and_on_with_any_limit() {
        assert!(Quotas::new(&QuotasConfig::default()).is_off());
        assert!(!Quotas::new(&config(0, 5, 1)).is_off());
        let mut section = QuotasConfig::default();
        section.tenants.insert("x".into(), TenantQuota { requests_per_sec: Some(1), ..TenantQuota::default() });
        assert!(!Quotas::new(&section).is_off());
    }

    #[tokio::test]
    async fn runs_are_counted_per_tenant_until_their_permits_drop() {
        let quotas = Quotas::new(&config(0, 0, 2));
        let acme = tenant("acme");
        let first = quotas.start_run(&acme).unwrap();
        let second = quotas.start_run(&acme).unwrap();
        assert_eq!(quotas.runs_in_flight(&acme), 2);
        let (quota, limit, wait) = refusal(quotas.start_run(&acme).map(drop));
        assert_eq!((quota, limit, wait), (MAX_CONCURRENT_RUNS, 2, RUN_RETRY));
        let other = quotas.start_run(&tenant("other")).unwrap();
        drop(first);
        assert_eq!(quotas.runs_in_flight(&acme), 1);
        let third = quotas.start_run(&acme).unwrap();
        refusal(quotas.start_run(&acme).map(drop));
        drop((second, third, other));
        assert_eq!(quotas.runs_in_flight(&acme), 0);
        // Without a run limit nothing is counted.
        let unlimited = Quotas::new(&config(5, 0, 0));
        let permits: Vec<_> = (0..10).map(|_| unlimited.start_run(&acme).unwrap()).collect();
        assert_eq!(unlimited.runs_in_flight(&acme), 0);
        drop(permits);
    }

    /// A body that yields its frames, then stays open (`open`) or ends.
    #[derive(Debug)]
    struct TestBody {
        frames: VecDeque<Result<Frame<Bytes>, Status>>,
        open: bool,
    }

    impl TestBody {
        fn stream(frames: impl IntoIterator<Item = Result<Frame<Bytes>, Status>>, open: bool) -> Self {
            TestBody { frames: frames.into_iter().collect(), open }
        }
    }

    impl http_body::Body for TestBody {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            match self.frames.pop_front() {
                Some(frame) => Poll::Ready(Some(frame)),
                None if self.open => Poll::Pending,
                None => Poll::Ready(None),
            }
        }

        fn is_end_stream(&self) -> bool {
            self.frames.is_empty() && !self.open
        }
    }

    fn data() -> Result<Frame<Bytes>, Status> {
        Ok(Frame::data(Bytes::from_static(b"event")))
    }

    fn trailers() -> Result<Frame<Bytes>, Status> {
        Ok(Frame::trailers(http::HeaderMap::new()))
    }

    /// A poll's outcome: `None` when pending, else the frame, the end or the error.
    type Polled = Option<Option<Result<Frame<Bytes>, Status>>>;

    fn poll(body: &mut PermitBody<TestBody>) -> Polled {
        let waker = futures::task::noop_waker();
        match http_body::Body::poll_frame(Pin::new(body), &mut Context::from_waker(&waker)) {
            Poll::Ready(frame) => Some(frame),
            Poll::Pending => None,
        }
    }

    fn one_run_quotas() -> (Quotas, Tenant) {
        (Quotas::new(&config(0, 0, 1)), tenant("acme"))
    }

    #[tokio::test]
    async fn the_body_gives_the_permit_back_at_its_trailers() {
        let (quotas, acme) = one_run_quotas();
        let mut body = PermitBody::new(TestBody::stream([data(), trailers()], false), quotas.start_run(&acme).unwrap());
        assert!(poll(&mut body).unwrap().unwrap().unwrap().is_data());
        assert_eq!(quotas.runs_in_flight(&acme), 1, "held while the stream runs");
        assert!(poll(&mut body).unwrap().unwrap().unwrap().is_trailers());
        assert_eq!(quotas.runs_in_flight(&acme), 0, "given back with the last frame, before the end is polled");
        assert!(poll(&mut body).unwrap().is_none());
        drop(body);
        assert_eq!(quotas.runs_in_flight(&acme), 0);
    }

    #[tokio::test]
    async fn the_body_gives_the_permit_back_at_its_end_or_error() {
        let (quotas, acme) = one_run_quotas();
        let mut body = PermitBody::new(TestBody::stream([data()], false), quotas.start_run(&acme).unwrap());
        poll(&mut body).unwrap().unwrap().unwrap();
        assert_eq!(quotas.runs_in_flight(&acme), 1);
        assert!(poll(&mut body).unwrap().is_none());
        assert_eq!(quotas.runs_in_flight(&acme), 0);

        let failing = TestBody::stream([data(), Err(Status::internal("reset"))], true);
        let mut body = PermitBody::new(failing, quotas.start_run(&acme).unwrap());
        poll(&mut body).unwrap().unwrap().unwrap();
        assert!(poll(&mut body).unwrap().unwrap().is_err());
        assert_eq!(quotas.runs_in_flight(&acme), 0);
    }

    #[tokio::test]
    async fn the_body_gives_the_permit_back_when_dropped_mid_stream() {
        let (quotas, acme) = one_run_quotas();
        let mut body = PermitBody::new(TestBody::stream([data()], true), quotas.start_run(&acme).unwrap());
        poll(&mut body).unwrap().unwrap().unwrap();
        assert!(poll(&mut body).is_none(), "the run goes on");
        assert_eq!(quotas.runs_in_flight(&acme), 1);
        drop(body);
        assert_eq!(quotas.runs_in_flight(&acme), 0, "a client that disconnects ends its place");
    }

    /// The inner service: answers every call with a stream that stays open, as a run does.
    #[derive(Clone)]
    struct Runs;

    impl Service<http::Request<()>> for Runs {
        type Response = http::Response<Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(Body::new(TestBody::stream([data()], true)))))
        }
    }

    const RUN: &str = "/test.v1.RunService/Start";
    const READ: &str = "/test.v1.RunService/Get";
    const HEALTH: &str = "/grpc.health.v1.Health/Check";

    fn service(section: QuotasConfig) -> Quota<Runs> {
        quota_layer(&section, [RUN.to_owned()], ["grpc.health.v1.Health".to_owned()]).layer(Runs)
    }

    fn request(path: &str, tenant: Option<&str>) -> http::Request<()> {
        let mut request = http::Request::builder().uri(path).body(()).unwrap();
        if let Some(name) = tenant {
            let principal = Principal { tenant: Tenant::new(name).unwrap(), ..Principal::open() };
            request.extensions_mut().insert(principal);
        }
        request
    }

    async fn call(service: &mut Quota<Runs>, path: &str, tenant: Option<&str>) -> http::Response<Body> {
        service.call(request(path, tenant)).await.unwrap()
    }

    /// The refusal's quota and retry delay, or `None` when the call passed.
    fn refused(response: &http::Response<Body>) -> Option<(String, Duration)> {
        let status = Status::from_header_map(response.headers())?;
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let details = status.get_error_details();
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, reason_name(ErrorReason::QuotaExceeded));
        assert!(info.metadata.contains_key("limit"));
        let retry = details.retry_info().and_then(|r| r.retry_delay).expect("RetryInfo");
        Some((info.metadata["quota"].clone(), retry))
    }

    #[test]
    fn runs_are_the_streams_that_write() {
        use crate::grpc::{conversation, workflow};
        let methods = MethodTable::new([&conversation::ACCESS, &workflow::ACCESS]);
        let runs = run_paths(frontdesk_api::FILE_DESCRIPTOR_SET, &methods).unwrap();
        // Not StartConversation (unary) nor SubscribeRun (a stream that reads).
        assert_eq!(runs, HashSet::from(["/frontdesk.v1.ConversationService/SendMessage".to_owned()]));
        assert!(run_paths(b"\xff", &methods).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_refuses_a_tenant_over_its_rate() {
        let mut service = service(config(1, 2, 0));
        assert!(refused(&call(&mut service, READ, Some("acme")).await).is_none());
        assert!(refused(&call(&mut service, RUN, Some("acme")).await).is_none(), "runs spend tokens too");
        let response = call(&mut service, READ, Some("acme")).await;
        assert_eq!(refused(&response), Some((REQUESTS_PER_SEC.to_owned(), Duration::from_secs(1))));
        assert!(refused(&call(&mut service, READ, Some("other")).await).is_none());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(refused(&call(&mut service, READ, Some("acme")).await).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn open_services_and_calls_without_a_principal_are_never_limited() {
        let mut service = service(config(1, 1, 1));
        for _ in 0..5 {
            assert!(refused(&call(&mut service, HEALTH, Some("default")).await).is_none());
            assert!(refused(&call(&mut service, RUN, None).await).is_none());
        }
        assert!(refused(&call(&mut service, READ, Some("default")).await).is_none(), "the bucket is untouched");
    }

    #[tokio::test]
    async fn the_layer_counts_runs_until_their_streams_end() {
        let mut service = service(config(0, 0, 1));
        let running = call(&mut service, RUN, Some("acme")).await;
        assert!(refused(&running).is_none());
        let second = call(&mut service, RUN, Some("acme")).await;
        assert_eq!(refused(&second), Some((MAX_CONCURRENT_RUNS.to_owned(), RUN_RETRY)));
        assert!(refused(&call(&mut service, READ, Some("acme")).await).is_none(), "only runs are counted");
        assert!(refused(&call(&mut service, RUN, Some("other")).await).is_none());
        drop(running);
        assert!(refused(&call(&mut service, RUN, Some("acme")).await).is_none());
    }
}
