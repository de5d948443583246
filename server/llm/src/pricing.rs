//! Token prices, to turn usage into dollars for budgets and reports.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TokenUsage;

/// Price of one model in USD per million tokens.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModelPrice {
    pub prompt_per_million: f64,
    pub completion_per_million: f64,
}

/// Prices by model name.
///
/// Unknown models cost 0.0 rather than failing: a missing price must not break a workflow, and
/// local models are genuinely free.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PriceTable {
    pub models: BTreeMap<String, ModelPrice>,
}

/// OpenAI's published list prices, USD per million tokens (input, output), as of 2025
/// (<https://openai.com/api/pricing/>). Standard tier; cached-input and batch discounts are not
/// modelled, so a cost computed from them is an upper bound. They go stale: configuration
/// overrides any of them (`model.prices`).
pub const OPENAI_LIST_PRICES_2025: &[(&str, f64, f64)] = &[
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
];

impl PriceTable {
    /// The compiled-in defaults: [`OPENAI_LIST_PRICES_2025`]. Without them every hosted call
    /// reported `costUsd` 0 until someone thought to configure prices, which reads as "free".
    pub fn defaults() -> Self {
        OPENAI_LIST_PRICES_2025
            .iter()
            .fold(Self::default(), |table, &(model, prompt, completion)| table.with_model(model, prompt, completion))
    }

    /// Adds or replaces the price of `model` (builder style).
    pub fn with_model(
        mut self,
        model: impl Into<String>,
        prompt_per_million: f64,
        completion_per_million: f64,
    ) -> Self {
        self.models.insert(model.into(), ModelPrice { prompt_per_million, completion_per_million });
        self
    }

    /// Cost in USD of `usage` on `model`: tokens * price / 1e6; unknown model => 0.0.
    ///
    /// Providers often report a dated variant ("gpt-4o-2024-08-06") of the configured name, so
    /// when there is no exact entry the longest configured name that prefixes `model` is used.
    pub fn cost(&self, model: &str, usage: TokenUsage) -> f64 {
        let price = self.models.get(model).or_else(|| {
            self.models
                .iter()
                .filter(|(name, _)| !name.is_empty() && model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, price)| price)
        });
        match price {
            Some(p) => {
                (usage.prompt_tokens as f64 * p.prompt_per_million
                    + usage.completion_tokens as f64 * p.completion_per_million)
                    / 1e6
            }
            None => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(p: u64, c: u64) -> TokenUsage {
        TokenUsage { prompt_tokens: p, completion_tokens: c }
    }

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let table = PriceTable::default().with_model("gpt-4o", 2.5, 10.0);
        let cost = table.cost("gpt-4o", usage(1_000_000, 500_000));
        assert!((cost - 7.5).abs() < 1e-9, "{cost}");
        let small = table.cost("gpt-4o", usage(100, 10));
        assert!((small - (100.0 * 2.5 + 10.0 * 10.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn unknown_model_is_free() {
        let table = PriceTable::default().with_model("gpt-4o", 2.5, 10.0);
        assert_eq!(table.cost("llama3", usage(1000, 1000)), 0.0);
        assert_eq!(PriceTable::default().cost("gpt-4o", usage(1000, 1000)), 0.0);
    }

    #[test]
    fn dated_variant_uses_longest_prefix() {
        let table = PriceTable::default().with_model("gpt-4o", 2.5, 10.0).with_model("gpt-4o-mini", 0.15, 0.6);
        let cost = table.cost("gpt-4o-mini-2024-07-18", usage(1_000_000, 0));
        assert!((cost - 0.15).abs() < 1e-9);
    }

    #[test]
    fn well_known_openai_models_are_priced_by_default() {
        let table = PriceTable::defaults();
        for (model, _, _) in OPENAI_LIST_PRICES_2025 {
            assert!(table.cost(model, usage(1000, 1000)) > 0.0, "{model}");
        }
        let mini = table.cost("gpt-4o-mini-2024-07-18", usage(1_000_000, 1_000_000));
        assert!((mini - 0.75).abs() < 1e-9, "a dated variant takes its base model's price: {mini}");
        let nano = table.cost("gpt-4.1-nano-2025-04-14", usage(1_000_000, 0));
        assert!((nano - 0.10).abs() < 1e-9, "the longest prefix, not gpt-4.1: {nano}");
        assert_eq!(table.cost("llama3.1:8b", usage(1000, 1000)), 0.0);
    }

    #[test]
    fn deserializes_from_json() {
        let table: PriceTable =
            serde_json::from_str(r#"{"models":{"m":{"prompt_per_million":1.0,"completion_per_million":2.0}}}"#)
                .unwrap();
        assert!((table.cost("m", usage(1_000_000, 1_000_000)) - 3.0).abs() < 1e-9);
    }
}
