//! Typed workflow state and the reducers that merge node updates into it.

use serde::{de::DeserializeOwned, Serialize};

/// A workflow's state. Nodes never mutate it; they return an [`State::Update`] that
/// [`State::apply`] merges field by field, each field with its own [`Reducer`].
pub trait State: Default + Clone + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// A partial write: every field optional, `None` meaning "not written".
    type Update: Default + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Merges an update. Must be deterministic: the same updates in the same order always give
    /// the same state, which is what makes replay and checkpoints trustworthy.
    fn apply(&mut self, update: Self::Update);
}

/// How a written value combines with the field's current value.
pub trait Reducer<T> {
    fn reduce(current: &mut T, written: T);
}

/// A type that knows how a written value merges into it: a workflow's own merge rules, for a
/// field declared with the [`reducer::Merged`] reducer (the [`crate::state!`] macro resolves
/// reducers in [`reducer`], so a workflow cannot name its own reducer there).
pub trait Mergeable {
    fn merge(&mut self, written: Self);
}

/// The reducers the runtime ships. A field names one in [`crate::state!`].
pub mod reducer {
    use super::Reducer;
    use std::collections::BTreeMap;

    /// The written value replaces the current one.
    pub struct Replace;
    impl<T> Reducer<T> for Replace {
        fn reduce(current: &mut T, written: T) {
            *current = written;
        }
    }

    /// The written items are appended (a log, such as the message history).
    pub struct Append;
    impl<T> Reducer<Vec<T>> for Append {
        fn reduce(current: &mut Vec<T>, written: Vec<T>) {
            current.extend(written);
        }
    }

    /// Adds the written number (counters such as turns taken).
    pub struct Sum;
    impl Reducer<u32> for Sum {
        fn reduce(current: &mut u32, written: u32) {
            *current = current.saturating_add(written);
        }
    }
    impl Reducer<u64> for Sum {
        fn reduce(current: &mut u64, written: u64) {
            *current = current.saturating_add(written);
        }
    }

    /// A [`crate::state::Log`] write appends its items, after clearing the log when it asks to.
    impl<T> Reducer<crate::state::Log<T>> for Append {
        fn reduce(current: &mut crate::state::Log<T>, written: crate::state::Log<T>) {
            if written.reset {
                current.items.clear();
            }
            current.items.extend(written.items);
        }
    }

    /// Each written entry replaces the entry of its key; other keys are kept. For state that
    /// concurrent tasks write one key each (a fan-out's per-task results), so that applying
    /// their updates in order loses none of them.
    pub struct Merge;
    impl<K: Ord, V> Reducer<BTreeMap<K, V>> for Merge {
        fn reduce(current: &mut BTreeMap<K, V>, written: BTreeMap<K, V>) {
            current.extend(written);
        }
    }

    /// A [`crate::state::Keyed`] write merges its entries, after clearing the map when it asks to.
    impl<K: Ord, V> Reducer<crate::state::Keyed<K, V>> for Merge {
        fn reduce(current: &mut crate::state::Keyed<K, V>, written: crate::state::Keyed<K, V>) {
            if written.reset {
                current.entries.clear();
            }
            current.entries.extend(written.entries);
        }
    }

    /// Keys of the written map overwrite the current ones; empty values never overwrite, so a
    /// partial extraction cannot erase what is already known (non-destructive merge).
    pub struct MergeNonEmpty;
    impl Reducer<BTreeMap<String, String>> for MergeNonEmpty {
        fn reduce(current: &mut BTreeMap<String, String>, written: BTreeMap<String, String>) {
            for (key, value) in written {
                if !value.trim().is_empty() {
                    current.insert(key, value);
                }
            }
        }
    }
    impl Reducer<BTreeMap<String, serde_json::Value>> for MergeNonEmpty {
        fn reduce(current: &mut BTreeMap<String, serde_json::Value>, written: BTreeMap<String, serde_json::Value>) {
            for (key, value) in written {
                let empty = match &value {
                    serde_json::Value::Null => true,
                    serde_json::Value::String(s) => s.trim().is_empty(),
                    serde_json::Value::Array(a) => a.is_empty(),
                    serde_json::Value::Object(o) => o.is_empty(),
                    _ => false,
                };
                if !empty {
                    current.insert(key, value);
                }
            }
        }
    }

    /// The written value merges itself into the current one by the type's own rules
    /// ([`crate::state::Mergeable`]).
    pub struct Merged;
    impl<T: crate::state::Mergeable> Reducer<T> for Merged {
        fn reduce(current: &mut T, written: T) {
            current.merge(written);
        }
    }
}

/// A map merged by key (the [`reducer::Merge`] reducer) whose writes can also clear it: for
/// per-task results that a later step starts over (a new plan's research steps).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(bound(
    serialize = "K: Serialize + Ord, V: Serialize",
    deserialize = "K: DeserializeOwned + Ord, V: DeserializeOwned"
))]
pub struct Keyed<K, V> {
    /// In a write: clear the map before merging. Always false in state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    #[serde(default = "std::collections::BTreeMap::new")]
    pub entries: std::collections::BTreeMap<K, V>,
}

