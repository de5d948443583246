//! The call's context: one JSON object whose fields are the flow configuration's
//! (`field_semantics`), so a business user can add a field without a code change. Updates
//! merge into it NON-DESTRUCTIVELY ([`Context`]'s [`Mergeable`] impl): arrays append, objects
//! merge key by key, scalars change only to a meaningful value, and nothing is ever erased.

use frontdesk_runtime::Mergeable;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::config::{AgentConfig, FieldType};

/// The context fields the workflow itself reads or writes (every other field is the
/// configuration's business).
pub mod fields {
    pub const AGENT_SESSION_ID: &str = "agent_session_id";
    pub const NODE_TRAVERSAL_PATH: &str = "node_traversal_path";
    pub const SUMMARY: &str = "summary_of_conversation_on_each_step_until_now";
    pub const FLAGS: &str = "flags";
    pub const CALL_ENDED: &str = "call_ended";
}

/// What models write for "unknown"; it never overwrites a value.
pub const NOT_SET: &str = "(not set)";

/// Whether `value` says anything: not `null`, not an empty or blank string, not "(not set)".
/// Numbers, booleans, arrays and objects always do.
pub fn is_meaningful(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => meaningful_str(s),
        _ => true,
    }
}

fn meaningful_str(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty() && !s.eq_ignore_ascii_case(NOT_SET)
}

/// A meaningful value that is not an empty array or object.
fn is_filled(value: &Value) -> bool {
    match value {
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        other => is_meaningful(other),
    }
}

/// One exchange of the conversation, as `summary_of_conversation_on_each_step_until_now`
/// records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Exchange {
    pub customer: String,
    pub agent: String,
}

/// The call's context. In state it is the whole context; in an update, the fields written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Context(pub Map<String, Value>);

impl From<Map<String, Value>> for Context {
    fn from(map: Map<String, Value>) -> Self {
        Context(map)
    }
}

impl FromIterator<(String, Value)> for Context {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Context(iter.into_iter().collect())
    }
}

impl Mergeable for Context {
    /// The design's non-destructive merge: arrays APPEND (a non-array value is appended as one
    /// item; items that say nothing are skipped); objects merge key by key by these same
    /// rules; scalars UPDATE only to a meaningful value; an object is never replaced by a
    /// non-object; a field is never erased, and a new field is added only with a value.
    fn merge(&mut self, written: Self) {
        merge_map(&mut self.0, written.0);
    }
}

fn merge_map(current: &mut Map<String, Value>, written: Map<String, Value>) {
    for (key, value) in written {
        match current.get_mut(&key) {
            Some(existing) => merge_value(existing, value),
            None => {
                let mut fresh = match &value {
                    Value::Array(_) => Value::Array(Vec::new()),
                    Value::Object(_) => Value::Object(Map::new()),
                    _ => Value::Null,
                };
                merge_value(&mut fresh, value);
                if is_filled(&fresh) {
                    current.insert(key, fresh);
                }
            }
        }
    }
}

fn merge_value(current: &mut Value, written: Value) {
    match (current, written) {
        (Value::Array(items), Value::Array(new)) => items.extend(new.into_iter().filter(is_meaningful)),
        (Value::Array(items), other) => {
            if is_meaningful(&other) {
                items.push(other);
            }
        }
        (Value::Object(map), Value::Object(new)) => merge_map(map, new),
        (Value::Object(_), _) => {}
        (current, written) => {
            if is_filled(&written) {
                *current = written;
            }
        }
    }
}

impl Context {
    /// A new call's context: the configuration's template, with the session id set.
    pub fn from_template(config: &AgentConfig, session_id: &str) -> Context {
        let mut map = config.initial_context_template.template.clone();
        map.insert(fields::AGENT_SESSION_ID.to_owned(), Value::String(session_id.to_owned()));
        Context(map)
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }

    /// A string field's value, when meaningful (trimmed).
    pub fn get_str(&self, field: &str) -> Option<&str> {
        self.0.get(field).and_then(Value::as_str).map(str::trim).filter(|s| meaningful_str(s))
    }

    /// Whether the field holds something: a meaningful scalar, a non-empty array or object.
    pub fn is_set(&self, field: &str) -> bool {
        self.0.get(field).is_some_and(is_filled)
    }

