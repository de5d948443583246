//! Rust client for the Frontdesk gRPC service (`frontdesk.v1`).
//!
//! [`Client`] wraps the generated `ConversationService`, `WorkflowService`, `TriageService`,
//! `InvestigationService` and `ResearchService` stubs with typed options, streaming turn, triage,
//! investigation and research APIs ([`Client::send_message`], [`Client::triage_ticket`],
//! [`Client::start_investigation`], [`Client::respond`], [`Client::ask`]) and errors whose
//! `google.rpc` details are already decoded ([`ApiError`]). [`describe_event`] renders a
//! [`v1::RunEvent`] as one human line ([`describe_agent_message`], [`describe_status_change`] and
//! [`describe_audit_entry`] do the same for an investigation's progress and audit trail,
//! [`describe_orchestrator_message`], [`describe_critic_verdict`] and [`describe_citation`] for a
//! research question's, [`describe_tool_call`] for a tool call with its result and latency); the
//! `frontdesk` CLI uses them to show progress live.
//!
//! ```no_run
//! # async fn demo() -> Result<(), frontdesk_client::ClientError> {
//! use frontdesk_client::{Client, SendOptions, StartOptions};
//!
//! let client = Client::connect("http://127.0.0.1:50051").await?;
//! let started = client.start_conversation("intake", StartOptions::default()).await?;
//! let id = started.conversation.unwrap().conversation_id;
//! let (events, result) = client.send_message_and_wait(&id, "I need a new laptop", SendOptions::default()).await?;
//! for e in &events {
//!     println!("{}", frontdesk_client::describe_event(e));
//! }
//! println!("{}", result.reply.map(|m| m.text).unwrap_or_default());
//! # Ok(())
//! # }
//! ```
//!
//! Triaging a support ticket streams its resolution, the run's events, then the typed result:
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! use frontdesk_client::TriageOptions;
//!
//! let (resolution, _events, result) = client
//!     .triage_ticket_and_wait("CUST-001", "I was charged twice on my last invoice", TriageOptions::default())
//!     .await?;
//! println!("{} → {:?}", resolution.ticket_id, result.recommended_action());
//! # Ok(())
//! # }
//! ```
//!
//! Investigating an HR mutation streams run events, agent messages and status changes, then the
//! investigation, which may wait for a person's reply ([`Reply`]):
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! use frontdesk_client::{v1, Reply};
//!
//! let run = client.start_investigation_and_wait("1002", None).await?;
//! for m in &run.messages {
//!     println!("{}", frontdesk_client::describe_agent_message(m));
//! }
//! let id = run.investigation.investigation_id;
//! let changer = &run.investigation.awaiting[0];
//! let reply = Reply::changer(&changer.recipient_id, "I stood in for u006, who was on vacation.");
//! let run = client.respond_and_wait(&id, &changer.action_id, reply).await?;
//! if let Some(manager) = run.investigation.awaiting.first() {
//!     let reply = Reply::manager(&manager.recipient_id, v1::ManagerDecision::Approve);
//!     let run = client.respond_and_wait(&id, &manager.action_id, reply).await?;
//!     println!("{:?}", run.investigation.report.map(|r| r.recommendation()));
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Asking a research question streams the critic loop live (each plan, research result, critic
//! decision and expert answer as it is produced), then the research with its final answer:
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! use frontdesk_client::{AskOptions, ResearchEvent};
//! use futures::StreamExt;
//!
//! let opts = AskOptions { retry_limit: Some(3), ..AskOptions::default() };
//! let mut stream = client.ask("Who invented CRISPR gene editing?", opts).await?;
//! while let Some(item) = stream.next().await {
//!     match item? {
//!         ResearchEvent::CriticDecision(v) => println!("{}", frontdesk_client::describe_critic_verdict(&v)),
//!         ResearchEvent::Result(r) => {
//!             println!("[step {}] {}", r.step_id, r.answer);
//!             for c in &r.citations {
//!                 println!("  {}", frontdesk_client::describe_citation(c));
//!             }
//!         }
//!         ResearchEvent::Research(r) => println!("{:?}: {}", r.outcome(), r.final_answer),
//!         _ => {}
//!     }
//! }
//! // Or collect it all: client.ask_and_wait(question, opts).await?.research
//! # Ok(())
//! # }
//! ```
//!
//! A service call (the `service_call` workflow) is a conversation too: one message per thing the
//! customer says, each turn running the flow's nodes until one has replied. Its state is a
//! [`v1::ServiceCallState`] ([`service_call_state`], [`service_call_context`]); [`nodes_run`] and
//! [`tool_calls`] read what a turn did from its events. Once the call was hung up, a further
//! message is `FAILED_PRECONDITION` with reason [`CONVERSATION_ENDED`]:
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! use frontdesk_client::{describe_tool_call, nodes_run, service_call_state, tool_calls};
//! use frontdesk_client::{SendOptions, StartOptions, CONVERSATION_ENDED, SERVICE_CALL_ROUTING_NODES};
//!
//! let started = client.start_conversation("service_call", StartOptions::default()).await?;
//! let id = started.conversation.unwrap().conversation_id;
//! let text = "Hello, I need help with drywall repair";
//! let (events, result) = client.send_message_and_wait(&id, text, SendOptions::default()).await?;
//! println!("{}", result.reply.map(|m| m.text).unwrap_or_default());
//! println!("nodes: {}", nodes_run(&events, &SERVICE_CALL_ROUTING_NODES).join(" → "));
//! for call in tool_calls(&events) {
//!     println!("[{}] {}", call.node, describe_tool_call(&call)); // arguments, result, latency
//! }
//! let conversation = result.conversation.unwrap_or_default();
//! let state = service_call_state(&conversation).expect("a service call");
//! println!("now at {}; ended: {}", state.current_node, state.call_ended);
//! if state.call_ended {
//!     let refused = client.send_message_and_wait(&id, "Hello?", SendOptions::default()).await.unwrap_err();
//!     assert_eq!(refused.reason(), Some(CONVERSATION_ENDED));
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The `frontdesk` CLI's `chat --workflow service_call` prints the same after each turn and ends
//! when the call has ended.
//!
//! [`Client::list_llm_calls`] lists the model calls a thread (a conversation, a ticket thread, an
//! investigation or a research) made, as the server's LLM call log recorded them
//! (`model.call_log` `redacted` or `full`), a page at a time, the most recent first. A page may
//! end early (at about 3 MiB of prompts and replies), so read on while there is a token:
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! let mut token = None;
//! loop {
//!     let page = client.list_llm_calls("conv-…", 0, token).await?;
//!     for c in &page.calls {
//!         println!("{} {} {} {}+{} tok", c.node, c.purpose, c.model, c.prompt_tokens, c.completion_tokens);
//!     }
//!     if page.next_page_token.is_empty() {
//!         break;
//!     }
//!     token = Some(page.next_page_token);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! `frontdesk llm-calls THREAD` prints them all, oldest first (`--prompts` for the prompts and
//! replies, `--run` for one run's).
//!
//! A server that requires API keys (`auth.mode = "keys"`, the default off loopback) refuses calls
//! without one as `UNAUTHENTICATED` ([`UNAUTHENTICATED`]) and calls whose key lacks the method's
//! scope as `PERMISSION_DENIED` ([`SCOPE_MISSING`]). [`Client::builder`] sends a key with every
//! call, and connects over TLS (a private CA, and a client certificate for mutual TLS):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use frontdesk_client::{Certificate, Client, ClientTlsConfig, Identity};
//!
//! let key = std::env::var("FRONTDESK_KEY").expect("an API key");
//! let tls = ClientTlsConfig::new()
//!     .ca_certificate(Certificate::from_pem(std::fs::read("ca.pem")?))
//!     .identity(Identity::from_pem(std::fs::read("client.pem")?, std::fs::read("client.key")?));
//! let client = Client::builder("https://frontdesk.example.com:50051").api_key(key).tls(tls).connect().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Retries and re-attaching
//!
//! A call that carries an idempotency key ([`StartOptions`], [`Client::reset_conversation`],
//! [`SendOptions`], [`TriageOptions`], [`Client::start_investigation`], [`Reply`],
//! [`AskOptions`]) is retried on `UNAVAILABLE` and `ABORTED` (the server answers a repeated key
//! with the first call's outcome, so nothing runs twice), as the Go, Python and TypeScript SDKs
//! do. Calls without a key, read-only ones included, are never retried: pass a key to opt in.
//! [`RetryPolicy::default()`] is on unless [`ClientBuilder::retry_policy`],
//! [`ClientBuilder::no_retries`] or [`Client::with_retry_policy`] say otherwise:
//!
//! - **How long it waits**: the server's `RetryInfo` delay ([`ApiError::retry_after`]) when the
//!   error carries one (`THREAD_BUSY`'s time left on another replica's lease, `SHUTTING_DOWN`'s
//!   1 s), else a backoff from `initial_backoff` doubling up to `max_backoff`, each wait a random
//!   50-100% of that; at most `max_attempts` calls and `max_wait` of waiting in all. Dropping the
//!   call's future or stream (or a `tokio::time::timeout` around it) stops the waiting.
//! - **Broken streams**: a keyed stream that fails with `UNAVAILABLE`/`ABORTED` (its server
//!   shutting down, `SHUTTING_DOWN`, included), or ends without its result, before its run's last
//!   event re-attaches at once with `WorkflowService/SubscribeRun` from the last event id it
//!   delivered (at most `max_attempts` times). `SubscribeRun` yields only run events, so once the
//!   run's last event arrived the call is sent again with its key, at once, for the recorded
//!   result (a run that failed fails the stream with its code and reason instead). When
//!   `SubscribeRun` cannot follow the run (`NOT_FOUND`: it lives on another replica, or this one
//!   forgot it; `UNAVAILABLE`: this one is down or shutting down) the call is sent again with its
//!   key, which attaches to the run wherever it resumed, after the wait above for the error that
//!   broke the stream (or `SubscribeRun`'s `RetryInfo` when longer). Every resend is one of the
//!   `max_attempts` calls; when none is left the stream fails with the error that broke it. With
//!   `reattach: false` the call is sent again after the wait, without `SubscribeRun`.
//! - **Each event once**: events are told apart by run id, event id and time (event ids number
//!   one execution of a run, from 1: a resumed run counts again), and what an event already
//!   delivered produced (an agent message, a status change, a plan, a triage's resolution) is
//!   dropped with it. While re-attached only [`v1::RunEvent`]s arrive; the final result holds every
//!   message.
//! - **Watching**: [`Client::watch_investigation`] goes on from the last `seq` it delivered when
//!   its stream ends with `UNAVAILABLE`, under the same policy, key or not (watching changes
//!   nothing).
//! - **Deadlines**: a call's [`Timeouts`] cover its retries and waits; a wait that would end past
//!   the deadline is not taken, and the call fails with the error that asked for it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), frontdesk_client::ClientError> {
//! use std::time::Duration;
//! use frontdesk_client::{Client, RetryPolicy, SendOptions};
//!
//! let policy = RetryPolicy { max_attempts: 8, max_wait: Duration::from_secs(60), ..RetryPolicy::default() };
//! let client = Client::builder("http://127.0.0.1:50051").retry_policy(policy).connect().await?;
//! let opts = SendOptions { idempotency_key: Some("turn-42".into()), ..SendOptions::default() };
//! let (_events, result) = client.send_message_and_wait("conv-…", "Hello", opts).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Deadlines
//!
//! A unary call fails with `DEADLINE_EXCEEDED` after 30 s, its retries included; a streamed call
//! (a turn, a triage, an investigation, a research question, [`Client::subscribe_run`],
//! [`Client::watch_investigation`]) has no deadline unless given one, since a turn on a slow model
//! or a watch of an investigation that waits for a manager can rightly take long. The client
//! enforces the deadline: on it the call's future returns, or its stream yields, one `Err` with
//! code `DEADLINE_EXCEEDED` (no `reason`: the server never saw it) and the call is cancelled. A
//! run the server had started goes on; send the call again with its idempotency key to attach to
//! it, or `SubscribeRun` to follow it. [`ClientBuilder::timeouts`] sets a client's deadlines, and
//! [`Client::with_timeouts`] a cheap copy's for some calls:
//!
//! ```no_run
//! # async fn demo(client: frontdesk_client::Client) -> Result<(), frontdesk_client::ClientError> {
//! use std::time::Duration;
//! use frontdesk_client::{SendOptions, Timeouts};
//!
//! let patient = client.with_timeouts(Timeouts { streaming: Some(Duration::from_secs(120)), ..client.timeouts() });
//! let (_events, result) = patient.send_message_and_wait("conv-…", "Hello", SendOptions::default()).await?;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;

mod retry;
pub use retry::{is_retryable, RetryPolicy};
use retry::{retry_unary, Deadline, ItemKind, Opener, RunItem, RunSource};

use futures::{Stream, StreamExt};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;
use tonic_types::StatusExt;

pub use tonic::transport::{Certificate, ClientTlsConfig, Identity};

pub use frontdesk_api::v1;
use v1::conversation_service_client::ConversationServiceClient;
use v1::investigation_service_client::InvestigationServiceClient;
use v1::research_service_client::ResearchServiceClient;
use v1::triage_service_client::TriageServiceClient;
use v1::workflow_service_client::WorkflowServiceClient;

/// How long [`Client::connect`] waits for the TCP/HTTP2 connection before failing.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call may take, its retries and the waits between them included, before the client
/// fails it with `DEADLINE_EXCEEDED` and cancels it ([Deadlines](crate#deadlines)). `None`: no
/// deadline. [`Timeouts::default()`] is 30 s for unary calls and none for streamed ones, as the
/// Python and TypeScript SDKs have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Every call that answers once (`GetConversation`, `ListTickets`, `StartConversation`, ...).
    pub unary: Option<Duration>,
    /// Every streamed call, from the call to the stream's end: `SendMessage`, `TriageTicket`,
    /// `StartInvestigation`, `Respond`, `Ask`, `SubscribeRun` and `WatchInvestigation` (and the
    /// `*_and_wait` methods built on them).
    pub streaming: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { unary: Some(Duration::from_secs(30)), streaming: None }
    }
}

/// Options of [`Client::start_conversation`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// Caller-chosen conversation id; the server generates one when `None`.
    pub conversation_id: Option<String>,
    /// A retried call with the same key returns the first call's outcome.
    pub idempotency_key: Option<String>,
}

