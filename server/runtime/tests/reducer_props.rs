//! Property tests of the reducers' laws (`state.rs`): what each reducer promises, checked on
//! generated values rather than a few hand-picked ones. A bounded number of cases each, so the
//! file runs in seconds under `cargo test`.

use std::collections::BTreeMap;

use frontdesk_runtime::{reducer, Keyed, Log, Mergeable, Reducer, State};
use proptest::prelude::*;
use serde_json::Value;

fn config() -> ProptestConfig {
    // No regression files: a failing case is printed, minimised, in the test's output.
    ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
}

/// Short keys from a small alphabet, so that generated maps share keys often.
fn key() -> impl Strategy<Value = String> {
    "[a-e]{1,2}"
}

/// Text that is blank about a third of the time (empty, spaces, tabs, newlines).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[ \t\n]{1,3}", "[ a-z0-9]{0,6}", ".{0,8}"]
}

fn text_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), text(), 0..6)
}

/// JSON values up to three levels deep, empty ones (null, "", blank, [], {}) included.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_map() -> impl Strategy<Value = BTreeMap<String, Value>> {
    prop::collection::btree_map(key(), json(), 0..6)
}

fn blank(value: &str) -> bool {
    value.trim().is_empty()
}

/// What `MergeNonEmpty` calls empty: a value that would erase what is known.
fn empty_json(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn reduce_all<T, R: Reducer<T>>(mut current: T, writes: impl IntoIterator<Item = T>) -> T {
    for written in writes {
        R::reduce(&mut current, written);
    }
    current
}

/// A workflow's own merge rule for the `Merged` hook: a set of tags (union), with the largest
/// level written.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Tags {
    tags: std::collections::BTreeSet<String>,
    level: u8,
}

impl Mergeable for Tags {
    fn merge(&mut self, written: Self) {
        self.tags.extend(written.tags);
        self.level = self.level.max(written.level);
    }
}

fn tags() -> impl Strategy<Value = Tags> {
    (prop::collection::btree_set(key(), 0..4), any::<u8>()).prop_map(|(tags, level)| Tags { tags, level })
}

frontdesk_runtime::state! {
    /// One field of every reducer, as a workflow declares them.
    struct Every / EveryUpdate {
        name: String => Replace,
        log: Vec<u32> => Append,
        history: Log<u32> => Append,
        turns: u32 => Sum,
        tokens: u64 => Sum,
        results: BTreeMap<String, u32> => Merge,
        steps: Keyed<String, u32> => Merge,
        fields: BTreeMap<String, String> => MergeNonEmpty,
        facts: BTreeMap<String, Value> => MergeNonEmpty,
        tags: Tags => Merged,
    }
}

fn log_write() -> impl Strategy<Value = Log<u32>> {
    (prop::bool::weighted(0.2), prop::collection::vec(any::<u32>(), 0..4))
        .prop_map(|(reset, items)| Log { reset, items })
}

fn keyed_write() -> impl Strategy<Value = Keyed<String, u32>> {
    (prop::bool::weighted(0.2), prop::collection::btree_map(key(), any::<u32>(), 0..4))
        .prop_map(|(reset, entries)| Keyed { reset, entries })
}

