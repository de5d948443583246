//! Graph definition: named nodes, static and conditional edges, validated when built.

use serde::Deserialize as _;
use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fmt::Write as _,
    sync::Arc,
    time::Duration,
};

use crate::{
    event::FailureKind,
    node::{Node, NodeContext, NodeError, NodeErrorKind, Resume, TaskNode},
    State,
};

pub const START: &str = "__start__";
pub const END: &str = "__end__";

/// Where an edge leads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    Node(String),
    End,
}

impl Target {
    pub fn node(name: impl Into<String>) -> Self {
        Target::Node(name.into())
    }

    fn name(&self) -> &str {
        match self {
            Target::Node(n) => n,
            Target::End => END,
        }
    }
}

type Router<S> = Arc<dyn Fn(&S) -> Target + Send + Sync>;
type OutputFn<S> = Arc<dyn Fn(&S) -> Result<serde_json::Value, serde_json::Error> + Send + Sync>;

pub(crate) enum Edge<S> {
    Static(Target),
    Conditional { router: Router<S>, targets: Vec<Target> },
}

/// What a graph node runs: one node, or the tasks of a fan-out.
pub(crate) enum NodeKind<S: State> {
    Single(Arc<dyn Node<S>>),
    FanOut(Arc<dyn FanOut<S>>),
}

pub(crate) struct NodeEntry<S: State> {
    pub(crate) kind: NodeKind<S>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retry: Option<RetryPolicy>,
    /// Acts outside the state: see [`NodeOptions::effects`].
    pub(crate) effects: bool,
}

impl<S: State> NodeEntry<S> {
    fn description(&self) -> &str {
        match &self.kind {
            NodeKind::Single(node) => node.description(),
            NodeKind::FanOut(fan_out) => fan_out.description(),
        }
    }
}

/// A fan-out node with its task type erased: task inputs travel as JSON, which is also how a
/// finished task's update is kept until its step completes.
#[async_trait::async_trait]
pub(crate) trait FanOut<S: State>: Send + Sync + 'static {
    fn dispatch(&self, state: &S) -> Result<Vec<serde_json::Value>, serde_json::Error>;
    async fn run_task(&self, state: &S, input: &serde_json::Value, ctx: &NodeContext) -> Result<S::Update, NodeError>;
    fn description(&self) -> &str;
}

struct TypedFanOut<T, D> {
    task: T,
    dispatch: D,
}

#[async_trait::async_trait]
impl<S, T, D> FanOut<S> for TypedFanOut<T, D>
where
    S: State,
    T: TaskNode<S>,
    D: Fn(&S) -> Vec<T::Input> + Send + Sync + 'static,
{
    fn dispatch(&self, state: &S) -> Result<Vec<serde_json::Value>, serde_json::Error> {
        (self.dispatch)(state).iter().map(serde_json::to_value).collect()
    }

    async fn run_task(&self, state: &S, input: &serde_json::Value, ctx: &NodeContext) -> Result<S::Update, NodeError> {
        let input = T::Input::deserialize(input)
            .map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "fan-out task input does not decode", e))?;
        self.task.run(state, input, ctx).await
    }

    fn description(&self) -> &str {
        self.task.description()
    }
}

/// How a node is run again after a failed attempt. Attempts count the first one; the delay
/// before attempt `n + 1` is drawn uniformly from zero to `initial_backoff * 2^(n - 1)`, capped
/// at `max_backoff` ("full jitter"), and no attempt starts that the run's deadline would cut.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Node error kinds that are retried. Validation failures (`InvalidInput`,
    /// `ModelOutputInvalid`, which the model client has already repaired once) are not by
    /// default: the same input fails the same way.
    pub retry_on: Vec<NodeErrorKind>,
    /// Whether a node timeout is retried (a run deadline never is).
    pub retry_timeouts: bool,
}

impl Default for RetryPolicy {
    /// Three attempts on transient failures: model transport errors, outside systems, timeouts.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(10),
            retry_on: vec![NodeErrorKind::ModelUnavailable, NodeErrorKind::DependencyFailed],
            retry_timeouts: true,
        }
    }
}

