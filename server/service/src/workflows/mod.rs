//! The workflows this server hosts, each registered once.
//!
//! A workflow's service-side module implements [`WorkflowModule`]: its name, its typed config
//! section `workflows.<name>`, and how it is built on the shared parts ([`Wiring`]). What it
//! builds is a [`HostedWorkflow`]: description, kind, graph, start-up recovery and the gRPC
//! service it adds, if any. A conversational workflow is served by `ConversationService`
//! through [`Conversations`], and shows its state on the wire through [`ProtoState`].
//! The registry, `App::build`, `serve_on` and the shared handlers iterate [`WORKFLOWS`] and
//! never name a workflow.

use std::{any::Any, fmt, future::Future, sync::Arc};

use async_trait::async_trait;
use figment::value::Value;
use frontdesk_api::v1 as pb;
use frontdesk_llm::LlmClient;
use frontdesk_runtime::{
    Checkpointer, Graph, GraphDescription, RunRegistry, Runner, RunnerConfig, State, ThreadSummary, UnfinishedRun,
};
use frontdesk_store::Database;
use frontdesk_workflows::{
    conversation::{ConversationLimits, ConversationWorkflow},
    ConversationView, Message, Tenant, TurnHandle, TurnOptions, WorkflowError,
};
use serde::{de::DeserializeOwned, Serialize};
use tonic::service::RoutesBuilder;

use crate::auth::ServiceAccess;

/// Declares each workflow's adapter module and lists it in [`WORKFLOWS`]: a module `name`
/// registers its `name::Workflow`.
macro_rules! workflows {
    ($($name:ident),+ $(,)?) => {
        $(pub mod $name;)+
        /// Every hosted workflow, in the order `ListWorkflows` shows them.
        pub static WORKFLOWS: &[&dyn Registration] = &[$(&$name::Workflow),+];
    };
}

// The one line where workflows are listed.
workflows![intake, triage, investigation, research, service_call];

#[cfg(test)]
pub(crate) mod testing;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A config section that does not read as its workflow's settings (boxed: figment's error is large).
pub type SettingsError = Box<figment::Error>;

/// A workflow's service-side module, implemented once per workflow.
pub trait WorkflowModule: Send + Sync + 'static {
    /// The workflow's name: in `ListWorkflows`, in its threads' records, and its config
    /// section `workflows.<name>`.
    const NAME: &'static str;
    /// Its config section: keys of `workflows.<name>` in the file, `FRONTDESK__WORKFLOWS__
    /// <NAME>__<KEY>` variables. The defaults form the lowest configuration layer.
    type Settings: Serialize + DeserializeOwned + Default + fmt::Debug + Send + Sync + 'static;

    /// Builds the workflow on the shared parts.
    fn build(
        &self,
        settings: Self::Settings,
        wiring: &Wiring<'_>,
    ) -> impl Future<Output = Result<Arc<dyn HostedWorkflow>, BoxError>> + Send;
}

/// A built workflow, as the server hosts it.
#[async_trait]
pub trait HostedWorkflow: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    fn kind(&self) -> WorkflowKind<'_>;
    /// Its graph, for `DescribeWorkflow`.
    fn graph(&self) -> GraphDescription;
    /// Finishes the runs a crash interrupted (start-up). A workflow that must repair its
    /// threads before their runs resume does so here, first.
    async fn recover(&self) -> Result<usize, WorkflowError>;
    /// Finishes this workflow's runs among `abandoned`: the periodic scan while serving lists
    /// the running threads once, picks out the abandoned runs (`RunRegistry::abandoned`) and
    /// hands each workflow with one among them the list. Like [`HostedWorkflow::recover`]
    /// without its scan; a workflow that repairs its threads before their runs resume repairs
    /// these only.
    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError>;
    /// Whether `thread_id` (a storage key) was one of this workflow's threads that it keeps
    /// elsewhere now that the thread itself is gone (triage archives a completed ticket and
    /// erases its thread), so that listings about threads (`ListLlmCalls`) still know it. Only
    /// such threads need an answer: the runners' stores answer for the rest. None by default.
    async fn keeps_thread(&self, thread_id: &str) -> Result<bool, WorkflowError> {
        let _ = thread_id;
        Ok(false)
    }
    /// Adds the workflow's own gRPC service, if it has one, with the request size limit; returns
    /// the service's name and its methods' scopes: health reports it as serving, and the auth
    /// layer checks its scopes.
    fn add_service(&self, routes: &mut RoutesBuilder, max_message_bytes: usize) -> Option<&'static ServiceAccess> {
        let _ = (routes, max_message_bytes);
        None
    }
    /// For tests and embedders that need the concrete workflow (`Registry::find`).
    fn as_any(&self) -> &dyn Any;
}

