//! Retries, re-attaching and resumed watches, against a tiny in-process fake server (no real
//! frontdesk-server): it answers StartConversation, SendMessage, SubscribeRun and
//! WatchInvestigation as each test scripts it, and records what it was asked.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frontdesk_client::{v1, Client, ClientError, RetryPolicy, SendOptions, StartOptions, Timeouts, TurnEvent};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};
use v1::conversation_service_server::{ConversationService, ConversationServiceServer};
use v1::investigation_service_server::{InvestigationService, InvestigationServiceServer};
use v1::run_event::Kind;
use v1::workflow_service_server::{WorkflowService, WorkflowServiceServer};

const RUN: &str = "0b6a3d5e-2f7c-4b8e-9d1a-5c3e7f9a1b2d";
const LAST: u64 = 5;
const ALL: [u64; 5] = [1, 2, 3, 4, 5];

/// An error the fake answers with: code, reason, and the `RetryInfo` delay if any.
#[derive(Clone, Copy)]
struct Scripted(Code, &'static str, Option<Duration>);

impl Scripted {
    fn status(self) -> Status {
        let mut details = ErrorDetails::with_error_info(self.1, "frontdesk.dev", HashMap::new());
        if let Some(delay) = self.2 {
            details.set_retry_info(Some(delay));
        }
        Status::with_error_details(self.0, "scripted failure", details)
    }
}

#[derive(Default)]
struct Script {
    /// Each StartConversation call takes the next: an error, or success once they run out.
    start_errors: VecDeque<Scripted>,
    /// Each SendMessage call takes the next: an error before any event, or the turn.
    send_errors: VecDeque<Scripted>,
    /// Every SendMessage after the first answers this (once `send_errors` ran out).
    resend_error: Option<Scripted>,
    /// The first SendMessage that streams breaks after this many events, with `break_with`.
    break_after: Option<u64>,
    break_with: Option<Scripted>,
    /// SubscribeRun answers this instead of the run's events.
    subscribe_error: Option<Scripted>,
    /// SubscribeRun's last event is a RunFailed (FAILED_PRECONDITION CONVERSATION_ENDED).
    run_fails: bool,
    /// The first WatchInvestigation sends entries 1..=n, then fails with `watch_break_with`;
    /// later ones send the rest up to `watch_last` and end.
    watch_break_after: u32,
    watch_break_with: Option<Scripted>,
    watch_last: u32,
    /// Every WatchInvestigation after the first fails at once with this.
    rewatch_error: Option<Scripted>,
    /// StartConversation never answers (once `start_errors` ran out).
    start_hangs: bool,
    /// SendMessage sends events 1..=n and then nothing more, until the client goes away.
    hang_after: Option<u64>,
}

#[derive(Default)]
struct Seen {
    start_calls: Vec<Instant>,
    send_calls: Vec<Instant>,
    subscribe_calls: Vec<u64>,
    watch_calls: Vec<u32>,
    /// When a SendMessage stream that hung saw its client go away.
    hung_stream_closed: Option<Instant>,
}

#[derive(Clone, Default)]
struct Fake {
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Seen>>,
}

fn event(id: u64) -> v1::RunEvent {
    let kind = match id {
        1 => Kind::RunStarted(v1::RunStarted { thread_id: "c1".into(), workflow: "intake".into(), resumed: false }),
        LAST => Kind::RunFinished(v1::RunFinished::default()),
        _ => Kind::NodeStarted(v1::NodeStarted { step: id as u32 }),
    };
    v1::RunEvent {
        run_id: RUN.into(),
        event_id: id,
        time: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: id as i32 }),
        node: "n".into(),
        task: None,
        kind: Some(kind),
    }
}

type Items<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A stream of `items`, sent from a task as a live server would.
fn stream_of<T: Send + 'static>(items: Vec<Result<T, Status>>) -> Items<T> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for item in items {
            if tx.send(item).await.is_err() {
                return;
            }
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