impl RetryPolicy {
    /// A policy of `max_attempts` attempts on the default transient failures.
    pub fn attempts(max_attempts: u32) -> Self {
        Self { max_attempts, ..Self::default() }
    }

    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    pub fn retrying(mut self, kinds: impl IntoIterator<Item = NodeErrorKind>) -> Self {
        self.retry_on = kinds.into_iter().collect();
        self
    }

    /// Whether a failed attempt is retried: a node error of a listed kind, or a node timeout.
    pub(crate) fn retries(&self, node_kind: Option<NodeErrorKind>, node_timeout: bool) -> bool {
        match node_kind {
            Some(kind) => self.retry_on.contains(&kind),
            None => node_timeout && self.retry_timeouts,
        }
    }

    /// The delay before attempt `attempt + 1`.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(20);
        let ceiling = self.initial_backoff.saturating_mul(1 << exponent).min(self.max_backoff);
        ceiling.mul_f64(rand::random::<f64>())
    }
}

/// Per-node settings.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Overrides the runner's default node timeout (per attempt).
    pub timeout: Option<Duration>,
    /// Overrides the graph's default retry policy.
    pub retry: Option<RetryPolicy>,
    /// The node acts outside the state (files a request, sends a message), so running it again
    /// is not harmless. Under [`Durability::ByEffect`] the run commits before and after it.
    pub effects: bool,
}

impl NodeOptions {
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Declares that the node acts outside the state ([`NodeOptions::effects`]). A crash while
    /// it runs still runs it again, with the same run id ([`crate::NodeContext::run_id`]), so
    /// its effect must be keyed by that id to happen once.
    pub fn with_effects(mut self) -> Self {
        self.effects = true;
        self
    }
}

/// Why a node failed for good, as the graph's failure route sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFailure {
    pub node: String,
    pub kind: FailureKind,
    pub message: String,
    /// Attempts made, counting the first.
    pub attempts: u32,
    /// The interrupt answer the node was resumed with when it failed. The answer is spent with
    /// the node: its interrupt cannot be answered again, so the failure route's `update` is the
    /// last place that can keep it (a person's reply the failed node had not yet recorded).
    pub answer: Option<Resume>,
}

type FailureUpdate<S> = Arc<dyn Fn(&NodeFailure) -> <S as State>::Update + Send + Sync>;

pub(crate) struct FailureRoute<S: State> {
    pub(crate) node: String,
    pub(crate) update: FailureUpdate<S>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    #[error("graph has no entry node")]
    NoEntry,
    #[error("node {0:?} is defined twice")]
    DuplicateNode(String),
    #[error("node name {0:?} is reserved")]
    ReservedName(String),
    #[error("edge from {from:?} leads to unknown node {to:?}")]
    UnknownTarget { from: String, to: String },
    #[error("edge starts at unknown node {0:?}")]
    UnknownSource(String),
    #[error("node {0:?} has more than one outgoing edge")]
    DuplicateEdge(String),
    #[error("node {0:?} has no outgoing edge")]
    NoOutgoingEdge(String),
    #[error("node {0:?} cannot be reached from the entry")]
    Unreachable(String),
    #[error("conditional edge from {0:?} declares no targets")]
    EmptyTargets(String),
    #[error("the failure route leads to unknown node {0:?}")]
    UnknownFailureNode(String),
}

/// Builds a [`Graph`]. Every node needs exactly one outgoing edge (static or conditional);
/// [`GraphBuilder::build`] rejects unknown targets and unreachable nodes.
pub struct GraphBuilder<S: State> {
    name: String,
    nodes: Vec<(String, NodeEntry<S>)>,
    edges: BTreeMap<String, Edge<S>>,
    duplicate_edges: Vec<String>,
    entry: Option<String>,
    max_steps: u32,
    output: Option<OutputFn<S>>,
    durability: Durability,
    default_retry: Option<RetryPolicy>,
    failure_route: Option<FailureRoute<S>>,
}