    /// The configuration's mandatory fields that are not set, in its order.
    pub fn missing_mandatory(&self, config: &AgentConfig) -> Vec<String> {
        config.global_context_schema_semantics.mandatory_fields.iter().filter(|f| !self.is_set(f)).cloned().collect()
    }

    /// The nodes run so far, in order.
    pub fn traversal_path(&self) -> Vec<String> {
        self.strings(fields::NODE_TRAVERSAL_PATH)
    }

    fn strings(&self, field: &str) -> Vec<String> {
        match self.0.get(field) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => Vec::new(),
        }
    }

    /// The conversation so far (the summary's items that are exchanges, in order).
    pub fn exchanges(&self) -> Vec<Exchange> {
        match self.0.get(fields::SUMMARY) {
            Some(Value::Array(items)) => items
                .iter()
                .filter(|item| item.is_object())
                .filter_map(|item| serde_json::from_value::<Exchange>(item.clone()).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The latest `n` exchanges, oldest first.
    pub fn recent_exchanges(&self, n: usize) -> Vec<Exchange> {
        let mut all = self.exchanges();
        all.drain(..all.len().saturating_sub(n));
        all
    }

    /// What an agent is shown of the context (the design's token optimisation): the mandatory
    /// fields that are set and the `expected` fields that are set, in the context's order;
    /// nothing empty. Not `flags`: its progress markers repeat the traversal path (the navigator
    /// is shown a failure, [`Context::step_failed`]).
    pub fn active_fields(&self, config: &AgentConfig, expected: &[String]) -> Map<String, Value> {
        let mandatory = &config.global_context_schema_semantics.mandatory_fields;
        self.0
            .iter()
            .filter(|(name, value)| is_filled(value) && (mandatory.contains(name) || expected.contains(name)))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    }

    /// Whether the tool node `node` failed the last time it ran: its flags hold `<node>_failed`
    /// and not `<node>_flag` (a tool node sets one to 1 and the other to 0 each time it runs;
    /// lower-cased names).
    pub fn step_failed(&self, node: &str) -> bool {
        let Some(Value::Object(flags)) = self.0.get(fields::FLAGS) else { return false };
        let node = node.to_lowercase();
        let set = |flag: String| flags.get(&flag).is_some_and(|v| is_meaningful(v) && v.as_i64() != Some(0));
        set(format!("{node}_failed")) && !set(format!("{node}_flag"))
    }

    /// Splits a model's proposed `updates` into those kept and the names of those dropped: a
    /// field not in `field_semantics` (a model cannot invent context fields) or a value not of
    /// the field's type is dropped. Values that say nothing (null, "", "(not set)") are left
    /// out without being reported: they would change nothing.
    pub fn filter_updates(config: &AgentConfig, updates: Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
        let mut kept = Map::new();
        let mut dropped = Vec::new();
        for (name, value) in updates {
            match config.field(&name) {
                None => dropped.push(name),
                Some(_) if !is_meaningful(&value) => {}
                Some(semantics) if !semantics.kind.matches(&value) => dropped.push(name),
                Some(_) => {
                    kept.insert(name, value);
                }
            }
        }
        (kept, dropped)
    }

    /// The context fields a tool's structured `result` fills, by the configuration's
    /// `mcp_result_mapping` for `tool` (field → JSON pointer). A pointer that finds nothing, or
    /// a value that says nothing, fills nothing. A number or boolean found for a string field
    /// is written as text (ids are often numbers), a single value for an array field as a
    /// one-item array; any other value of the wrong type is skipped.
    pub fn map_tool_result(config: &AgentConfig, tool: &str, result: &Value) -> Map<String, Value> {
        let Some(mapping) = config.mcp_result_mapping.get(tool) else { return Map::new() };
        let mut out = Map::new();
        for (field, pointer) in mapping {
            let Some(semantics) = config.field(field) else { continue };
            let Some(found) = result.pointer(pointer).filter(|v| is_filled(v)) else { continue };
            let value = match (semantics.kind, found) {
                (kind, value) if kind.matches(value) => Some(value.clone()),
                (FieldType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
                (FieldType::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
                (FieldType::Array, value) => Some(Value::Array(vec![value.clone()])),
                _ => None,
            };
            match value {
                Some(value) => {
                    out.insert(field.clone(), value);
                }
                None => tracing::debug!(tool, field, pointer, "tool result value not of the field's type; not mapped"),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frontdesk_runtime::State;
    use serde_json::json;

    fn ctx(value: Value) -> Context {
        serde_json::from_value(value).unwrap()
    }

    fn merged(current: Value, written: Value) -> Value {
        let mut context = ctx(current);
        context.merge(ctx(written));
        serde_json::to_value(context).unwrap()
    }

    #[test]
    fn arrays_append_and_are_never_replaced() {
        assert_eq!(
            merged(json!({"node_traversal_path": ["A"]}), json!({"node_traversal_path": ["B", "C"]})),
            json!({"node_traversal_path": ["A", "B", "C"]})
        );
        // An empty array, a bare value, items that say nothing.
        assert_eq!(
            merged(json!({"node_traversal_path": ["A"]}), json!({"node_traversal_path": []})),
            json!({"node_traversal_path": ["A"]})
        );
        assert_eq!(
            merged(json!({"node_traversal_path": ["A"]}), json!({"node_traversal_path": "B"})),
            json!({"node_traversal_path": ["A", "B"]})
        );
        assert_eq!(
            merged(json!({"node_traversal_path": ["A"]}), json!({"node_traversal_path": ["", null, "(not set)", "B"]})),
            json!({"node_traversal_path": ["A", "B"]})
        );
        let exchange = json!({"customer": "My sink leaks", "agent": "Sorry to hear that."});
        assert_eq!(
            merged(
                json!({"summary_of_conversation_on_each_step_until_now": []}),
                json!({"summary_of_conversation_on_each_step_until_now": [exchange.clone()]})
            ),
            json!({"summary_of_conversation_on_each_step_until_now": [exchange]})
        );
    }

    #[test]
    fn objects_merge_key_by_key() {
        assert_eq!(
            merged(
                json!({"flags": {"greet_flag": 1, "empathize_flag": 0, "notes": {"a": "x"}}}),
                json!({"flags": {"empathize_flag": 1, "plan_flag": 1, "notes": {"b": "y"}}})
            ),
            json!({"flags": {"greet_flag": 1, "empathize_flag": 1, "notes": {"a": "x", "b": "y"}, "plan_flag": 1}})
        );
        // An object is not replaced by a scalar, nor emptied by an empty object.
        assert_eq!(
            merged(json!({"flags": {"greet_flag": 1}}), json!({"flags": "reset"})),
            json!({"flags": {"greet_flag": 1}})
        );
        assert_eq!(
            merged(json!({"flags": {"greet_flag": 1}}), json!({"flags": {}})),
            json!({"flags": {"greet_flag": 1}})
        );
    }

    #[test]
    fn scalars_update_only_when_meaningful_and_nothing_is_erased() {
        let current = json!({"customer_name": "Ann Lee", "customer_phone_number": "555-0100", "call_ended": false});
        assert_eq!(
            merged(
                current.clone(),
                json!({"customer_name": "", "customer_phone_number": null, "customer_email": "(not set)"})
            ),
            current
        );
        assert_eq!(merged(current.clone(), json!({"customer_name": "  (NOT SET) "})), current);
        assert_eq!(merged(current.clone(), json!({"customer_name": "   "})), current);
        assert_eq!(
            merged(
                current,
                json!({"customer_name": "Ann Smith", "call_ended": true, "customer_email": "ann@example.com"})
            ),
            json!({"customer_name": "Ann Smith", "customer_phone_number": "555-0100", "call_ended": true, "customer_email": "ann@example.com"})
        );
        // A new field starts only with a value.
        assert_eq!(merged(json!({}), json!({"a": "", "b": [], "c": {}, "d": {"e": null}})), json!({}));
    }

    #[test]
    fn merges_as_a_state_field_through_the_merged_reducer() {
        frontdesk_runtime::state! {
            struct Call / CallUpdate {
                context: Context => Merged,
            }
        }
        let config = AgentConfig::shipped();
        let mut state = Call { context: Context::from_template(&config, "call-1") };
        state.apply(CallUpdate {
            context: Some(ctx(json!({"node_traversal_path": ["GREET_CUSTOMER"], "customer_name": "Ann"}))),
        });
        state.apply(CallUpdate {
            context: Some(ctx(json!({"node_traversal_path": ["Identify_Issue"], "customer_name": ""}))),
        });
        assert_eq!(state.context.traversal_path(), ["GREET_CUSTOMER", "Identify_Issue"]);
        assert_eq!(state.context.get_str("customer_name"), Some("Ann"));
        assert_eq!(state.context.get_str("agent_session_id"), Some("call-1"));
    }

    #[test]
    fn a_new_context_is_the_template_with_the_session_id() {
        let config = AgentConfig::shipped();
        let context = Context::from_template(&config, "s-42");
        assert_eq!(context.get_str(fields::AGENT_SESSION_ID), Some("s-42"));
        assert!(context.get_str("who_are_you").is_some());
        assert_eq!(context.get_str("customer_name"), None);
        assert!(!context.is_set("customer_name"));
        assert!(!context.is_set(fields::FLAGS));
        assert!(context.traversal_path().is_empty());
        assert!(context.exchanges().is_empty());
        for field in config.initial_context_template.template.keys() {
            assert!(context.get(field).is_some(), "{field}");
        }
    }

    #[test]
    fn missing_mandatory_lists_the_unset_mandatory_fields() {
        let config = AgentConfig::shipped();
        let mut context = Context::from_template(&config, "s");
        assert_eq!(context.missing_mandatory(&config), ["customers_main_ask", "customer_phone_number"]);
        context.merge(ctx(json!({"customers_main_ask": "Leaking kitchen sink", "customer_phone_number": "(not set)"})));
        assert_eq!(context.missing_mandatory(&config), ["customer_phone_number"]);
        context.merge(ctx(json!({"customer_phone_number": "555-0100"})));
        assert!(context.missing_mandatory(&config).is_empty());
    }

    #[test]
    fn exchanges_come_from_the_summary() {
        let context = ctx(json!({"summary_of_conversation_on_each_step_until_now": [
            {"customer": "Hi", "agent": "Hello! How can I help?"},
            "a note, not an exchange",
            {"customer": "My sink leaks"},
            {"customer": "It is the kitchen one", "agent": "Thanks."}
        ]}));
        let all = context.exchanges();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1], Exchange { customer: "My sink leaks".into(), agent: String::new() });
        let recent = context.recent_exchanges(2);
        assert_eq!(
            recent.iter().map(|e| e.customer.as_str()).collect::<Vec<_>>(),
            ["My sink leaks", "It is the kitchen one"]
        );
        assert_eq!(context.recent_exchanges(10).len(), 3);
        assert!(context.recent_exchanges(0).is_empty());
    }

    #[test]
    fn active_fields_are_the_set_mandatory_and_expected_fields() {
        let config = AgentConfig::shipped();
        let mut context = Context::from_template(&config, "s");
        context.merge(ctx(json!({
            "customers_main_ask": "Leaking kitchen sink",
            "customer_name": "Ann Lee",
            "customer_email": "ann@example.com",
            "flags": {"greet_flag": 1},
        })));
        let expected = vec!["customer_name".to_owned(), "customer_phone_number".to_owned(), "task_id".to_owned()];
        let active = context.active_fields(&config, &expected);
        let names: Vec<&str> = active.keys().map(String::as_str).collect();
        // The phone (mandatory, expected) and task id (expected) are not set: left out, like the
        // email (set, but neither mandatory nor expected), the session id and the flags (the
        // traversal path says the same).
        let mut want = vec!["customer_name", "customers_main_ask"];
        let order: Vec<&str> = config.initial_context_template.template.keys().map(String::as_str).collect();
        want.sort_by_key(|name| order.iter().position(|o| o == name));
        assert_eq!(names, want);
        let fresh = Context::from_template(&config, "s");
        assert!(fresh.active_fields(&config, &expected).is_empty());
    }

    #[test]
    fn a_step_failed_when_its_last_run_failed() {
        let config = AgentConfig::shipped();
        let mut context = Context::from_template(&config, "s");
        assert!(!context.step_failed("use_mcp_to_get_info"));
        context.merge(ctx(json!({"flags": {"use_mcp_to_get_info_failed": 1, "plan_flag": 1}})));
        assert!(context.step_failed("use_mcp_to_get_info"));
        assert!(!context.step_failed("Plan"));
        context.merge(ctx(json!({"flags": {"use_mcp_to_get_info_flag": 1, "use_mcp_to_get_info_failed": 0}})));
        assert!(!context.step_failed("use_mcp_to_get_info"));
        // A later run of the node fails again: the navigator must see it.
        context.merge(ctx(json!({"flags": {"use_mcp_to_get_info_flag": 0, "use_mcp_to_get_info_failed": 1}})));
        assert!(context.step_failed("use_mcp_to_get_info"));
    }

    #[test]
    fn filter_updates_drops_unknown_and_mistyped_fields() {
        let config = AgentConfig::shipped();
        let updates = json!({
            "customer_name": "Ann Lee",
            "customer_shoe_size": "42",
            "call_ended": "yes",
            "node_traversal_path": "Plan",
            "flags": {"plan_flag": 1},
            "customer_email": "",
            "customer_phone_number": null,
            "customers_main_ask": "(not set)",
        });
        let Value::Object(updates) = updates else { unreachable!() };
        let (kept, dropped) = Context::filter_updates(&config, updates);
        assert_eq!(Value::Object(kept), json!({"customer_name": "Ann Lee", "flags": {"plan_flag": 1}}));
        assert_eq!(dropped, ["customer_shoe_size", "call_ended", "node_traversal_path"]);
    }

    #[test]
    fn tool_results_fill_fields_by_the_configured_pointers() {
        let config = AgentConfig::shipped();
        let customer = json!({"customer": {"id": 1042, "name": "Ann Lee", "phone": "555-0100", "email": null}});
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "customer_get", &customer)),
            json!({"customer_id": "1042", "customer_name": "Ann Lee", "customer_phone_number": "555-0100"})
        );
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "customer_create", &customer)),
            json!({"customer_id": "1042", "customer_name": "Ann Lee", "customer_phone_number": "555-0100"})
        );
        let task = json!({"task": {"id": "TSK-00007", "name": "Fix kitchen sink leak", "customer_id": "CUS-01042",
            "project_id": null, "service_category": "plumbing", "description": "The kitchen sink leaks",
            "priority": "medium", "address": null, "status": "open", "created_at": "2026-11-24T10:00:00Z"}});
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "task_create", &task)),
            json!({"task_id": "TSK-00007", "task_name": "Fix kitchen sink leak"})
        );
        let booking = json!({"booking": {"id": "B-1", "date": "2025-06-02", "time_slot": "09:00-11:00", "technician": "Bo Diaz"}});
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "person_calendar_book", &booking)),
            json!({"appointment_details": booking["booking"], "assigned_employee_name": "Bo Diaz"})
        );
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "call_hangup", &json!({"ended": true}))),
            json!({"call_ended": true})
        );
        // The catalogue is left to the MCP node's model; unknown tools and missing paths map
        // nothing.
        let catalogue = json!({"category": "dl__service_category", "entries": [{"name": "Plumbing"}]});
        assert!(Context::map_tool_result(&config, "setting_list", &catalogue).is_empty());
        assert!(Context::map_tool_result(&config, "weather", &catalogue).is_empty());
        assert!(Context::map_tool_result(&config, "customer_get", &json!({"customer": null})).is_empty());
        // Mapped values merge like any update.
        let mut context = Context::from_template(&config, "s");
        context.merge(Context(Context::map_tool_result(&config, "person_calendar_book", &booking)));
        assert_eq!(context.get("appointment_details"), Some(&booking["booking"]));
    }

    #[test]
    fn tool_results_are_coerced_to_the_fields_types() {
        let mut json: Value = serde_json::from_str(super::super::config::SHIPPED).unwrap();
        json["mcp_result_mapping"]["entity_list"] =
            json!({"related_entities_for_customers_ask": "/entity", "call_ended": "/name"});
        let config = AgentConfig::parse(&json.to_string(), "test.json").unwrap();
        let result = json!({"entity": {"id": "P-1"}, "name": "not a boolean"});
        assert_eq!(
            Value::Object(Context::map_tool_result(&config, "entity_list", &result)),
            json!({"related_entities_for_customers_ask": [{"id": "P-1"}]})
        );
    }
}