#[tonic::async_trait]
impl ConversationService for Fake {
    async fn start_conversation(
        &self,
        _: Request<v1::StartConversationRequest>,
    ) -> Result<Response<v1::StartConversationResponse>, Status> {
        self.seen.lock().unwrap().start_calls.push(Instant::now());
        let hangs = {
            let mut script = self.script.lock().unwrap();
            if let Some(err) = script.start_errors.pop_front() {
                return Err(err.status());
            }
            script.start_hangs
        };
        if hangs {
            std::future::pending::<()>().await;
        }
        let conversation = v1::Conversation { conversation_id: "c1".into(), ..Default::default() };
        Ok(Response::new(v1::StartConversationResponse { conversation: Some(conversation), welcome: None }))
    }

    type SendMessageStream = Items<v1::SendMessageResponse>;

    async fn send_message(
        &self,
        _: Request<v1::SendMessageRequest>,
    ) -> Result<Response<Self::SendMessageStream>, Status> {
        let first = {
            let mut seen = self.seen.lock().unwrap();
            seen.send_calls.push(Instant::now());
            seen.send_calls.len() == 1
        };
        let mut script = self.script.lock().unwrap();
        if let Some(err) = script.send_errors.pop_front().or(script.resend_error.filter(|_| !first)) {
            return Err(err.status());
        }
        use v1::send_message_response::Payload;
        if let Some(n) = script.hang_after {
            let (tx, rx) = mpsc::channel(16);
            let seen = self.seen.clone();
            tokio::spawn(async move {
                for id in 1..=n {
                    let _ = tx.send(Ok(v1::SendMessageResponse { payload: Some(Payload::Event(event(id))) })).await;
                }
                tx.closed().await;
                seen.lock().unwrap().hung_stream_closed = Some(Instant::now());
            });
            return Ok(Response::new(Box::pin(ReceiverStream::new(rx))));
        }
        let mut items = Vec::new();
        for id in 1..=LAST {
            if let (true, Some(after)) = (first, script.break_after) {
                if id > after {
                    let err = script.break_with.unwrap_or(Scripted(Code::Unavailable, "STORE_UNAVAILABLE", None));
                    items.push(Err(err.status()));
                    return Ok(Response::new(stream_of(items)));
                }
            }
            items.push(Ok(v1::SendMessageResponse { payload: Some(Payload::Event(event(id))) }));
        }
        let result = v1::TurnResult { run_id: RUN.into(), replayed: !first, ..Default::default() };
        items.push(Ok(v1::SendMessageResponse { payload: Some(Payload::Result(result)) }));
        Ok(Response::new(stream_of(items)))
    }

    async fn get_conversation(
        &self,
        _: Request<v1::GetConversationRequest>,
    ) -> Result<Response<v1::GetConversationResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_conversations(
        &self,
        _: Request<v1::ListConversationsRequest>,
    ) -> Result<Response<v1::ListConversationsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn reset_conversation(
        &self,
        _: Request<v1::ResetConversationRequest>,
    ) -> Result<Response<v1::ResetConversationResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn delete_conversation(
        &self,
        _: Request<v1::DeleteConversationRequest>,
    ) -> Result<Response<v1::DeleteConversationResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

#[tonic::async_trait]
impl WorkflowService for Fake {
    async fn list_workflows(
        &self,
        _: Request<v1::ListWorkflowsRequest>,
    ) -> Result<Response<v1::ListWorkflowsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn describe_workflow(
        &self,
        _: Request<v1::DescribeWorkflowRequest>,
    ) -> Result<Response<v1::DescribeWorkflowResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn cancel_run(&self, _: Request<v1::CancelRunRequest>) -> Result<Response<v1::CancelRunResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_llm_calls(
        &self,
        _: Request<v1::ListLlmCallsRequest>,
    ) -> Result<Response<v1::ListLlmCallsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    type SubscribeRunStream = Items<v1::SubscribeRunResponse>;

