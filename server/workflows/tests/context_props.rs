//! Property tests of the service call's context merge (`service_call/context.rs`): the
//! non-destructive rules checked on generated contexts and writes. A bounded number of cases
//! each, so the file runs in seconds under `cargo test`.

use frontdesk_runtime::{Mergeable, State};
use frontdesk_workflows::service_call::context::{is_meaningful, Context};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn config() -> ProptestConfig {
    // No regression files: a failing case is printed, minimised, in the test's output.
    ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
}

/// Field names from a small set, so that writes hit existing fields often.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("customer_name".to_owned()),
        Just("node_traversal_path".to_owned()),
        Just("flags".to_owned()),
        Just("call_ended".to_owned()),
        "[a-d]{1,2}",
    ]
}

/// Strings that say nothing (empty, blank, "(not set)" in any case and padding) about half the
/// time.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("(not set)".to_owned()),
        Just("  (NOT SET) ".to_owned()),
        "[ \t]{1,3}",
        "[a-z0-9 ]{1,6}",
        ".{0,6}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

/// JSON values up to three levels deep; `arrays` says whether arrays may appear.
fn value(arrays: bool) -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(3, 24, 4, move |inner| {
            let object = prop::collection::vec((key(), inner.clone()), 0..4)
                .prop_map(|e| Value::Object(e.into_iter().collect()));
            if arrays {
                prop_oneof![prop::collection::vec(inner, 0..4).prop_map(Value::Array), object].boxed()
            } else {
                object.boxed()
            }
        })
        .boxed()
}

fn context_with(arrays: bool) -> impl Strategy<Value = Context> {
    prop::collection::vec((key(), value(arrays)), 0..6).prop_map(|entries| Context(entries.into_iter().collect()))
}

fn context() -> impl Strategy<Value = Context> {
    context_with(true)
}

fn merged(current: &Context, written: &Context) -> Context {
    let mut out = current.clone();
    out.merge(written.clone());
    out
}

/// A meaningful value that is not an empty array or object (what a new field needs).
fn filled(value: &Value) -> bool {
    match value {
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        other => is_meaningful(other),
    }
}

/// Every path to a value in `before` is still there in `after`, an object still an object, an
/// array still an array that starts with the same items.
fn nothing_erased(before: &Map<String, Value>, after: &Map<String, Value>, path: &str) -> Result<(), String> {
    for (key, old) in before {
        let at = format!("{path}/{key}");
        let Some(new) = after.get(key) else { return Err(format!("{at} was erased")) };
        match (old, new) {
            (Value::Object(old), Value::Object(new)) => nothing_erased(old, new, &at)?,
            (Value::Object(_), other) => return Err(format!("object {at} became {other}")),
            (Value::Array(old), Value::Array(new)) if !new.starts_with(old) => {
                return Err(format!("array {at} lost items: {old:?} -> {new:?}"));
            }
            (Value::Array(_), Value::Array(_)) => {}
            (Value::Array(_), other) => return Err(format!("array {at} became {other}")),
            (old, new) if filled(old) && !filled(new) => return Err(format!("{at} went from {old} to {new}")),
            _ => {}
        }
    }
    Ok(())
}