/// A task workflow's desk: its entry points over one runner. [`HostedTask`] hosts it, so a
/// task workflow writes only what is its own (its service).
pub trait TaskDesk: Send + Sync + 'static {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    type State: State;
    fn runner(&self) -> &Runner<Self::State>;
    /// Adds the desk's gRPC service with the request size limit; returns the service's name
    /// and its methods' scopes.
    fn add_service(desk: Arc<Self>, routes: &mut RoutesBuilder, max_message_bytes: usize) -> &'static ServiceAccess;
}

/// A task workflow as the server hosts it, from its desk.
pub struct HostedTask<D: TaskDesk> {
    desk: Arc<D>,
}

impl<D: TaskDesk> HostedTask<D> {
    pub fn new(desk: D) -> Self {
        Self { desk: Arc::new(desk) }
    }

    pub fn desk(&self) -> &Arc<D> {
        &self.desk
    }
}

#[async_trait]
impl<D: TaskDesk> HostedWorkflow for HostedTask<D> {
    fn name(&self) -> &str {
        D::NAME
    }

    fn description(&self) -> &str {
        D::DESCRIPTION
    }

    fn kind(&self) -> WorkflowKind<'_> {
        WorkflowKind::Task
    }

    fn graph(&self) -> GraphDescription {
        TaskDesk::runner(&*self.desk).graph().describe()
    }

    async fn recover(&self) -> Result<usize, WorkflowError> {
        Ok(TaskDesk::runner(&*self.desk).recover().await?)
    }

    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        Ok(TaskDesk::runner(&*self.desk).resume_abandoned(abandoned).await)
    }

    fn add_service(&self, routes: &mut RoutesBuilder, max_message_bytes: usize) -> Option<&'static ServiceAccess> {
        Some(D::add_service(self.desk.clone(), routes, max_message_bytes))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How a workflow is driven.
pub enum WorkflowKind<'a> {
    /// Through `ConversationService`.
    Conversational(&'a Conversations),
    /// Through its own service.
    Task,
}

impl WorkflowKind<'_> {
    pub fn to_proto(&self) -> pb::WorkflowKind {
        match self {
            WorkflowKind::Conversational(_) => pb::WorkflowKind::Conversational,
            WorkflowKind::Task => pb::WorkflowKind::Task,
        }
    }
}

/// A conversational workflow with its state views in their wire form: what
/// `ConversationService` serves, whatever the workflow.
pub type Conversations = dyn ConversationWorkflow<View = pb::conversation::State>;

/// How a conversational workflow's state view appears on the wire: its case of the
/// `Conversation.state` oneof. Implemented beside the workflow's adapter.
pub trait ProtoState {
    fn into_proto(self) -> pb::conversation::State;
}

/// A conversational workflow whose views are shown through [`ProtoState`].
struct OnTheWire<W>(W);