    async fn subscribe_run(
        &self,
        request: Request<v1::SubscribeRunRequest>,
    ) -> Result<Response<Self::SubscribeRunStream>, Status> {
        let after = request.into_inner().after_event_id;
        self.seen.lock().unwrap().subscribe_calls.push(after);
        let script = self.script.lock().unwrap();
        if let Some(err) = script.subscribe_error {
            return Err(err.status());
        }
        let items = (after + 1..=LAST)
            .map(|id| {
                let mut e = event(id);
                if id == LAST && script.run_fails {
                    e.kind = Some(Kind::RunFailed(v1::RunFailed {
                        code: Code::FailedPrecondition as i32,
                        message: "the conversation has ended".into(),
                        reason: "CONVERSATION_ENDED".into(),
                        usage: None,
                    }));
                }
                Ok(v1::SubscribeRunResponse { event: Some(e), skipped: 0 })
            })
            .collect();
        Ok(Response::new(stream_of(items)))
    }
}

fn audit_entry(seq: u32) -> v1::AuditEntry {
    v1::AuditEntry { investigation_id: "INV-1002".into(), seq, actor: "investigation".into(), ..Default::default() }
}

#[tonic::async_trait]
impl InvestigationService for Fake {
    type StartInvestigationStream = Items<v1::StartInvestigationResponse>;

    async fn start_investigation(
        &self,
        _: Request<v1::StartInvestigationRequest>,
    ) -> Result<Response<Self::StartInvestigationStream>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    type RespondStream = Items<v1::RespondResponse>;

    async fn respond(&self, _: Request<v1::RespondRequest>) -> Result<Response<Self::RespondStream>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn get_investigation(
        &self,
        _: Request<v1::GetInvestigationRequest>,
    ) -> Result<Response<v1::GetInvestigationResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_investigations(
        &self,
        _: Request<v1::ListInvestigationsRequest>,
    ) -> Result<Response<v1::ListInvestigationsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    type WatchInvestigationStream = Items<v1::WatchInvestigationResponse>;

    async fn watch_investigation(
        &self,
        request: Request<v1::WatchInvestigationRequest>,
    ) -> Result<Response<Self::WatchInvestigationStream>, Status> {
        let after = request.into_inner().after_seq;
        let first = {
            let mut seen = self.seen.lock().unwrap();
            seen.watch_calls.push(after);
            seen.watch_calls.len() == 1
        };
        let script = self.script.lock().unwrap();
        let entry = |seq| Ok(v1::WatchInvestigationResponse { entry: Some(audit_entry(seq)) });
        let items = if first {
            let mut items: Vec<_> = (after + 1..=script.watch_break_after).map(entry).collect();
            items.extend(script.watch_break_with.map(|err| Err(err.status())));
            items
        } else if let Some(err) = script.rewatch_error {
            return Err(err.status());
        } else {
            (after + 1..=script.watch_last).map(entry).collect()
        };
        Ok(Response::new(stream_of(items)))
    }

    async fn get_audit_trail(
        &self,
        _: Request<v1::GetAuditTrailRequest>,
    ) -> Result<Response<v1::GetAuditTrailResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_pending_actions(
        &self,
        _: Request<v1::ListPendingActionsRequest>,
    ) -> Result<Response<v1::ListPendingActionsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

/// Fast enough for tests; `RetryInfo` delays still rule where the fake sends them.
fn fast() -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        ..RetryPolicy::default()
    }
}

/// Serves a fake scripted by `script` on a loopback port; a client of it with `policy`
/// (`None`: retries off).
async fn start(script: Script, policy: Option<RetryPolicy>) -> (Fake, Client) {
    start_with(script, policy, Timeouts::default()).await
}

