//! The service call's flow configuration (`config/service_call/agent_config.json`): the agent
//! profiles, the node DAG a call walks from greeting to hang-up, the context's fields and their
//! initial values, and how MCP tool results fill the context. A business user changes the flow
//! by editing the file; no code names a node.
//!
//! [`AgentConfig::parse`] validates the whole file and reports every problem at once, each
//! naming its node and field ([`ConfigErrors`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::WorkflowError;

/// The flow shipped with Frontdesk.
pub const SHIPPED: &str = include_str!("../../../../config/service_call/agent_config.json");

/// Where [`SHIPPED`] comes from, as error messages name it.
pub const SHIPPED_PATH: &str = "config/service_call/agent_config.json";

/// The `agent_profile_type` of internal nodes, which no agent runs.
pub const INTERNAL_PROFILE: &str = "internal";
/// The profile of the agent that runs reply nodes.
pub const REPLY_PROFILE: &str = "worker_reply_agent";
/// The profile of the agent that runs MCP nodes (tool calls and extractions).
pub const MCP_PROFILE: &str = "worker_mcp_agent";
/// The profile of the agent that picks the next node.
pub const NAVIGATOR_PROFILE: &str = "node_navigator_agent";

/// The only merge rule for arrays (the context's merge is non-destructive).
pub const APPEND_RULE: &str = "APPEND";
/// The only merge rule for scalar fields.
pub const UPDATE_IF_MEANINGFUL_RULE: &str = "UPDATE if meaningful";

/// The whole flow configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Agent profiles by name: `worker_reply_agent`, `worker_mcp_agent`, `node_navigator_agent`.
    #[serde(rename = "AGENT_PROFILE")]
    pub agent_profile: BTreeMap<String, AgentProfile>,
    #[serde(default)]
    pub context_update_rules: ContextUpdateRules,
    /// The node a call starts at.
    pub entry_node: String,
    pub nodes: Vec<NodeConfig>,
    pub global_context_schema_semantics: ContextSchema,
    pub initial_context_template: InitialContextTemplate,
    /// Tool name → context field → JSON pointer into the tool's structured result
    /// ([`crate::service_call::context::Context::map_tool_result`]).
    #[serde(default)]
    pub mcp_result_mapping: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    pub token_budget: TokenBudget,
}

/// What an agent is and does, shown to it in its prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    pub role: String,
    #[serde(default)]
    pub responsibilities: Vec<String>,
}

/// How updates merge into the context. The context implements exactly one behaviour (arrays
/// append, scalars update only with a meaningful value); the file states it so a reader sees
/// it, and validation rejects any other rule rather than silently ignoring it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextUpdateRules {
    pub merge_behavior: MergeBehavior,
}

impl Default for ContextUpdateRules {
    fn default() -> Self {
        Self {
            merge_behavior: MergeBehavior {
                arrays: MergeRule { rule: APPEND_RULE.to_owned() },
                scalar_fields: MergeRule { rule: UPDATE_IF_MEANINGFUL_RULE.to_owned() },
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeBehavior {
    pub arrays: MergeRule,
    pub scalar_fields: MergeRule,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeRule {
    pub rule: String,
}

/// One node of the flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub node_name: String,
    pub node_action: NodeAction,
    /// The agent that runs the node: `worker_reply_agent` for reply nodes, `worker_mcp_agent`
    /// for MCP nodes, `internal` for internal nodes.
    pub agent_profile_type: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub node_goal: String,
    /// Examples of what to say or do, in the design's style (one or two sentences).
    #[serde(default)]
    pub prompt_templates: String,
    /// Where the flow goes when no branching condition holds; `null` ends the flow.
    #[serde(default)]
    pub default_next_node: Option<String>,
    /// Alternatives to the default, in the order the navigator weighs them.
    #[serde(default)]
    pub branching_conditions: Vec<BranchingCondition>,
    /// The context fields this node fills.
    #[serde(default)]
    pub expected_context_fields: Vec<String>,
    /// Whether this MCP node extracts its fields from the conversation rather than calling
    /// tools. When absent: an MCP node whose name contains "extract" (in any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction: Option<bool>,
    /// The MCP tools a tool node is offered, by name. When absent, every tool of the configured
    /// MCP servers (each definition costs prompt tokens in every round of the node).
    /// Names are checked against the servers' tools when those are known
    /// ([`AgentConfig::check_tools`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// What a node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeAction {
    /// Says something to the customer.
    Reply,
    /// Calls MCP tools or extracts context fields from the conversation.
    Mcp,
    /// Run by no agent (routing only).
    Internal,
}

impl NodeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeAction::Reply => "reply",
            NodeAction::Mcp => "mcp",
            NodeAction::Internal => "internal",
        }
    }

    /// The `agent_profile_type` a node of this action must name.
    pub fn profile(self) -> &'static str {
        match self {
            NodeAction::Reply => REPLY_PROFILE,
            NodeAction::Mcp => MCP_PROFILE,
            NodeAction::Internal => INTERNAL_PROFILE,
        }
    }
}