/// When a run writes checkpoints besides the accepting commit (which always makes the input
/// durable before the run starts) and the commit when it stops (END, an interrupt, a failure).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// After every node: a crash loses at most the node in flight. For graphs where a node's
    /// result must not be recomputed (a model's answer that later steps build on was shown to
    /// somebody, say), whatever the nodes do.
    #[default]
    EveryNode,
    /// Around effects: before a node declared with effects ([`NodeOptions::with_effects`]), if
    /// anything changed since the last commit, and after it; nothing between effect-free nodes.
    /// A crash re-runs at most the effect-free nodes since the last commit (model calls only),
    /// or the effectful node it interrupted, with the same run id. A long run also writes a
    /// heartbeat commit after a node when the last commit is older than half of
    /// `RunnerConfig::takeover_after`, so it is never taken for abandoned. Node events still
    /// stream as each node finishes.
    ByEffect,
    /// Nothing is written: the run lives in memory only and a crash forgets it. For graphs whose
    /// result only the caller uses before it commits to anything (triage's ticket matching picks
    /// the ticket a message joins; the message is accepted by the ticket's own run). Every run
    /// starts a new thread; idempotency keys, resumes and interrupts are refused
    /// ([`crate::RunError::Ephemeral`]).
    Ephemeral,
}

