//! Conversational workflows (intake now, service_call later) behind one object-safe trait, and
//! the generic host that implements it for any [`ConversationSpec`] on the runtime.
//!
//! Each workflow shows its state as its own typed view (`ConversationSpec::View`, such as
//! `IntakeView`); nothing here lists the workflows. The service layer turns a view into its
//! wire form beside the workflow's adapter.

use std::{future::Future, pin::Pin, sync::Arc, time::SystemTime};

use async_trait::async_trait;
use frontdesk_runtime::{
    BusyPolicy, Checkpoint, GraphDescription, RunError, RunEvents, RunInput, RunOutcome, RunRequest, Runner,
    StartError, State, ThreadHead, ThreadQuery, ThreadSummary, UnfinishedRun,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::{idempotency::fingerprint, Message, Tenant, WorkflowError};

/// A conversation as callers see it; `V` is the workflow's view of its own state.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationView<V> {
    pub id: String,
    pub workflow: String,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    pub version: u64,
    pub turn_count: u32,
    pub state: V,
    /// The message history; empty where only the summary was asked for.
    pub messages: Vec<Message>,
}

impl<V> ConversationView<V> {
    /// The same conversation with its state shown another way (the service's wire form).
    pub fn map<W>(self, show: impl FnOnce(V) -> W) -> ConversationView<W> {
        let ConversationView { id, workflow, created_at, updated_at, version, turn_count, state, messages } = self;
        ConversationView { id, workflow, created_at, updated_at, version, turn_count, state: show(state), messages }
    }
}

/// What a finished turn reports, and what the checkpoint store keeps for idempotent replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnOutput<V> {
    pub reply: Option<Message>,
    pub turn_count: u32,
    pub state: StoredView<V>,
}

/// A view as a turn's recorded output holds it: `{"workflow": NAME, ...view}`. Recorded outputs
/// outlive releases (an idempotent retry replays one), so this shape stays as it was when the
/// views were variants of one enum tagged by workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredView<V> {
    pub workflow: String,
    #[serde(flatten)]
    pub view: V,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome<V> {
    pub run_id: String,
    pub reply: Option<Message>,
    pub conversation: ConversationView<V>,
    pub replayed: bool,
}

impl<V> TurnOutcome<V> {
    pub fn map<W>(self, show: impl FnOnce(V) -> W) -> TurnOutcome<W> {
        let TurnOutcome { run_id, reply, conversation, replayed } = self;
        TurnOutcome { run_id, reply, conversation: conversation.map(show), replayed }
    }
}

#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    pub idempotency_key: Option<String>,
    pub busy: BusyPolicy,
    /// The conversation as the caller read it to find its workflow: the turn starts from it
    /// instead of reading again (see [`RunRequest::head`]; when it no longer holds, the turn
    /// reads afresh).
    pub routed: Option<ThreadHead>,
}

type OutcomeFuture<V> = Pin<Box<dyn Future<Output = Result<TurnOutcome<V>, WorkflowError>> + Send>>;

/// A running turn: its events as they happen, then its outcome.
pub struct TurnHandle<V> {
    pub run_id: String,
    pub events: RunEvents,
    pub outcome: OutcomeFuture<V>,
}

impl<V: 'static> TurnHandle<V> {
    pub fn map<W: 'static>(self, show: impl FnOnce(V) -> W + Send + 'static) -> TurnHandle<W> {
        let TurnHandle { run_id, events, outcome } = self;
        TurnHandle { run_id, events, outcome: Box::pin(async move { outcome.await.map(|o| o.map(show)) }) }
    }
}

/// Limits every conversation enforces.
#[derive(Debug, Clone)]
pub struct ConversationLimits {
    /// Longest user message, in characters.
    pub max_text_chars: usize,
    /// Most user turns a conversation may take.
    pub max_turns: u32,
    /// Largest a conversation's state may grow, in bytes as stored (its messages make most of
    /// it): `GetConversation` answers with the whole state, and a default gRPC client decodes
    /// at most 4 MiB, so a conversation past it could be continued but never read back.
    pub max_state_bytes: usize,
}

/// The default [`ConversationLimits::max_state_bytes`]: 3 MiB, room below a default client's
/// 4 MiB for the rest of a `GetConversation` answer.
pub const DEFAULT_MAX_STATE_BYTES: usize = 3 * 1024 * 1024;

