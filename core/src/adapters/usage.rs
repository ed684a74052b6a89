//! Token counts as a provider reports them, read the same way from every answer and chunk.
//!
//! Guarantees: counts never wrap; a count over `MAX_USAGE_TOKENS` is a malformed answer,
//! never a bill; cached input tokens are a part of the input tokens, never more.

use serde::Serialize;
use serde_json::Value;

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// The part of `prompt_tokens` served from the provider's prompt cache (OpenAI's
    /// `prompt_tokens_details.cached_tokens`); 0 when not reported.
    pub cached_tokens: u64,
    /// The part of `completion_tokens` spent on reasoning (OpenAI's
    /// `completion_tokens_details.reasoning_tokens`, Gemini's `thoughtsTokenCount`); 0 when not reported.
    pub reasoning_tokens: u64,
}

/// More tokens than this in one answer's usage is a malformed answer, not a bill: no model
/// call comes near it, and pricing it would put absurd sums into costs and budgets.
pub const MAX_USAGE_TOKENS: u64 = 1_000_000_000;

impl Usage {
    /// The usage object of an answer or chunk; `Ok(None)` when there is none, `Err` when a
    /// count is over `MAX_USAGE_TOKENS`. A missing total is the sum (never wrapping).
    pub(crate) fn from_value(v: Option<&Value>) -> Result<Option<Usage>, String> {
        let Some(o) = v.and_then(Value::as_object) else { return Ok(None) };
        let n = |k: &str| o.get(k).and_then(Value::as_u64);
        let Some(prompt) = n("prompt_tokens").or_else(|| n("input_tokens")) else { return Ok(None) };
        let completion = n("completion_tokens").or_else(|| n("output_tokens")).unwrap_or(0);
        let total = n("total_tokens").unwrap_or(prompt.saturating_add(completion));
        let details = o.get("prompt_tokens_details").or_else(|| o.get("input_tokens_details"));
        let cached = details.and_then(|d| d.get("cached_tokens")).and_then(Value::as_u64).unwrap_or(0);
        let out_details = o.get("completion_tokens_details").or_else(|| o.get("output_tokens_details"));
        let reasoning = out_details.and_then(|d| d.get("reasoning_tokens")).and_then(Value::as_u64).unwrap_or(0);
        Usage::checked(prompt, completion, Some(total), cached, reasoning).map(Some)
    }

    /// Counts as a format reports them, checked: none over `MAX_USAGE_TOKENS`; a missing
    /// total is the sum; cached and reasoning tokens never exceed what they are part of.
    pub(crate) fn checked(prompt: u64, completion: u64, total: Option<u64>, cached: u64, reasoning: u64) -> Result<Usage, String> {
        let total = total.unwrap_or(prompt.saturating_add(completion));
        for (what, count) in [("prompt", prompt), ("completion", completion), ("total", total), ("cached", cached), ("reasoning", reasoning)] {
            if count > MAX_USAGE_TOKENS {
                return Err(format!("malformed usage: {count} {what} tokens (more than {MAX_USAGE_TOKENS})"));
            }
        }
        // Cached tokens are counted within the prompt: more than the prompt is charged as the prompt.
        Ok(Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total, cached_tokens: cached.min(prompt), reasoning_tokens: reasoning.min(completion) })
    }

    /// OpenAI's `usage` object (how a native answer's usage is handed on).
    pub(crate) fn openai_json(&self) -> Value {
        let mut u = serde_json::json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens});
        if self.cached_tokens > 0 {
            u["prompt_tokens_details"] = serde_json::json!({"cached_tokens": self.cached_tokens});
        }
        if self.reasoning_tokens > 0 {
            u["completion_tokens_details"] = serde_json::json!({"reasoning_tokens": self.reasoning_tokens});
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cached_tokens_are_read_from_either_details_and_never_exceed_the_prompt() {
        let u = |v: Value| Usage::from_value(Some(&v));
        let got = u(json!({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 60}})).unwrap().unwrap();
        assert_eq!(got, Usage { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105, cached_tokens: 60, reasoning_tokens: 0 });
        let got = u(json!({"prompt_tokens": 1, "completion_tokens": 50, "completion_tokens_details": {"reasoning_tokens": 40}})).unwrap().unwrap();
        assert_eq!(got.reasoning_tokens, 40);
        let got = u(json!({"input_tokens": 10, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 4}})).unwrap().unwrap();
        assert_eq!(got.cached_tokens, 4);
        assert_eq!(u(json!({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}})).unwrap().unwrap().cached_tokens, 10);
        assert_eq!(u(json!({"prompt_tokens": 10})).unwrap().unwrap().cached_tokens, 0);
        assert!(u(json!({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 1_000_000_001u64}})).unwrap_err().contains("cached"));
    }
}
