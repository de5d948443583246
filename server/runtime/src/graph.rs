//! Graph definition: named nodes, static and conditional edges, validated when built.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fmt::Write as _,
    sync::Arc,
    time::Duration,
};

use crate::{node::Node, State};

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
type OutputFn<S> = Arc<dyn Fn(&S) -> serde_json::Value + Send + Sync>;

pub(crate) enum Edge<S> {
    Static(Target),
    Conditional { router: Router<S>, targets: Vec<Target> },
}

pub(crate) struct NodeEntry<S: State> {
    pub(crate) node: Arc<dyn Node<S>>,
    pub(crate) timeout: Option<Duration>,
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
}

/// When a run writes checkpoints besides the accepting commit (which always makes the input
/// durable before the run starts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// After every node: a crash loses at most the node in flight. For graphs whose nodes act
    /// on the world (submit a request, send a message), where re-running one is not harmless.
    #[default]
    EveryNode,
    /// When the run stops (END, an interrupt, a failure), plus a heartbeat commit after a node
    /// when the last commit is older than half of `RunnerConfig::takeover_after`, so a long run
    /// is never taken for abandoned. A crash re-runs the run's nodes from its input; only for
    /// graphs whose nodes have no effect outside the state, where that costs model calls only.
    /// Node events still stream as each node finishes.
    Exit,
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
        }
    }

    /// When runs write checkpoints; [`Durability::EveryNode`] unless set.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub fn node(mut self, name: impl Into<String>, node: impl Node<S>) -> Self {
        self.nodes.push((name.into(), NodeEntry { node: Arc::new(node), timeout: None }));
        self
    }

    /// A node with its own timeout, overriding the runner's default.
    pub fn node_with_timeout(mut self, name: impl Into<String>, node: impl Node<S>, timeout: Duration) -> Self {
        self.nodes.push((name.into(), NodeEntry { node: Arc::new(node), timeout: Some(timeout) }));
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

    /// What a finished run reports (and what an idempotent replay returns).
    pub fn output(mut self, output: impl Fn(&S) -> serde_json::Value + Send + Sync + 'static) -> Self {
        self.output = Some(Arc::new(output));
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
        let mut reached = BTreeSet::from([entry.clone()]);
        let mut queue = VecDeque::from([entry.clone()]);
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
            output: self.output.unwrap_or_else(|| Arc::new(|_| serde_json::Value::Null)),
            durability: self.durability,
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

    pub(crate) fn output(&self, state: &S) -> serde_json::Value {
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
            .map(|name| NodeInfo { name: name.clone(), description: self.nodes[name].node.description().to_owned() })
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
        let mermaid = mermaid(&nodes, &edges);
        GraphDescription { name: self.name.clone(), nodes, edges, mermaid }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub description: String,
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
}

fn mermaid(nodes: &[NodeInfo], edges: &[EdgeInfo]) -> String {
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(out, "    {START}([start])");
    let _ = writeln!(out, "    {END}([end])");
    for node in nodes {
        let _ = writeln!(out, "    {}[{}]", node.name, node.name);
    }
    for edge in edges {
        let arrow = if edge.conditional { "-.->" } else { "-->" };
        let _ = writeln!(out, "    {} {arrow} {}", edge.source, edge.target);
    }
    out
}