async fn start_with(script: Script, policy: Option<RetryPolicy>, timeouts: Timeouts) -> (Fake, Client) {
    let fake = Fake { script: Arc::new(Mutex::new(script)), seen: Arc::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ConversationServiceServer::new(fake.clone()))
            .add_service(WorkflowServiceServer::new(fake.clone()))
            .add_service(InvestigationServiceServer::new(fake.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let builder = Client::builder(format!("http://{addr}")).timeouts(timeouts);
    let builder = match policy {
        Some(policy) => builder.retry_policy(policy),
        None => builder.no_retries(),
    };
    (fake, builder.connect().await.unwrap())
}

fn keyed_start() -> StartOptions {
    StartOptions { idempotency_key: Some("k1".into()), ..StartOptions::default() }
}

fn keyed_send() -> SendOptions {
    SendOptions { idempotency_key: Some("k1".into()), ..SendOptions::default() }
}

/// The event ids a turn's stream delivered, its result, and the error that ended it.
async fn collect_turn(client: &Client, opts: SendOptions) -> (Vec<u64>, Option<v1::TurnResult>, Option<ClientError>) {
    let mut stream = match client.send_message("c1", "hi", opts).await {
        Ok(stream) => stream,
        Err(err) => return (Vec::new(), None, Some(err)),
    };
    let (mut ids, mut result) = (Vec::new(), None);
    while let Some(item) = stream.next().await {
        match item {
            Ok(TurnEvent::Event(e)) => ids.push(e.event_id),
            Ok(TurnEvent::Result(r)) => result = Some(r),
            Err(err) => return (ids, result, Some(err)),
        }
    }
    (ids, result, None)
}

fn gaps(calls: &[Instant]) -> Vec<Duration> {
    calls.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test]
async fn a_keyed_call_is_retried_after_unavailable_waiting_the_retry_info_delay() {
    let delay = Some(Duration::from_millis(200));
    let script = Script {
        start_errors: [Scripted(Code::Unavailable, "STORE_UNAVAILABLE", delay); 2].into(),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let started = client.start_conversation("intake", keyed_start()).await.unwrap();
    assert_eq!(started.conversation.unwrap().conversation_id, "c1");
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.start_calls.len(), 3);
    for gap in gaps(&seen.start_calls) {
        assert!(gap >= Duration::from_millis(190), "gap {gap:?} is shorter than the RetryInfo delay (200ms)");
    }
}

#[tokio::test]
async fn a_keyed_turn_answered_aborted_thread_busy_is_retried() {
    let script = Script {
        send_errors: [Scripted(Code::Aborted, "THREAD_BUSY", Some(Duration::from_millis(100)))].into(),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let (events, result) = client.send_message_and_wait("c1", "hi", keyed_send()).await.unwrap();
    assert_eq!(events.iter().map(|e| e.event_id).collect::<Vec<_>>(), ALL);
    assert_eq!(result.run_id, RUN);
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.send_calls.len(), 2);
    assert!(gaps(&seen.send_calls)[0] >= Duration::from_millis(95), "the THREAD_BUSY RetryInfo was not waited");
}

#[tokio::test]
async fn backoff_without_retry_info_is_quick() {
    let script = Script { start_errors: [Scripted(Code::Aborted, "THREAD_BUSY", None); 2].into(), ..Script::default() };
    let (fake, client) = start(script, Some(fast())).await;
    let before = Instant::now();
    client.start_conversation("intake", keyed_start()).await.unwrap();
    assert!(before.elapsed() < Duration::from_millis(500), "{:?}", before.elapsed());
    assert_eq!(fake.seen.lock().unwrap().start_calls.len(), 3);
}

#[tokio::test]
async fn calls_without_a_key_are_never_retried() {
    let script = Script {
        start_errors: [Scripted(Code::Unavailable, "STORE_UNAVAILABLE", Some(Duration::from_millis(10)))].into(),
        break_after: Some(2),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let err = client.start_conversation("intake", StartOptions::default()).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::Unavailable));

    let (ids, result, err) = collect_turn(&client, SendOptions::default()).await;
    assert_eq!((ids, result), (vec![1, 2], None));
    assert_eq!(err.and_then(|e| e.code()), Some(Code::Unavailable));
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.start_calls.len(), seen.send_calls.len()), (1, 1));
    assert!(seen.subscribe_calls.is_empty());
}

#[tokio::test]
async fn attempts_are_bounded_by_the_policy() {
    let busy = Scripted(Code::Aborted, "THREAD_BUSY", Some(Duration::from_millis(10)));
    let script = Script { start_errors: [busy; 10].into(), ..Script::default() };
    let (fake, client) = start(script, Some(RetryPolicy { max_attempts: 3, ..fast() })).await;
    let err = client.start_conversation("intake", keyed_start()).await.unwrap_err();
    assert_eq!((err.code(), err.reason()), (Some(Code::Aborted), Some("THREAD_BUSY")));
    assert_eq!(fake.seen.lock().unwrap().start_calls.len(), 3);
}

#[tokio::test]
async fn waits_are_bounded_by_max_wait() {
    let busy = Scripted(Code::Aborted, "THREAD_BUSY", Some(Duration::from_millis(150)));
    let script = Script { start_errors: [busy; 10].into(), ..Script::default() };
    let policy = RetryPolicy { max_wait: Duration::from_millis(400), ..fast() };
    let (fake, client) = start(script, Some(policy)).await;
    client.start_conversation("intake", keyed_start()).await.unwrap_err();
    // 150 + 150 fits in 400 ms, a third wait would not.
    assert_eq!(fake.seen.lock().unwrap().start_calls.len(), 3);
}