impl<S: State> GraphBuilder<S> {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            nodes: Vec::new(),
            edges: BTreeMap::new(),
            duplicate_edges: Vec::new(),
            entry: None,
            max_steps: 25,
            output: None,
            durability: Durability::EveryNode,
            default_retry: None,
            failure_route: None,
        }
    }

    /// When runs write checkpoints; [`Durability::EveryNode`] unless set.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub fn node(self, name: impl Into<String>, node: impl Node<S>) -> Self {
        self.node_with(name, node, NodeOptions::default())
    }

    /// A node with its own timeout, overriding the runner's default.
    pub fn node_with_timeout(self, name: impl Into<String>, node: impl Node<S>, timeout: Duration) -> Self {
        self.node_with(name, node, NodeOptions::default().timeout(timeout))
    }

    /// A node with its own timeout and retry policy.
    pub fn node_with(mut self, name: impl Into<String>, node: impl Node<S>, options: NodeOptions) -> Self {
        let NodeOptions { timeout, retry, effects } = options;
        self.nodes.push((name.into(), NodeEntry { kind: NodeKind::Single(Arc::new(node)), timeout, retry, effects }));
        self
    }

    /// A fan-out node: when the run reaches it, `dispatch` gives one input per task, the tasks
    /// run concurrently under the run's deadline and cancellation (each with the node's timeout
    /// and retry policy), and their updates are applied in dispatch order once all have
    /// finished. Each finished task's update is committed as a pending write, so a crash
    /// re-runs only the tasks that had not finished. No tasks is a step that changes nothing.
    pub fn fan_out<T, D>(self, name: impl Into<String>, task: T, dispatch: D) -> Self
    where
        T: TaskNode<S>,
        D: Fn(&S) -> Vec<T::Input> + Send + Sync + 'static,
    {
        self.fan_out_with(name, task, dispatch, NodeOptions::default())
    }

    /// [`GraphBuilder::fan_out`] with per-task timeout and retry policy.
    pub fn fan_out_with<T, D>(mut self, name: impl Into<String>, task: T, dispatch: D, options: NodeOptions) -> Self
    where
        T: TaskNode<S>,
        D: Fn(&S) -> Vec<T::Input> + Send + Sync + 'static,
    {
        let NodeOptions { timeout, retry, effects } = options;
        let kind = NodeKind::FanOut(Arc::new(TypedFanOut { task, dispatch }));
        self.nodes.push((name.into(), NodeEntry { kind, timeout, retry, effects }));
        self
    }

    /// The retry policy of nodes without one of their own (none unless set).
    pub fn default_retry(mut self, policy: RetryPolicy) -> Self {
        self.default_retry = Some(policy);
        self
    }

    /// Where a run goes when a node fails for good (its retries exhausted, or a failure that is
    /// not retried) or the run hits its step limit, instead of failing: `update` records the
    /// failure in the state, and the run continues at `node` with a fresh step budget. A second
    /// failure after that, cancellation, deadlines and store failures still fail the run.
    pub fn on_failure(
        mut self,
        node: impl Into<String>,
        update: impl Fn(&NodeFailure) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        self.failure_route = Some(FailureRoute { node: node.into(), update: Arc::new(update) });
        self
    }

    pub fn entry(mut self, name: impl Into<String>) -> Self {
        self.entry = Some(name.into());
        self
    }

    pub fn edge(mut self, from: impl Into<String>, to: Target) -> Self {
        self.insert_edge(from.into(), Edge::Static(to));
        self
    }

    /// An edge chosen at run time by `router` among the declared `targets`. A router that
    /// returns an undeclared target fails the run rather than jumping somewhere unplanned.
    pub fn conditional_edge(
        mut self,
        from: impl Into<String>,
        targets: impl IntoIterator<Item = Target>,
        router: impl Fn(&S) -> Target + Send + Sync + 'static,
    ) -> Self {
        let targets = targets.into_iter().collect();
        self.insert_edge(from.into(), Edge::Conditional { router: Arc::new(router), targets });
        self
    }

    /// Guards against loops: a run that executes more nodes than this fails.
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// What a finished run reports (and what an idempotent replay returns). An output that
    /// cannot be encoded fails the run (`RunError::OutputCodec`) before its end is recorded,
    /// rather than reporting `null`.
    pub fn output<O: serde::Serialize>(mut self, output: impl Fn(&S) -> O + Send + Sync + 'static) -> Self {
        self.output = Some(Arc::new(move |state| serde_json::to_value(output(state))));
        self
    }

    fn insert_edge(&mut self, from: String, edge: Edge<S>) {
        if self.edges.insert(from.clone(), edge).is_some() {
            self.duplicate_edges.push(from);
        }
    }

    pub fn build(self) -> Result<Graph<S>, GraphError> {
        let mut nodes = BTreeMap::new();
        let mut order = Vec::new();
        for (name, entry) in self.nodes {
            if name == START || name == END {
                return Err(GraphError::ReservedName(name));
            }
            if nodes.contains_key(&name) {
                return Err(GraphError::DuplicateNode(name));
            }
            order.push(name.clone());
            nodes.insert(name, entry);
        }
        if let Some(dup) = self.duplicate_edges.into_iter().next() {
            return Err(GraphError::DuplicateEdge(dup));
        }
        let entry = self.entry.ok_or(GraphError::NoEntry)?;
        if !nodes.contains_key(&entry) {
            return Err(GraphError::UnknownTarget { from: START.into(), to: entry });
        }
        for (from, edge) in &self.edges {
            if !nodes.contains_key(from) {
                return Err(GraphError::UnknownSource(from.clone()));
            }
            let targets = match edge {
                Edge::Static(t) => std::slice::from_ref(t),
                Edge::Conditional { targets, .. } if targets.is_empty() => {
                    return Err(GraphError::EmptyTargets(from.clone()))
                }
                Edge::Conditional { targets, .. } => targets.as_slice(),
            };
            for target in targets {
                if let Target::Node(to) = target {
                    if !nodes.contains_key(to) {
                        return Err(GraphError::UnknownTarget { from: from.clone(), to: to.clone() });
                    }
                }
            }
        }
        for name in &order {
            if !self.edges.contains_key(name) {
                return Err(GraphError::NoOutgoingEdge(name.clone()));
            }
        }
        if let Some(route) = &self.failure_route {
            if !nodes.contains_key(&route.node) {
                return Err(GraphError::UnknownFailureNode(route.node.clone()));
            }
        }
        // Any node may fail, so the failure route's node counts as reachable from the entry.
        let mut reached = BTreeSet::from([entry.clone()]);
        let mut queue = VecDeque::from([entry.clone()]);
        if let Some(route) = &self.failure_route {
            if reached.insert(route.node.clone()) {
                queue.push_back(route.node.clone());
            }
        }
        while let Some(name) = queue.pop_front() {
            let targets: Vec<&Target> = match &self.edges[&name] {
                Edge::Static(t) => vec![t],
                Edge::Conditional { targets, .. } => targets.iter().collect(),
            };
            for target in targets {
                if let Target::Node(to) = target {
                    if reached.insert(to.clone()) {
                        queue.push_back(to.clone());
                    }
                }
            }
        }
        if let Some(unreached) = order.iter().find(|n| !reached.contains(*n)) {
            return Err(GraphError::Unreachable(unreached.clone()));
        }
        Ok(Graph {
            name: self.name,
            order,
            nodes,
            edges: self.edges,
            entry,
            max_steps: self.max_steps,
            output: self.output.unwrap_or_else(|| Arc::new(|_| Ok(serde_json::Value::Null))),
            durability: self.durability,
            default_retry: self.default_retry,
            failure_route: self.failure_route,
        })
    }
}

