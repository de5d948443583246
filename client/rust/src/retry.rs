//! Retries and re-attaching for calls that carry an idempotency key, as the Go, Python and
//! TypeScript SDKs do them (Go's `client/go/retry.go` is the reference): the server answers a
//! repeated key with the first call's outcome, so such a call can be sent again safely.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::time::Instant;
use tonic::Code;

use crate::{v1, ApiError, AuthChannel, ClientError};
use v1::workflow_service_client::WorkflowServiceClient;

/// How a [`Client`](crate::Client) retries calls that carry an idempotency key, on `UNAVAILABLE`
/// and `ABORTED`, and re-attaches their broken streams. [`RetryPolicy::default()`] is what a
/// client has unless told otherwise: 5 attempts, 30 s of waiting at most, backoff from 250 ms to
/// 5 s, re-attaching with `SubscribeRun`. Change fields with struct update syntax:
/// `RetryPolicy { max_attempts: 3, ..RetryPolicy::default() }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The most times one call is made, the first included (a stream also re-attaches at most
    /// this many times). 0 counts as 1.
    pub max_attempts: u32,
    /// The most time one call spends waiting between attempts, all waits together.
    pub max_wait: Duration,
    /// With `max_backoff`, the wait when the server's error carries no `RetryInfo` delay:
    /// `initial_backoff` doubling with each attempt up to `max_backoff`, each wait a random
    /// 50-100% of that (jitter).
    pub initial_backoff: Duration,
    /// See `initial_backoff`.
    pub max_backoff: Duration,
    /// Re-attach a broken stream to its run with `WorkflowService/SubscribeRun` first; `false`
    /// re-sends the call (after the wait for its error, as any retry) instead.
    pub reattach: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            max_wait: Duration::from_secs(30),
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(5),
            reattach: true,
        }
    }
}

/// Whether a call with an idempotency key is retried on `code`: `UNAVAILABLE` (the server, the
/// model, the store or a dependency is unavailable; the server is shutting down; the connection
/// broke) and `ABORTED` (`THREAD_BUSY`, `CHECKPOINT_CONFLICT`).
pub fn is_retryable(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::Aborted)
}

/// The code and `RetryInfo` delay a retry decision looks at. A stream that ended without its
/// result broke, as far as retrying goes: `UNAVAILABLE`.
fn retry_view(err: &ClientError) -> (Code, Option<Duration>) {
    match err {
        ClientError::Status(api) => (api.code, api.retry_after),
        ClientError::StreamEndedWithoutResult => (Code::Unavailable, None),
        _ => (Code::Unknown, None),
    }
}

/// A number in [0, 1) for jitter. std's `RandomState` is randomly keyed per instance, which is
/// random enough to spread retries and spares the crate a dependency.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// When one call must have ended ([`Timeouts`](crate::Timeouts)), and the timeout it came from,
/// for the error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    after: Duration,
}

impl Deadline {
    /// The deadline of a call starting now; `None` without a timeout.
    pub(crate) fn start(timeout: Option<Duration>) -> Option<Self> {
        timeout.map(|after| Deadline { at: Instant::now() + after, after })
    }

    /// The error of a call that reached its deadline. The client raises it, so it carries no
    /// details from a server.
    pub(crate) fn exceeded(&self) -> ClientError {
        ClientError::Status(Box::new(ApiError {
            code: Code::DeadlineExceeded,
            message: format!(
                "the call's deadline of {} passed (the client's timeout)",
                crate::format_duration(self.after)
            ),
            reason: None,
            metadata: Default::default(),
            field_violations: Vec::new(),
            retry_after: None,
        }))
    }

    /// Runs `call` until the deadline, if there is one.
    pub(crate) async fn bound<T>(
        deadline: Option<Self>,
        call: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        match deadline {
            Some(d) => tokio::time::timeout_at(d.at, call).await.unwrap_or_else(|_| Err(d.exceeded())),
            None => call.await,
        }
    }

    /// `stream` until the deadline, if there is one: then it ends with [`Deadline::exceeded`],
    /// dropping (so cancelling) the call's stream at once.
    pub(crate) fn bound_stream<T: Send + 'static>(
        deadline: Option<Self>,
        stream: BoxStream<'static, Result<T, ClientError>>,
    ) -> BoxStream<'static, Result<T, ClientError>> {
        let Some(d) = deadline else { return stream };
        futures::stream::unfold(Some(stream), move |stream| async move {
            let mut stream = stream?;
            match tokio::time::timeout_at(d.at, stream.next()).await {
                Ok(Some(item)) => Some((item, Some(stream))),
                Ok(None) => None,
                Err(_) => Some((Err(d.exceeded()), None)),
            }
        })
        .boxed()
    }
}