#[tokio::test]
async fn retries_switched_off() {
    let script = Script {
        start_errors: [Scripted(Code::Unavailable, "STORE_UNAVAILABLE", Some(Duration::from_millis(10)))].into(),
        break_after: Some(2),
        ..Script::default()
    };
    let (fake, client) = start(script, None).await;
    assert!(client.retry_policy().is_none());
    client.start_conversation("intake", keyed_start()).await.unwrap_err();
    let (ids, _, err) = collect_turn(&client, keyed_send()).await;
    assert_eq!(ids, [1, 2]);
    assert_eq!(err.and_then(|e| e.code()), Some(Code::Unavailable));
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.start_calls.len(), seen.send_calls.len()), (1, 1));
    assert!(seen.subscribe_calls.is_empty());
}

#[tokio::test]
async fn a_broken_stream_reattaches_with_subscribe_run_and_delivers_each_event_once() {
    let script = Script { break_after: Some(3), ..Script::default() };
    let (fake, client) = start(script, Some(fast())).await;
    let (ids, result, err) = collect_turn(&client, keyed_send()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(ids, ALL, "each event once");
    // SubscribeRun yields no result: the call is sent again with its key for the recorded one,
    // and the events it streams again are dropped.
    assert_eq!(result.map(|r| (r.run_id, r.replayed)), Some((RUN.to_string(), true)));
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.subscribe_calls, [3], "re-attached from the last event delivered");
    assert_eq!(seen.send_calls.len(), 2);
}

#[tokio::test]
async fn subscribe_run_not_found_falls_back_to_sending_the_keyed_call_again() {
    let script = Script {
        break_after: Some(2),
        subscribe_error: Some(Scripted(Code::NotFound, "NOT_FOUND", None)),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let (ids, result, err) = collect_turn(&client, keyed_send()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(ids, ALL);
    assert!(result.is_some());
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.subscribe_calls.as_slice(), seen.send_calls.len()), (&[2][..], 2));
}

/// A server stopping a run at shutdown ends its stream, and its subscribers', with UNAVAILABLE
/// SHUTTING_DOWN and RetryInfo: the keyed call is sent again after that delay, and attaches to
/// the run where it resumed.
#[tokio::test]
async fn a_run_stopped_by_shutting_down_is_followed_by_a_keyed_retry() {
    let shutting_down = Scripted(Code::Unavailable, "SHUTTING_DOWN", Some(Duration::from_millis(200)));
    let script = Script {
        break_after: Some(2),
        break_with: Some(shutting_down),
        subscribe_error: Some(shutting_down),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let (ids, result, err) = collect_turn(&client, keyed_send()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(ids, ALL);
    assert!(result.is_some());
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.subscribe_calls.as_slice(), seen.send_calls.len()), (&[2][..], 2));
    assert!(gaps(&seen.send_calls)[0] >= Duration::from_millis(190), "the SHUTTING_DOWN RetryInfo was not waited");
}

#[tokio::test]
async fn a_run_that_failed_while_reattached_fails_the_call_with_its_reason() {
    let script = Script { break_after: Some(2), run_fails: true, ..Script::default() };
    let (fake, client) = start(script, Some(fast())).await;
    let (ids, _, err) = collect_turn(&client, keyed_send()).await;
    let err = err.expect("the run's failure");
    assert_eq!((err.code(), err.reason()), (Some(Code::FailedPrecondition), Some("CONVERSATION_ENDED")));
    assert_eq!(err.api().unwrap().message, "the conversation has ended");
    assert_eq!(ids, ALL);
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.subscribe_calls.as_slice(), seen.send_calls.len()), (&[2][..], 1));
}

