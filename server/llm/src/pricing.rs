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

impl PriceTable {
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
    fn deserializes_from_json() {
        let table: PriceTable =
            serde_json::from_str(r#"{"models":{"m":{"prompt_per_million":1.0,"completion_per_million":2.0}}}"#)
                .unwrap();
        assert!((table.cost("m", usage(1_000_000, 1_000_000)) - 3.0).abs() < 1e-9);
    }
}