impl Default for ConversationLimits {
    fn default() -> Self {
        Self { max_text_chars: 8_000, max_turns: 500, max_state_bytes: DEFAULT_MAX_STATE_BYTES }
    }
}

#[async_trait]
pub trait ConversationWorkflow: Send + Sync + 'static {
    /// How a conversation's state is shown.
    type View: Send + 'static;
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn graph(&self) -> GraphDescription;
    fn limits(&self) -> &ConversationLimits;
    /// Creates one of `tenant`'s conversations. With an idempotency key and no id, the id is
    /// derived from the key, so a retried start finds the conversation it created.
    async fn start(
        &self,
        tenant: &Tenant,
        id: Option<String>,
        idempotency_key: Option<String>,
    ) -> Result<(ConversationView<Self::View>, Message), WorkflowError>;
    async fn send(
        &self,
        tenant: &Tenant,
        id: &str,
        text: &str,
        options: TurnOptions,
    ) -> Result<TurnHandle<Self::View>, WorkflowError>;
    async fn get(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<Self::View>, WorkflowError>;
    /// Summary (no messages) of a stored thread of this workflow, one of `tenant`'s.
    async fn summarize(
        &self,
        tenant: &Tenant,
        thread: &ThreadSummary,
    ) -> Result<ConversationView<Self::View>, WorkflowError>;
    async fn reset(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<Self::View>, WorkflowError>;
    async fn delete(&self, tenant: &Tenant, id: &str) -> Result<(), WorkflowError>;
    /// Finishes runs a crash interrupted (start-up), of every tenant.
    async fn recover(&self) -> Result<usize, WorkflowError>;
    /// Finishes the runs of this workflow among `abandoned`, which a takeover scan picked out
    /// (`RunRegistry::abandoned`); returns how many it resumed.
    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError>;
    /// `tenant`'s threads of this workflow, ordered by storage key; `after` and the returned
    /// cursor are storage keys.
    async fn list(
        &self,
        tenant: &Tenant,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView<Self::View>>, Option<String>), WorkflowError>;
}

/// What a conversational workflow defines; [`ConversationHost`] does the rest.
pub trait ConversationSpec: Send + Sync + 'static {
    type State: State;
    /// The state as callers see it. Serialized into each turn's recorded output.
    type View: Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static;
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The state of a new conversation, holding the welcome message.
    fn initial_state(&self) -> Self::State;
    fn user_turn(&self, message: Message) -> <Self::State as State>::Update;
    fn messages<'s>(&self, state: &'s Self::State) -> &'s [Message];
    fn turn_count(&self, state: &Self::State) -> u32;
    fn view(&self, state: &Self::State) -> Self::View;
    /// The state after a reset (clear everything, messages included).
    fn reset(&self, state: &Self::State) -> Self::State;
    /// Whether the conversation has ended and takes no more messages (a hung-up call).
    fn ended(&self, state: &Self::State) -> bool {
        let _ = state;
        false
    }
}

/// The graph output of every conversational workflow (its graph's `output`): the turn's reply and
/// the new state view. [`ConversationHost`] reports a turn that ran here from this value itself,
/// and a replay from the JSON the runner recorded of it, so the two cannot differ.
pub fn turn_output<C: ConversationSpec>(spec: &C, state: &C::State) -> TurnOutput<C::View> {
    let reply = spec.messages(state).last().filter(|m| m.role == crate::Role::Assistant).cloned();
    let view = StoredView { workflow: spec.name().to_owned(), view: spec.view(state) };
    TurnOutput { reply, turn_count: spec.turn_count(state), state: view }
}

pub struct ConversationHost<C: ConversationSpec> {
    spec: Arc<C>,
    runner: Runner<C::State>,
    limits: ConversationLimits,
}

const ID_MAX: usize = 128;

pub fn validate_id(id: &str) -> Result<(), WorkflowError> {
    let ok = !id.is_empty()
        && id.len() <= ID_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(WorkflowError::InvalidArgument {
            field: "conversation_id",
            reason: format!("must be 1 to {ID_MAX} characters of A-Z a-z 0-9 . _ : -"),
        })
    }
}

