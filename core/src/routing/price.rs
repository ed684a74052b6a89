//! What an answer costs: a provider's own `price`, else the top-level `prices:` entry for
//! its model, applied to the usage the provider reported.
//!
//! Guarantees: a provider's own `price` wins whole over the table (never a mix of the two);
//! cached input tokens are charged at the cached rate and the rest of the input at the
//! input rate; an answer without usage is priced only when its price is per request alone
//! (a cost is never guessed); a negative, NaN or infinite price is a `ConfigError` naming
//! the field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::adapters::usage::Usage;
use crate::error::HarnessError;
use crate::redact::escape_control;

/// Prices in one currency: per 1,000 tokens, and per answered request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Price {
    pub input_per_1k: f64,
    pub output_per_1k: f64,
    /// Input tokens served from the provider's prompt cache (default: `input_per_1k`).
    pub cached_input_per_1k: Option<f64>,
    /// Added to every priced answer.
    pub per_request: f64,
}

impl Price {
    /// Each field a finite number >= 0; `at` is the price's field path.
    pub(crate) fn validate(&self, at: &str) -> Result<(), HarnessError> {
        let fields = [
            ("input_per_1k", Some(self.input_per_1k)),
            ("output_per_1k", Some(self.output_per_1k)),
            ("cached_input_per_1k", self.cached_input_per_1k),
            ("per_request", Some(self.per_request)),
        ];
        for (field, v) in fields {
            if let Some(v) = v {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err(HarnessError::config(format!("{at}.{field}: expected a number >= 0, got {v}")));
                }
            }
        }
        Ok(())
    }

    fn charges_tokens(&self) -> bool {
        self.input_per_1k > 0.0 || self.output_per_1k > 0.0 || self.cached_input_per_1k.is_some_and(|c| c > 0.0)
    }

    /// The cost of one answer with `usage`; `None` when it cannot be known.
    pub fn cost(&self, usage: Option<&Usage>) -> Option<f64> {
        let Some(u) = usage else {
            // Without usage only a per-request price is known for certain.
            return (self.per_request > 0.0 && !self.charges_tokens()).then_some(self.per_request);
        };
        let cached = u.cached_tokens.min(u.prompt_tokens);
        let fresh = u.prompt_tokens - cached;
        let cached_rate = self.cached_input_per_1k.unwrap_or(self.input_per_1k);
        Some(
            fresh as f64 / 1000.0 * self.input_per_1k
                + cached as f64 / 1000.0 * cached_rate
                + u.completion_tokens as f64 / 1000.0 * self.output_per_1k
                + self.per_request,
        )
    }
}

/// The top-level `prices:` table, keyed by the model name a provider is configured with.
pub(crate) fn validate_table(prices: &BTreeMap<String, Price>) -> Result<(), HarnessError> {
    for (model, price) in prices {
        price.validate(&format!("prices.{}", escape_control(model)))?;
    }
    Ok(())
}

/// The price of a provider: its own `price`, else the table's entry for its `model`.
pub fn resolve(own: Option<Price>, model: Option<&str>, prices: &BTreeMap<String, Price>) -> Option<Price> {
    own.or_else(|| prices.get(model?).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, completion: u64, cached: u64) -> Usage {
        Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, cached_tokens: cached, reasoning_tokens: 0 }
    }

    #[test]
    fn tokens_are_priced_per_1k_with_cached_input_at_its_own_rate() {
        let p = Price { input_per_1k: 0.15, output_per_1k: 0.6, ..Default::default() };
        assert!((p.cost(Some(&usage(1000, 500, 0))).unwrap() - 0.45).abs() < 1e-12);
        // Without a cached rate, cached tokens cost what input costs (the provider's bill before caching).
        assert!((p.cost(Some(&usage(1000, 500, 400))).unwrap() - 0.45).abs() < 1e-12);
        let p = Price { input_per_1k: 1.0, output_per_1k: 2.0, cached_input_per_1k: Some(0.25), per_request: 0.01 };
        // 600 fresh at 1.0, 400 cached at 0.25, 500 out at 2.0, plus 0.01.
        assert!((p.cost(Some(&usage(1000, 500, 400))).unwrap() - (0.6 + 0.1 + 1.0 + 0.01)).abs() < 1e-12);
    }

    #[test]
    fn an_answer_without_usage_is_priced_only_per_request() {
        let per_request = Price { per_request: 0.002, ..Default::default() };
        assert_eq!(per_request.cost(None), Some(0.002));
        let tokens = Price { input_per_1k: 1.0, per_request: 0.002, ..Default::default() };
        assert_eq!(tokens.cost(None), None);
        assert_eq!(Price::default().cost(None), None);
    }

    #[test]
    fn a_provider_price_wins_whole_over_the_table() {
        let table = BTreeMap::from([("m".to_string(), Price { input_per_1k: 1.0, per_request: 0.5, ..Default::default() })]);
        let own = Price { output_per_1k: 3.0, ..Default::default() };
        assert_eq!(resolve(Some(own), Some("m"), &table), Some(own));
        assert_eq!(resolve(None, Some("m"), &table), Some(table["m"]));
        assert_eq!(resolve(None, Some("other"), &table), None);
        assert_eq!(resolve(None, None, &table), None);
    }

    #[test]
    fn bad_prices_name_their_field() {
        let nan = Price { cached_input_per_1k: Some(f64::NAN), ..Default::default() };
        let e = validate_table(&BTreeMap::from([("gpt-x".to_string(), nan)])).unwrap_err();
        assert_eq!(e.message, "prices.gpt-x.cached_input_per_1k: expected a number >= 0, got NaN");
        let neg = Price { per_request: -1.0, ..Default::default() };
        assert!(neg.validate("p").unwrap_err().message.starts_with("p.per_request: expected a number >= 0"));
        let inf = Price { output_per_1k: f64::INFINITY, ..Default::default() };
        assert!(inf.validate("p").unwrap_err().message.starts_with("p.output_per_1k"));
    }
}