#[async_trait]
impl<W> ConversationWorkflow for OnTheWire<W>
where
    W: ConversationWorkflow,
    W::View: ProtoState,
{
    type View = pb::conversation::State;

    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        self.0.description()
    }

    fn graph(&self) -> GraphDescription {
        self.0.graph()
    }

    fn limits(&self) -> &ConversationLimits {
        self.0.limits()
    }

    async fn start(
        &self,
        tenant: &Tenant,
        id: Option<String>,
        idempotency_key: Option<String>,
    ) -> Result<(ConversationView<Self::View>, Message), WorkflowError> {
        let (view, welcome) = self.0.start(tenant, id, idempotency_key).await?;
        Ok((view.map(ProtoState::into_proto), welcome))
    }

    async fn send(
        &self,
        tenant: &Tenant,
        id: &str,
        text: &str,
        options: TurnOptions,
    ) -> Result<TurnHandle<Self::View>, WorkflowError> {
        Ok(self.0.send(tenant, id, text, options).await?.map(ProtoState::into_proto))
    }

    async fn get(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<Self::View>, WorkflowError> {
        Ok(self.0.get(tenant, id).await?.map(ProtoState::into_proto))
    }

    async fn summarize(
        &self,
        tenant: &Tenant,
        thread: &ThreadSummary,
    ) -> Result<ConversationView<Self::View>, WorkflowError> {
        Ok(self.0.summarize(tenant, thread).await?.map(ProtoState::into_proto))
    }

    async fn reset(&self, tenant: &Tenant, id: &str) -> Result<ConversationView<Self::View>, WorkflowError> {
        Ok(self.0.reset(tenant, id).await?.map(ProtoState::into_proto))
    }

    async fn delete(&self, tenant: &Tenant, id: &str) -> Result<(), WorkflowError> {
        self.0.delete(tenant, id).await
    }

    async fn recover(&self) -> Result<usize, WorkflowError> {
        self.0.recover().await
    }

    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        self.0.take_over(abandoned).await
    }

    async fn list(
        &self,
        tenant: &Tenant,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView<Self::View>>, Option<String>), WorkflowError> {
        let (views, next) = self.0.list(tenant, after, limit).await?;
        Ok((views.into_iter().map(|v| v.map(ProtoState::into_proto)).collect(), next))
    }
}

/// A conversational workflow as the server hosts it: everything it needs is on its
/// conversation host, and `ConversationService` is its service.
pub struct Conversational {
    conversations: Arc<Conversations>,
}

impl Conversational {
    pub fn new<W>(workflow: W) -> Self
    where
        W: ConversationWorkflow,
        W::View: ProtoState,
    {
        Conversational { conversations: Arc::new(OnTheWire(workflow)) }
    }
}

#[async_trait]
impl HostedWorkflow for Conversational {
    fn name(&self) -> &str {
        self.conversations.name()
    }

    fn description(&self) -> &str {
        self.conversations.description()
    }

    fn kind(&self) -> WorkflowKind<'_> {
        WorkflowKind::Conversational(&*self.conversations)
    }

    fn graph(&self) -> GraphDescription {
        self.conversations.graph()
    }

    async fn recover(&self) -> Result<usize, WorkflowError> {
        self.conversations.recover().await
    }

    async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        self.conversations.take_over(abandoned).await
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The shared parts every workflow is built on.
pub struct Wiring<'a> {
    pub database: &'a Database,
    /// The store of every workflow's threads, unless a workflow's settings choose another.
    pub checkpointer: &'a Arc<dyn Checkpointer>,
    pub llm: &'a LlmClient,
    pub runs: &'a Arc<RunRegistry>,
    pub runner_config: &'a RunnerConfig,
    pub conversation_limits: &'a ConversationLimits,
    /// Newest checkpoints kept per thread, for workflows that open a store of their own.
    pub checkpoint_retention: usize,
    pub parts: &'a Parts,
}