/// A turn's text and idempotency key as [`ConversationWorkflow::send`] checks them: the text,
/// trimmed, must be 1 to `max_text_chars` characters without NUL, and a key as
/// [`validate_key`](crate::idempotency::validate_key) says. Returns the
/// trimmed text.
pub fn validate_turn<'t>(
    text: &'t str,
    idempotency_key: Option<&str>,
    max_text_chars: usize,
) -> Result<&'t str, WorkflowError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(WorkflowError::InvalidArgument { field: "text", reason: "must not be empty".into() });
    }
    let chars = text.chars().count();
    if chars > max_text_chars {
        return Err(WorkflowError::InvalidArgument {
            field: "text",
            reason: format!("is {chars} characters; the limit is {max_text_chars}"),
        });
    }
    WorkflowError::reject_nul("text", text)?;
    crate::idempotency::validate_key(idempotency_key)?;
    Ok(text)
}

fn not_found(id: &str) -> WorkflowError {
    WorkflowError::NotFound { what: "conversation", id: id.to_owned() }
}

/// A conversation's thread id is its conversation id.
fn map_run_error(id: &str, error: RunError) -> WorkflowError {
    WorkflowError::run_on("conversation", id, error)
}

impl<C: ConversationSpec> ConversationHost<C> {
    pub fn new(spec: Arc<C>, runner: Runner<C::State>, limits: ConversationLimits) -> Self {
        Self { spec, runner, limits }
    }

    pub fn runner(&self) -> &Runner<C::State> {
        &self.runner
    }

    fn view(
        &self,
        id: &str,
        state: &C::State,
        cp: &Checkpoint,
        created_at: SystemTime,
        messages: bool,
    ) -> ConversationView<C::View> {
        ConversationView {
            id: id.to_owned(),
            workflow: self.spec.name().to_owned(),
            created_at,
            updated_at: cp.created_at,
            version: cp.version,
            turn_count: self.spec.turn_count(state),
            state: self.spec.view(state),
            messages: if messages { self.spec.messages(state).to_vec() } else { Vec::new() },
        }
    }

    /// `id` is the caller's, `key` its storage key.
    async fn load(&self, id: &str, key: &str) -> Result<(C::State, Checkpoint, SystemTime), WorkflowError> {
        validate_id(id)?;
        let (state, cp) =
            self.runner.state(key).await.map_err(|e| map_run_error(id, e))?.ok_or_else(|| not_found(id))?;
        if cp.workflow != self.spec.name() {
            return Err(not_found(id));
        }
        let created_at = self.runner.checkpointer().thread(key).await?.map_or(cp.created_at, |t| t.created_at);
        Ok((state, cp, created_at))
    }
}

struct Finished<V> {
    run_id: String,
    version: u64,
    /// The turn's output: typed from the final state when the run ran here, else (a replay) the
    /// recorded JSON.
    output: Result<TurnOutput<V>, serde_json::Value>,
    replayed: bool,
    /// The thread's creation and update times, when the run knows them.
    times: Option<(SystemTime, SystemTime)>,
}

async fn finish_turn<V: DeserializeOwned>(
    finished: Result<Finished<V>, RunError>,
    (id, key): (String, String),
    workflow: String,
    checkpointer: Arc<dyn frontdesk_runtime::Checkpointer>,
) -> Result<TurnOutcome<V>, WorkflowError> {
    let finished = finished.map_err(|e| map_run_error(&id, e))?;
    let output = match finished.output {
        Ok(output) => output,
        Err(recorded) => {
            serde_json::from_value(recorded).map_err(|source| WorkflowError::Corrupt { id: id.clone(), source })?
        }
    };
    // A run reports the times it read and wrote; only a replay leaves them to a read here.
    let (created_at, updated_at) = match finished.times {
        Some(times) => times,
        None => {
            let thread = checkpointer.thread(&key).await?;
            let now = SystemTime::now();
            thread.map_or((now, now), |t| (t.created_at, t.updated_at))
        }
    };
    Ok(TurnOutcome {
        run_id: finished.run_id,
        reply: output.reply,
        replayed: finished.replayed,
        conversation: ConversationView {
            created_at,
            updated_at,
            id,
            workflow,
            version: finished.version,
            turn_count: output.turn_count,
            state: output.state.view,
            messages: Vec::new(),
        },
    })
}

#[async_trait]
impl<C: ConversationSpec> ConversationWorkflow for ConversationHost<C> {
    type View = C::View;