/// One call's attempts and waits so far, against its policy and deadline.
#[derive(Debug)]
pub(crate) struct Budget {
    /// `None`: not retried.
    policy: Option<RetryPolicy>,
    deadline: Option<Deadline>,
    calls: u32,
    reattaches: u32,
    waited: Duration,
}

impl Budget {
    pub(crate) fn new(policy: Option<RetryPolicy>, deadline: Option<Deadline>) -> Self {
        Budget { policy, deadline, calls: 1, reattaches: 0, waited: Duration::ZERO }
    }

    fn backoff(p: &RetryPolicy, calls: u32) -> Duration {
        let ceiling =
            p.initial_backoff.checked_mul(1 << (calls - 1).min(30)).unwrap_or(p.max_backoff).min(p.max_backoff);
        ceiling.mul_f64(0.5 + jitter() / 2.0)
    }

    /// The wait before calling again after an error with `code` and `retry_after`; `None` when
    /// the error is final.
    fn delay(&self, code: Code, retry_after: Option<Duration>) -> Option<Duration> {
        let p = self.policy.as_ref()?;
        if !is_retryable(code) || self.calls >= p.max_attempts.max(1) {
            return None;
        }
        let wait = retry_after.unwrap_or_else(|| Self::backoff(p, self.calls));
        // A wait that would end past the deadline only postpones the failure: the caller gets
        // the error that asked for it now, rather than DEADLINE_EXCEEDED later.
        let in_time = self.deadline.is_none_or(|d| Instant::now() + wait < d.at);
        (self.waited + wait <= p.max_wait && in_time).then_some(wait)
    }

    pub(crate) fn delay_for(&self, err: &ClientError) -> Option<Duration> {
        let (code, retry_after) = retry_view(err);
        self.delay(code, retry_after)
    }

    /// Counts a call made again after `wait`.
    pub(crate) fn spend(&mut self, wait: Duration) {
        self.calls += 1;
        self.waited += wait;
    }

    fn can_reattach(&self) -> bool {
        self.policy.is_some_and(|p| p.reattach && self.reattaches < p.max_attempts.max(1))
    }

    fn attempts_left(&self) -> bool {
        self.policy.is_some_and(|p| self.calls < p.max_attempts.max(1))
    }
}

/// Makes one unary call, retried per `policy` (`None`: once), all of it before `deadline`.
pub(crate) async fn retry_unary<T, F, Fut>(
    policy: Option<RetryPolicy>,
    deadline: Option<Deadline>,
    mut call: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let mut budget = Budget::new(policy, deadline);
    let attempts = async {
        loop {
            let err = match call().await {
                Ok(res) => return Ok(res),
                Err(status) => ClientError::from(status),
            };
            let Some(wait) = budget.delay_for(&err) else { return Err(err) };
            budget.spend(wait);
            tokio::time::sleep(wait).await;
        }
    };
    Deadline::bound(deadline, attempts).await
}

/// What an item of a run's stream is, as re-attaching sees it.
pub(crate) enum ItemKind<'a> {
    /// A `RunEvent`: delivered once, told apart by run id, event id and time.
    Event(&'a v1::RunEvent),
    /// The call's result, its last item.
    Result,
    /// A triage's ticket resolution: delivered once.
    Resolution,
    /// Produced by the event before it (a message, a plan, ...): dropped with a duplicate event.
    Derived,
}

/// An item of a streamed call that runs a workflow.
pub(crate) trait RunItem: Send + Sized + 'static {
    fn kind(&self) -> ItemKind<'_>;
    /// The item carrying an event `SubscribeRun` delivered.
    fn from_event(event: v1::RunEvent) -> Self;
}

pub(crate) type CallStream<T> = BoxStream<'static, Result<T, tonic::Status>>;

/// Opens the call again (the same request, idempotency key included).
pub(crate) type Opener<T> = Box<dyn FnMut() -> BoxFuture<'static, Result<CallStream<T>, tonic::Status>> + Send>;

enum Current<T> {
    Idle,
    Call(CallStream<T>),
    Subscription(Box<tonic::Streaming<v1::SubscribeRunResponse>>),
}

enum Plan {
    Call(Duration),
    Subscribe,
    Raise(ClientError),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    run_id: String,
    event_id: u64,
}

/// The streams of one call that runs a workflow: with a policy, it retries the call and
/// re-attaches a broken stream (`SubscribeRun` from the last event delivered, then the call
/// again with its idempotency key for the result, which the server replays), handing each event
/// on once. Event ids number one execution of a run, so an id seen again with another time
/// belongs to a later execution (resumed after a crash, or by another replica) and is new.
pub(crate) struct RunSource<T> {
    open: Opener<T>,
    workflows: WorkflowServiceClient<AuthChannel>,
    budget: Budget,
    current: Current<T>,
    subscribing: bool,
    seen: HashMap<EventKey, (i64, i32)>,
    /// Runs whose last event arrived: `Some` with the failure of a run that failed.
    ended: HashMap<String, Option<v1::RunFailed>>,
    last_dup: bool,
    resolved: bool,
    have_result: bool,
    /// The failure that took the stream from the call to `SubscribeRun`: what a fallback to the
    /// call waits on, or raises.
    cause: Option<ClientError>,
    run_id: String,
    event_id: u64,
    done: bool,
}