#[tokio::test]
async fn without_reattach_the_call_is_sent_again() {
    let script = Script { break_after: Some(2), ..Script::default() };
    let (fake, client) = start(script, Some(RetryPolicy { reattach: false, ..fast() })).await;
    let (ids, result, err) = collect_turn(&client, keyed_send()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(ids, ALL);
    assert!(result.is_some());
    let seen = fake.seen.lock().unwrap();
    assert!(seen.subscribe_calls.is_empty());
    assert_eq!(seen.send_calls.len(), 2);
}

#[tokio::test]
async fn a_fallback_is_bounded_by_max_attempts() {
    let busy = Scripted(Code::Aborted, "THREAD_BUSY", Some(Duration::from_millis(20)));
    let script = Script {
        break_after: Some(2),
        subscribe_error: Some(Scripted(Code::NotFound, "NOT_FOUND", None)),
        resend_error: Some(busy),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(RetryPolicy { max_attempts: 3, ..fast() })).await;
    let (_, _, err) = collect_turn(&client, keyed_send()).await;
    let err = err.expect("an error");
    assert_eq!((err.code(), err.reason()), (Some(Code::Aborted), Some("THREAD_BUSY")), "{err}");
    assert_eq!(fake.seen.lock().unwrap().send_calls.len(), 3);
}

#[tokio::test]
async fn a_watch_resumes_from_the_last_seq_after_unavailable() {
    let script = Script {
        watch_break_after: 2,
        watch_break_with: Some(Scripted(Code::Unavailable, "SHUTTING_DOWN", Some(Duration::from_millis(50)))),
        watch_last: 4,
        ..Script::default()
    };
    let (fake, client) = start(script, Some(fast())).await;
    let seqs: Vec<u32> = client
        .watch_investigation("INV-1002", 0)
        .await
        .unwrap()
        .map(|entry| entry.expect("no error").seq)
        .collect()
        .await;
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(fake.seen.lock().unwrap().watch_calls, [0, 2], "watched again from the last seq");
}

#[tokio::test]
async fn a_watch_gives_up_as_the_policy_says() {
    let unavailable = Scripted(Code::Unavailable, "SHUTTING_DOWN", Some(Duration::from_millis(10)));
    let script = Script {
        watch_break_after: 2,
        watch_break_with: Some(unavailable),
        rewatch_error: Some(unavailable),
        ..Script::default()
    };
    let (fake, client) = start(script, Some(RetryPolicy { max_attempts: 3, ..fast() })).await;
    let items: Vec<_> = client.watch_investigation("INV-1002", 0).await.unwrap().collect().await;
    assert_eq!(items.len(), 3);
    assert_eq!(items[2].as_ref().unwrap_err().reason(), Some("SHUTTING_DOWN"));
    assert_eq!(fake.seen.lock().unwrap().watch_calls, [0, 2, 2]);
}

#[tokio::test]
async fn a_watch_without_retries_ends_with_the_error() {
    let script = Script {
        watch_break_after: 2,
        watch_break_with: Some(Scripted(Code::Unavailable, "SHUTTING_DOWN", Some(Duration::from_millis(10)))),
        watch_last: 4,
        ..Script::default()
    };
    let (fake, client) = start(script, None).await;
    let items: Vec<_> = client.watch_investigation("INV-1002", 0).await.unwrap().collect().await;
    assert_eq!(items.len(), 3);
    assert_eq!(items[2].as_ref().unwrap_err().code(), Some(Code::Unavailable));
    assert_eq!(fake.seen.lock().unwrap().watch_calls, [0]);
}

fn timeouts(unary: Option<u64>, streaming: Option<u64>) -> Timeouts {
    Timeouts { unary: unary.map(Duration::from_millis), streaming: streaming.map(Duration::from_millis) }
}

/// `call`, failing the test after 10 s: without a working deadline these calls would never end.
async fn within<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), call).await.expect("the call outlived its deadline by seconds")
}

fn assert_deadline_exceeded(err: &ClientError) {
    assert_eq!(err.code(), Some(Code::DeadlineExceeded), "{err}");
    assert_eq!(err.reason(), None, "the client's own deadline carries no server reason: {err}");
}