/// A validated graph, shared by every run of its workflow.
pub struct Graph<S: State> {
    name: String,
    order: Vec<String>,
    pub(crate) nodes: BTreeMap<String, NodeEntry<S>>,
    edges: BTreeMap<String, Edge<S>>,
    pub(crate) entry: String,
    pub(crate) max_steps: u32,
    output: OutputFn<S>,
    durability: Durability,
    pub(crate) default_retry: Option<RetryPolicy>,
    pub(crate) failure_route: Option<FailureRoute<S>>,
}

/// Why a router's choice could not be followed.
#[derive(Debug)]
pub(crate) struct UndeclaredTarget {
    pub(crate) target: Target,
}

impl<S: State> Graph<S> {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The same graph with another [`Durability`]: an operator may trade a workflow's
    /// checkpoint writes for re-running more after a crash, or the other way round.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub(crate) fn output(&self, state: &S) -> Result<serde_json::Value, serde_json::Error> {
        (self.output)(state)
    }

    /// The node after `from`, given the state after `from` ran.
    pub(crate) fn next(&self, from: &str, state: &S) -> Result<Target, UndeclaredTarget> {
        match &self.edges[from] {
            Edge::Static(target) => Ok(target.clone()),
            Edge::Conditional { router, targets } => {
                let target = router(state);
                if targets.contains(&target) {
                    Ok(target)
                } else {
                    Err(UndeclaredTarget { target })
                }
            }
        }
    }

    pub fn describe(&self) -> GraphDescription {
        let nodes: Vec<NodeInfo> = self
            .order
            .iter()
            .map(|name| {
                let entry = &self.nodes[name];
                NodeInfo {
                    name: name.clone(),
                    description: entry.description().to_owned(),
                    fan_out: matches!(entry.kind, NodeKind::FanOut(_)),
                    effects: entry.effects,
                }
            })
            .collect();
        let mut edges = vec![EdgeInfo { source: START.into(), target: self.entry.clone(), conditional: false }];
        for name in &self.order {
            match &self.edges[name] {
                Edge::Static(t) => {
                    edges.push(EdgeInfo { source: name.clone(), target: t.name().to_owned(), conditional: false })
                }
                Edge::Conditional { targets, .. } => edges.extend(targets.iter().map(|t| EdgeInfo {
                    source: name.clone(),
                    target: t.name().to_owned(),
                    conditional: true,
                })),
            }
        }
        let failure_node = self.failure_route.as_ref().map(|route| route.node.clone());
        let mermaid = mermaid(&nodes, &edges, failure_node.as_deref());
        GraphDescription { name: self.name.clone(), nodes, edges, mermaid, failure_node }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub description: String,
    /// True for a fan-out node (its tasks run concurrently).
    pub fan_out: bool,
    /// True for a node that acts outside the state ([`NodeOptions::effects`]).
    pub effects: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EdgeInfo {
    pub source: String,
    pub target: String,
    pub conditional: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GraphDescription {
    pub name: String,
    pub nodes: Vec<NodeInfo>,
    pub edges: Vec<EdgeInfo>,
    pub mermaid: String,
    /// Where a node that fails for good, or a run at its step limit, continues.
    pub failure_node: Option<String>,
}

fn mermaid(nodes: &[NodeInfo], edges: &[EdgeInfo], failure_node: Option<&str>) -> String {
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(out, "    {START}([start])");
    let _ = writeln!(out, "    {END}([end])");
    for node in nodes {
        if node.fan_out {
            // A stacked shape: several tasks of the node run at once.
            let _ = writeln!(out, "    {}[[{}]]", node.name, node.name);
        } else {
            let _ = writeln!(out, "    {}[{}]", node.name, node.name);
        }
    }
    if let Some(node) = failure_node {
        let _ = writeln!(out, "    __failure__{{{{on failure}}}} -.-> {node}");
    }
    for edge in edges {
        let arrow = if edge.conditional { "-.->" } else { "-->" };
        let _ = writeln!(out, "    {} {arrow} {}", edge.source, edge.target);
    }
    out
}