impl<T: RunItem> RunSource<T> {
    /// Opens the call (retrying per `policy`) and returns its stream of items, or the error
    /// that failed it before it streamed anything; the call, its retries and its stream end by
    /// `deadline`.
    pub(crate) async fn start(
        policy: Option<RetryPolicy>,
        deadline: Option<Deadline>,
        workflows: WorkflowServiceClient<AuthChannel>,
        open: Opener<T>,
    ) -> Result<BoxStream<'static, Result<T, ClientError>>, ClientError> {
        let mut source = RunSource {
            open,
            workflows,
            budget: Budget::new(policy, deadline),
            current: Current::Idle,
            subscribing: false,
            seen: HashMap::new(),
            ended: HashMap::new(),
            last_dup: false,
            resolved: false,
            have_result: false,
            cause: None,
            run_id: String::new(),
            event_id: 0,
            done: false,
        };
        let opened = Deadline::bound(deadline, async {
            if let Err(err) = source.open_current(false).await {
                let plan = source.failed(err);
                source.follow(plan).await?;
            }
            Ok(())
        });
        opened.await?;
        let stream = futures::stream::unfold(source, |mut s| async move { s.next().await.map(|item| (item, s)) });
        Ok(Deadline::bound_stream(deadline, stream.boxed()))
    }

    /// Whether the caller has not seen `event` yet; records it.
    fn fresh(&mut self, event: &v1::RunEvent) -> bool {
        let key = EventKey { run_id: event.run_id.clone(), event_id: event.event_id };
        let stamp = event.time.as_ref().map(|t| (t.seconds, t.nanos)).unwrap_or_default();
        match self.seen.get(&key) {
            Some(prior) if *prior == stamp => {
                self.last_dup = true;
                return false;
            }
            Some(_) => {
                // A new execution of the run: its events count again from 1.
                self.seen.retain(|k, _| k.run_id != key.run_id);
                self.ended.remove(&key.run_id);
            }
            None => {}
        }
        self.last_dup = false;
        self.run_id.clone_from(&key.run_id);
        self.event_id = key.event_id;
        use v1::run_event::Kind;
        match &event.kind {
            Some(Kind::RunFinished(_)) | Some(Kind::RunInterrupted(_)) => {
                self.ended.insert(key.run_id.clone(), None);
            }
            Some(Kind::RunFailed(f)) => {
                self.ended.insert(key.run_id.clone(), Some(f.clone()));
            }
            _ => {}
        }
        self.seen.insert(key, stamp);
        true
    }

    fn open_run(&self) -> bool {
        !self.run_id.is_empty() && !self.ended.contains_key(&self.run_id)
    }

    fn again(&mut self, wait: Duration) -> Plan {
        self.subscribing = false;
        self.budget.spend(wait);
        Plan::Call(wait)
    }

    /// Switches to `SubscribeRun` at once, because of `cause`.
    fn reattach(&mut self, cause: ClientError) -> Plan {
        self.subscribing = true;
        self.budget.reattaches += 1;
        self.cause = Some(cause);
        Plan::Subscribe
    }

    /// Sends the call again after the wait `err` asks for (its `RetryInfo`, else the backoff),
    /// or raises `err` when it is final.
    fn retry(&mut self, err: ClientError) -> Plan {
        match self.budget.delay_for(&err) {
            Some(wait) => self.again(wait),
            None => Plan::Raise(err),
        }
    }

    fn take_cause(&mut self) -> ClientError {
        self.cause.take().unwrap_or(ClientError::StreamEndedWithoutResult)
    }

    /// Sends the call again when `SubscribeRun` could not follow the run (`sub_err`:
    /// `NOT_FOUND`, another replica has it or this one forgot it; `UNAVAILABLE`, it is down or
    /// shutting down; `None`: it ended before the run's last event, with no re-attach left);
    /// with its key the call attaches or replays. It waits what the failure that left the call
    /// asks for, or `sub_err`'s `RetryInfo` when that is longer; else it raises that failure.
    fn fall_back(&mut self, sub_err: Option<&ClientError>) -> Plan {
        let (mut code, mut retry_after) = self.cause.as_ref().map(retry_view).unwrap_or((Code::Unavailable, None));
        if !is_retryable(code) {
            (code, retry_after) = (Code::Unavailable, None);
        }
        if let Some((sub_code, Some(d))) = sub_err.map(retry_view) {
            if is_retryable(sub_code) && retry_after.is_none_or(|prior| d > prior) {
                (code, retry_after) = (sub_code, Some(d));
            }
        }
        match self.budget.delay(code, retry_after) {
            Some(wait) => self.again(wait),
            None => Plan::Raise(self.take_cause()),
        }
    }

    fn failed(&mut self, err: ClientError) -> Plan {
        if self.subscribing {
            return self.fall_back(Some(&err));
        }
        if self.budget.policy.is_none() {
            return Plan::Raise(err);
        }
        if is_retryable(retry_view(&err).0) && self.open_run() && self.budget.can_reattach() {
            return self.reattach(err);
        }
        self.retry(err)
    }

    fn ended_without_result(&mut self) -> Plan {
        if self.subscribing {
            if self.open_run() {
                // Ended before the run's last event: re-attach again, or fall back to the call.
                if self.budget.can_reattach() {
                    let cause = self.take_cause();
                    return self.reattach(cause);
                }
                return self.fall_back(None);
            }
            if let Some(Some(failed)) = self.ended.get(&self.run_id) {
                let err = run_failed_error(failed);
                return self.retry(err);
            }
            // The run ended: the call with its key replays the recorded outcome, at once
            // (nothing failed), as one of the attempts.
            if !self.budget.attempts_left() {
                return Plan::Raise(self.take_cause());
            }
            return self.again(Duration::ZERO);
        }
        let err = ClientError::StreamEndedWithoutResult;
        if self.budget.policy.is_none() {
            return Plan::Raise(err);
        }
        if self.open_run() && self.budget.can_reattach() {
            return self.reattach(err);
        }
        self.retry(err)
    }

    /// Opens the call or `SubscribeRun`, dropping (so cancelling) the stream before it.
    async fn open_current(&mut self, subscribe: bool) -> Result<(), ClientError> {
        self.current = Current::Idle;
        self.current = if subscribe {
            let req = v1::SubscribeRunRequest { run_id: self.run_id.clone(), after_event_id: self.event_id };
            Current::Subscription(Box::new(self.workflows.subscribe_run(req).await?.into_inner()))
        } else {
            Current::Call((self.open)().await?)
        };
        Ok(())
    }

    /// Carries out `plan`: opens the next stream, or fails.
    async fn follow(&mut self, mut plan: Plan) -> Result<(), ClientError> {
        loop {
            let subscribe = match plan {
                Plan::Raise(err) => return Err(err),
                Plan::Call(wait) => {
                    self.current = Current::Idle;
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    false
                }
                Plan::Subscribe => true,
            };
            match self.open_current(subscribe).await {
                Ok(()) => return Ok(()),
                Err(err) => plan = self.failed(err),
            }
        }
    }

    /// The next item for the caller: `None` after the result, else the error that ended the
    /// call, once.
    async fn next(&mut self) -> Option<Result<T, ClientError>> {
        if self.done {
            return None;
        }
        loop {
            let plan = match &mut self.current {
                Current::Idle => Plan::Raise(ClientError::StreamEndedWithoutResult),
                Current::Subscription(sub) => match sub.next().await {
                    Some(Ok(res)) => {
                        match res.event {
                            Some(event) if self.fresh(&event) => return Some(Ok(T::from_event(event))),
                            _ => {}
                        }
                        continue;
                    }
                    Some(Err(status)) => self.failed(status.into()),
                    None => self.ended_without_result(),
                },
                Current::Call(call) => match call.next().await {
                    Some(Ok(item)) => {
                        let deliver = match item.kind() {
                            ItemKind::Event(event) => self.fresh(event),
                            ItemKind::Result => {
                                self.have_result = true;
                                true
                            }
                            ItemKind::Resolution => !std::mem::replace(&mut self.resolved, true),
                            ItemKind::Derived => !self.last_dup,
                        };
                        if deliver {
                            return Some(Ok(item));
                        }
                        continue;
                    }
                    // Broken or ended after the result: nothing is missing.
                    _ if self.have_result => {
                        self.finish();
                        return None;
                    }
                    Some(Err(status)) => self.failed(status.into()),
                    None => self.ended_without_result(),
                },
            };
            if let Err(err) = self.follow(plan).await {
                self.finish();
                return Some(Err(err));
            }
        }
    }

    fn finish(&mut self) {
        self.done = true;
        self.current = Current::Idle;
    }
}

/// The error a run's `RunFailed` event stands for.
fn run_failed_error(f: &v1::RunFailed) -> ClientError {
    ClientError::Status(Box::new(ApiError {
        code: Code::from_i32(f.code),
        message: f.message.clone(),
        reason: Some(f.reason.clone()).filter(|r| !r.is_empty()),
        metadata: Default::default(),
        field_violations: Vec::new(),
        retry_after: None,
    }))
}