impl<K, V> Default for Keyed<K, V> {
    fn default() -> Self {
        Self { reset: false, entries: std::collections::BTreeMap::new() }
    }
}

impl<K: Ord, V> Keyed<K, V> {
    /// A write that merges `entries`.
    pub fn merge(entries: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { reset: false, entries: entries.into_iter().collect() }
    }

    /// A write that clears the map, then merges `entries`.
    pub fn replace(entries: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { reset: true, entries: entries.into_iter().collect() }
    }
}

/// An append-only log (such as a message history) whose writes can also clear it, the way a
/// "clear context" command must.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(bound(deserialize = "T: DeserializeOwned"))]
pub struct Log<T> {
    /// In a write: clear the log before appending. Always false in state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    #[serde(default)]
    pub items: Vec<T>,
}

impl<T> Default for Log<T> {
    fn default() -> Self {
        Self { reset: false, items: Vec::new() }
    }
}

impl<T> Log<T> {
    /// A write that appends `items`.
    pub fn append(items: Vec<T>) -> Self {
        Self { reset: false, items }
    }

    /// A write that clears the log, then appends `items`.
    pub fn replace(items: Vec<T>) -> Self {
        Self { reset: true, items }
    }
}

/// Declares a state struct, its update struct and the [`State`] impl in one place, so a field
/// and its reducer can never drift apart.
///
/// ```
/// frontdesk_runtime::state! {
///     /// Counter state.
///     pub struct Counter / CounterUpdate {
///         count: u32 => Replace,
///         log: Vec<String> => Append,
///     }
/// }
/// let mut s = Counter::default();
/// frontdesk_runtime::State::apply(&mut s, CounterUpdate { count: Some(2), log: Some(vec!["a".into()]) });
/// assert_eq!(s.count, 2);
/// ```
#[macro_export]
macro_rules! state {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident / $update:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $reducer:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        #[doc = concat!("A partial write to [`", stringify!($name), "`]; `None` leaves a field untouched.")]
        #[derive(Debug, Clone, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        $vis struct $update {
            $(
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: ::core::option::Option<$ty>,
            )*
        }

        impl $crate::State for $name {
            type Update = $update;
            fn apply(&mut self, update: $update) {
                $(
                    if let ::core::option::Option::Some(written) = update.$field {
                        <$crate::reducer::$reducer as $crate::Reducer<$ty>>::reduce(&mut self.$field, written);
                    }
                )*
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    crate::state! {
        struct Demo / DemoUpdate {
            name: String => Replace,
            log: Vec<u32> => Append,
            fields: BTreeMap<String, String> => MergeNonEmpty,
        }
    }

    #[test]
    fn keyed_merges_by_key_and_resets_on_request() {
        use crate::Reducer;
        let mut map: Keyed<u32, &str> = Keyed::default();
        reducer::Merge::reduce(&mut map, Keyed::merge([(1, "a"), (2, "b")]));
        reducer::Merge::reduce(&mut map, Keyed::merge([(2, "B"), (3, "c")]));
        assert_eq!(map.entries.into_iter().collect::<Vec<_>>(), [(1, "a"), (2, "B"), (3, "c")]);
        let mut map: Keyed<u32, String> = Keyed::merge([(1, "a".to_owned())]);
        reducer::Merge::reduce(&mut map, Keyed::replace([(7, "z".to_owned())]));
        assert_eq!(map.entries.keys().copied().collect::<Vec<_>>(), [7]);
        let json = serde_json::to_string(&map).unwrap();
        assert_eq!(serde_json::from_str::<Keyed<u32, String>>(&json).unwrap(), map);
    }

    #[test]
    fn reducers_merge_per_field() {
        let mut state = Demo::default();
        state.apply(DemoUpdate {
            name: Some("a".into()),
            log: Some(vec![1]),
            fields: Some(BTreeMap::from([("x".into(), "1".into())])),
        });
        state.apply(DemoUpdate {
            log: Some(vec![2, 3]),
            fields: Some(BTreeMap::from([("x".into(), " ".into()), ("y".into(), "2".into())])),
            ..Default::default()
        });
        assert_eq!(state.name, "a");
        assert_eq!(state.log, vec![1, 2, 3]);
        assert_eq!(state.fields.get("x").map(String::as_str), Some("1"));
        assert_eq!(state.fields.get("y").map(String::as_str), Some("2"));
    }

    #[test]
    fn merged_fields_merge_by_their_own_rules() {
        /// Keeps the largest value written.
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Max(u32);
        impl Mergeable for Max {
            fn merge(&mut self, written: Self) {
                self.0 = self.0.max(written.0);
            }
        }
        crate::state! {
            struct Peak / PeakUpdate {
                peak: Max => Merged,
            }
        }
        let mut state = Peak::default();
        for value in [3, 7, 5] {
            state.apply(PeakUpdate { peak: Some(Max(value)) });
        }
        assert_eq!(state.peak, Max(7));
    }

    #[test]
    fn unwritten_fields_are_not_serialized_in_updates() {
        let update = DemoUpdate { name: Some("n".into()), ..Default::default() };
        assert_eq!(serde_json::to_string(&update).unwrap(), r#"{"name":"n"}"#);
    }
}