impl Wiring<'_> {
    /// A runner of `graph` on the shared store, registered for `CancelRun` and shutdown.
    pub fn runner<S: State>(&self, graph: Graph<S>) -> Runner<S> {
        self.runner_on(graph, self.checkpointer.clone())
    }

    /// A runner of `graph` on a store of the workflow's own.
    pub fn runner_on<S: State>(&self, graph: Graph<S>, checkpointer: Arc<dyn Checkpointer>) -> Runner<S> {
        Runner::new(graph, checkpointer, self.runner_config.clone()).with_registry(self.runs.clone())
    }
}

/// Parts a caller supplies to individual workflows in place of their configured ones (tests,
/// embedding), found by type: each workflow's module defines the part types it takes (intake's
/// `UseSubmitter`), so this type never names a workflow.
#[derive(Default)]
pub struct Parts(Vec<Box<dyn Any + Send + Sync>>);

impl Parts {
    pub fn with<T: Any + Send + Sync>(mut self, part: T) -> Self {
        self.0.push(Box::new(part));
        self
    }

    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.0.iter().find_map(|part| part.downcast_ref::<T>())
    }
}

/// A workflow module with its settings type erased, as [`WORKFLOWS`] lists it.
#[async_trait]
pub trait Registration: Send + Sync {
    fn name(&self) -> &'static str;
    /// The default settings, as configuration values.
    fn default_section(&self) -> Result<Value, SettingsError>;
    /// Reads a section with the workflow's settings type (the configuration's `Debug`, which
    /// shows the typed settings so that secrets stay as redacted as their types make them).
    fn read_section(&self, section: &Value) -> Result<Box<dyn fmt::Debug + Send + Sync>, SettingsError>;
    /// Checks that a loaded configuration, focused on the workflow's section, reads as its
    /// settings. Read from the figment itself, its errors name the file or variable at fault.
    fn check(&self, section: &figment::Figment) -> Result<(), SettingsError>;
    async fn build(&self, section: Option<&Value>, wiring: &Wiring<'_>) -> Result<Arc<dyn HostedWorkflow>, BuildError>;
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("invalid settings (workflows.{name})")]
    Settings {
        name: &'static str,
        #[source]
        source: SettingsError,
    },
    #[error("cannot set up workflow {name}")]
    Workflow {
        name: &'static str,
        #[source]
        source: BoxError,
    },
}

#[async_trait]
impl<M: WorkflowModule> Registration for M {
    fn name(&self) -> &'static str {
        M::NAME
    }

    fn default_section(&self) -> Result<Value, SettingsError> {
        Ok(Value::serialize(M::Settings::default())?)
    }

    fn read_section(&self, section: &Value) -> Result<Box<dyn fmt::Debug + Send + Sync>, SettingsError> {
        Ok(Box::new(section.deserialize::<M::Settings>()?))
    }

    fn check(&self, section: &figment::Figment) -> Result<(), SettingsError> {
        section.extract::<M::Settings>().map(drop).map_err(Box::new)
    }

    async fn build(&self, section: Option<&Value>, wiring: &Wiring<'_>) -> Result<Arc<dyn HostedWorkflow>, BuildError> {
        let settings = match section {
            Some(section) => section
                .deserialize::<M::Settings>()
                .map_err(|source| BuildError::Settings { name: M::NAME, source: Box::new(source) })?,
            None => M::Settings::default(),
        };
        WorkflowModule::build(self, settings, wiring)
            .await
            .map_err(|source| BuildError::Workflow { name: M::NAME, source })
    }
}

/// The registered workflow called `name`.
pub fn registration(name: &str) -> Option<&'static dyn Registration> {
    WORKFLOWS.iter().copied().find(|w| w.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_default_settings_serialize() {
        let mut names: Vec<&str> = WORKFLOWS.iter().map(|w| w.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WORKFLOWS.len(), "two workflows share a name");
        for workflow in WORKFLOWS {
            let section = workflow.default_section().expect("default settings serialize");
            workflow.read_section(&section).expect("default settings read back");
        }
    }
}