#[tokio::test]
async fn a_unary_call_that_gets_no_answer_fails_at_its_deadline() {
    let script = Script { start_hangs: true, ..Script::default() };
    let (_fake, client) = start_with(script, Some(fast()), timeouts(Some(300), None)).await;
    let before = Instant::now();
    let err = within(client.start_conversation("intake", keyed_start())).await.unwrap_err();
    let took = before.elapsed();
    assert_deadline_exceeded(&err);
    assert!(took >= Duration::from_millis(290) && took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_deadline_covers_the_retries_of_a_unary_call() {
    // Three quick UNAVAILABLEs, then no answer: the deadline counts from the first attempt.
    let script = Script {
        start_errors: [Scripted(Code::Unavailable, "STORE_UNAVAILABLE", Some(Duration::from_millis(50))); 3].into(),
        start_hangs: true,
        ..Script::default()
    };
    let (fake, client) = start_with(script, Some(fast()), timeouts(Some(400), None)).await;
    let before = Instant::now();
    let err = within(client.start_conversation("intake", keyed_start())).await.unwrap_err();
    let took = before.elapsed();
    assert_deadline_exceeded(&err);
    assert!(took >= Duration::from_millis(390) && took < Duration::from_secs(5), "{took:?}");
    assert_eq!(fake.seen.lock().unwrap().start_calls.len(), 4);
}

#[tokio::test]
async fn a_retry_wait_that_would_pass_the_deadline_fails_at_once_with_the_error_that_asked_for_it() {
    let script = Script {
        start_errors: [Scripted(Code::Unavailable, "STORE_UNAVAILABLE", Some(Duration::from_secs(5)))].into(),
        ..Script::default()
    };
    let (fake, client) = start_with(script, Some(fast()), timeouts(Some(3_000), None)).await;
    let before = Instant::now();
    let err = within(client.start_conversation("intake", keyed_start())).await.unwrap_err();
    assert_eq!(err.reason(), Some("STORE_UNAVAILABLE"), "{err}");
    assert!(before.elapsed() < Duration::from_millis(2_900), "not at the deadline: {:?}", before.elapsed());
    assert_eq!(fake.seen.lock().unwrap().start_calls.len(), 1);
}

#[tokio::test]
async fn a_stream_past_its_deadline_ends_with_deadline_exceeded_and_is_cancelled() {
    let script = Script { hang_after: Some(2), ..Script::default() };
    let (fake, client) = start_with(script, Some(fast()), timeouts(None, Some(400))).await;
    let before = Instant::now();
    let (ids, result, err) = within(collect_turn(&client, keyed_send())).await;
    let took = before.elapsed();
    assert_eq!(ids, [1, 2], "the events before the deadline are delivered");
    assert!(result.is_none());
    assert_deadline_exceeded(&err.expect("the stream ends with an error"));
    assert!(took >= Duration::from_millis(390) && took < Duration::from_secs(5), "{took:?}");
    // The client cancels the call: the server sees its stream closed.
    for _ in 0..100 {
        if fake.seen.lock().unwrap().hung_stream_closed.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(fake.seen.lock().unwrap().hung_stream_closed.is_some(), "the server never saw the call cancelled");
    assert_eq!(fake.seen.lock().unwrap().send_calls.len(), 1, "a deadline is not retried");
}

#[tokio::test]
async fn streams_have_no_deadline_by_default_and_unary_calls_thirty_seconds() {
    assert_eq!(Timeouts::default(), timeouts(Some(30_000), None));
    // The unary deadline does not reach a stream: this turn outlives it and completes.
    let (_fake, client) = start_with(Script::default(), Some(fast()), timeouts(Some(1), None)).await;
    let slow = client.with_timeouts(timeouts(Some(1), None));
    let (ids, result, err) = collect_turn(&slow, SendOptions::default()).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(ids, ALL);
    assert!(result.is_some());
}

#[tokio::test]
async fn with_timeouts_gives_one_copy_of_a_client_its_own_deadline() {
    let script = Script { hang_after: Some(1), ..Script::default() };
    let (_fake, client) = start_with(script, Some(fast()), Timeouts::default()).await;
    let bounded = client.with_timeouts(Timeouts { streaming: Some(Duration::from_millis(200)), ..client.timeouts() });
    assert_eq!(client.timeouts().streaming, None, "the original client is unchanged");
    let (ids, _, err) = within(collect_turn(&bounded, keyed_send())).await;
    assert_eq!(ids, [1]);
    assert_deadline_exceeded(&err.expect("the stream ends with an error"));
}
