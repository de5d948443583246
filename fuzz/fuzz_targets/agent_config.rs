//! The service call's flow configuration (`AgentConfig::parse`) from arbitrary bytes: never
//! panics, refuses with `WorkflowError::Config`, and a configuration it accepts has every
//! property validation promises: unique non-empty node names, an entry node that exists, every
//! default_next_node and child_node naming a node, every node reachable from the entry, the
//! navigator's profile, each node run by the agent its action needs. An accepted configuration
//! also survives its own serialization unchanged.

#![no_main]

use std::collections::{BTreeSet, VecDeque};

use frontdesk_workflows::{
    service_call::config::{AgentConfig, NodeAction, INTERNAL_PROFILE, NAVIGATOR_PROFILE},
    WorkflowError,
};
use libfuzzer_sys::fuzz_target;

fn check_valid(config: &AgentConfig) {
    let names: BTreeSet<&str> = config.nodes.iter().map(|n| n.node_name.as_str()).collect();
    assert!(!config.nodes.is_empty(), "a valid flow has nodes");
    assert_eq!(names.len(), config.nodes.len(), "node names are unique");
    assert!(names.iter().all(|n| !n.trim().is_empty()), "node names are not empty");
    assert!(names.contains(config.entry_node.as_str()), "the entry node exists");
    assert_eq!(config.entry().node_name, config.entry_node);
    assert!(config.profile(NAVIGATOR_PROFILE).is_some(), "the navigator has a profile");
    for node in &config.nodes {
        for child in config.children(node) {
            assert!(names.contains(child), "{}'s next node {child:?} exists", node.node_name);
            assert!(config.node(child).is_some());
        }
        if let Some(next) = &node.default_next_node {
            assert!(names.contains(next.as_str()));
        }
        assert_eq!(
            node.agent_profile_type,
            node.node_action.profile(),
            "{} is run by its action's agent",
            node.node_name
        );
        if node.agent_profile_type != INTERNAL_PROFILE {
            assert!(config.profile(&node.agent_profile_type).is_some());
        }
        if config.is_extraction(node) {
            assert_eq!(node.node_action, NodeAction::Mcp, "only mcp nodes extract");
            assert!(!node.expected_context_fields.is_empty(), "an extraction node names its fields");
        }
        if let Some(tools) = &node.tools {
            assert!(!tools.is_empty() && !config.is_extraction(node) && node.node_action == NodeAction::Mcp);
            let unique: BTreeSet<&String> = tools.iter().collect();
            assert_eq!(unique.len(), tools.len(), "tools are listed once");
        }
    }
    // Context fields: every field named has semantics; mandatory fields agree with their
    // semantics, start in the template and are filled by some node; initial values are typed.
    let schema = &config.global_context_schema_semantics;
    for node in &config.nodes {
        for field in &node.expected_context_fields {
            assert!(config.field(field).is_some(), "{}'s field {field:?} has semantics", node.node_name);
        }
    }
    for field in &schema.mandatory_fields {
        assert!(config.field(field).is_some_and(|s| s.mandatory), "mandatory {field:?} is marked mandatory");
        assert!(config.initial_context_template.template.contains_key(field));
        assert!(config.producer_of(field).is_some(), "some node fills mandatory {field:?}");
    }
    for (name, semantics) in &schema.field_semantics {
        assert_eq!(semantics.mandatory, schema.mandatory_fields.contains(name));
    }
    for (name, value) in &config.initial_context_template.template {
        let semantics = config.field(name).expect("a template field has semantics");
        assert!(value.is_null() || semantics.kind.matches(value), "{name}'s initial value is a {}", semantics.kind);
    }
    for mapping in config.mcp_result_mapping.values() {
        for (field, pointer) in mapping {
            assert!(config.field(field).is_some());
            assert!(pointer.is_empty() || pointer.starts_with('/'));
        }
    }
    // Every node is reachable from the entry node.
    let mut reached = BTreeSet::from([config.entry_node.as_str()]);
    let mut queue = VecDeque::from([config.entry()]);
    while let Some(node) = queue.pop_front() {
        for child in config.children(node) {
            if reached.insert(child) {
                queue.push_back(config.node(child).unwrap());
            }
        }
    }
    assert_eq!(reached, names, "every node is reachable from the entry node");
    // Validation is a pure function of the configuration, and the configuration serializes to a
    // file that parses back to it.
    assert!(config.validate().is_ok());
    let text = serde_json::to_string(config).expect("a configuration serializes");
    let again = AgentConfig::parse(&text, "fuzz (re-serialized)").expect("a serialized valid configuration parses");
    assert_eq!(&again, config, "serialization round-trips");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match AgentConfig::parse(text, "fuzz") {
        Ok(config) => check_valid(&config),
        Err(WorkflowError::Config { path, .. }) => assert_eq!(path, "fuzz"),
        Err(other) => panic!("AgentConfig::parse returned {other:?}, not a Config error"),
    }
    // Whatever parses as JSON validates without panicking, valid or not: validation reports every
    // problem rather than stopping at the first.
    if let Ok(config) = serde_json::from_str::<AgentConfig>(text) {
        match config.validate() {
            Ok(()) => check_valid(&config),
            Err(errors) => assert!(!errors.0.is_empty(), "a refusal names at least one problem"),
        }
    }
});