impl fmt::Display for NodeAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A free-text condition the navigator judges, and the node it leads to (`null`: none, the
/// condition only informs the decision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchingCondition {
    pub condition: String,
    #[serde(default)]
    pub child_node: Option<String>,
}

/// The context's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSchema {
    /// Fields a call must have filled before it can be acted on.
    #[serde(default)]
    pub mandatory_fields: Vec<String>,
    /// Every context field by name. A model can fill only these.
    pub field_semantics: BTreeMap<String, FieldSemantics>,
}

/// What a context field means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSemantics {
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Must agree with `mandatory_fields`.
    #[serde(default)]
    pub mandatory: bool,
    #[serde(default)]
    pub description: String,
    /// Which node or agent fills the field (documentation).
    #[serde(default)]
    pub updated_by: String,
}

/// A context field's JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Boolean,
    Number,
    Array,
    Object,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
            FieldType::Number => "number",
            FieldType::Array => "array",
            FieldType::Object => "object",
        }
    }

    /// Whether `value` is of this type (`null` is of none).
    pub fn matches(self, value: &Value) -> bool {
        matches!(
            (self, value),
            (FieldType::String, Value::String(_))
                | (FieldType::Boolean, Value::Bool(_))
                | (FieldType::Number, Value::Number(_))
                | (FieldType::Array, Value::Array(_))
                | (FieldType::Object, Value::Object(_))
        )
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The context a call starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitialContextTemplate {
    pub template: Map<String, Value>,
}

/// How much of the conversation each agent is shown (the design's token optimisation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokenBudget {
    /// Latest exchanges shown to the navigator.
    pub navigator_exchanges: usize,
    /// Latest exchanges shown to a reply node's agent.
    pub reply_exchanges: usize,
    /// Latest exchanges an extraction node reads.
    pub extraction_exchanges: usize,
    /// A node's `prompt_templates` is cut to this many characters in prompts.
    pub prompt_example_chars: usize,
}

impl Default for TokenBudget {
    fn default() -> Self {
        Self { navigator_exchanges: 2, reply_exchanges: 5, extraction_exchanges: 10, prompt_example_chars: 200 }
    }
}

/// One problem of a configuration: where it is (the node, when it is in one, and the field)
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    pub node: Option<String>,
    pub field: String,
    pub problem: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(node) = &self.node {
            write!(f, "node {node}: ")?;
        }
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigProblem {}

/// Every problem of a configuration, displayed one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigProblem>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects problems while validating.
#[derive(Default)]
struct Problems(Vec<ConfigProblem>);

impl Problems {
    fn node(&mut self, node: &str, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(ConfigProblem { node: Some(node.to_owned()), field: field.into(), problem: problem.into() });
    }

    fn global(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(ConfigProblem { node: None, field: field.into(), problem: problem.into() });
    }
}

impl AgentConfig {
    /// The shipped flow ([`SHIPPED`]), which a test proves valid.
    pub fn shipped() -> Self {
        Self::parse(SHIPPED, SHIPPED_PATH).expect("the shipped service_call config is valid")
    }