/// Options of [`Client::send_message`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendOptions {
    /// A retried call with the same key replays the first call's result.
    pub idempotency_key: Option<String>,
    /// Wait for a running turn on the same conversation instead of failing with `ABORTED`.
    pub queue_if_busy: bool,
}

/// One item of a turn's stream.
// Unboxed on purpose: the result arrives once per turn, and plain variants match more easily.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// A progress event of the run (node started/finished, token delta, model call, ...).
    Event(v1::RunEvent),
    /// The last item: the assistant's reply and the conversation after the turn.
    Result(v1::TurnResult),
}

impl TurnEvent {
    /// The run event, if this is one.
    pub fn as_event(&self) -> Option<&v1::RunEvent> {
        match self {
            TurnEvent::Event(e) => Some(e),
            TurnEvent::Result(_) => None,
        }
    }

    /// The turn result, if this is it.
    pub fn as_result(&self) -> Option<&v1::TurnResult> {
        match self {
            TurnEvent::Result(r) => Some(r),
            TurnEvent::Event(_) => None,
        }
    }
}

/// The stream returned by [`Client::send_message`]. It ends after the [`TurnEvent::Result`], or
/// with an `Err`: the error that ended the turn (after any retries, see [`RetryPolicy`]), or
/// [`ClientError::StreamEndedWithoutResult`].
pub type TurnStream = Pin<Box<dyn Stream<Item = Result<TurnEvent, ClientError>> + Send>>;

/// A re-attached run's events ([`Client::subscribe_run`]).
pub type RunEventStream = Pin<Box<dyn Stream<Item = Result<v1::SubscribeRunResponse, ClientError>> + Send>>;

/// Options of [`Client::triage_ticket`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TriageOptions {
    /// Optional subject line of the ticket.
    pub subject: Option<String>,
    /// ISO 639-1 language hint (such as `"es"`); the server detects the language when `None`.
    pub language: Option<String>,
    /// A retried call with the same key replays the first call's result.
    pub idempotency_key: Option<String>,
}

/// One item of a triage stream: the ticket-matching run's [`TriageEvent::Event`]s (only when the
/// customer has active tickets), the [`TriageEvent::Resolution`], the ticket run's
/// [`TriageEvent::Event`]s, last the [`TriageEvent::Result`].
// Unboxed on purpose, as `TurnEvent`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum TriageEvent {
    /// Which ticket the message belongs to (a new one, or an active one it continues).
    Resolution(v1::TicketResolution),
    /// A progress event of the triage run (node started/finished, model call, tool call, ...).
    Event(v1::RunEvent),
    /// The last item: the typed triage result.
    Result(v1::TriageResult),
}

impl TriageEvent {
    /// The ticket resolution, if this is it.
    pub fn as_resolution(&self) -> Option<&v1::TicketResolution> {
        match self {
            TriageEvent::Resolution(r) => Some(r),
            _ => None,
        }
    }

    /// The run event, if this is one.
    pub fn as_event(&self) -> Option<&v1::RunEvent> {
        match self {
            TriageEvent::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The triage result, if this is it.
    pub fn as_result(&self) -> Option<&v1::TriageResult> {
        match self {
            TriageEvent::Result(r) => Some(r),
            _ => None,
        }
    }
}

/// The stream returned by [`Client::triage_ticket`]. It ends after the [`TriageEvent::Result`],
/// or with an `Err`: the error that ended the triage (after any retries, see [`RetryPolicy`]), or
/// [`ClientError::StreamEndedWithoutResult`].
pub type TriageStream = Pin<Box<dyn Stream<Item = Result<TriageEvent, ClientError>> + Send>>;

/// Which HR mutation [`Client::start_investigation`] investigates. `"1002".into()` names one of
/// the imported HR data; an [`v1::HrMutation`] is given inline (and recorded with the HR data).
#[derive(Debug, Clone, PartialEq)]
pub enum MutationRef {
    /// A mutation of the imported HR data, by id (such as `"1002"`).
    Id(String),
    /// A mutation given inline. An existing mutation id with other values is `ALREADY_EXISTS`.
    Inline(v1::HrMutation),
}

impl From<&str> for MutationRef {
    fn from(id: &str) -> Self {
        MutationRef::Id(id.to_string())
    }
}

impl From<String> for MutationRef {
    fn from(id: String) -> Self {
        MutationRef::Id(id)
    }
}

impl From<&String> for MutationRef {
    fn from(id: &String) -> Self {
        MutationRef::Id(id.clone())
    }
}

impl From<v1::HrMutation> for MutationRef {
    fn from(m: v1::HrMutation) -> Self {
        MutationRef::Inline(m)
    }
}

/// A reply to a pending action, for [`Client::respond`]: the changer's clarification
/// ([`Reply::changer`]) or the manager's decision ([`Reply::manager`], with an optional comment).
/// The server checks it: the role and responder must be the ones the action awaits
/// (`PERMISSION_DENIED`, reason `WRONG_RESPONDER`), the changer must send text and the manager a
/// decision (`INVALID_ARGUMENT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Who answers: the changer or the manager.
    pub role: v1::ResponderRole,
    /// The user answering; must be the action's recipient.
    pub responder_id: String,
    /// The changer's clarification, or the manager's comment.
    pub text: Option<String>,
    /// The manager's decision.
    pub decision: Option<v1::ManagerDecision>,
    /// A retried call with the same key and reply returns the first call's outcome.
    pub idempotency_key: Option<String>,
}

impl Reply {
    /// The changer's clarification.
    pub fn changer(responder_id: impl Into<String>, text: impl Into<String>) -> Self {
        Reply {
            role: v1::ResponderRole::Changer,
            responder_id: responder_id.into(),
            text: Some(text.into()),
            decision: None,
            idempotency_key: None,
        }
    }

    /// The manager's decision (add a comment with [`Reply::with_text`]).
    pub fn manager(responder_id: impl Into<String>, decision: v1::ManagerDecision) -> Self {
        Reply {
            role: v1::ResponderRole::Manager,
            responder_id: responder_id.into(),
            text: None,
            decision: Some(decision),
            idempotency_key: None,
        }
    }

    /// Sets the text: the changer's clarification or the manager's comment.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the idempotency key.
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// One item of an investigation's stream ([`Client::start_investigation`], [`Client::respond`]):
/// run events, each agent message and status change right after the node event that produced
/// it, and last the [`InvestigationEvent::Investigation`].
// Unboxed on purpose, as `TurnEvent`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum InvestigationEvent {
    /// A progress event of the run (node started/finished, model call, tool call, ...).
    Event(v1::RunEvent),
    /// A message one agent sent another.
    Message(v1::AgentMessage),
    /// A change of the investigation's status.
    StatusChange(v1::StatusChange),
    /// The last item: the investigation as the run left it (finished, or awaiting a reply).
    Investigation(v1::Investigation),
}

impl InvestigationEvent {
    /// The run event, if this is one.
    pub fn as_event(&self) -> Option<&v1::RunEvent> {
        match self {
            InvestigationEvent::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The agent message, if this is one.
    pub fn as_message(&self) -> Option<&v1::AgentMessage> {
        match self {
            InvestigationEvent::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The status change, if this is one.
    pub fn as_status_change(&self) -> Option<&v1::StatusChange> {
        match self {
            InvestigationEvent::StatusChange(c) => Some(c),
            _ => None,
        }
    }

    /// The investigation, if this is it.
    pub fn as_investigation(&self) -> Option<&v1::Investigation> {
        match self {
            InvestigationEvent::Investigation(i) => Some(i),
            _ => None,
        }
    }
}

/// The stream returned by [`Client::start_investigation`] and [`Client::respond`]. It ends after
/// the [`InvestigationEvent::Investigation`], or with an `Err`: the error that ended the run
/// (after any retries, see [`RetryPolicy`]), or [`ClientError::StreamEndedWithoutResult`].
pub type InvestigationStream = Pin<Box<dyn Stream<Item = Result<InvestigationEvent, ClientError>> + Send>>;

/// Everything one investigation run streamed, collected by
/// [`Client::start_investigation_and_wait`] and [`Client::respond_and_wait`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InvestigationRun {
    /// The run's events, in order.
    pub events: Vec<v1::RunEvent>,
    /// The agent messages, in order.
    pub messages: Vec<v1::AgentMessage>,
    /// The status changes, in order.
    pub status_changes: Vec<v1::StatusChange>,
    /// The investigation as the run left it (finished, or awaiting a reply).
    pub investigation: v1::Investigation,
}

/// The stream returned by [`Client::watch_investigation`]: audit entries in `seq` order. It ends
/// once the advisory report is generated, or with an `Err`.
pub type AuditStream = Pin<Box<dyn Stream<Item = Result<v1::AuditEntry, ClientError>> + Send>>;

/// Whose audit trail [`Client::get_audit_trail`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTrailKey {
    /// The whole trail of one investigation (such as `INV-1002`).
    Investigation(String),
    /// One message exchange: a request and its result (such as `corr-INV-1002-1`).
    Correlation(String),
}

/// Options of [`Client::ask`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AskOptions {
    /// Rejections allowed before the question is given up; `None` means the server's default (5),
    /// at most 20.
    pub retry_limit: Option<u32>,
    /// The document corpus to research; `None` means the default (`sample`, the shipped
    /// documents).
    pub corpus: Option<String>,
    /// A retried call with the same key and request returns the first call's outcome.
    pub idempotency_key: Option<String>,
}

/// One item of a research question's stream ([`Client::ask`]): run events, each orchestrator
/// message, plan, research result, critic decision and expert answer right after the node (or
/// task) event that produced it, and last the [`ResearchEvent::Research`].
// Unboxed on purpose, as `TurnEvent`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ResearchEvent {
    /// A progress event of the run (node started/finished, model call, tool call, ...).
    Event(v1::RunEvent),
    /// An instruction of the orchestrator to an agent, or an agent's response.
    Message(v1::OrchestratorMessage),
    /// A plan (a rejected plan is followed by a new one).
    Plan(v1::Plan),
    /// One research step's result, with its citations.
    Result(v1::ResearchResult),
    /// A critic's decision on the planner's, a researcher's or the expert's work.
    CriticDecision(v1::CriticVerdict),
    /// The expert's answer.
    ExpertAnswer(v1::ExpertAnswer),
    /// The last item: the research with its outcome, final answer and reasoning trace.
    Research(v1::Research),
}

impl ResearchEvent {
    /// The run event, if this is one.
    pub fn as_event(&self) -> Option<&v1::RunEvent> {
        match self {
            ResearchEvent::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The orchestrator message, if this is one.
    pub fn as_message(&self) -> Option<&v1::OrchestratorMessage> {
        match self {
            ResearchEvent::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The plan, if this is one.
    pub fn as_plan(&self) -> Option<&v1::Plan> {
        match self {
            ResearchEvent::Plan(p) => Some(p),
            _ => None,
        }
    }

    /// The research result, if this is one.
    pub fn as_result(&self) -> Option<&v1::ResearchResult> {
        match self {
            ResearchEvent::Result(r) => Some(r),
            _ => None,
        }
    }

    /// The critic decision, if this is one.
    pub fn as_critic_decision(&self) -> Option<&v1::CriticVerdict> {
        match self {
            ResearchEvent::CriticDecision(v) => Some(v),
            _ => None,
        }
    }

    /// The expert answer, if this is one.
    pub fn as_expert_answer(&self) -> Option<&v1::ExpertAnswer> {
        match self {
            ResearchEvent::ExpertAnswer(e) => Some(e),
            _ => None,
        }
    }

    /// The research, if this is it.
    pub fn as_research(&self) -> Option<&v1::Research> {
        match self {
            ResearchEvent::Research(r) => Some(r),
            _ => None,
        }
    }
}

/// The stream returned by [`Client::ask`]. It ends after the [`ResearchEvent::Research`], or
/// with an `Err`: the error that ended the run (after any retries, see [`RetryPolicy`]), or
/// [`ClientError::StreamEndedWithoutResult`].
pub type ResearchStream = Pin<Box<dyn Stream<Item = Result<ResearchEvent, ClientError>> + Send>>;

/// Everything one research question streamed, collected by [`Client::ask_and_wait`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResearchRun {
    /// The run's events, in order.
    pub events: Vec<v1::RunEvent>,
    /// The orchestrator's messages, in order.
    pub messages: Vec<v1::OrchestratorMessage>,
    /// The plans, in order (more than one when the planner's critic rejected one).
    pub plans: Vec<v1::Plan>,
    /// The research results as they finished (`research.results` has them in plan order).
    pub results: Vec<v1::ResearchResult>,
    /// The critics' decisions, in order.
    pub critic_decisions: Vec<v1::CriticVerdict>,
    /// The expert's answers, in order.
    pub expert_answers: Vec<v1::ExpertAnswer>,
    /// The research: outcome, final answer and reasoning trace, results in plan order.
    pub research: v1::Research,
}

/// Everything that can go wrong in a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be made or broke.
    #[error("{}", error_chain(.0))]
    Transport(#[from] tonic::transport::Error),
    /// The server answered with an error status.
    #[error("{0}")]
    Status(Box<ApiError>),
    /// A turn's, triage's, investigation's or research question's stream ended without its
    /// result (or a triage without its ticket resolution).
    #[error("the stream ended without a result")]
    StreamEndedWithoutResult,
    /// The API key given to [`ClientBuilder::api_key`] or [`Client::with_api_key`] is empty or
    /// cannot be sent as a header value (it has characters other than visible ASCII); the
    /// message never contains the key.
    #[error("the API key is not a valid header value")]
    InvalidApiKey,
}

impl ClientError {
    /// The gRPC code of a server error; `None` for transport errors and truncated streams.
    pub fn code(&self) -> Option<Code> {
        self.api().map(|e| e.code)
    }

    /// The decoded server error, if this is one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            ClientError::Status(e) => Some(e),
            _ => None,
        }
    }

    /// The `ErrorInfo` reason of a server error (one of the `ErrorReason` names).
    pub fn reason(&self) -> Option<&str> {
        self.api().and_then(|e| e.reason.as_deref())
    }
}

impl From<tonic::Status> for ClientError {
    fn from(status: tonic::Status) -> Self {
        ClientError::Status(Box::new(ApiError::from_status(&status)))
    }
}

/// A server error with its `google.rpc` details decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    /// `google.rpc.ErrorInfo.reason`: one of the `ErrorReason` names, such as `THREAD_BUSY`.
    pub reason: Option<String>,
    /// `google.rpc.ErrorInfo.metadata`: what the error is about, such as `kind` and `id` of a
    /// missing or busy conversation or ticket, or the `field` of an invalid argument.
    pub metadata: BTreeMap<String, String>,
    /// `google.rpc.BadRequest` field violations, as `(field, description)`.
    pub field_violations: Vec<(String, String)>,
    /// `google.rpc.RetryInfo.retry_delay`.
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// Decodes a status and its details. Details that fail to decode are ignored.
    pub fn from_status(status: &tonic::Status) -> Self {
        let details = status.get_error_details();
        let reason = details.error_info().map(|i| i.reason.clone()).filter(|r| !r.is_empty());
        let metadata = details.error_info().map(|i| i.metadata.clone().into_iter().collect()).unwrap_or_default();
        let field_violations = details
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| (v.field.clone(), v.description.clone())).collect())
            .unwrap_or_default();
        let retry_after = details.retry_info().and_then(|r| r.retry_delay);
        ApiError {
            code: status.code(),
            message: status.message().to_string(),
            reason,
            metadata,
            field_violations,
            retry_after,
        }
    }

    /// True when the `ErrorInfo` reason is `reason` (for example `v1::ErrorReason::ThreadBusy`).
    pub fn is_reason(&self, reason: v1::ErrorReason) -> bool {
        // The server sends the value name without its enum prefix, as google.rpc.ErrorInfo
        // reasons conventionally are ("THREAD_BUSY").
        let name = reason.as_str_name();
        self.reason.as_deref() == Some(name.strip_prefix("ERROR_REASON_").unwrap_or(name))
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        ApiError::from_status(&status)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", code_name(self.code), self.message)?;
        if let Some(reason) = &self.reason {
            write!(f, " [{reason}]")?;
        }
        for (field, description) in &self.field_violations {
            write!(f, "; {field}: {description}")?;
        }
        if let Some(delay) = self.retry_after {
            write!(f, "; retry after {}", format_duration(delay))?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

/// The canonical upper-case name of a gRPC code, such as `NOT_FOUND`.
pub use frontdesk_api::code_name;

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

fn non_empty(s: Option<String>) -> String {
    s.unwrap_or_default()
}

/// The channel every stub of a [`Client`] calls through: the connection, with the client's
/// [`Credentials`] added to each call.
pub type AuthChannel = InterceptedService<Channel, Credentials>;

/// What a [`Client`] sends with every call: its API key as `authorization: Bearer <key>`, or
/// nothing. A call that already carries an `authorization` header (set on a raw stub's request)
/// keeps it. `Debug` never shows the key.
#[derive(Clone, Default)]
pub struct Credentials {
    authorization: Option<MetadataValue<Ascii>>,
}

impl Credentials {
    /// Credentials sending `key` (a key from `frontdesk-server keys create`, `fdk_…`).
    pub fn api_key(key: &str) -> Result<Self, ClientError> {
        let key = key.trim();
        if key.is_empty() {
            return Err(ClientError::InvalidApiKey);
        }
        let mut value: MetadataValue<Ascii> =
            format!("Bearer {key}").parse().map_err(|_| ClientError::InvalidApiKey)?;
        // Sensitive values are kept out of HPACK's dynamic table and print as "Sensitive".
        value.set_sensitive(true);
        Ok(Credentials { authorization: Some(value) })
    }

    /// Whether an API key is sent.
    pub fn has_api_key(&self) -> bool {
        self.authorization.is_some()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = if self.has_api_key() { "<redacted>" } else { "none" };
        f.debug_struct("Credentials").field("api_key", &format_args!("{key}")).finish()
    }
}

impl Interceptor for Credentials {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.authorization {
            if !request.metadata().contains_key("authorization") {
                request.metadata_mut().insert("authorization", value.clone());
            }
        }
        Ok(request)
    }
}

/// Builds a [`Client`]: the server's address, an API key, TLS, the connect timeout
/// ([`Client::builder`]). `Debug` never shows the key or TLS material.
#[derive(Clone)]
pub struct ClientBuilder {
    endpoint: String,
    api_key: Option<String>,
    tls: Option<ClientTlsConfig>,
    connect_timeout: Duration,
    retry: Option<RetryPolicy>,
    timeouts: Timeouts,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("endpoint", &self.endpoint)
            .field("api_key", &format_args!("{}", if self.api_key.is_some() { "<redacted>" } else { "none" }))
            .field("tls", &self.tls.is_some())
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl ClientBuilder {
    /// Sends `key` as `authorization: Bearer <key>` with every call (unary and streaming).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Connects over TLS with `tls`: the CA that signed the server's certificate
    /// ([`ClientTlsConfig::ca_certificate`], or [`ClientTlsConfig::with_enabled_roots`] for the
    /// system's roots), a client
    /// certificate for mutual TLS ([`ClientTlsConfig::identity`]), the name to verify
    /// ([`ClientTlsConfig::domain_name`]; the endpoint's host without one). An `http://`
    /// endpoint is taken as `https://`. An `https://` endpoint without this option verifies the
    /// server against the system's roots.
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// How long [`ClientBuilder::connect`] waits for the connection (10 s unless set).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How calls with an idempotency key are retried and their broken streams re-attached
    /// ([`RetryPolicy::default()`] unless set).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Turns retrying and re-attaching off: every error is returned as it comes, and a broken
    /// stream fails.
    pub fn no_retries(mut self) -> Self {
        self.retry = None;
        self
    }

    /// The deadlines of the client's calls ([`Timeouts::default()`] unless set).
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    fn endpoint(&self) -> Result<(Endpoint, Credentials), ClientError> {
        let credentials = match &self.api_key {
            Some(key) => Credentials::api_key(key)?,
            None => Credentials::default(),
        };
        // tonic speaks TLS to https:// URIs only: TLS settings on an http:// endpoint would be
        // ignored and the key sent in plaintext.
        let url = match (&self.tls, self.endpoint.strip_prefix("http://")) {
            (Some(_), Some(rest)) => format!("https://{rest}"),
            _ => self.endpoint.clone(),
        };
        let mut endpoint = Endpoint::from_shared(url)?.connect_timeout(self.connect_timeout);
        let tls = match &self.tls {
            Some(tls) => Some(tls.clone()),
            None if endpoint.uri().scheme_str() == Some("https") => Some(ClientTlsConfig::new().with_enabled_roots()),
            None => None,
        };
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls)?;
        }
        Ok((endpoint, credentials))
    }

    /// Connects now; fails when the server cannot be reached (or the TLS handshake fails).
    pub async fn connect(self) -> Result<Client, ClientError> {
        let (endpoint, credentials) = self.endpoint()?;
        Ok(Client { channel: endpoint.connect().await?, credentials, retry: self.retry, timeouts: self.timeouts })
    }

    /// Connects on the first call (and again after the connection broke).
    pub fn connect_lazy(self) -> Result<Client, ClientError> {
        let (endpoint, credentials) = self.endpoint()?;
        Ok(Client { channel: endpoint.connect_lazy(), credentials, retry: self.retry, timeouts: self.timeouts })
    }
}