fn update() -> impl Strategy<Value = EveryUpdate> {
    (
        (
            prop::option::of(text()),
            prop::option::of(prop::collection::vec(any::<u32>(), 0..4)),
            prop::option::of(log_write()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u64>()),
        ),
        (
            prop::option::of(prop::collection::btree_map(key(), any::<u32>(), 0..4)),
            prop::option::of(keyed_write()),
            prop::option::of(text_map()),
            prop::option::of(json_map()),
            prop::option::of(tags()),
        ),
    )
        .prop_map(|((name, log, history, turns, tokens), (results, steps, fields, facts, tags))| EveryUpdate {
            name,
            log,
            history,
            turns,
            tokens,
            results,
            steps,
            fields,
            facts,
            tags,
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn replace_keeps_the_last_write(current in text(), writes in prop::collection::vec(text(), 1..5)) {
        let last = writes.last().cloned();
        prop_assert_eq!(Some(reduce_all::<_, reducer::Replace>(current, writes)), last);
    }

    #[test]
    fn append_keeps_order_and_every_item(
        current in prop::collection::vec(any::<u16>(), 0..8),
        writes in prop::collection::vec(prop::collection::vec(any::<u16>(), 0..5), 0..5),
    ) {
        let total = current.len() + writes.iter().map(Vec::len).sum::<usize>();
        let one_by_one = reduce_all::<_, reducer::Append>(current.clone(), writes.clone());
        prop_assert_eq!(one_by_one.len(), total);
        // The current items first, then each write's, in order.
        let mut expected = current.clone();
        for written in &writes {
            expected.extend_from_slice(written);
        }
        prop_assert_eq!(&one_by_one, &expected);
        // Appending the writes in one go is the same as one by one.
        let in_one_go = reduce_all::<_, reducer::Append>(current, [writes.concat()]);
        prop_assert_eq!(in_one_go, one_by_one);
    }

    #[test]
    fn an_appended_log_is_cleared_only_by_a_reset(
        current in prop::collection::vec(any::<u32>(), 0..6),
        writes in prop::collection::vec(log_write(), 0..6),
    ) {
        let result = reduce_all::<_, reducer::Append>(Log::append(current.clone()), writes.clone());
        prop_assert!(!result.reset, "state never carries a reset");
        // What follows the last reset, or the whole history when nothing reset it.
        let (start, from) = match writes.iter().rposition(|w| w.reset) {
            Some(last_reset) => (Vec::new(), last_reset),
            None => (current, 0),
        };
        let mut expected = start;
        for written in &writes[from..] {
            expected.extend_from_slice(&written.items);
        }
        prop_assert_eq!(result.items, expected);
    }

    #[test]
    fn sum_is_the_saturating_sum_in_any_order(
        current in any::<u32>(),
        writes in prop::collection::vec(any::<u32>(), 0..6),
    ) {
        let exact: u128 = u128::from(current) + writes.iter().map(|&w| u128::from(w)).sum::<u128>();
        let summed = reduce_all::<u32, reducer::Sum>(current, writes.iter().copied());
        prop_assert_eq!(u128::from(summed), exact.min(u128::from(u32::MAX)));
        let mut reversed = writes.clone();
        reversed.reverse();
        prop_assert_eq!(reduce_all::<u32, reducer::Sum>(current, reversed), summed);
        // One write of the (saturated) total lands on the same value.
        let total = writes.iter().fold(0u32, |a, &b| a.saturating_add(b));
        prop_assert_eq!(reduce_all::<u32, reducer::Sum>(current, [total]), summed);
    }

    #[test]
    fn sum_of_small_counters_is_exact(current in 0u64..1 << 40, writes in prop::collection::vec(0u64..1 << 40, 0..8)) {
        let summed = reduce_all::<u64, reducer::Sum>(current, writes.iter().copied());
        prop_assert_eq!(summed, current + writes.iter().sum::<u64>());
    }

    #[test]
    fn merge_keeps_every_key_and_the_last_write_of_each(
        current in prop::collection::btree_map(key(), any::<u8>(), 0..6),
        writes in prop::collection::vec(prop::collection::btree_map(key(), any::<u8>(), 0..4), 0..5),
    ) {
        let merged = reduce_all::<_, reducer::Merge>(current.clone(), writes.clone());
        for (key, value) in &merged {
            let last_written = writes.iter().rev().find_map(|w| w.get(key));
            prop_assert_eq!(Some(value), last_written.or(current.get(key)));
        }
        let keys = current.keys().chain(writes.iter().flat_map(BTreeMap::keys)).count();
        prop_assert!(merged.len() <= keys);
        for key in current.keys().chain(writes.iter().flat_map(BTreeMap::keys)) {
            prop_assert!(merged.contains_key(key), "lost {}", key);
        }
        // Writes of concurrent tasks, one key each, lose nothing whatever their order.
        let mut in_one_go = BTreeMap::new();
        for written in &writes {
            in_one_go.extend(written.clone());
        }
        prop_assert_eq!(reduce_all::<_, reducer::Merge>(current, [in_one_go]), merged);
    }

    #[test]
    fn keyed_merges_by_key_and_clears_only_on_a_reset(
        current in prop::collection::btree_map(key(), any::<u32>(), 0..6),
        writes in prop::collection::vec(keyed_write(), 0..6),
    ) {
        let result = reduce_all::<_, reducer::Merge>(Keyed::merge(current.clone()), writes.clone());
        prop_assert!(!result.reset);
        let (mut expected, from) = match writes.iter().rposition(|w| w.reset) {
            Some(last_reset) => (BTreeMap::new(), last_reset),
            None => (current, 0),
        };
        for written in &writes[from..] {
            expected.extend(written.entries.clone());
        }
        prop_assert_eq!(result.entries, expected);
    }

    #[test]
    fn merge_non_empty_never_loses_a_key_nor_writes_a_blank(
        current in text_map(),
        writes in prop::collection::vec(text_map(), 0..5),
    ) {
        let merged = reduce_all::<_, reducer::MergeNonEmpty>(current.clone(), writes.clone());
        for (key, old) in &current {
            prop_assert!(merged.contains_key(key), "lost {}", key);
            // A key is only ever overwritten by a non-blank value.
            let value = &merged[key];
            prop_assert!(value == old || !blank(value), "{} became blank", key);
        }
        for (key, value) in &merged {
            let last_meaningful = writes.iter().rev().find_map(|w| w.get(key).filter(|v| !blank(v)));
            prop_assert_eq!(Some(value), last_meaningful.or(current.get(key)));
        }
        // Only known keys and keys written with a value appear.
        for key in merged.keys() {
            let written = writes.iter().any(|w| w.get(key).is_some_and(|v| !blank(v)));
            prop_assert!(current.contains_key(key) || written, "{} appeared from nothing", key);
        }
    }

    #[test]
    fn merge_non_empty_in_one_go_equals_one_by_one(current in text_map(), first in text_map(), second in text_map()) {
        let one_by_one = reduce_all::<_, reducer::MergeNonEmpty>(current.clone(), [first.clone(), second.clone()]);
        // The two writes merged by the same rule first, then applied once.
        let mut both = first;
        reducer::MergeNonEmpty::reduce(&mut both, second.clone());
        prop_assert_eq!(reduce_all::<_, reducer::MergeNonEmpty>(current.clone(), [both]), one_by_one.clone());
        // A write applied twice changes nothing the second time.
        prop_assert_eq!(reduce_all::<_, reducer::MergeNonEmpty>(one_by_one.clone(), [second]), one_by_one);
    }

    #[test]
    fn merge_non_empty_json_never_loses_a_key_nor_writes_an_empty_value(
        current in json_map(),
        writes in prop::collection::vec(json_map(), 0..4),
    ) {
        let merged = reduce_all::<_, reducer::MergeNonEmpty>(current.clone(), writes.clone());
        for key in current.keys() {
            prop_assert!(merged.contains_key(key), "lost {}", key);
        }
        for (key, value) in &merged {
            let last_filled = writes.iter().rev().find_map(|w| w.get(key).filter(|v| !empty_json(v)));
            prop_assert_eq!(Some(value), last_filled.or(current.get(key)));
        }
        let twice = reduce_all::<_, reducer::MergeNonEmpty>(merged.clone(), writes.last().cloned());
        prop_assert_eq!(twice, merged, "the last write applied again changes nothing");
    }

    #[test]
    fn merged_defers_to_the_types_own_rule(current in tags(), writes in prop::collection::vec(tags(), 0..5)) {
        let through_reducer = reduce_all::<_, reducer::Merged>(current.clone(), writes.clone());
        let mut direct = current;
        for written in writes {
            direct.merge(written);
        }
        prop_assert_eq!(through_reducer, direct);
    }

    #[test]
    fn a_state_applies_each_field_by_its_reducer_and_replays_identically(
        updates in prop::collection::vec(update(), 0..6),
    ) {
        let mut state = Every::default();
        for update in updates.clone() {
            state.apply(update);
        }
        // Field by field, each reducer on its own: an update's fields never interfere.
        let mut fields = Every::default();
        for u in updates.clone() {
            if let Some(w) = u.name { reducer::Replace::reduce(&mut fields.name, w) }
            if let Some(w) = u.log { reducer::Append::reduce(&mut fields.log, w) }
            if let Some(w) = u.history { reducer::Append::reduce(&mut fields.history, w) }
            if let Some(w) = u.turns { reducer::Sum::reduce(&mut fields.turns, w) }
            if let Some(w) = u.tokens { reducer::Sum::reduce(&mut fields.tokens, w) }
            if let Some(w) = u.results { reducer::Merge::reduce(&mut fields.results, w) }
            if let Some(w) = u.steps { reducer::Merge::reduce(&mut fields.steps, w) }
            if let Some(w) = u.fields { reducer::MergeNonEmpty::reduce(&mut fields.fields, w) }
            if let Some(w) = u.facts { reducer::MergeNonEmpty::reduce(&mut fields.facts, w) }
            if let Some(w) = u.tags { reducer::Merged::reduce(&mut fields.tags, w) }
        }
        prop_assert_eq!(&state, &fields);
        // Deterministic: replaying the same updates, as recovery does, gives the same state.
        let mut replayed = Every::default();
        for update in updates.clone() {
            replayed.apply(update);
        }
        prop_assert_eq!(&replayed, &state);
        // Updates survive the JSON a checkpoint stores them in, and so does the state.
        for update in &updates {
            let json = serde_json::to_string(update).unwrap();
            prop_assert_eq!(&serde_json::from_str::<EveryUpdate>(&json).unwrap(), update);
        }
        let json = serde_json::to_string(&state).unwrap();
        prop_assert_eq!(serde_json::from_str::<Every>(&json).unwrap(), state);
    }

    #[test]
    fn an_empty_update_changes_nothing(updates in prop::collection::vec(update(), 0..4)) {
        let mut state = Every::default();
        for update in updates {
            state.apply(update);
        }
        let before = state.clone();
        state.apply(EveryUpdate::default());
        prop_assert_eq!(state, before);
    }
}