/// No field anywhere that was added by a write holds nothing.
fn added_fields_are_filled(before: Option<&Map<String, Value>>, after: &Map<String, Value>) -> Result<(), String> {
    for (key, new) in after {
        match before.and_then(|b| b.get(key)) {
            None if !filled(new) => return Err(format!("{key} was added empty: {new}")),
            Some(Value::Object(old)) => {
                if let Value::Object(new) = new {
                    added_fields_are_filled(Some(old), new)?;
                }
            }
            None => {
                if let Value::Object(new) = new {
                    added_fields_are_filled(None, new)?;
                }
            }
            Some(_) => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn nothing_is_ever_erased(current in context(), written in context()) {
        let after = merged(&current, &written);
        if let Err(problem) = nothing_erased(&current.0, &after.0, "") {
            return Err(TestCaseError::fail(problem));
        }
        if let Err(problem) = added_fields_are_filled(Some(&current.0), &after.0) {
            return Err(TestCaseError::fail(problem));
        }
    }

    #[test]
    fn arrays_append_the_meaningful_items_in_order(current in context(), written in context()) {
        let after = merged(&current, &written);
        for (key, old) in &current.0 {
            let Value::Array(old) = old else { continue };
            let Some(write) = written.0.get(key) else {
                prop_assert_eq!(&after.0[key], &Value::Array(old.clone()));
                continue;
            };
            let appended: Vec<Value> = match write {
                Value::Array(items) => items.iter().filter(|i| is_meaningful(i)).cloned().collect(),
                single if is_meaningful(single) => vec![single.clone()],
                _ => Vec::new(),
            };
            let mut expected = old.clone();
            expected.extend(appended);
            prop_assert_eq!(&after.0[key], &Value::Array(expected), "field {}", key);
        }
    }

    #[test]
    fn scalars_update_only_to_a_meaningful_value(current in context(), written in context()) {
        let after = merged(&current, &written);
        for (key, old) in &current.0 {
            if old.is_array() || old.is_object() {
                continue;
            }
            let expected = match written.0.get(key) {
                Some(new) if filled(new) => new,
                _ => old,
            };
            prop_assert_eq!(&after.0[key], expected, "field {}", key);
        }
        // A field the write does not name is untouched.
        for (key, old) in &current.0 {
            if !written.0.contains_key(key) {
                prop_assert_eq!(&after.0[key], old);
            }
        }
    }

    #[test]
    fn objects_merge_key_by_key_and_are_never_replaced(current in context(), written in context()) {
        let after = merged(&current, &written);
        for (key, old) in &current.0 {
            let Value::Object(old) = old else { continue };
            let Value::Object(new) = &after.0[key] else {
                return Err(TestCaseError::fail(format!("{key} is no longer an object")));
            };
            match written.0.get(key) {
                // The object is the merge of its own fields by the same rules.
                Some(Value::Object(write)) => {
                    let inner = merged(&Context(old.clone()), &Context(write.clone()));
                    prop_assert_eq!(new, &inner.0);
                }
                _ => prop_assert_eq!(new, old),
            }
        }
    }

    #[test]
    fn merging_nothing_changes_nothing(current in context(), keys in prop::collection::vec(key(), 0..5)) {
        prop_assert_eq!(merged(&current, &Context::default()), current.clone());
        // Values that say nothing, under any names.
        let nothing: Context = keys
            .into_iter()
            .zip(
                [Value::Null, Value::from(""), Value::from("(not set)"), Value::from("  "), Value::Array(Vec::new())]
                    .into_iter()
                    .cycle(),
            )
            .collect();
        let after = merged(&current, &nothing);
        // Only an empty object may appear, as an object field written `{}`: never here.
        prop_assert_eq!(after, current);
    }

    /// Arrays append (a scalar written to an array field is appended too), so only a write that
    /// meets no array is idempotent.
    #[test]
    fn a_write_without_arrays_is_idempotent(current in context_with(false), written in context_with(false)) {
        let once = merged(&current, &written);
        prop_assert_eq!(merged(&once, &written), once);
    }

    #[test]
    fn the_merged_reducer_is_the_contexts_merge(
        current in context(),
        writes in prop::collection::vec(context(), 0..4),
    ) {
        frontdesk_runtime::state! {
            struct Call / CallUpdate {
                context: Context => Merged,
            }
        }
        let mut state = Call { context: current.clone() };
        let mut direct = current;
        for written in writes {
            state.apply(CallUpdate { context: Some(written.clone()) });
            direct.merge(written);
        }
        prop_assert_eq!(state.context, direct);
    }
}