/// A Frontdesk client: every service over one channel. Cheap to clone. `Debug` never shows the
/// API key.
#[derive(Debug, Clone)]
pub struct Client {
    channel: Channel,
    credentials: Credentials,
    retry: Option<RetryPolicy>,
    timeouts: Timeouts,
}

impl Client {
    /// Connects to a server, such as `"http://127.0.0.1:50051"` (an `https://` address verifies
    /// the server against the system's roots). [`Client::builder`] adds an API key or TLS
    /// settings.
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, ClientError> {
        Self::builder(endpoint).connect().await
    }

    /// A [`ClientBuilder`] for `endpoint`, such as `"https://frontdesk.example.com:50051"`:
    /// `Client::builder(endpoint).api_key(key).tls(tls).connect().await`.
    pub fn builder(endpoint: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            endpoint: endpoint.into(),
            api_key: None,
            tls: None,
            connect_timeout: CONNECT_TIMEOUT,
            retry: Some(RetryPolicy::default()),
            timeouts: Timeouts::default(),
        }
    }

    /// Wraps an existing channel (for custom TLS, timeouts or lazy connection); add a key with
    /// [`Client::with_api_key`].
    pub fn from_channel(channel: Channel) -> Self {
        Client {
            channel,
            credentials: Credentials::default(),
            retry: Some(RetryPolicy::default()),
            timeouts: Timeouts::default(),
        }
    }

    /// This client sending `key` as `authorization: Bearer <key>` with every call.
    pub fn with_api_key(self, key: &str) -> Result<Self, ClientError> {
        Ok(Client { credentials: Credentials::api_key(key)?, ..self })
    }

    /// Whether this client sends an API key.
    pub fn has_api_key(&self) -> bool {
        self.credentials.has_api_key()
    }

    /// This client retrying calls with an idempotency key, and re-attaching their streams, per
    /// `policy`; `None` turns both off.
    pub fn with_retry_policy(self, policy: Option<RetryPolicy>) -> Self {
        Client { retry: policy, ..self }
    }

    /// How this client retries calls with an idempotency key; `None` when it does not.
    pub fn retry_policy(&self) -> Option<&RetryPolicy> {
        self.retry.as_ref()
    }

    /// This client with the deadlines `timeouts` (a cheap copy, sharing the connection).
    pub fn with_timeouts(&self, timeouts: Timeouts) -> Self {
        Client { timeouts, ..self.clone() }
    }

    /// This client's deadlines.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// A unary call that starts now, bounded by the unary deadline.
    async fn unary<T>(
        &self,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ClientError> {
        Deadline::bound(Deadline::start(self.timeouts.unary), async { Ok(call.await?.into_inner()) }).await
    }

    /// The policy for a call with idempotency key `key`: none without one, since a call without
    /// a key is not safe to repeat.
    fn policy_for(&self, key: &str) -> Option<RetryPolicy> {
        self.retry.filter(|_| !key.is_empty())
    }

    /// Runs a streamed call that carries `key` through the retrying, re-attaching [`RunSource`].
    async fn run_stream<T: RunItem>(
        &self,
        key: &str,
        open: Opener<T>,
    ) -> Result<Pin<Box<dyn Stream<Item = Result<T, ClientError>> + Send>>, ClientError> {
        let deadline = Deadline::start(self.timeouts.streaming);
        RunSource::start(self.policy_for(key), deadline, self.workflows(), open).await
    }

    /// The raw `ConversationService` stub, for calls this wrapper does not cover. It sends the
    /// client's API key too.
    pub fn conversations(&self) -> ConversationServiceClient<AuthChannel> {
        ConversationServiceClient::with_interceptor(self.channel.clone(), self.credentials.clone())
    }

    /// The raw `WorkflowService` stub.
    pub fn workflows(&self) -> WorkflowServiceClient<AuthChannel> {
        WorkflowServiceClient::with_interceptor(self.channel.clone(), self.credentials.clone())
    }

    /// The raw `TriageService` stub.
    pub fn triage(&self) -> TriageServiceClient<AuthChannel> {
        TriageServiceClient::with_interceptor(self.channel.clone(), self.credentials.clone())
    }

    /// The raw `InvestigationService` stub.
    pub fn investigations(&self) -> InvestigationServiceClient<AuthChannel> {
        InvestigationServiceClient::with_interceptor(self.channel.clone(), self.credentials.clone())
    }

    /// The raw `ResearchService` stub.
    pub fn research(&self) -> ResearchServiceClient<AuthChannel> {
        ResearchServiceClient::with_interceptor(self.channel.clone(), self.credentials.clone())
    }

    /// Creates a conversation on `workflow` and returns it with its welcome message. With an
    /// idempotency key the call is retried per the client's [`RetryPolicy`].
    pub async fn start_conversation(
        &self,
        workflow: &str,
        opts: StartOptions,
    ) -> Result<v1::StartConversationResponse, ClientError> {
        let req = v1::StartConversationRequest {
            workflow: workflow.to_string(),
            conversation_id: non_empty(opts.conversation_id),
            idempotency_key: non_empty(opts.idempotency_key),
        };
        let policy = self.policy_for(&req.idempotency_key);
        let stub = self.conversations();
        retry_unary(policy, Deadline::start(self.timeouts.unary), || {
            let (mut stub, req) = (stub.clone(), req.clone());
            async move { stub.start_conversation(req).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// Sends one user turn and streams it: [`TurnEvent::Event`]s as the run progresses, then one
    /// [`TurnEvent::Result`]. A turn that fails ends the stream with `Err`. With an idempotency
    /// key the call is retried, and a broken stream re-attached, per the client's
    /// [`RetryPolicy`], each event delivered once.
    pub async fn send_message(
        &self,
        conversation_id: &str,
        text: &str,
        opts: SendOptions,
    ) -> Result<TurnStream, ClientError> {
        let busy_policy = if opts.queue_if_busy { v1::BusyPolicy::Queue } else { v1::BusyPolicy::Reject };
        let req = v1::SendMessageRequest {
            conversation_id: conversation_id.to_string(),
            text: text.to_string(),
            idempotency_key: non_empty(opts.idempotency_key),
            busy_policy: busy_policy as i32,
        };
        let key = req.idempotency_key.clone();
        let stub = self.conversations();
        let open: Opener<TurnEvent> = Box::new(move || {
            let (mut stub, req) = (stub.clone(), req.clone());
            Box::pin(async move {
                let stream = stub.send_message(req).await?.into_inner();
                Ok(stream
                    .filter_map(|item| {
                        use v1::send_message_response::Payload;
                        futures::future::ready(match item {
                            Ok(v1::SendMessageResponse { payload: Some(Payload::Event(e)) }) => {
                                Some(Ok(TurnEvent::Event(e)))
                            }
                            Ok(v1::SendMessageResponse { payload: Some(Payload::Result(r)) }) => {
                                Some(Ok(TurnEvent::Result(r)))
                            }
                            Ok(v1::SendMessageResponse { payload: None }) => None,
                            Err(status) => Some(Err(status)),
                        })
                    })
                    .boxed())
            })
        });
        self.run_stream(&key, open).await
    }

    /// Sends one user turn and waits for it: returns every event and the result. Fails with the
    /// server's status if the turn fails, or [`ClientError::StreamEndedWithoutResult`].
    pub async fn send_message_and_wait(
        &self,
        conversation_id: &str,
        text: &str,
        opts: SendOptions,
    ) -> Result<(Vec<v1::RunEvent>, v1::TurnResult), ClientError> {
        let mut stream = self.send_message(conversation_id, text, opts).await?;
        let mut events = Vec::new();
        let mut result = None;
        while let Some(item) = stream.next().await {
            match item? {
                TurnEvent::Event(e) => events.push(e),
                TurnEvent::Result(r) => result = Some(r),
            }
        }
        result.map(|r| (events, r)).ok_or(ClientError::StreamEndedWithoutResult)
    }

    /// Re-attaches to a run by the id its events carry: the events numbered after
    /// `after_event_id` (0: all the replica keeps), then live ones, ending after the run's last
    /// event. Each item says how many events the replica no longer held before it (`skipped`).
    /// NOT_FOUND when this replica does not know the run: retry the original call with its
    /// idempotency key instead. Never retried; streams with an idempotency key re-attach on
    /// their own ([`RetryPolicy`]). Event ids number one execution of a run on one replica; a
    /// resumed or taken-over run starts again at 1 (`RunStarted.resumed`).
    pub async fn subscribe_run(&self, run_id: &str, after_event_id: u64) -> Result<RunEventStream, ClientError> {
        let req = v1::SubscribeRunRequest { run_id: run_id.to_string(), after_event_id };
        let deadline = Deadline::start(self.timeouts.streaming);
        let opened = Deadline::bound(deadline, async { Ok(self.workflows().subscribe_run(req).await?.into_inner()) });
        let stream = opened.await?.map(|item| item.map_err(ClientError::from)).boxed();
        Ok(Deadline::bound_stream(deadline, stream))
    }

    /// Returns a conversation's state and its whole message history.
    pub async fn get_conversation(&self, conversation_id: &str) -> Result<v1::GetConversationResponse, ClientError> {
        let req = v1::GetConversationRequest { conversation_id: conversation_id.to_string() };
        self.unary(self.conversations().get_conversation(req)).await
    }

    /// Lists conversations ordered by id. `page_size` 0 means the server default.
    pub async fn list_conversations(
        &self,
        workflow: Option<&str>,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListConversationsResponse, ClientError> {
        let req = v1::ListConversationsRequest {
            workflow: workflow.unwrap_or_default().to_string(),
            page_size,
            page_token: non_empty(page_token),
        };
        self.unary(self.conversations().list_conversations(req)).await
    }

    /// Clears a conversation's messages and collected fields; returns it afterwards. With an
    /// idempotency key a retry returns the first call's outcome, and the call is retried per the
    /// client's [`RetryPolicy`].
    pub async fn reset_conversation(
        &self,
        conversation_id: &str,
        idempotency_key: Option<String>,
    ) -> Result<v1::Conversation, ClientError> {
        let req = v1::ResetConversationRequest {
            conversation_id: conversation_id.to_string(),
            idempotency_key: non_empty(idempotency_key),
        };
        let policy = self.policy_for(&req.idempotency_key);
        let stub = self.conversations();
        let resp = retry_unary(policy, Deadline::start(self.timeouts.unary), || {
            let (mut stub, req) = (stub.clone(), req.clone());
            async move { stub.reset_conversation(req).await.map(tonic::Response::into_inner) }
        })
        .await?;
        Ok(resp.conversation.unwrap_or_default())
    }

    /// Erases a conversation with all its checkpoints and messages.
    pub async fn delete_conversation(&self, conversation_id: &str) -> Result<(), ClientError> {
        let req = v1::DeleteConversationRequest { conversation_id: conversation_id.to_string() };
        self.conversations().delete_conversation(req).await?;
        Ok(())
    }

    /// The workflows this server hosts.
    pub async fn list_workflows(&self) -> Result<Vec<v1::Workflow>, ClientError> {
        Ok(self.unary(self.workflows().list_workflows(v1::ListWorkflowsRequest {})).await?.workflows)
    }

    /// A workflow's graph: nodes, edges and a mermaid rendering.
    pub async fn describe_workflow(&self, name: &str) -> Result<v1::DescribeWorkflowResponse, ClientError> {
        let req = v1::DescribeWorkflowRequest { name: name.to_string() };
        self.unary(self.workflows().describe_workflow(req)).await
    }

    /// Stops a running run (true). A run that is not running, unknown or already ended, is a
    /// `NOT_FOUND` error; an id that is not a run id (a UUID) is `INVALID_ARGUMENT`.
    pub async fn cancel_run(&self, run_id: &str) -> Result<bool, ClientError> {
        let req = v1::CancelRunRequest { run_id: run_id.to_string() };
        Ok(self.unary(self.workflows().cancel_run(req)).await?.cancelled)
    }

    /// A page of the model calls a thread made (`thread_id`: a conversation id, a ticket thread
    /// `customer_id:ticket_id`, an investigation id or a research id), the most recent first, as
    /// the server's LLM call log recorded them (`model.call_log` `redacted` or `full`; with it
    /// off a known thread lists none, and a thread the server does not know is `NOT_FOUND`).
    /// `page_size` 0 is the server's default (50), at most 500; a page also ends early once its
    /// prompts and replies reach about 3 MiB, so read on while `next_page_token` is not empty
    /// (pass it as `page_token`) rather than by a page's length. `total_calls` and `total_usage`
    /// cover every recorded call of the thread.
    pub async fn list_llm_calls(
        &self,
        thread_id: &str,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListLlmCallsResponse, ClientError> {
        let req =
            v1::ListLlmCallsRequest { thread_id: thread_id.to_string(), page_size, page_token: non_empty(page_token) };
        self.unary(self.workflows().list_llm_calls(req)).await
    }

    /// Triages one customer message and streams it: the ticket-matching run's
    /// [`TriageEvent::Event`]s (only when the customer has active tickets), one
    /// [`TriageEvent::Resolution`] (the ticket the message belongs to), [`TriageEvent::Event`]s as
    /// the ticket's run progresses, then one [`TriageEvent::Result`]. A triage that fails ends the
    /// stream with `Err`; an unknown customer fails the call itself with `NOT_FOUND`. Retries and
    /// re-attaching as for [`Client::send_message`] (the resolution is delivered once).
    pub async fn triage_ticket(
        &self,
        customer_id: &str,
        message: &str,
        opts: TriageOptions,
    ) -> Result<TriageStream, ClientError> {
        let req = v1::TriageTicketRequest {
            customer_id: customer_id.to_string(),
            message: message.to_string(),
            subject: non_empty(opts.subject),
            language: non_empty(opts.language),
            idempotency_key: non_empty(opts.idempotency_key),
        };
        let key = req.idempotency_key.clone();
        let stub = self.triage();
        let open: Opener<TriageEvent> = Box::new(move || {
            let (mut stub, req) = (stub.clone(), req.clone());
            Box::pin(async move {
                let stream = stub.triage_ticket(req).await?.into_inner();
                Ok(stream
                    .filter_map(|item| {
                        use v1::triage_ticket_response::Payload;
                        futures::future::ready(match item {
                            Ok(v1::TriageTicketResponse { payload }) => payload.map(|payload| {
                                Ok(match payload {
                                    Payload::Resolution(r) => TriageEvent::Resolution(r),
                                    Payload::Event(e) => TriageEvent::Event(e),
                                    Payload::Result(r) => TriageEvent::Result(r),
                                })
                            }),
                            Err(status) => Some(Err(status)),
                        })
                    })
                    .boxed())
            })
        });
        self.run_stream(&key, open).await
    }

    /// Triages one customer message and waits for it: returns the ticket resolution, every run
    /// event and the result. Fails with the server's status if the triage fails, or
    /// [`ClientError::StreamEndedWithoutResult`].
    pub async fn triage_ticket_and_wait(
        &self,
        customer_id: &str,
        message: &str,
        opts: TriageOptions,
    ) -> Result<(v1::TicketResolution, Vec<v1::RunEvent>, v1::TriageResult), ClientError> {
        let mut stream = self.triage_ticket(customer_id, message, opts).await?;
        let (mut resolution, mut events, mut result) = (None, Vec::new(), None);
        while let Some(item) = stream.next().await {
            match item? {
                TriageEvent::Resolution(r) => resolution = Some(r),
                TriageEvent::Event(e) => events.push(e),
                TriageEvent::Result(r) => result = Some(r),
            }
        }
        match (resolution, result) {
            (Some(resolution), Some(result)) => Ok((resolution, events, result)),
            _ => Err(ClientError::StreamEndedWithoutResult),
        }
    }

    /// Returns one of a customer's tickets (active or archived) with its messages and latest
    /// triage result. Another customer's ticket is `NOT_FOUND`.
    pub async fn get_ticket(&self, customer_id: &str, ticket_id: &str) -> Result<v1::GetTicketResponse, ClientError> {
        let req = v1::GetTicketRequest { customer_id: customer_id.to_string(), ticket_id: ticket_id.to_string() };
        self.unary(self.triage().get_ticket(req)).await
    }

    /// Lists a customer's archived tickets, most recently completed first. `status` `None` lists
    /// resolved and escalated tickets; `Some(TicketStatus::Active)` lists the active ones
    /// (unpaged). `page_size` 0 means the server default.
    pub async fn list_tickets(
        &self,
        customer_id: &str,
        status: Option<v1::TicketStatus>,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListTicketsResponse, ClientError> {
        let req = v1::ListTicketsRequest {
            customer_id: customer_id.to_string(),
            status: status.unwrap_or(v1::TicketStatus::Unspecified) as i32,
            page_size,
            page_token: non_empty(page_token),
        };
        self.unary(self.triage().list_tickets(req)).await
    }

    /// A customer's active tickets (awaiting a specialist or a follow-up).
    pub async fn list_active_tickets(&self, customer_id: &str) -> Result<Vec<v1::Ticket>, ClientError> {
        let req = v1::ListActiveTicketsRequest { customer_id: customer_id.to_string() };
        Ok(self.unary(self.triage().list_active_tickets(req)).await?.tickets)
    }

    /// Starts the investigation of one HR mutation (by id, or inline) and streams it:
    /// [`InvestigationEvent::Event`]s, [`InvestigationEvent::Message`]s and
    /// [`InvestigationEvent::StatusChange`]s as the run progresses, then one
    /// [`InvestigationEvent::Investigation`] (finished, or awaiting a reply). An unknown mutation
    /// is `NOT_FOUND`; a second investigation of one mutation is `ALREADY_EXISTS`. A retry with
    /// the same `idempotency_key` and mutation returns the first call's outcome; with one, the
    /// call is retried and re-attached as [`Client::send_message`] is.
    pub async fn start_investigation(
        &self,
        mutation: impl Into<MutationRef>,
        idempotency_key: Option<String>,
    ) -> Result<InvestigationStream, ClientError> {
        use v1::start_investigation_request::Mutation;
        let mutation = match mutation.into() {
            MutationRef::Id(id) => Mutation::MutationId(id),
            MutationRef::Inline(m) => Mutation::InlineMutation(m),
        };
        let req =
            v1::StartInvestigationRequest { mutation: Some(mutation), idempotency_key: non_empty(idempotency_key) };
        let key = req.idempotency_key.clone();
        let stub = self.investigations();
        let open: Opener<InvestigationEvent> = Box::new(move || {
            let (mut stub, req) = (stub.clone(), req.clone());
            Box::pin(async move {
                let stream = stub.start_investigation(req).await?.into_inner();
                Ok(progress_stream(stream.map(|item| item.map(|r| r.progress))))
            })
        });
        self.run_stream(&key, open).await
    }

    /// Starts an investigation and waits for its run: returns everything it streamed and the
    /// investigation (finished, or awaiting a reply). Fails with the server's status if the run
    /// fails, or [`ClientError::StreamEndedWithoutResult`].
    pub async fn start_investigation_and_wait(
        &self,
        mutation: impl Into<MutationRef>,
        idempotency_key: Option<String>,
    ) -> Result<InvestigationRun, ClientError> {
        collect_investigation(self.start_investigation(mutation, idempotency_key).await?).await
    }

    /// Answers a pending action of an investigation (the changer's clarification or the
    /// manager's decision) and streams the continuation as [`Client::start_investigation`] does.
    /// An unknown action is `NOT_FOUND` (`INTERRUPT_NOT_FOUND`), one already answered
    /// `FAILED_PRECONDITION` (`INTERRUPT_ANSWERED`), a reply from someone else
    /// `PERMISSION_DENIED` (`WRONG_RESPONDER`). With an idempotency key
    /// ([`Reply::with_idempotency_key`]) the call is retried and re-attached as
    /// [`Client::send_message`] is.
    pub async fn respond(
        &self,
        investigation_id: &str,
        action_id: &str,
        reply: Reply,
    ) -> Result<InvestigationStream, ClientError> {
        let req = v1::RespondRequest {
            investigation_id: investigation_id.to_string(),
            action_id: action_id.to_string(),
            role: reply.role as i32,
            responder_id: reply.responder_id,
            text: non_empty(reply.text),
            decision: reply.decision.unwrap_or(v1::ManagerDecision::Unspecified) as i32,
            idempotency_key: non_empty(reply.idempotency_key),
        };
        let key = req.idempotency_key.clone();
        let stub = self.investigations();
        let open: Opener<InvestigationEvent> = Box::new(move || {
            let (mut stub, req) = (stub.clone(), req.clone());
            Box::pin(async move {
                let stream = stub.respond(req).await?.into_inner();
                Ok(progress_stream(stream.map(|item| item.map(|r| r.progress))))
            })
        });
        self.run_stream(&key, open).await
    }

    /// Answers a pending action and waits for the continuation: returns everything it streamed
    /// and the investigation (finished, or awaiting the next reply).
    pub async fn respond_and_wait(
        &self,
        investigation_id: &str,
        action_id: &str,
        reply: Reply,
    ) -> Result<InvestigationRun, ClientError> {
        collect_investigation(self.respond(investigation_id, action_id, reply).await?).await
    }

    /// Returns an investigation (such as `INV-1002`): status, history, the actions it awaits,
    /// findings and report.
    pub async fn get_investigation(&self, investigation_id: &str) -> Result<v1::Investigation, ClientError> {
        let req = v1::GetInvestigationRequest { investigation_id: investigation_id.to_string() };
        let resp = self.unary(self.investigations().get_investigation(req)).await?;
        Ok(resp.investigation.unwrap_or_default())
    }

    /// Lists investigations, most recently started first; `status` `None` lists every status.
    /// `page_size` 0 means the server default.
    pub async fn list_investigations(
        &self,
        status: Option<v1::InvestigationStatus>,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListInvestigationsResponse, ClientError> {
        let req = v1::ListInvestigationsRequest {
            status: status.unwrap_or(v1::InvestigationStatus::Unspecified) as i32,
            page_size,
            page_token: non_empty(page_token),
        };
        self.unary(self.investigations().list_investigations(req)).await
    }

    /// Streams an investigation's audit entries with a `seq` above `after_seq` (0: the whole
    /// trail), then each new one as it is written; the stream ends once the advisory report is
    /// generated. When the stream ends with `UNAVAILABLE` (its server shutting down,
    /// `SHUTTING_DOWN`, or the connection broken) the watch goes on from the last `seq` received,
    /// under the client's [`RetryPolicy`] (with or without a key: watching changes nothing), its
    /// attempts and waits counted afresh after each entry; other errors, and the last
    /// `UNAVAILABLE` when the policy allows no more (or is off), end the stream with `Err`.
    pub async fn watch_investigation(
        &self,
        investigation_id: &str,
        after_seq: u32,
    ) -> Result<AuditStream, ClientError> {
        let deadline = Deadline::start(self.timeouts.streaming);
        let watch = AuditWatch {
            stub: self.investigations(),
            investigation_id: investigation_id.to_string(),
            last_seq: after_seq,
            policy: self.retry,
            deadline,
            budget: retry::Budget::new(self.retry, deadline),
            stream: None,
        };
        let stream = Deadline::bound(deadline, async { Ok(watch.open().await?) }).await?;
        let watch = AuditWatch { stream: Some(stream), ..watch };
        let entries = futures::stream::unfold(watch, |mut w| async move { w.next().await.map(|item| (item, w)) });
        Ok(Deadline::bound_stream(deadline, entries.boxed()))
    }

    /// The audit trail of one investigation, or of one message exchange by correlation id, in
    /// order.
    pub async fn get_audit_trail(&self, key: AuditTrailKey) -> Result<Vec<v1::AuditEntry>, ClientError> {
        use v1::get_audit_trail_request::Key;
        let key = match key {
            AuditTrailKey::Investigation(id) => Key::InvestigationId(id),
            AuditTrailKey::Correlation(id) => Key::CorrelationId(id),
        };
        let req = v1::GetAuditTrailRequest { key: Some(key) };
        Ok(self.unary(self.investigations().get_audit_trail(req)).await?.entries)
    }

    /// A page of the pending actions (notifications) of `recipient_id`, or of everyone when
    /// `None`, with `status` (awaiting a reply when `None`), oldest first. `page_size` 0 is the
    /// server's default (20), at most 100; pass the response's `next_page_token` for the next
    /// page (empty on the last).
    pub async fn list_pending_actions(
        &self,
        recipient_id: Option<&str>,
        status: Option<v1::PendingActionStatus>,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListPendingActionsResponse, ClientError> {
        let req = v1::ListPendingActionsRequest {
            recipient_id: recipient_id.unwrap_or_default().to_string(),
            status: status.unwrap_or(v1::PendingActionStatus::Unspecified) as i32,
            page_size,
            page_token: non_empty(page_token),
        };
        self.unary(self.investigations().list_pending_actions(req)).await
    }

    /// Asks a research question and streams it: [`ResearchEvent::Event`]s as the run progresses,
    /// each orchestrator message, plan, research result (with its citations), critic decision
    /// and expert answer as it is produced, then one [`ResearchEvent::Research`] (its outcome,
    /// final answer and reasoning trace). An empty question, a retry limit over 20 or an unknown
    /// corpus is `INVALID_ARGUMENT`. A retry with the same `idempotency_key` and request returns
    /// the first call's outcome; with one, the call is retried and re-attached as
    /// [`Client::send_message`] is.
    pub async fn ask(&self, question: &str, opts: AskOptions) -> Result<ResearchStream, ClientError> {
        let req = v1::AskRequest {
            question: question.to_string(),
            retry_limit: opts.retry_limit.unwrap_or(0),
            corpus: non_empty(opts.corpus),
            idempotency_key: non_empty(opts.idempotency_key),
        };
        let key = req.idempotency_key.clone();
        let stub = self.research();
        let open: Opener<ResearchEvent> = Box::new(move || {
            let (mut stub, req) = (stub.clone(), req.clone());
            Box::pin(async move {
                let stream = stub.ask(req).await?.into_inner();
                Ok(stream
                    .filter_map(|item| {
                        use v1::ask_response::Payload;
                        futures::future::ready(match item {
                            Ok(v1::AskResponse { payload }) => payload.map(|payload| {
                                Ok(match payload {
                                    Payload::Event(e) => ResearchEvent::Event(e),
                                    Payload::Message(m) => ResearchEvent::Message(m),
                                    Payload::Plan(p) => ResearchEvent::Plan(p),
                                    Payload::ResearchResult(r) => ResearchEvent::Result(r),
                                    Payload::CriticDecision(v) => ResearchEvent::CriticDecision(v),
                                    Payload::ExpertAnswer(e) => ResearchEvent::ExpertAnswer(e),
                                    Payload::Research(r) => ResearchEvent::Research(r),
                                })
                            }),
                            Err(status) => Some(Err(status)),
                        })
                    })
                    .boxed())
            })
        });
        self.run_stream(&key, open).await
    }

    /// Asks a research question and waits for the answer: returns everything the run streamed
    /// and the research. Fails with the server's status if the run fails, or
    /// [`ClientError::StreamEndedWithoutResult`]. (A question the critics never approve within
    /// the retry limit is not an error: its outcome is `RETRY_LIMIT`.)
    pub async fn ask_and_wait(&self, question: &str, opts: AskOptions) -> Result<ResearchRun, ClientError> {
        let mut stream = self.ask(question, opts).await?;
        let mut run = ResearchRun::default();
        let mut research = None;
        while let Some(item) = stream.next().await {
            match item? {
                ResearchEvent::Event(e) => run.events.push(e),
                ResearchEvent::Message(m) => run.messages.push(m),
                ResearchEvent::Plan(p) => run.plans.push(p),
                ResearchEvent::Result(r) => run.results.push(r),
                ResearchEvent::CriticDecision(v) => run.critic_decisions.push(v),
                ResearchEvent::ExpertAnswer(e) => run.expert_answers.push(e),
                ResearchEvent::Research(r) => research = Some(r),
            }
        }
        run.research = research.ok_or(ClientError::StreamEndedWithoutResult)?;
        Ok(run)
    }

    /// Returns a research (such as `RES-…`) as it stands: question, outcome, plan, results,
    /// expert answer, final answer and reasoning trace, messages. An unknown one is `NOT_FOUND`.
    pub async fn get_research(&self, research_id: &str) -> Result<v1::Research, ClientError> {
        let req = v1::GetResearchRequest { research_id: research_id.to_string() };
        let resp = self.unary(self.research().get_research(req)).await?;
        Ok(resp.research.unwrap_or_default())
    }

    /// Lists research, ordered by research id. `page_size` 0 means the server default (20).
    pub async fn list_research(
        &self,
        page_size: i32,
        page_token: Option<String>,
    ) -> Result<v1::ListResearchResponse, ClientError> {
        let req = v1::ListResearchRequest { page_size, page_token: non_empty(page_token) };
        self.unary(self.research().list_research(req)).await
    }
}

/// Maps the `progress` of StartInvestigation and Respond responses to [`InvestigationEvent`]s,
/// skipping empty ones.
fn progress_stream<S>(stream: S) -> retry::CallStream<InvestigationEvent>
where
    S: Stream<Item = Result<Option<v1::InvestigationProgress>, tonic::Status>> + Send + 'static,
{
    use v1::investigation_progress::Payload;
    Box::pin(stream.filter_map(|item| {
        futures::future::ready(match item {
            Ok(progress) => progress.and_then(|p| p.payload).map(|payload| {
                Ok(match payload {
                    Payload::Event(e) => InvestigationEvent::Event(e),
                    Payload::Message(m) => InvestigationEvent::Message(m),
                    Payload::StatusChange(c) => InvestigationEvent::StatusChange(c),
                    Payload::Investigation(i) => InvestigationEvent::Investigation(i),
                })
            }),
            Err(status) => Some(Err(status)),
        })
    }))
}

async fn collect_investigation(mut stream: InvestigationStream) -> Result<InvestigationRun, ClientError> {
    let mut run = InvestigationRun::default();
    let mut investigation = None;
    while let Some(item) = stream.next().await {
        match item? {
            InvestigationEvent::Event(e) => run.events.push(e),
            InvestigationEvent::Message(m) => run.messages.push(m),
            InvestigationEvent::StatusChange(c) => run.status_changes.push(c),
            InvestigationEvent::Investigation(i) => investigation = Some(i),
        }
    }
    run.investigation = investigation.ok_or(ClientError::StreamEndedWithoutResult)?;
    Ok(run)
}

/// One [`Client::watch_investigation`]: the stream, and where to resume it.
struct AuditWatch {
    stub: InvestigationServiceClient<AuthChannel>,
    investigation_id: String,
    last_seq: u32,
    policy: Option<RetryPolicy>,
    deadline: Option<Deadline>,
    budget: retry::Budget,
    /// `None` once the watch has ended.
    stream: Option<tonic::Streaming<v1::WatchInvestigationResponse>>,
}

impl AuditWatch {
    async fn open(&self) -> Result<tonic::Streaming<v1::WatchInvestigationResponse>, tonic::Status> {
        let req =
            v1::WatchInvestigationRequest { investigation_id: self.investigation_id.clone(), after_seq: self.last_seq };
        Ok(self.stub.clone().watch_investigation(req).await?.into_inner())
    }

    async fn next(&mut self) -> Option<Result<v1::AuditEntry, ClientError>> {
        loop {
            let status = match self.stream.as_mut()?.next().await {
                Some(Ok(v1::WatchInvestigationResponse { entry: Some(entry) })) => {
                    self.last_seq = self.last_seq.max(entry.seq);
                    // A watch lives as long as its investigation: only failures in a row count.
                    self.budget = retry::Budget::new(self.policy, self.deadline);
                    return Some(Ok(entry));
                }
                Some(Ok(v1::WatchInvestigationResponse { entry: None })) => continue,
                Some(Err(status)) => status,
                None => {
                    self.stream = None;
                    return None;
                }
            };
            self.stream = None;
            let mut err = ClientError::from(status);
            loop {
                let wait = match err.code() {
                    Some(Code::Unavailable) => self.budget.delay_for(&err),
                    _ => None,
                };
                let Some(wait) = wait else { return Some(Err(err)) };
                self.budget.spend(wait);
                tokio::time::sleep(wait).await;
                match self.open().await {
                    Ok(stream) => {
                        self.stream = Some(stream);
                        break;
                    }
                    Err(status) => err = status.into(),
                }
            }
        }
    }
}

impl RunItem for TurnEvent {
    fn kind(&self) -> ItemKind<'_> {
        match self {
            TurnEvent::Event(e) => ItemKind::Event(e),
            TurnEvent::Result(_) => ItemKind::Result,
        }
    }

    fn from_event(event: v1::RunEvent) -> Self {
        TurnEvent::Event(event)
    }
}

impl RunItem for TriageEvent {
    fn kind(&self) -> ItemKind<'_> {
        match self {
            TriageEvent::Resolution(_) => ItemKind::Resolution,
            TriageEvent::Event(e) => ItemKind::Event(e),
            TriageEvent::Result(_) => ItemKind::Result,
        }
    }

    fn from_event(event: v1::RunEvent) -> Self {
        TriageEvent::Event(event)
    }
}

impl RunItem for InvestigationEvent {
    fn kind(&self) -> ItemKind<'_> {
        match self {
            InvestigationEvent::Event(e) => ItemKind::Event(e),
            InvestigationEvent::Message(_) | InvestigationEvent::StatusChange(_) => ItemKind::Derived,
            InvestigationEvent::Investigation(_) => ItemKind::Result,
        }
    }

    fn from_event(event: v1::RunEvent) -> Self {
        InvestigationEvent::Event(event)
    }
}

impl RunItem for ResearchEvent {
    fn kind(&self) -> ItemKind<'_> {
        match self {
            ResearchEvent::Event(e) => ItemKind::Event(e),
            ResearchEvent::Research(_) => ItemKind::Result,
            _ => ItemKind::Derived,
        }
    }

    fn from_event(event: v1::RunEvent) -> Self {
        ResearchEvent::Event(event)
    }
}

/// Formats a duration compactly: `850µs`, `12ms`, `1.25s`, `2m05s`.
pub fn format_duration(d: Duration) -> String {
    let micros = d.as_micros();
    if micros < 1_000 && !d.is_zero() {
        format!("{micros}µs")
    } else if micros < 1_000_000 {
        format!("{}ms", d.as_millis())
    } else if d.as_secs() < 60 {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

fn proto_duration(d: Option<&prost_types::Duration>) -> Option<Duration> {
    let d = d?;
    Duration::try_from(*d).ok()
}

fn format_usage(u: &v1::Usage) -> String {
    let mut out = format!("{}+{} tok", u.prompt_tokens, u.completion_tokens);
    if u.cost_usd > 0.0 {
        if u.cost_usd >= 0.0001 {
            out.push_str(&format!(" ${:.4}", u.cost_usd));
        } else {
            out.push_str(&format!(" ${:.6}", u.cost_usd));
        }
    }
    out
}

/// Shortens `s` to at most `max` characters, marking the cut with `…`.
fn truncate(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Compact one-line JSON (the server may send pretty-printed JSON).
fn compact_json(s: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(v) => v.to_string(),
        Err(_) => s.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

const JSON_PREVIEW: usize = 160;

/// Renders a run event as one human-readable line, such as `[3] supervisor ▸ started`,
/// `[4] supervisor ✓ 12ms → elicitation_agent` or
/// `[5] llm gpt-4o-mini supervisor.route 230+12 tok $0.0001 410ms`.
///
/// Token deltas are returned raw (their text, unprefixed, possibly without a newline), so a
/// caller can print them inline as the model generates.
pub fn describe_event(e: &v1::RunEvent) -> String {
    use v1::run_event::Kind;
    let id = e.event_id;
    let node = match (e.node.is_empty(), e.task) {
        (true, _) => "run".to_owned(),
        (false, None) => e.node.clone(),
        // Tasks of one fan-out node interleave; the index tells them apart.
        (false, Some(task)) => format!("{}#{task}", e.node),
    };
    let Some(kind) = &e.kind else {
        return format!("[{id}] {node} (unknown event)");
    };
    match kind {
        Kind::TokenDelta(t) => t.text.clone(),
        Kind::RunStarted(s) => {
            let verb = if s.resumed { "resumed" } else { "started" };
            format!("[{id}] run {verb}: workflow {} thread {} run {}", s.workflow, s.thread_id, e.run_id)
        }
        Kind::NodeStarted(_) => format!("[{id}] {node} ▸ started"),
        Kind::NodeFinished(f) => {
            let mut out = format!("[{id}] {node} ✓");
            if let Some(d) = proto_duration(f.duration.as_ref()) {
                out.push(' ');
                out.push_str(&format_duration(d));
            }
            out.push_str(" → ");
            out.push_str(if f.next_node.is_empty() { "__end__" } else { &f.next_node });
            out
        }
        Kind::LlmCallFinished(c) => {
            let mut out = format!("[{id}] llm {}", if c.model.is_empty() { "?" } else { &c.model });
            if !c.purpose.is_empty() {
                out.push(' ');
                out.push_str(&c.purpose);
            }
            if let Some(u) = &c.usage {
                out.push(' ');
                out.push_str(&format_usage(u));
            }
            if let Some(d) = proto_duration(c.latency.as_ref()) {
                out.push(' ');
                out.push_str(&format_duration(d));
            }
            if c.attempts > 1 {
                out.push_str(&format!(" ({} attempts)", c.attempts));
            }
            if !c.error.is_empty() {
                out.push_str(" ✗ ");
                out.push_str(&truncate(&c.error, JSON_PREVIEW));
            }
            out
        }
        Kind::ToolCalled(t) => {
            format!("[{id}] {node} tool ▸ {}({})", t.name, truncate(&compact_json(&t.arguments_json), JSON_PREVIEW))
        }
        Kind::ToolReturned(t) => {
            let mark = if t.is_error { "✗" } else { "✓" };
            let mut out = format!(
                "[{id}] {node} tool {mark} {} → {}",
                t.name,
                truncate(&compact_json(&t.result_json), JSON_PREVIEW)
            );
            if let Some(d) = proto_duration(t.latency.as_ref()) {
                out.push(' ');
                out.push_str(&format_duration(d));
            }
            out
        }
        Kind::NodeRetrying(r) => {
            let mut out = format!("[{id}] {node} ↻ attempt {}/{} failed [{}]", r.attempt, r.max_attempts, r.reason);
            if let Some(d) = proto_duration(r.delay.as_ref()) {
                out.push_str(&format!(", retrying in {}", format_duration(d)));
            }
            out
        }
        Kind::NodeFailed(f) => {
            format!("[{id}] {node} ✗ failed [{}]: {} → failure route {}", f.reason, f.message, f.fallback_node)
        }
        Kind::TasksDispatched(d) => {
            let mut out = format!("[{id}] {node} ⇉ {} tasks", d.tasks);
            if d.already_done > 0 {
                out.push_str(&format!(" ({} already done)", d.already_done));
            }
            out
        }
        Kind::TaskFinished(f) => {
            let mut out = format!("[{id}] {node} ✓ task");
            if let Some(d) = proto_duration(f.duration.as_ref()) {
                out.push(' ');
                out.push_str(&format_duration(d));
            }
            out
        }
        Kind::InterruptRaised(i) => {
            let mut out = format!("[{id}] {node} ⏸ interrupt {}: {}", i.interrupt_id, i.reason);
            if !i.payload_json.is_empty() {
                out.push(' ');
                out.push_str(&truncate(&compact_json(&i.payload_json), JSON_PREVIEW));
            }
            out
        }
        Kind::RunInterrupted(i) => {
            let mut out = format!("[{id}] run paused, awaiting: {}", i.pending_interrupt_ids.join(", "));
            push_spent(&mut out, i.usage.as_ref());
            out
        }
        Kind::RunFinished(f) => {
            let mut out = format!("[{id}] run finished: {} steps", f.steps);
            if let Some(d) = proto_duration(f.duration.as_ref()) {
                out.push(' ');
                out.push_str(&format_duration(d));
            }
            if let Some(u) = &f.usage {
                out.push(' ');
                out.push_str(&format_usage(u));
            }
            out
        }
        Kind::RunFailed(f) => {
            let mut out = format!("[{id}] run failed: {} {}", code_name(Code::from_i32(f.code)), f.message);
            if !f.reason.is_empty() {
                out.push_str(&format!(" [{}]", f.reason));
            }
            push_spent(&mut out, f.usage.as_ref());
            out
        }
    }
}

/// What a run that paused or failed spent, when its model calls spent anything.
fn push_spent(out: &mut String, usage: Option<&v1::Usage>) {
    if let Some(u) = usage.filter(|u| u.prompt_tokens + u.completion_tokens > 0 || u.cost_usd > 0.0) {
        out.push_str(", spent ");
        out.push_str(&format_usage(u));
    }
}

/// The reason (`ApiError::reason`) of a message sent to a conversation that has ended, such as a
/// service call that was hung up: `FAILED_PRECONDITION`.
pub const CONVERSATION_ENDED: &str = "CONVERSATION_ENDED";

/// The reason of a call without an API key, or with one that is unknown, malformed or revoked:
/// `UNAUTHENTICATED`. Not worth retrying with the same key.
pub const UNAUTHENTICATED: &str = "UNAUTHENTICATED";

/// The reason of a call whose API key lacks the scope the method needs: `PERMISSION_DENIED`;
/// `ApiError::metadata["scope"]` names the scope, such as `triage:write`.
pub const SCOPE_MISSING: &str = "SCOPE_MISSING";

/// The reason of a call over one of the tenant's quotas: `RESOURCE_EXHAUSTED`, with
/// `ApiError::retry_after` saying when to try again and `ApiError::metadata["quota"]` naming the
/// quota (`requests_per_sec` or `max_concurrent_runs`).
pub const QUOTA_EXCEEDED: &str = "QUOTA_EXCEEDED";

/// The conversation's state when it is an intake conversation.
pub fn intake_state(c: &v1::Conversation) -> Option<&v1::IntakeState> {
    match &c.state {
        Some(v1::conversation::State::Intake(s)) => Some(s),
        _ => None,
    }
}

/// The conversation's state when it is a service call (the `service_call` workflow): the current
/// node, the context as JSON ([`service_call_context`]), the node traversal path, the mandatory
/// fields still missing, whether the call has ended, model calls and tokens.
pub fn service_call_state(c: &v1::Conversation) -> Option<&v1::ServiceCallState> {
    match &c.state {
        Some(v1::conversation::State::ServiceCall(s)) => Some(s),
        _ => None,
    }
}

/// A service call's context (`ServiceCallState::context_json`) as JSON; an empty object when the
/// state carries none.
pub fn service_call_context(s: &v1::ServiceCallState) -> Result<serde_json::Value, serde_json::Error> {
    if s.context_json.is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(&s.context_json)
}

/// The graph nodes of a turn that are not nodes of the service call's flow configuration: the
/// entry that receives the customer's message, and the navigator that runs after every node.
pub const SERVICE_CALL_ROUTING_NODES: [&str; 2] = ["receive", "navigator"];

/// The nodes a turn ran, in order, from its `NodeStarted` events (a node run twice appears
/// twice), leaving out `skip` (for a service call, [`SERVICE_CALL_ROUTING_NODES`]).
pub fn nodes_run(events: &[v1::RunEvent], skip: &[&str]) -> Vec<String> {
    events
        .iter()
        .filter(|e| matches!(e.kind, Some(v1::run_event::Kind::NodeStarted(_))))
        .filter(|e| !skip.contains(&e.node.as_str()))
        .map(|e| e.node.clone())
        .collect()
}

/// One tool call of a run: its `ToolCalled` event and, once it came, its `ToolReturned`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The node that made the call.
    pub node: String,
    pub call_id: String,
    pub name: String,
    /// The arguments, as JSON.
    pub arguments_json: String,
    /// The result, or the error when `is_error`, as JSON; `None` when the call has not returned
    /// (the run failed first).
    pub result_json: Option<String>,
    pub is_error: bool,
    /// How long the call took.
    pub latency: Option<Duration>,
}

/// The tool calls among a run's events, in the order they were made, each with its result.
pub fn tool_calls(events: &[v1::RunEvent]) -> Vec<ToolCall> {
    use v1::run_event::Kind;
    let mut calls: Vec<ToolCall> = Vec::new();
    for e in events {
        match &e.kind {
            Some(Kind::ToolCalled(c)) => calls.push(ToolCall {
                node: e.node.clone(),
                call_id: c.call_id.clone(),
                name: c.name.clone(),
                arguments_json: c.arguments_json.clone(),
                result_json: None,
                is_error: false,
                latency: None,
            }),
            Some(Kind::ToolReturned(r)) => {
                let latency = proto_duration(r.latency.as_ref());
                match calls.iter_mut().find(|c| c.call_id == r.call_id && c.result_json.is_none()) {
                    Some(call) => {
                        call.result_json = Some(r.result_json.clone());
                        call.is_error = r.is_error;
                        call.latency = latency;
                    }
                    // A result without its call (a stream joined late): kept, arguments unknown.
                    None => calls.push(ToolCall {
                        node: e.node.clone(),
                        call_id: r.call_id.clone(),
                        name: r.name.clone(),
                        arguments_json: String::new(),
                        result_json: Some(r.result_json.clone()),
                        is_error: r.is_error,
                        latency,
                    }),
                }
            }
            _ => {}
        }
    }
    calls
}

/// A tool call on one line: `customer_get({"phone":"555-1234"}) ✗ {"error":"not found"} 3ms`
/// (`✓` for a result, `✗` for an error, `…` when it has not returned), arguments and result
/// compacted and shortened.
pub fn describe_tool_call(c: &ToolCall) -> String {
    let mut out = format!("{}({})", c.name, truncate(&compact_json(&c.arguments_json), JSON_PREVIEW));
    match &c.result_json {
        None => out.push_str(" … no result"),
        Some(result) => {
            out.push_str(if c.is_error { " ✗ " } else { " ✓ " });
            out.push_str(&truncate(&compact_json(result), JSON_PREVIEW));
        }
    }
    if let Some(d) = c.latency {
        out.push(' ');
        out.push_str(&format_duration(d));
    }
    out
}

/// A proto enum value's name without its prefix, lower-cased (`AGENT_RIGHTS_CHECK` →
/// `rights_check`); `-` when unspecified or unknown.
fn enum_label(name: Option<&str>, prefix: &str) -> String {
    match name.map(|n| n.strip_prefix(prefix).unwrap_or(n)) {
        Some("UNSPECIFIED") | None => "-".to_string(),
        Some(n) => n.to_lowercase(),
    }
}

fn agent_label(v: i32) -> String {
    enum_label(v1::Agent::try_from(v).ok().map(|e| e.as_str_name()), "AGENT_")
}

fn agent_action_label(v: i32) -> String {
    enum_label(v1::AgentAction::try_from(v).ok().map(|e| e.as_str_name()), "AGENT_ACTION_")
}

fn message_status_label(v: i32) -> String {
    enum_label(v1::AgentMessageStatus::try_from(v).ok().map(|e| e.as_str_name()), "AGENT_MESSAGE_STATUS_")
}

fn investigation_status_label(v: i32) -> String {
    enum_label(v1::InvestigationStatus::try_from(v).ok().map(|e| e.as_str_name()), "INVESTIGATION_STATUS_")
}

fn responder_role_label(v: i32) -> String {
    enum_label(v1::ResponderRole::try_from(v).ok().map(|e| e.as_str_name()), "RESPONDER_ROLE_")
}

fn decision_label(v: i32) -> String {
    enum_label(v1::ManagerDecision::try_from(v).ok().map(|e| e.as_str_name()), "MANAGER_DECISION_")
}

/// Free text on one line (newlines and runs of spaces become one space), at most `TEXT_PREVIEW`
/// characters.
fn one_line(s: &str) -> String {
    truncate(&s.split_whitespace().collect::<Vec<_>>().join(" "), TEXT_PREVIEW)
}

const TEXT_PREVIEW: usize = 160;

/// The label of a critic decision, as the CLI prints it: `APPROVE`, `REJECT` (`-` when
/// unspecified or unknown).
pub fn critic_decision_label(v: i32) -> String {
    enum_label(v1::CriticDecision::try_from(v).ok().map(|e| e.as_str_name()), "CRITIC_DECISION_").to_uppercase()
}

/// The label of a research outcome: `running`, `answered`, `retry_limit`, `failed` (`-` when
/// unspecified or unknown).
pub fn research_outcome_label(v: i32) -> String {
    enum_label(v1::ResearchOutcome::try_from(v).ok().map(|e| e.as_str_name()), "RESEARCH_OUTCOME_")
}

/// The label of a research step: `input`, `planner`, ..., `finalizer`, `error` (`-` when
/// unspecified or unknown).
pub fn research_step_label(v: i32) -> String {
    enum_label(v1::ResearchStep::try_from(v).ok().map(|e| e.as_str_name()), "RESEARCH_STEP_")
}

/// Renders an orchestrator message as one line: `sender -> receiver (type) [step N]: content`,
/// such as `orchestrator -> researcher (instruction) [step 0]: Research: Find who invented
/// CRISPR` (no `[step N]` when the message concerns no research step; the content on one line).
pub fn describe_orchestrator_message(m: &v1::OrchestratorMessage) -> String {
    let mut out =
        format!("{} -> {} ({})", dash_if_empty(&m.sender), dash_if_empty(&m.receiver), dash_if_empty(&m.r#type));
    if let Some(step) = m.step_id {
        out.push_str(&format!(" [step {step}]"));
    }
    let content = m.content.split_whitespace().collect::<Vec<_>>().join(" ");
    if !content.is_empty() {
        out.push_str(": ");
        out.push_str(&content);
    }
    out
}

/// Renders a critic's decision as one line: `critic_x: APPROVE|REJECT (retry k) feedback`, such
/// as `critic_planner: REJECT (retry 1) Also research the transistor.` (`k` is the question's
/// retry count after the decision; the feedback on one line).
pub fn describe_critic_verdict(v: &v1::CriticVerdict) -> String {
    let mut out =
        format!("{}: {} (retry {})", dash_if_empty(&v.critic), critic_decision_label(v.decision), v.retry_count);
    let feedback = v.feedback.split_whitespace().collect::<Vec<_>>().join(" ");
    if !feedback.is_empty() {
        out.push(' ');
        out.push_str(&feedback);
    }
    out
}

/// Renders a citation as `[document_id#passage] title`, such as `[crispr#0] CRISPR gene
/// editing` (no title when the server sent none).
pub fn describe_citation(c: &v1::Citation) -> String {
    let title = c.document_title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() {
        format!("[{}#{}]", c.document_id, c.passage)
    } else {
        format!("[{}#{}] {title}", c.document_id, c.passage)
    }
}

fn dash_if_empty(s: &str) -> &str {
    if s.trim().is_empty() {
        "-"
    } else {
        s
    }
}

/// Renders an agent's error as `REASON: message (3 attempts)`.
pub fn describe_agent_error(e: &v1::AgentError) -> String {
    let mut out = if e.reason.is_empty() { "ERROR".to_string() } else { e.reason.clone() };
    if !e.message.trim().is_empty() {
        out.push_str(": ");
        out.push_str(&one_line(&e.message));
    }
    if e.attempts > 1 {
        out.push_str(&format!(" ({} attempts)", e.attempts));
    }
    out
}

/// Renders an agent message as one line: `sender -> receiver: action (status)`, such as
/// `investigation -> rights_check: check_rights (pending)`; an error result ends with its
/// error, such as `[MODEL_UNAVAILABLE: model down (3 attempts)]`.
pub fn describe_agent_message(m: &v1::AgentMessage) -> String {
    let mut out = format!(
        "{} -> {}: {} ({})",
        agent_label(m.sender),
        agent_label(m.receiver),
        agent_action_label(m.action),
        message_status_label(m.status)
    );
    if let Some(e) = &m.error {
        out.push_str(&format!(" [{}]", describe_agent_error(e)));
    }
    out
}

/// Renders a status change as one line: `status: FROM -> TO`, such as
/// `status: investigation_started -> clarification_requested` (`-` as FROM for the first status).
pub fn describe_status_change(c: &v1::StatusChange) -> String {
    format!("status: {}", status_transition(c))
}

fn status_transition(c: &v1::StatusChange) -> String {
    format!("{} -> {}", investigation_status_label(c.from), investigation_status_label(c.to))
}

/// The kind of an audit entry: `message`, `status_change`, `tool`, `notification`, `reply`,
/// `error` (or `unknown` for an entry this client does not know).
pub fn audit_entry_kind(e: &v1::AuditEntry) -> &'static str {
    use v1::audit_entry::Entry;
    match &e.entry {
        Some(Entry::Message(_)) => "message",
        Some(Entry::StatusChange(_)) => "status_change",
        Some(Entry::Tool(_)) => "tool",
        Some(Entry::Notification(_)) => "notification",
        Some(Entry::Reply(_)) => "reply",
        Some(Entry::Error(_)) => "error",
        None => "unknown",
    }
}

/// Summarises an audit entry on one line (its kind is [`audit_entry_kind`]):
///
/// - message: as [`describe_agent_message`];
/// - status change: `pending -> investigation_started`;
/// - tool: `check_authorization({"user_id":"u003"}) → {"authorized":false}` (JSON compacted and
///   cut to 160 characters);
/// - notification: `INV-1002-changer to u003 (changer): <subject>`;
/// - reply: `INV-1002-manager from u001 (manager): approve: <comment>`;
/// - error: as [`describe_agent_error`].
pub fn describe_audit_entry(e: &v1::AuditEntry) -> String {
    use v1::audit_entry::Entry;
    match &e.entry {
        Some(Entry::Message(m)) => describe_agent_message(m),
        Some(Entry::StatusChange(c)) => status_transition(c),
        Some(Entry::Tool(t)) => format!(
            "{}({}) → {}",
            t.name,
            truncate(&compact_json(&t.arguments_json), JSON_PREVIEW),
            truncate(&compact_json(&t.result_json), JSON_PREVIEW)
        ),
        Some(Entry::Notification(n)) => {
            let mut out = format!("{} to {} ({})", n.action_id, n.recipient_id, responder_role_label(n.recipient_role));
            if !n.subject.trim().is_empty() {
                out.push_str(": ");
                out.push_str(&one_line(&n.subject));
            }
            out
        }
        Some(Entry::Reply(r)) => {
            let mut parts = Vec::new();
            if r.decision != v1::ManagerDecision::Unspecified as i32 {
                parts.push(decision_label(r.decision));
            }
            if !r.text.trim().is_empty() {
                parts.push(one_line(&r.text));
            }
            let mut out = format!("{} from {} ({})", r.action_id, r.responder_id, responder_role_label(r.role));
            if !parts.is_empty() {
                out.push_str(": ");
                out.push_str(&parts.join(": "));
            }
            out
        }
        Some(Entry::Error(err)) => describe_agent_error(err),
        None => "(unknown entry)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use tonic_types::{ErrorDetails, FieldViolation};
    use v1::run_event::Kind;

    fn ev(id: u64, node: &str, kind: Kind) -> v1::RunEvent {
        v1::RunEvent {
            run_id: "run-1".into(),
            event_id: id,
            time: None,
            node: node.into(),
            task: None,
            kind: Some(kind),
        }
    }

    fn ms(ms: i64) -> Option<prost_types::Duration> {
        Some(prost_types::Duration { seconds: ms / 1000, nanos: ((ms % 1000) * 1_000_000) as i32 })
    }

    #[test]
    fn describes_node_events() {
        assert_eq!(
            describe_event(&ev(3, "supervisor", Kind::NodeStarted(v1::NodeStarted { step: 0 }))),
            "[3] supervisor ▸ started"
        );
        let finished = v1::NodeFinished {
            step: 0,
            update_json: "{}".into(),
            duration: ms(12),
            next_node: "elicitation_agent".into(),
        };
        assert_eq!(
            describe_event(&ev(4, "supervisor", Kind::NodeFinished(finished))),
            "[4] supervisor ✓ 12ms → elicitation_agent"
        );
        let last =
            v1::NodeFinished { step: 3, update_json: String::new(), duration: ms(1500), next_node: String::new() };
        assert_eq!(describe_event(&ev(9, "review", Kind::NodeFinished(last))), "[9] review ✓ 1.50s → __end__");
    }

    #[test]
    fn describes_llm_calls_and_tokens() {
        let call = v1::LlmCallFinished {
            model: "gpt-4o-mini".into(),
            usage: Some(v1::Usage { prompt_tokens: 230, completion_tokens: 12, cost_usd: 0.0001 }),
            latency: ms(410),
            purpose: "supervisor.route".into(),
            attempts: 1,
            error: String::new(),
        };
        assert_eq!(
            describe_event(&ev(5, "supervisor", Kind::LlmCallFinished(call.clone()))),
            "[5] llm gpt-4o-mini supervisor.route 230+12 tok $0.0001 410ms"
        );
        let retried = v1::LlmCallFinished { attempts: 3, usage: None, ..call.clone() };
        assert_eq!(
            describe_event(&ev(6, "x", Kind::LlmCallFinished(retried))),
            "[6] llm gpt-4o-mini supervisor.route 410ms (3 attempts)"
        );
        let failed = v1::LlmCallFinished {
            attempts: 2,
            error: "model output failed validation after 2 attempts: expected value".into(),
            ..call
        };
        assert_eq!(
            describe_event(&ev(7, "x", Kind::LlmCallFinished(failed))),
            "[7] llm gpt-4o-mini supervisor.route 230+12 tok $0.0001 410ms (2 attempts) ✗ model output failed \
             validation after 2 attempts: expected value"
        );
        let delta = v1::TokenDelta { text: "Hel".into() };
        assert_eq!(describe_event(&ev(7, "chat_agent", Kind::TokenDelta(delta))), "Hel");
    }

    #[test]
    fn describes_run_events() {
        let failed = v1::RunFailed {
            code: Code::Aborted as i32,
            message: "thread busy".into(),
            reason: "THREAD_BUSY".into(),
            usage: None,
        };
        assert_eq!(
            describe_event(&ev(2, "", Kind::RunFailed(failed.clone()))),
            "[2] run failed: ABORTED thread busy [THREAD_BUSY]"
        );
        let spent = v1::RunFailed {
            code: Code::Unavailable as i32,
            message: "model output invalid".into(),
            reason: "MODEL_OUTPUT_INVALID".into(),
            usage: Some(v1::Usage { prompt_tokens: 300, completion_tokens: 20, cost_usd: 0.0 }),
        };
        assert_eq!(
            describe_event(&ev(3, "", Kind::RunFailed(spent))),
            "[3] run failed: UNAVAILABLE model output invalid [MODEL_OUTPUT_INVALID], spent 300+20 tok"
        );
        let nothing = v1::RunFailed { usage: Some(v1::Usage::default()), ..failed };
        assert_eq!(
            describe_event(&ev(2, "", Kind::RunFailed(nothing))),
            "[2] run failed: ABORTED thread busy [THREAD_BUSY]"
        );
        #[allow(deprecated)]
        let paused = v1::RunInterrupted {
            reason: String::new(),
            payload_json: String::new(),
            pending_interrupt_ids: vec!["INV-1-manager".into()],
            usage: Some(v1::Usage { prompt_tokens: 1200, completion_tokens: 90, cost_usd: 0.0 }),
        };
        assert_eq!(
            describe_event(&ev(9, "", Kind::RunInterrupted(paused))),
            "[9] run paused, awaiting: INV-1-manager, spent 1200+90 tok"
        );
        let finished = v1::RunFinished {
            steps: 4,
            duration: ms(2340),
            usage: Some(v1::Usage { prompt_tokens: 900, completion_tokens: 80, cost_usd: 0.0 }),
            output_json: "{}".into(),
        };
        assert_eq!(
            describe_event(&ev(12, "", Kind::RunFinished(finished))),
            "[12] run finished: 4 steps 2.34s 900+80 tok"
        );
        let started = v1::RunStarted { thread_id: "c1".into(), workflow: "intake".into(), resumed: false };
        assert_eq!(
            describe_event(&ev(1, "", Kind::RunStarted(started))),
            "[1] run started: workflow intake thread c1 run run-1"
        );
        let tool = v1::ToolReturned {
            call_id: "t1".into(),
            name: "lookup_team".into(),
            result_json: "{\n  \"team\": \"it\"\n}".into(),
            is_error: false,
            latency: Some(prost_types::Duration { seconds: 0, nanos: 12_000_000 }),
        };
        assert_eq!(
            describe_event(&ev(8, "matcher", Kind::ToolReturned(tool))),
            "[8] matcher tool ✓ lookup_team → {\"team\":\"it\"} 12ms"
        );
        let called = v1::ToolCalled {
            call_id: "t2".into(),
            name: "customer_lookup".into(),
            arguments_json: "{\n  \"customer_id\": \"CUST-001\"\n}".into(),
        };
        assert_eq!(
            describe_event(&ev(6, "supervisor", Kind::ToolCalled(called))),
            "[6] supervisor tool ▸ customer_lookup({\"customer_id\":\"CUST-001\"})"
        );
        let failed_tool = v1::ToolReturned {
            call_id: "t2".into(),
            name: "kb_search".into(),
            result_json: "index unavailable".into(),
            is_error: true,
            latency: None,
        };
        assert_eq!(
            describe_event(&ev(7, "billing_specialist", Kind::ToolReturned(failed_tool))),
            "[7] billing_specialist tool ✗ kb_search → index unavailable"
        );
        let unknown = v1::RunEvent { event_id: 9, node: "n".into(), ..Default::default() };
        assert_eq!(describe_event(&unknown), "[9] n (unknown event)");
    }

    fn called(id: u64, node: &str, call_id: &str, name: &str, arguments: &str) -> v1::RunEvent {
        let c = v1::ToolCalled { call_id: call_id.into(), name: name.into(), arguments_json: arguments.into() };
        ev(id, node, Kind::ToolCalled(c))
    }

    fn returned(id: u64, node: &str, call_id: &str, name: &str, result: &str, is_error: bool) -> v1::RunEvent {
        let r = v1::ToolReturned {
            call_id: call_id.into(),
            name: name.into(),
            result_json: result.into(),
            is_error,
            latency: ms(3),
        };
        ev(id, node, Kind::ToolReturned(r))
    }

    #[test]
    fn pairs_tool_calls_with_their_results() {
        let events = vec![
            ev(1, "Check_IF_existing_customer", Kind::NodeStarted(v1::NodeStarted { step: 1 })),
            called(2, "Check_IF_existing_customer", "call_1", "customer_get", "{\"phone\": \"555-1234\"}"),
            returned(3, "Check_IF_existing_customer", "call_1", "customer_get", "\"no customer\"", true),
            called(4, "Check_IF_existing_customer", "call_2", "customer_create", "{\"name\":\"John Doe\"}"),
            returned(
                5,
                "Check_IF_existing_customer",
                "call_2",
                "customer_create",
                "{\"customer_id\":\"CUS-1\"}",
                false,
            ),
            called(6, "Plan", "call_3", "task_create", "{}"),
        ];
        let calls = tool_calls(&events);
        assert_eq!(calls.len(), 3);
        assert_eq!(
            calls[0],
            ToolCall {
                node: "Check_IF_existing_customer".into(),
                call_id: "call_1".into(),
                name: "customer_get".into(),
                arguments_json: "{\"phone\": \"555-1234\"}".into(),
                result_json: Some("\"no customer\"".into()),
                is_error: true,
                latency: Some(Duration::from_millis(3)),
            }
        );
        assert_eq!(describe_tool_call(&calls[0]), "customer_get({\"phone\":\"555-1234\"}) ✗ \"no customer\" 3ms");
        assert_eq!(
            describe_tool_call(&calls[1]),
            "customer_create({\"name\":\"John Doe\"}) ✓ {\"customer_id\":\"CUS-1\"} 3ms"
        );
        assert_eq!((calls[2].node.as_str(), calls[2].result_json.as_deref()), ("Plan", None));
        assert_eq!(describe_tool_call(&calls[2]), "task_create({}) … no result");
        // A result whose call the stream did not carry is kept, without arguments.
        let orphan = tool_calls(&[returned(9, "Plan", "call_9", "task_create", "{}", false)]);
        assert_eq!((orphan[0].name.as_str(), orphan[0].arguments_json.as_str()), ("task_create", ""));
    }

    #[test]
    fn lists_the_nodes_a_turn_ran() {
        let started = |id, node: &str| ev(id, node, Kind::NodeStarted(v1::NodeStarted { step: id as u32 }));
        let finished = |id, node: &str| ev(id, node, Kind::NodeFinished(v1::NodeFinished::default()));
        let events = vec![
            started(1, "receive"),
            finished(2, "receive"),
            started(3, "Extract_Customer_Issue"),
            finished(4, "Extract_Customer_Issue"),
            started(5, "navigator"),
            started(6, "Identify_Issue"),
            started(7, "navigator"),
        ];
        assert_eq!(nodes_run(&events, &SERVICE_CALL_ROUTING_NODES), ["Extract_Customer_Issue", "Identify_Issue"]);
        assert_eq!(nodes_run(&events, &[]).len(), 5);
    }

    #[test]
    fn reads_a_conversations_workflow_state() {
        let call = v1::Conversation {
            workflow: "service_call".into(),
            state: Some(v1::conversation::State::ServiceCall(v1::ServiceCallState {
                current_node: "Plan".into(),
                context_json: r#"{"customer_id": "CUS-1", "flags": {"plan_flag": 1}}"#.into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let state = service_call_state(&call).unwrap();
        assert_eq!(state.current_node, "Plan");
        assert!(intake_state(&call).is_none());
        assert_eq!(
            service_call_context(state).unwrap(),
            serde_json::json!({"customer_id": "CUS-1", "flags": {"plan_flag": 1}})
        );
        assert_eq!(service_call_context(&v1::ServiceCallState::default()).unwrap(), serde_json::json!({}));
        let intake = v1::Conversation {
            state: Some(v1::conversation::State::Intake(v1::IntakeState::default())),
            ..Default::default()
        };
        assert!(service_call_state(&intake).is_none() && intake_state(&intake).is_some());
        assert_eq!(v1::ErrorReason::ConversationEnded.as_str_name(), format!("ERROR_REASON_{CONVERSATION_ENDED}"));
    }

    #[test]
    fn decodes_error_details() {
        let mut details = ErrorDetails::new();
        details
            .set_error_info("INVALID_ARGUMENT", "frontdesk.dev", HashMap::new())
            .set_bad_request(vec![FieldViolation::new("text", "must be non-empty")])
            .set_retry_info(Some(Duration::from_millis(1500)));
        let status = tonic::Status::with_error_details(Code::InvalidArgument, "invalid request", details);
        let err = ClientError::from(status);
        assert_eq!(err.code(), Some(Code::InvalidArgument));
        assert_eq!(err.reason(), Some("INVALID_ARGUMENT"));
        let api = err.api().unwrap();
        assert!(api.is_reason(v1::ErrorReason::InvalidArgument));
        assert_eq!(api.message, "invalid request");
        assert_eq!(api.field_violations, vec![("text".to_string(), "must be non-empty".to_string())]);
        assert_eq!(api.retry_after, Some(Duration::from_millis(1500)));
        assert_eq!(
            err.to_string(),
            "INVALID_ARGUMENT: invalid request [INVALID_ARGUMENT]; text: must be non-empty; retry after 1.50s"
        );
    }

    #[test]
    fn decodes_plain_status() {
        let err = ClientError::from(tonic::Status::not_found("no such conversation"));
        let api = err.api().unwrap();
        assert_eq!(api.code, Code::NotFound);
        assert_eq!(api.reason, None);
        assert!(api.field_violations.is_empty());
        assert_eq!(api.retry_after, None);
        assert_eq!(err.to_string(), "NOT_FOUND: no such conversation");
        assert_eq!(ClientError::StreamEndedWithoutResult.code(), None);
    }

    #[test]
    fn triage_event_accessors() {
        let resolution =
            TriageEvent::Resolution(v1::TicketResolution { ticket_id: "TKT-1".into(), ..Default::default() });
        assert_eq!(resolution.as_resolution().map(|r| r.ticket_id.as_str()), Some("TKT-1"));
        assert!(resolution.as_event().is_none() && resolution.as_result().is_none());
        let result = TriageEvent::Result(v1::TriageResult { ticket_id: "TKT-1".into(), ..Default::default() });
        assert_eq!(result.as_result().map(|r| r.ticket_id.as_str()), Some("TKT-1"));
        assert!(TriageEvent::Event(v1::RunEvent::default()).as_event().is_some());
    }

    fn message(action: v1::AgentAction, status: v1::AgentMessageStatus) -> v1::AgentMessage {
        v1::AgentMessage {
            sender: v1::Agent::Investigation as i32,
            receiver: v1::Agent::RightsCheck as i32,
            action: action as i32,
            context_json: "{}".into(),
            correlation_id: "corr-INV-1002-1".into(),
            timestamp: None,
            status: status as i32,
            error: None,
        }
    }

    #[test]
    fn describes_agent_messages_and_status_changes() {
        let m = message(v1::AgentAction::CheckRights, v1::AgentMessageStatus::Pending);
        assert_eq!(describe_agent_message(&m), "investigation -> rights_check: check_rights (pending)");
        let failed = v1::AgentMessage {
            sender: v1::Agent::RequestForInformation as i32,
            receiver: v1::Agent::Investigation as i32,
            error: Some(v1::AgentError {
                reason: "MODEL_UNAVAILABLE".into(),
                message: "model down\nretry later".into(),
                attempts: 3,
            }),
            ..message(v1::AgentAction::ManagerValidationResponse, v1::AgentMessageStatus::Error)
        };
        assert_eq!(
            describe_agent_message(&failed),
            "request_for_information -> investigation: manager_validation_response (error) \
             [MODEL_UNAVAILABLE: model down retry later (3 attempts)]"
        );
        let first = v1::StatusChange {
            from: v1::InvestigationStatus::Unspecified as i32,
            to: v1::InvestigationStatus::Pending as i32,
            time: None,
            agent: v1::Agent::Investigation as i32,
        };
        assert_eq!(describe_status_change(&first), "status: - -> pending");
        let next = v1::StatusChange {
            from: v1::InvestigationStatus::AwaitingManagerResponse as i32,
            to: v1::InvestigationStatus::RejectedManagerDenied as i32,
            ..first
        };
        assert_eq!(describe_status_change(&next), "status: awaiting_manager_response -> rejected_manager_denied");
        let unknown = v1::AgentMessage { action: 99, ..m };
        assert_eq!(describe_agent_message(&unknown), "investigation -> rights_check: - (pending)");
    }

    #[test]
    fn describes_audit_entries() {
        use v1::audit_entry::Entry;
        let entry = |e: Entry| v1::AuditEntry {
            investigation_id: "INV-1002".into(),
            seq: 1,
            correlation_id: "corr-INV-1002-1".into(),
            time: None,
            actor: "investigation".into(),
            entry: Some(e),
        };
        let m = entry(Entry::Message(message(v1::AgentAction::CheckRights, v1::AgentMessageStatus::Pending)));
        assert_eq!(audit_entry_kind(&m), "message");
        assert_eq!(describe_audit_entry(&m), "investigation -> rights_check: check_rights (pending)");
        let change = entry(Entry::StatusChange(v1::StatusChange {
            from: v1::InvestigationStatus::Pending as i32,
            to: v1::InvestigationStatus::InvestigationStarted as i32,
            ..Default::default()
        }));
        assert_eq!(audit_entry_kind(&change), "status_change");
        assert_eq!(describe_audit_entry(&change), "pending -> investigation_started");
        let tool = entry(Entry::Tool(v1::ToolInvocation {
            name: "check_authorization".into(),
            arguments_json: "{\n  \"user_id\": \"u003\"\n}".into(),
            result_json: "{\"authorized\": false}".into(),
        }));
        assert_eq!(audit_entry_kind(&tool), "tool");
        assert_eq!(describe_audit_entry(&tool), "check_authorization({\"user_id\":\"u003\"}) → {\"authorized\":false}");
        let notification = entry(Entry::Notification(v1::PendingAction {
            action_id: "INV-1002-changer".into(),
            recipient_id: "u003".into(),
            recipient_role: v1::ResponderRole::Changer as i32,
            subject: "Your Payroll change\nof 3 May".into(),
            ..Default::default()
        }));
        assert_eq!(audit_entry_kind(&notification), "notification");
        assert_eq!(
            describe_audit_entry(&notification),
            "INV-1002-changer to u003 (changer): Your Payroll change of 3 May"
        );
        let reply = entry(Entry::Reply(v1::HumanReply {
            action_id: "INV-1002-manager".into(),
            role: v1::ResponderRole::Manager as i32,
            responder_id: "u001".into(),
            text: "ok, covered".into(),
            decision: v1::ManagerDecision::Approve as i32,
        }));
        assert_eq!(audit_entry_kind(&reply), "reply");
        assert_eq!(describe_audit_entry(&reply), "INV-1002-manager from u001 (manager): approve: ok, covered");
        let changer = entry(Entry::Reply(v1::HumanReply {
            action_id: "INV-1002-changer".into(),
            role: v1::ResponderRole::Changer as i32,
            responder_id: "u003".into(),
            text: "I stood in for u006".into(),
            decision: 0,
        }));
        assert_eq!(describe_audit_entry(&changer), "INV-1002-changer from u003 (changer): I stood in for u006");
        let error = entry(Entry::Error(v1::AgentError {
            reason: "TIMEOUT".into(),
            message: "rights check timed out".into(),
            attempts: 1,
        }));
        assert_eq!(audit_entry_kind(&error), "error");
        assert_eq!(describe_audit_entry(&error), "TIMEOUT: rights check timed out");
        let empty = v1::AuditEntry::default();
        assert_eq!((audit_entry_kind(&empty), describe_audit_entry(&empty).as_str()), ("unknown", "(unknown entry)"));
    }

    #[test]
    fn investigation_event_accessors_and_replies() {
        let inv = InvestigationEvent::Investigation(v1::Investigation {
            investigation_id: "INV-1002".into(),
            ..Default::default()
        });
        assert_eq!(inv.as_investigation().map(|i| i.investigation_id.as_str()), Some("INV-1002"));
        assert!(inv.as_event().is_none() && inv.as_message().is_none() && inv.as_status_change().is_none());
        assert!(InvestigationEvent::Event(v1::RunEvent::default()).as_event().is_some());
        assert!(InvestigationEvent::Message(v1::AgentMessage::default()).as_message().is_some());
        assert!(InvestigationEvent::StatusChange(v1::StatusChange::default()).as_status_change().is_some());

        assert_eq!(MutationRef::from("1002"), MutationRef::Id("1002".into()));
        let inline = v1::HrMutation { mutation_id: "2001".into(), ..Default::default() };
        assert_eq!(MutationRef::from(inline.clone()), MutationRef::Inline(inline));

        let changer = Reply::changer("u003", "I stood in for u006");
        assert_eq!(changer.role, v1::ResponderRole::Changer);
        assert_eq!((changer.text.as_deref(), changer.decision), (Some("I stood in for u006"), None));
        let manager = Reply::manager("u001", v1::ManagerDecision::Deny).with_text("no").with_idempotency_key("k1");
        assert_eq!(manager.role, v1::ResponderRole::Manager);
        assert_eq!(manager.decision, Some(v1::ManagerDecision::Deny));
        assert_eq!((manager.text.as_deref(), manager.idempotency_key.as_deref()), (Some("no"), Some("k1")));
    }

    #[test]
    fn describes_orchestrator_messages_critic_verdicts_and_citations() {
        let instruction = v1::OrchestratorMessage {
            sender: "orchestrator".into(),
            receiver: "researcher".into(),
            r#type: "instruction".into(),
            content: "Research: Find who invented\n  CRISPR gene editing".into(),
            step_id: Some(0),
        };
        assert_eq!(
            describe_orchestrator_message(&instruction),
            "orchestrator -> researcher (instruction) [step 0]: Research: Find who invented CRISPR gene editing"
        );
        let response = v1::OrchestratorMessage {
            sender: "planner".into(),
            receiver: "orchestrator".into(),
            r#type: "response".into(),
            content: "2 research steps, 1 expert steps".into(),
            step_id: None,
        };
        assert_eq!(
            describe_orchestrator_message(&response),
            "planner -> orchestrator (response): 2 research steps, 1 expert steps"
        );
        assert_eq!(describe_orchestrator_message(&v1::OrchestratorMessage::default()), "- -> - (-)");

        let approve = v1::CriticVerdict {
            critic: "critic_planner".into(),
            decision: v1::CriticDecision::Approve as i32,
            feedback: "Looks complete.".into(),
            step_id: None,
            retry_count: 0,
        };
        assert_eq!(describe_critic_verdict(&approve), "critic_planner: APPROVE (retry 0) Looks complete.");
        let reject = v1::CriticVerdict {
            critic: "critic_researcher".into(),
            decision: v1::CriticDecision::Reject as i32,
            feedback: "Cite the passage\nwith the date.".into(),
            step_id: Some(1),
            retry_count: 2,
        };
        assert_eq!(
            describe_critic_verdict(&reject),
            "critic_researcher: REJECT (retry 2) Cite the passage with the date."
        );
        let unknown = v1::CriticVerdict { decision: 7, feedback: String::new(), ..approve };
        assert_eq!(describe_critic_verdict(&unknown), "critic_planner: - (retry 0)");

        let citation = v1::Citation {
            document_id: "crispr".into(),
            document_title: "CRISPR gene editing".into(),
            passage: 2,
            text: "Jennifer Doudna and Emmanuelle Charpentier ...".into(),
        };
        assert_eq!(describe_citation(&citation), "[crispr#2] CRISPR gene editing");
        let untitled = v1::Citation { document_title: String::new(), ..citation };
        assert_eq!(describe_citation(&untitled), "[crispr#2]");

        assert_eq!(research_outcome_label(v1::ResearchOutcome::RetryLimit as i32), "retry_limit");
        assert_eq!(research_outcome_label(0), "-");
        assert_eq!(research_step_label(v1::ResearchStep::CriticExpert as i32), "critic_expert");
        assert_eq!(critic_decision_label(v1::CriticDecision::Reject as i32), "REJECT");
    }

    #[test]
    fn research_event_accessors() {
        let research = ResearchEvent::Research(v1::Research { research_id: "RES-1".into(), ..Default::default() });
        assert_eq!(research.as_research().map(|r| r.research_id.as_str()), Some("RES-1"));
        assert!(research.as_event().is_none() && research.as_plan().is_none() && research.as_result().is_none());
        assert!(ResearchEvent::Event(v1::RunEvent::default()).as_event().is_some());
        assert!(ResearchEvent::Message(v1::OrchestratorMessage::default()).as_message().is_some());
        assert!(ResearchEvent::Plan(v1::Plan::default()).as_plan().is_some());
        assert!(ResearchEvent::Result(v1::ResearchResult::default()).as_result().is_some());
        assert!(ResearchEvent::CriticDecision(v1::CriticVerdict::default()).as_critic_decision().is_some());
        assert!(ResearchEvent::ExpertAnswer(v1::ExpertAnswer::default()).as_expert_answer().is_some());
        assert!(ResearchEvent::Plan(v1::Plan::default()).as_critic_decision().is_none());
        assert_eq!(AskOptions::default().retry_limit, None);
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_duration(Duration::from_micros(850)), "850µs");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m05s");
    }
}