    pub fn load(path: &Path) -> Result<Self, WorkflowError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| WorkflowError::Config { path: path.display().to_string(), source: e.into() })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates a configuration; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, WorkflowError> {
        let config: AgentConfig = serde_json::from_str(text)
            .map_err(|e| WorkflowError::Config { path: origin.to_owned(), source: e.into() })?;
        config.validate().map_err(|e| WorkflowError::Config { path: origin.to_owned(), source: Box::new(e) })?;
        Ok(config)
    }

    pub fn node(&self, name: &str) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.node_name == name)
    }

    /// The entry node. Panics on a configuration that was not validated and lacks it.
    pub fn entry(&self) -> &NodeConfig {
        self.node(&self.entry_node).expect("a validated config has its entry node")
    }

    /// An agent profile by name (`worker_reply_agent`, `node_navigator_agent`, ...).
    pub fn profile(&self, name: &str) -> Option<&AgentProfile> {
        self.agent_profile.get(name)
    }

    /// A context field's semantics.
    pub fn field(&self, name: &str) -> Option<&FieldSemantics> {
        self.global_context_schema_semantics.field_semantics.get(name)
    }

    /// Whether `node` extracts context fields from the conversation (rather than calling
    /// tools): its `extraction` flag, or when absent an MCP node whose name contains "extract".
    pub fn is_extraction(&self, node: &NodeConfig) -> bool {
        node.extraction
            .unwrap_or_else(|| node.node_action == NodeAction::Mcp && node.node_name.to_lowercase().contains("extract"))
    }

    /// The nodes `node` can lead to: its default, then every condition's child, each once, in
    /// that order.
    pub fn children<'a>(&self, node: &'a NodeConfig) -> Vec<&'a str> {
        let mut children: Vec<&str> = Vec::new();
        let candidates =
            node.default_next_node.iter().chain(node.branching_conditions.iter().filter_map(|c| c.child_node.as_ref()));
        for child in candidates {
            if !children.contains(&child.as_str()) {
                children.push(child);
            }
        }
        children
    }

    /// Whether tool node `node` is offered the MCP tool `tool`: it is one its `tools` names, or
    /// it names none (every tool).
    pub fn offers_tool(&self, node: &NodeConfig, tool: &str) -> bool {
        node.tools.as_ref().is_none_or(|tools| tools.iter().any(|t| t == tool))
    }

    /// The first node (in configuration order) that fills `field`.
    pub fn producer_of(&self, field: &str) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.expected_context_fields.iter().any(|f| f == field))
    }

    /// Every problem of the configuration, or none.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        let mut problems = Problems::default();
        self.check_nodes(&mut problems);
        self.check_profiles(&mut problems);
        self.check_fields(&mut problems);
        self.check_merge_rules(&mut problems);
        if problems.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(problems.0))
        }
    }

    /// Names, links and reachability.
    fn check_nodes(&self, problems: &mut Problems) {
        if self.nodes.is_empty() {
            problems.global("nodes", "no nodes are configured");
        }
        let mut seen = BTreeSet::new();
        let mut reported = BTreeSet::new();
        for node in &self.nodes {
            if node.node_name.trim().is_empty() {
                problems.global("nodes", "a node has an empty node_name");
            } else if !seen.insert(node.node_name.as_str()) && reported.insert(node.node_name.as_str()) {
                problems.node(&node.node_name, "node_name", "is defined more than once");
            }
        }
        let known = |name: &str| seen.contains(name);
        if !self.nodes.is_empty() && !known(&self.entry_node) {
            problems.global("entry_node", format!("unknown node {:?}", self.entry_node));
        }
        for node in &self.nodes {
            if let Some(next) = &node.default_next_node {
                if !known(next) {
                    problems.node(&node.node_name, "default_next_node", format!("unknown node {next:?}"));
                }
            }
            for (i, condition) in node.branching_conditions.iter().enumerate() {
                if let Some(child) = &condition.child_node {
                    if !known(child) {
                        problems.node(
                            &node.node_name,
                            format!("branching_conditions[{i}].child_node"),
                            format!("unknown node {child:?}"),
                        );
                    }
                }
            }
        }
        if known(&self.entry_node) {
            let mut reached = BTreeSet::from([self.entry_node.as_str()]);
            let mut queue = VecDeque::from([self.entry_node.as_str()]);
            while let Some(name) = queue.pop_front() {
                let Some(node) = self.node(name) else { continue };
                for child in self.children(node) {
                    if known(child) && reached.insert(child) {
                        queue.push_back(child);
                    }
                }
            }
            let mut reported = BTreeSet::new();
            for node in &self.nodes {
                if !reached.contains(node.node_name.as_str()) && reported.insert(node.node_name.as_str()) {
                    problems.node(
                        &node.node_name,
                        "node_name",
                        format!(
                            "not reachable from the entry node {:?} (no default_next_node or child_node leads here)",
                            self.entry_node
                        ),
                    );
                }
            }
        }
    }

    /// Each node is run by the agent its action needs, and that agent has a profile.
    fn check_profiles(&self, problems: &mut Problems) {
        if !self.agent_profile.contains_key(NAVIGATOR_PROFILE) {
            problems.global(
                "AGENT_PROFILE",
                format!("missing the profile {NAVIGATOR_PROFILE:?} (the agent that picks the next node)"),
            );
        }
        for node in &self.nodes {
            let expected = node.node_action.profile();
            if node.agent_profile_type != expected {
                problems.node(
                    &node.node_name,
                    "agent_profile_type",
                    format!("{} nodes are run by {expected:?}, not {:?}", node.node_action, node.agent_profile_type),
                );
            } else if expected != INTERNAL_PROFILE && !self.agent_profile.contains_key(expected) {
                problems.node(
                    &node.node_name,
                    "agent_profile_type",
                    format!("unknown agent profile {expected:?} (not in AGENT_PROFILE)"),
                );
            }
            if node.extraction == Some(true) && node.node_action != NodeAction::Mcp {
                problems.node(
                    &node.node_name,
                    "extraction",
                    format!("only mcp nodes can be extraction nodes (this is a {} node)", node.node_action),
                );
            }
            if self.is_extraction(node) && node.expected_context_fields.is_empty() {
                problems.node(
                    &node.node_name,
                    "expected_context_fields",
                    "an extraction node must name the fields it extracts",
                );
            }
            if let Some(tools) = &node.tools {
                if node.node_action != NodeAction::Mcp || self.is_extraction(node) {
                    let what = if node.node_action == NodeAction::Mcp {
                        "an extraction node".to_owned()
                    } else {
                        format!("a {} node", node.node_action)
                    };
                    problems.node(&node.node_name, "tools", format!("only tool nodes call tools (this is {what})"));
                } else if tools.is_empty() {
                    problems.node(
                        &node.node_name,
                        "tools",
                        "is empty: a tool node needs a tool (leave the key out to offer every tool)",
                    );
                }
                let mut seen = BTreeSet::new();
                for tool in tools {
                    if tool.trim().is_empty() {
                        problems.node(&node.node_name, "tools", "a tool name is empty");
                    } else if !seen.insert(tool.as_str()) {
                        problems.node(&node.node_name, "tools", format!("{tool:?} is listed more than once"));
                    }
                }
            }
        }
    }

    /// Checks the tool names of the flow against the tools the MCP servers offer (known only once
    /// they are connected): every node's `tools` and every tool of `mcp_result_mapping` must be
    /// one of them. Every problem is reported at once, like [`AgentConfig::validate`]'s.
    pub fn check_tools(&self, offered: &[&str]) -> Result<(), ConfigErrors> {
        let mut problems = Problems::default();
        let known = || {
            if offered.is_empty() {
                "the MCP servers offer no tools".to_owned()
            } else {
                format!("the MCP servers offer: {}", offered.join(", "))
            }
        };
        for node in &self.nodes {
            for tool in node.tools.iter().flatten() {
                if !offered.contains(&tool.as_str()) {
                    problems.node(&node.node_name, "tools", format!("unknown tool {tool:?} ({})", known()));
                }
            }
        }
        for tool in self.mcp_result_mapping.keys() {
            if !offered.contains(&tool.as_str()) {
                problems.global(format!("mcp_result_mapping.{tool}"), format!("unknown tool {tool:?} ({})", known()));
            }
        }
        if problems.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(problems.0))
        }
    }

    /// Every field named anywhere has semantics; mandatory fields are consistent, start in the
    /// template and are filled by some node; the template's values have their fields' types.
    fn check_fields(&self, problems: &mut Problems) {
        let schema = &self.global_context_schema_semantics;
        let template = &self.initial_context_template.template;
        for node in &self.nodes {
            for field in &node.expected_context_fields {
                if self.field(field).is_none() {
                    problems.node(
                        &node.node_name,
                        "expected_context_fields",
                        format!("unknown context field {field:?} (not in field_semantics)"),
                    );
                }
            }
        }
        for field in &schema.mandatory_fields {
            let location = "global_context_schema_semantics.mandatory_fields";
            match self.field(field) {
                None => problems.global(location, format!("{field:?} has no field_semantics")),
                Some(semantics) if !semantics.mandatory => problems.global(
                    format!("global_context_schema_semantics.field_semantics.{field}.mandatory"),
                    "is false, but the field is in mandatory_fields",
                ),
                Some(_) => {}
            }
            if !template.contains_key(field) {
                problems.global(location, format!("{field:?} is not in initial_context_template.template"));
            }
            if self.producer_of(field).is_none() {
                problems.global(
                    location,
                    format!("{field:?} is in no node's expected_context_fields, so no node fills it"),
                );
            }
        }
        for (name, semantics) in &schema.field_semantics {
            if semantics.mandatory && !schema.mandatory_fields.contains(name) {
                problems.global(
                    format!("global_context_schema_semantics.field_semantics.{name}.mandatory"),
                    "is true, but the field is not in mandatory_fields",
                );
            }
        }
        for (name, value) in template {
            let location = format!("initial_context_template.template.{name}");
            match self.field(name) {
                None => problems.global(location, "the field has no field_semantics"),
                Some(semantics) if !value.is_null() && !semantics.kind.matches(value) => problems
                    .global(location, format!("the field is of type {}, its initial value is not", semantics.kind)),
                Some(_) => {}
            }
        }
        for (tool, mapping) in &self.mcp_result_mapping {
            for (field, pointer) in mapping {
                let location = format!("mcp_result_mapping.{tool}.{field}");
                if self.field(field).is_none() {
                    problems.global(&location, format!("unknown context field {field:?} (not in field_semantics)"));
                }
                if !pointer.is_empty() && !pointer.starts_with('/') {
                    problems.global(location, format!("{pointer:?} is not a JSON pointer (\"/a/b\")"));
                }
            }
        }
    }

    fn check_merge_rules(&self, problems: &mut Problems) {
        let behavior = &self.context_update_rules.merge_behavior;
        for (field, rule, supported) in [
            ("arrays", &behavior.arrays.rule, APPEND_RULE),
            ("scalar_fields", &behavior.scalar_fields.rule, UPDATE_IF_MEANINGFUL_RULE),
        ] {
            if !rule.trim().eq_ignore_ascii_case(supported) {
                problems.global(
                    format!("context_update_rules.merge_behavior.{field}.rule"),
                    format!("unsupported rule {rule:?} (the only one is {supported:?})"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped_json() -> Value {
        serde_json::from_str(SHIPPED).unwrap()
    }

    fn parse(json: &Value) -> Result<AgentConfig, Vec<String>> {
        match AgentConfig::parse(&json.to_string(), "test.json") {
            Ok(config) => Ok(config),
            Err(WorkflowError::Config { path, source }) => {
                assert_eq!(path, "test.json");
                let errors =
                    source.downcast_ref::<ConfigErrors>().unwrap_or_else(|| panic!("not a ConfigErrors: {source}"));
                Err(errors.0.iter().map(ToString::to_string).collect())
            }
            Err(other) => panic!("unexpected error {other}"),
        }
    }

    /// The problems of the shipped config after `edit`.
    fn problems_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
        let mut json = shipped_json();
        edit(&mut json);
        parse(&json).expect_err("the edited config is invalid")
    }

    fn node_mut<'a>(json: &'a mut Value, name: &str) -> &'a mut Value {
        json["nodes"].as_array_mut().unwrap().iter_mut().find(|n| n["node_name"] == name).unwrap()
    }

    #[test]
    fn the_shipped_config_loads_with_17_reachable_nodes() {
        let config = AgentConfig::shipped();
        assert_eq!(config.nodes.len(), 17);
        assert_eq!(config.entry().node_name, "GREET_CUSTOMER");
        assert_eq!(config.entry_node, "GREET_CUSTOMER");
        // Reachability is validated; check it independently here too.
        let mut reached = BTreeSet::from([config.entry_node.clone()]);
        let mut queue = vec![config.entry()];
        while let Some(node) = queue.pop() {
            for child in config.children(node) {
                if reached.insert(child.to_owned()) {
                    queue.push(config.node(child).unwrap());
                }
            }
        }
        assert_eq!(reached.len(), 17);
        let hangup = config.node("Execute_Call_Hangup").unwrap();
        assert_eq!(hangup.default_next_node, None);
        assert_eq!(config.children(hangup), ["Execute_Call_Hangup"]);
        // Extraction: auto-detected from the node name.
        let extractions: Vec<&str> =
            config.nodes.iter().filter(|n| config.is_extraction(n)).map(|n| n.node_name.as_str()).collect();
        assert_eq!(extractions, ["Extract_Customer_Issue", "Extract_Customer_Contact_Info"]);
        assert_eq!(config.producer_of("customers_main_ask").unwrap().node_name, "Extract_Customer_Issue");
        assert_eq!(config.producer_of("customer_phone_number").unwrap().node_name, "Extract_Customer_Contact_Info");
        assert_eq!(config.producer_of("customer_id").unwrap().node_name, "Check_IF_existing_customer");
        assert!(config.producer_of("who_are_you").is_none());
        assert_eq!(config.token_budget, TokenBudget::default());
        for profile in [REPLY_PROFILE, MCP_PROFILE, NAVIGATOR_PROFILE] {
            assert!(config.profile(profile).is_some(), "{profile}");
        }
        // The file on disk is what is compiled in.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(SHIPPED_PATH);
        assert_eq!(AgentConfig::load(&path).unwrap(), config);
    }

    #[test]
    fn children_are_the_default_then_condition_children_once_each() {
        let config = AgentConfig::shipped();
        let identify = config.node("Identify_Issue").unwrap();
        assert_eq!(config.children(identify), ["Empathize", "Extract_Customer_Issue"]);
        let mut node = identify.clone();
        node.branching_conditions
            .push(BranchingCondition { condition: "again".into(), child_node: Some("Empathize".into()) });
        node.branching_conditions.push(BranchingCondition { condition: "informative".into(), child_node: None });
        assert_eq!(config.children(&node), ["Empathize", "Extract_Customer_Issue"]);
    }

    #[test]
    fn a_duplicate_node_name_is_reported() {
        let problems = problems_after(|json| {
            let copy = node_mut(json, "Plan").clone();
            json["nodes"].as_array_mut().unwrap().push(copy);
        });
        assert_eq!(problems, ["node Plan: node_name: is defined more than once"]);
    }

    #[test]
    fn an_unknown_entry_node_is_reported() {
        let problems = problems_after(|json| json["entry_node"] = "GREET".into());
        assert_eq!(problems, [r#"entry_node: unknown node "GREET""#]);
    }

    #[test]
    fn an_unknown_default_next_node_is_reported() {
        // Plan's successor is then reached only through its other parents; none, so it is
        // unreachable too.
        let problems = problems_after(|json| node_mut(json, "Plan")["default_next_node"] = "Pln".into());
        assert_eq!(problems[0], r#"node Plan: default_next_node: unknown node "Pln""#);
    }

    #[test]
    fn an_unknown_child_node_is_reported() {
        let problems = problems_after(|json| {
            node_mut(json, "Empathize")["branching_conditions"][0]["child_node"] = "Extract_Issue".into();
        });
        assert_eq!(problems, [r#"node Empathize: branching_conditions[0].child_node: unknown node "Extract_Issue""#]);
    }

    #[test]
    fn an_unreachable_node_is_reported() {
        let problems = problems_after(|json| {
            json["nodes"].as_array_mut().unwrap().push(serde_json::json!({
                "node_name": "Upsell", "node_action": "reply", "agent_profile_type": "worker_reply_agent",
                "role": "a salesperson", "node_goal": "Offer a maintenance plan", "prompt_templates": "Offer it.",
                "default_next_node": "Goodbye_And_Hangup"
            }));
        });
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with(r#"node Upsell: node_name: not reachable from the entry node "GREET_CUSTOMER""#)
        );
    }

    #[test]
    fn an_unknown_agent_profile_is_reported() {
        let problems = problems_after(|json| {
            json["AGENT_PROFILE"].as_object_mut().unwrap().remove("worker_mcp_agent");
        });
        let config = AgentConfig::shipped();
        let mcp_nodes = config.nodes.iter().filter(|n| n.node_action == NodeAction::Mcp).count();
        assert_eq!(problems.len(), mcp_nodes);
        assert_eq!(
            problems[0],
            r#"node Extract_Customer_Issue: agent_profile_type: unknown agent profile "worker_mcp_agent" (not in AGENT_PROFILE)"#
        );
        let problems = problems_after(|json| {
            json["AGENT_PROFILE"].as_object_mut().unwrap().remove("node_navigator_agent");
        });
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with(r#"AGENT_PROFILE: missing the profile "node_navigator_agent""#));
    }

    #[test]
    fn an_action_and_profile_mismatch_is_reported() {
        let problems = problems_after(|json| {
            node_mut(json, "Plan")["agent_profile_type"] = "worker_reply_agent".into();
            node_mut(json, "Empathize")["agent_profile_type"] = "internal".into();
            node_mut(json, "Identify_Issue")["node_action"] = "internal".into();
        });
        assert_eq!(
            problems,
            [
                r#"node Identify_Issue: agent_profile_type: internal nodes are run by "internal", not "worker_reply_agent""#,
                r#"node Empathize: agent_profile_type: reply nodes are run by "worker_reply_agent", not "internal""#,
                r#"node Plan: agent_profile_type: mcp nodes are run by "worker_mcp_agent", not "worker_reply_agent""#,
            ]
        );
    }

    #[test]
    fn an_unknown_expected_context_field_is_reported() {
        let problems = problems_after(|json| {
            node_mut(json, "Plan")["expected_context_fields"].as_array_mut().unwrap().push("task_priority".into());
        });
        assert_eq!(
            problems,
            [r#"node Plan: expected_context_fields: unknown context field "task_priority" (not in field_semantics)"#]
        );
    }

    #[test]
    fn a_mandatory_field_without_semantics_is_reported() {
        let problems = problems_after(|json| {
            json["global_context_schema_semantics"]["field_semantics"]
                .as_object_mut()
                .unwrap()
                .remove("customer_phone_number");
        });
        // Also: the template holds a field without semantics, and the extraction node names it.
        assert!(problems.contains(
            &r#"global_context_schema_semantics.mandatory_fields: "customer_phone_number" has no field_semantics"#
                .to_owned()
        ));
        assert!(problems.contains(
            &"initial_context_template.template.customer_phone_number: the field has no field_semantics".to_owned()
        ));
    }

    #[test]
    fn a_mandatory_field_missing_from_the_template_is_reported() {
        let problems = problems_after(|json| {
            json["initial_context_template"]["template"].as_object_mut().unwrap().remove("customers_main_ask");
        });
        assert_eq!(
            problems,
            [
                r#"global_context_schema_semantics.mandatory_fields: "customers_main_ask" is not in initial_context_template.template"#
            ]
        );
    }

    #[test]
    fn a_mandatory_field_no_node_fills_is_reported() {
        let problems = problems_after(|json| {
            node_mut(json, "Extract_Customer_Issue")["expected_context_fields"] =
                serde_json::json!(["related_entities_for_customers_ask"]);
        });
        assert_eq!(
            problems,
            [
                r#"global_context_schema_semantics.mandatory_fields: "customers_main_ask" is in no node's expected_context_fields, so no node fills it"#
            ]
        );
    }

    #[test]
    fn mandatory_flags_must_agree_with_mandatory_fields() {
        let problems = problems_after(|json| {
            let fields = &mut json["global_context_schema_semantics"]["field_semantics"];
            fields["customer_email"]["mandatory"] = true.into();
            fields["customer_phone_number"]["mandatory"] = false.into();
        });
        assert_eq!(
            problems,
            [
                "global_context_schema_semantics.field_semantics.customer_phone_number.mandatory: is false, but the field is in mandatory_fields",
                "global_context_schema_semantics.field_semantics.customer_email.mandatory: is true, but the field is not in mandatory_fields",
            ]
        );
    }

    #[test]
    fn template_values_must_have_their_fields_types() {
        let problems = problems_after(|json| {
            json["initial_context_template"]["template"]["flags"] = serde_json::json!([]);
            json["initial_context_template"]["template"]["favourite_colour"] = "".into();
        });
        assert_eq!(
            problems,
            [
                "initial_context_template.template.flags: the field is of type object, its initial value is not",
                "initial_context_template.template.favourite_colour: the field has no field_semantics",
            ]
        );
    }

    #[test]
    fn a_result_mapping_to_an_unknown_field_is_reported() {
        let problems = problems_after(|json| {
            json["mcp_result_mapping"]["customer_get"]["customer_idd"] = "/customer/id".into();
            json["mcp_result_mapping"]["task_create"]["task_id"] = "task/id".into();
        });
        assert_eq!(
            problems,
            [
                r#"mcp_result_mapping.customer_get.customer_idd: unknown context field "customer_idd" (not in field_semantics)"#,
                r#"mcp_result_mapping.task_create.task_id: "task/id" is not a JSON pointer ("/a/b")"#,
            ]
        );
    }

    #[test]
    fn an_unsupported_merge_rule_is_reported() {
        let problems = problems_after(|json| {
            json["context_update_rules"]["merge_behavior"]["arrays"]["rule"] = "REPLACE".into();
            json["context_update_rules"]["merge_behavior"]["scalar_fields"]["rule"] = "UPDATE always".into();
        });
        assert_eq!(
            problems,
            [
                r#"context_update_rules.merge_behavior.arrays.rule: unsupported rule "REPLACE" (the only one is "APPEND")"#,
                r#"context_update_rules.merge_behavior.scalar_fields.rule: unsupported rule "UPDATE always" (the only one is "UPDATE if meaningful")"#,
            ]
        );
    }

    #[test]
    fn extraction_is_only_for_mcp_nodes_that_name_their_fields() {
        let problems = problems_after(|json| {
            node_mut(json, "Empathize")["extraction"] = true.into();
            node_mut(json, "Extract_Customer_Contact_Info")["expected_context_fields"] = serde_json::json!([]);
        });
        assert!(problems.contains(
            &"node Empathize: extraction: only mcp nodes can be extraction nodes (this is a reply node)".to_owned()
        ));
        assert!(problems.contains(
            &"node Extract_Customer_Contact_Info: expected_context_fields: an extraction node must name the fields it extracts"
                .to_owned()
        ));
        // An explicit flag wins over the name.
        let mut json = shipped_json();
        node_mut(&mut json, "Extract_Customer_Issue")["extraction"] = false.into();
        node_mut(&mut json, "use_mcp_to_get_info")["extraction"] = true.into();
        // An extraction node calls no tools, so it lists none.
        node_mut(&mut json, "use_mcp_to_get_info").as_object_mut().unwrap().remove("tools");
        let config = parse(&json).unwrap();
        assert!(!config.is_extraction(config.node("Extract_Customer_Issue").unwrap()));
        assert!(config.is_extraction(config.node("use_mcp_to_get_info").unwrap()));
    }

    #[test]
    fn tools_are_listed_only_on_tool_nodes_and_checked_against_the_servers() {
        let config = AgentConfig::shipped();
        let check = config.node("Check_IF_existing_customer").unwrap();
        assert_eq!(check.tools.as_deref(), Some(&["customer_get".to_owned(), "customer_create".to_owned()][..]));
        assert!(config.offers_tool(check, "customer_create"));
        assert!(!config.offers_tool(check, "call_hangup"));
        // A tool node without the key is offered every tool.
        let mut json = shipped_json();
        node_mut(&mut json, "Plan").as_object_mut().unwrap().remove("tools");
        let open = parse(&json).unwrap();
        assert!(open.offers_tool(open.node("Plan").unwrap(), "entity_list"));

        let problems = problems_after(|json| {
            node_mut(json, "Empathize")["tools"] = serde_json::json!(["setting_list"]);
            node_mut(json, "Extract_Customer_Issue")["tools"] = serde_json::json!(["setting_list"]);
            node_mut(json, "Plan")["tools"] = serde_json::json!([]);
            node_mut(json, "Execute_Call_Hangup")["tools"] = serde_json::json!(["call_hangup", "call_hangup", " "]);
        });
        assert_eq!(
            problems,
            [
                "node Extract_Customer_Issue: tools: only tool nodes call tools (this is an extraction node)",
                "node Empathize: tools: only tool nodes call tools (this is a reply node)",
                "node Plan: tools: is empty: a tool node needs a tool (leave the key out to offer every tool)",
                r#"node Execute_Call_Hangup: tools: "call_hangup" is listed more than once"#,
                "node Execute_Call_Hangup: tools: a tool name is empty",
            ]
        );

        // Once the servers' tools are known, every name must be one of them.
        let pmo = [
            "setting_list",
            "entity_list",
            "customer_create",
            "customer_get",
            "task_create",
            "person_calendar_book",
            "call_hangup",
        ];
        assert_eq!(config.check_tools(&pmo), Ok(()));
        let mut json = shipped_json();
        node_mut(&mut json, "Plan")["tools"] = serde_json::json!(["task_creat"]);
        json["mcp_result_mapping"]["calendar_book"] = serde_json::json!({"appointment_details": "/booking"});
        let edited = parse(&json).unwrap();
        let problems: Vec<String> = edited.check_tools(&pmo).unwrap_err().0.iter().map(ToString::to_string).collect();
        let offered = pmo.join(", ");
        assert_eq!(
            problems,
            [
                format!(r#"node Plan: tools: unknown tool "task_creat" (the MCP servers offer: {offered})"#),
                format!(
                    r#"mcp_result_mapping.calendar_book: unknown tool "calendar_book" (the MCP servers offer: {offered})"#
                ),
            ]
        );
        assert!(config.check_tools(&[]).unwrap_err().to_string().contains("the MCP servers offer no tools"));
    }

    #[test]
    fn every_problem_is_reported_at_once_one_per_line() {
        let mut json = shipped_json();
        node_mut(&mut json, "Plan")["default_next_node"] = "Pln".into();
        node_mut(&mut json, "Empathize")["agent_profile_type"] = "worker_mcp_agent".into();
        node_mut(&mut json, "Identify_Issue")["expected_context_fields"] = serde_json::json!(["issue_severity"]);
        json["context_update_rules"]["merge_behavior"]["arrays"]["rule"] = "REPLACE".into();
        json["mcp_result_mapping"]["call_hangup"]["call_ende"] = "/ended".into();
        let error = AgentConfig::parse(&json.to_string(), "edited.json").unwrap_err();
        assert_eq!(error.to_string(), "invalid workflow configuration edited.json");
        let WorkflowError::Config { source, .. } = error else { panic!("not a config error") };
        let text = source.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&r#"node Plan: default_next_node: unknown node "Pln""#), "{text}");
        assert!(lines
            .iter()
            .any(|l| l.starts_with("node Communicate_To_Customer_Before_Action: node_name: not reachable")));
        assert!(lines.contains(
            &r#"node Empathize: agent_profile_type: reply nodes are run by "worker_reply_agent", not "worker_mcp_agent""#
        ));
        assert!(lines.contains(
            &r#"node Identify_Issue: expected_context_fields: unknown context field "issue_severity" (not in field_semantics)"#
        ));
        assert!(lines.iter().any(|l| l.starts_with("context_update_rules.merge_behavior.arrays.rule:")));
        assert!(lines.iter().any(|l| l.starts_with("mcp_result_mapping.call_hangup.call_ende:")));
        let errors = source.downcast_ref::<ConfigErrors>().unwrap();
        assert_eq!(errors.0.len(), lines.len());
        let plan = errors.0.iter().find(|p| p.problem.contains("Pln")).unwrap();
        assert_eq!((plan.node.as_deref(), plan.field.as_str()), (Some("Plan"), "default_next_node"));
    }

    #[test]
    fn a_typo_in_a_key_is_an_error() {
        let mut json = shipped_json();
        node_mut(&mut json, "Plan")["default_next"] = "Communicate_To_Customer_Before_Action".into();
        let error = AgentConfig::parse(&json.to_string(), "typo.json").unwrap_err();
        let WorkflowError::Config { source, .. } = error else { panic!("not a config error") };
        assert!(source.to_string().contains("unknown field `default_next`"), "{source}");
        let error = AgentConfig::load(Path::new("/nonexistent/agent_config.json")).unwrap_err();
        assert!(matches!(error, WorkflowError::Config { ref path, .. } if path == "/nonexistent/agent_config.json"));
    }

    #[test]
    fn a_node_added_in_json_alone_is_valid() {
        // A business user splices "Verify_Customer_Address" between Check_IF_existing_customer
        // and Plan, with a new context field: no code changes.
        let mut json = shipped_json();
        let nodes = json["nodes"].as_array_mut().unwrap();
        let at = nodes.iter().position(|n| n["node_name"] == "Plan").unwrap();
        nodes.insert(
            at,
            serde_json::json!({
                "node_name": "Verify_Customer_Address",
                "node_action": "reply",
                "agent_profile_type": "worker_reply_agent",
                "role": "a careful service coordinator",
                "node_goal": "Confirm the address where the service is needed",
                "prompt_templates": "Could you confirm the address where you need the service?",
                "default_next_node": "Plan",
                "branching_conditions": [
                    {"condition": "if customer changes issue", "child_node": "Extract_Customer_Issue"}
                ],
                "expected_context_fields": ["service_address"]
            }),
        );
        node_mut(&mut json, "Check_IF_existing_customer")["default_next_node"] = "Verify_Customer_Address".into();
        json["global_context_schema_semantics"]["field_semantics"]["service_address"] = serde_json::json!({
            "type": "string", "mandatory": false, "description": "Where the service is needed",
            "updated_by": "Verify_Customer_Address"
        });
        json["initial_context_template"]["template"]["service_address"] = "".into();
        let config = parse(&json).unwrap();
        assert_eq!(config.nodes.len(), 18);
        let check = config.node("Check_IF_existing_customer").unwrap();
        assert_eq!(config.children(check)[0], "Verify_Customer_Address");
        let verify = config.node("Verify_Customer_Address").unwrap();
        assert_eq!(config.children(verify), ["Plan", "Extract_Customer_Issue"]);
        assert!(!config.is_extraction(verify));
        assert_eq!(config.producer_of("service_address").unwrap().node_name, "Verify_Customer_Address");
    }
}