    fn name(&self) -> &str {
        self.spec.name()
    }

    fn description(&self) -> &str {
        self.spec.description()
    }

    fn graph(&self) -> GraphDescription {
        self.runner.graph().describe()
    }

    fn limits(&self) -> &ConversationLimits {
        &self.limits
    }

    async fn start(
        &self,
        tenant: &Tenant,
        id: Option<String>,
        idempotency_key: Option<String>,
    ) -> Result<(ConversationView<C::View>, Message), WorkflowError> {
        let id = match (id, &idempotency_key) {
            (Some(id), _) => id,
            (None, Some(key)) => {
                format!("conv-{}", uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).simple())
            }
            (None, None) => format!("conv-{}", uuid::Uuid::now_v7().simple()),
        };
        validate_id(&id)?;
        crate::idempotency::validate_key(idempotency_key.as_deref())?;
        let key = tenant.key(&id);
        let state = self.spec.initial_state();
        let welcome =
            self.spec.messages(&state).last().cloned().ok_or(WorkflowError::NotFound {
                what: "welcome message of workflow",
                id: self.spec.name().to_owned(),
            })?;
        // What the start asks for, as its key's record holds it: a retry must ask the same.
        let fingerprint = idempotency_key.as_ref().map(|_| {
            crate::idempotency::fingerprint(&[("start", "conversation"), ("workflow", self.spec.name()), ("id", &id)])
        });
        match self.runner.create_thread_keyed(&key, &state, idempotency_key.clone(), fingerprint.clone()).await {
            Ok(cp) => Ok((self.view(&id, &state, &cp, cp.created_at, false), welcome)),
            Err(RunError::AlreadyExists { .. }) => {
                // A retried start is answered with what its first call created; a conversation
                // its key did not create is somebody else's.
                let Some(idempotency_key) = idempotency_key else {
                    return Err(WorkflowError::AlreadyExists { what: "conversation", id });
                };
                let recorded = self.runner.checkpointer().find_idempotent(&key, &idempotency_key).await?;
                match recorded {
                    Some(run) if run.fingerprint.is_some() && run.fingerprint != fingerprint => {
                        Err(WorkflowError::IdempotencyMismatch { what: "conversation", id, key: idempotency_key })
                    }
                    Some(_) => {
                        let (state, cp, created_at) = self.load(&id, &key).await?;
                        Ok((self.view(&id, &state, &cp, created_at, false), welcome))
                    }
                    None => Err(WorkflowError::AlreadyExists { what: "conversation", id }),
                }
            }
            Err(other) => Err(map_run_error(&id, other)),
        }
    }

    async fn send(
        &self,
        tenant: &Tenant,
        id: &str,
        text: &str,
        options: TurnOptions,
    ) -> Result<TurnHandle<C::View>, WorkflowError> {
        validate_id(id)?;
        let key = tenant.key(id);
        let text = validate_turn(text, options.idempotency_key.as_deref(), self.limits.max_text_chars)?;
        // Checked under the thread's lock on the checkpoint the turn starts from: one read per
        // turn, and no other turn can slip in between. A retry of a turn that already ran is
        // replayed before this check, so it is never refused for the limit it reached.
        let admit = |state: &C::State, cp: &Checkpoint| {
            if cp.workflow != self.spec.name() {
                return Err(not_found(id));
            }
            if self.spec.ended(state) {
                return Err(WorkflowError::ConversationEnded { id: id.to_owned() });
            }
            if self.spec.turn_count(state) >= self.limits.max_turns {
                return Err(WorkflowError::LimitExceeded {
                    limit: "turns per conversation",
                    max: u64::from(self.limits.max_turns),
                });
            }
            // Checked before the turn, on the state it starts from: a turn may take it past the
            // limit once (by at most a message and a reply), and the next is refused.
            if cp.state.len() >= self.limits.max_state_bytes {
                return Err(WorkflowError::LimitExceeded {
                    limit: "conversation state bytes",
                    max: self.limits.max_state_bytes as u64,
                });
            }
            Ok(())
        };
        // What the turn is: a retry with the key must send the same text to the same
        // conversation (the busy policy only says how to wait, so it is not part of it).
        let turn_fingerprint = options
            .idempotency_key
            .as_ref()
            .map(|_| fingerprint(&[("workflow", self.spec.name()), ("conversation_id", id), ("text", text)]));
        let request = |head: Option<ThreadHead>| {
            let mut request = RunRequest::new(key.clone(), RunInput::Update(self.spec.user_turn(Message::user(text))));
            request.fingerprint = turn_fingerprint.clone();
            request.idempotency_key = options.idempotency_key.clone();
            request.busy = options.busy;
            request.head = head;
            request
        };
        // The caller's read first; when it no longer holds, once more on a fresh one.
        let started = match self.runner.start_with(request(options.routed), &admit).await {
            Err(StartError::Stale) => self.runner.start_with(request(None), &admit).await,
            started => started,
        };
        let handle = started.map_err(|error| match error {
            StartError::Refused(error) => error,
            StartError::Run(error) => map_run_error(id, error),
            StartError::Stale => unreachable!("a turn started without a head is never stale"),
        })?;
        let run_id = handle.run_id.clone();
        let (events, outcome, _cancel) = handle.into_parts();
        let checkpointer = self.runner.checkpointer().clone();
        let (ids, workflow) = ((id.to_owned(), key), self.spec.name().to_owned());
        let spec = self.spec.clone();
        let outcome = Box::pin(async move {
            let result = match outcome.await {
                Ok(result) => result.map(|o: RunOutcome<C::State>| Finished {
                    run_id: o.run_id,
                    version: o.version,
                    output: o.state.as_ref().map(|state| turn_output(&*spec, state)).ok_or(o.output),
                    replayed: o.replayed,
                    times: o.thread_created_at.zip(o.updated_at),
                }),
                Err(_) => Err(RunError::Lost),
            };
            finish_turn(result, ids, workflow, checkpointer).await
        });
        Ok(TurnHandle { run_id, events, outcome })
    }

    async fn get(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<C::View>, WorkflowError> {
        let (state, cp, created_at) = self.load(id, &tenant.key(id)).await?;
        Ok(self.view(id, &state, &cp, created_at, true))
    }

    async fn summarize(
        &self,
        tenant: &Tenant,
        thread: &ThreadSummary,
    ) -> Result<ConversationView<C::View>, WorkflowError> {
        let key = &thread.thread_id;
        let id = tenant.id(key).ok_or_else(|| not_found(key))?;
        let (state, cp) =
            self.runner.state(key).await.map_err(|e| map_run_error(id, e))?.ok_or_else(|| not_found(id))?;
        Ok(self.view(id, &state, &cp, thread.created_at, false))
    }

    async fn reset(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<C::View>, WorkflowError> {
        let key = tenant.key(id);
        let (state, _, created_at) = self.load(id, &key).await?;
        let reset = self.spec.reset(&state);
        let cp = self.runner.overwrite_state(&key, &reset).await.map_err(|e| map_run_error(id, e))?;
        Ok(self.view(id, &reset, &cp, created_at, false))
    }

    async fn delete(&self, tenant: &Tenant, id: &str) -> Result<(), WorkflowError> {
        let key = tenant.key(id);
        self.load(id, &key).await?;
        if self.runner.delete_thread(&key).await.map_err(|e| map_run_error(id, e))? {
            Ok(())
        } else {
            Err(not_found(id))
        }
    }

    async fn recover(&self) -> Result<usize, WorkflowError> {
        Ok(self.runner.recover().await?)
    }

    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        Ok(self.runner.resume_abandoned(abandoned).await)
    }

    async fn list(
        &self,
        tenant: &Tenant,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView<C::View>>, Option<String>), WorkflowError> {
        let prefix = Some(tenant.key_prefix()).filter(|p| !p.is_empty());
        let query = ThreadQuery { workflow: Some(self.spec.name().to_owned()), after, limit, prefix };
        let page = self.runner.checkpointer().list_threads(&query).await?;
        let mut views = Vec::with_capacity(page.threads.len());
        // The default tenant's listing passes over other tenants' keys: a page may come back
        // short, and its cursor still moves on.
        for thread in page.threads.iter().filter(|t| tenant.owns(&t.thread_id)) {
            match self.summarize(tenant, thread).await {
                Ok(view) => views.push(view),
                // Deleted between the listing and the read.
                Err(WorkflowError::NotFound { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok((views, page.next_after))
    }
}
