//! Caller budgets (`budget_per_day`, in the routes' price unit).
//!
//! Guarantees: a chat request reserves the most it can cost when it is admitted (its prompt at
//! one token per byte, a token being at least a byte, plus its `max_tokens`, at the dearest price
//! among the providers that may serve it) and settles what it did cost when it ends; a caller is
//! admitted while what it spent today plus what is reserved stays under its budget, so however
//! many requests run at once, spend passes the budget by at most one request's reservation. A
//! stream is charged for what was streamed, even when the caller leaves before its end: the
//! provider's cost when it reported usage, else an estimate (one token per 4 bytes of the prompt
//! and of the streamed text, at the provider's price).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use harness_core::observability::metrics::Label;
use harness_core::routing::price::{self, Price};
use harness_core::Config;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

// A core `Label`: escaped on output (prometheus-client writes values raw), so no caller name can
// end a label or start a sample of its own.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CallerLabels {
    caller: Label,
}

/// Spend by caller (`harness_gateway_cost`).
pub(crate) type CostFamily = Family<CallerLabels, Counter<f64, AtomicU64>>;

/// One caller's day.
#[derive(Default)]
struct Spend {
    day: u64,
    spent: f64,
    reserved: f64,
}

fn today() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 86_400).unwrap_or(0)
}

impl Spend {
    fn roll(&mut self) {
        let today = today();
        if self.day != today {
            self.day = today;
            self.spent = 0.0;
        }
    }
}

/// Every caller's spend and reservations (today's), by caller name, and the cost counters.
#[derive(Default)]
pub(crate) struct Budgets {
    spend: Mutex<HashMap<String, Spend>>,
    cost: CostFamily,
}

impl Budgets {
    /// The cost counters, to register with the gateway's metrics (a clone shares the counters).
    pub fn cost(&self) -> CostFamily {
        self.cost.clone()
    }

    /// Reserves `amount` for `caller`, whose budget is `budget_per_day`; `None` when its budget
    /// for today is used up (spent and reserved). A caller without a budget is always admitted.
    pub fn reserve(self: &Arc<Self>, caller: &str, budget_per_day: Option<f64>, amount: f64) -> Option<Reservation> {
        let amount = if amount.is_finite() { amount.max(0.0) } else { f64::MAX };
        if let Some(budget) = budget_per_day {
            let mut spend = self.spend.lock();
            let s = spend.entry(caller.to_string()).or_default();
            s.roll();
            if s.spent + s.reserved >= budget {
                return None;
            }
            s.reserved += amount;
        }
        Some(Reservation { budgets: self.clone(), caller: caller.to_string(), budgeted: budget_per_day.is_some(), amount, settled: false })
    }

    /// What `caller` spent today, and what its requests in flight hold reserved.
    pub fn spent_today(&self, caller: &str) -> (f64, f64) {
        let mut spend = self.spend.lock();
        match spend.get_mut(caller) {
            Some(s) => {
                s.roll();
                (s.spent, s.reserved)
            }
            None => (0.0, 0.0),
        }
    }

    fn settle(&self, caller: &str, budgeted: bool, reserved: f64, cost: f64) {
        let cost = if cost.is_finite() { cost.max(0.0) } else { 0.0 };
        if cost > 0.0 {
            self.cost.get_or_create(&CallerLabels { caller: caller.into() }).inc_by(cost);
        }
        // Whether the caller had a budget when it reserved (a reload makes new callers), so a
        // reservation is released exactly when one was made.
        if !budgeted {
            return;
        }
        let mut spend = self.spend.lock();
        let s = spend.entry(caller.to_string()).or_default();
        s.reserved = (s.reserved - reserved).max(0.0);
        s.roll();
        s.spent += cost;
    }
}

/// What one admitted request holds of its caller's budget until it settles (dropped
/// unsettled: released, nothing charged).
pub(crate) struct Reservation {
    budgets: Arc<Budgets>,
    caller: String,
    /// The caller had a budget when it reserved.
    budgeted: bool,
    amount: f64,
    settled: bool,
}

impl Reservation {
    /// Releases the reservation and charges `cost`.
    pub fn settle(mut self, cost: f64) {
        self.settled = true;
        self.budgets.settle(&self.caller, self.budgeted, self.amount, cost);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.budgets.settle(&self.caller, self.budgeted, self.amount, 0.0);
        }
    }
}

/// The prices a chat request may be charged at, and its prompt's size.
pub(crate) struct Pricing {
    /// Provider id -> price, for the providers that may serve the request.
    prices: Vec<(String, Price)>,
    /// Bytes of the messages as JSON.
    prompt_bytes: u64,
}

impl Pricing {
    /// The providers of `route` that may serve `model` (`route` or `route/model`).
    pub fn new(cfg: &Config, route: &str, model: &str, messages: &serde_json::Value) -> Pricing {
        let pinned = model.split_once('/').map(|(_, m)| m);
        let mut prices: Vec<(String, Price)> = Vec::new();
        if let Some(r) = cfg.routes.get(route) {
            let serving: Vec<_> = r.providers.iter().filter(|p| pinned.is_none_or(|m| p.model.as_deref() == Some(m))).collect();
            let serving = if serving.is_empty() { r.providers.iter().collect() } else { serving };
            // The price the core charges: the provider's own, else the `prices:` entry for its model.
            prices = serving.into_iter().map(|p| (p.id.clone(), price::resolve(p.price, p.model.as_deref(), &cfg.prices).unwrap_or_default())).collect();
        }
        Pricing { prices, prompt_bytes: messages.to_string().len() as u64 }
    }

    /// Each rate at its highest among the providers (an input token at the dearer of the
    /// fresh and cached rates: whether it is cached is known only afterwards).
    fn dearest(&self) -> Price {
        self.prices.iter().fold(Price::default(), |a, (_, p)| Price {
            input_per_1k: a.input_per_1k.max(p.input_per_1k).max(p.cached_input_per_1k.unwrap_or(0.0)),
            output_per_1k: a.output_per_1k.max(p.output_per_1k),
            cached_input_per_1k: None,
            per_request: a.per_request.max(p.per_request),
        })
    }

    pub fn is_free(&self) -> bool {
        let p = self.dearest();
        p.input_per_1k <= 0.0 && p.output_per_1k <= 0.0 && p.per_request <= 0.0
    }

    /// The most the request can cost with `max_tokens` of output.
    pub fn max_cost(&self, max_tokens: u64) -> f64 {
        let p = self.dearest();
        (self.prompt_bytes as f64 * p.input_per_1k + max_tokens as f64 * p.output_per_1k) / 1000.0 + p.per_request
    }

    /// An estimate for an answer of `answer_bytes` bytes from `provider` that reported no usage
    /// (its input all fresh, as nothing says any of it was cached).
    pub fn estimate(&self, provider: Option<&str>, answer_bytes: u64) -> f64 {
        let p = provider.and_then(|id| self.prices.iter().find(|(p, _)| p == id)).map(|(_, p)| *p).unwrap_or_else(|| self.dearest());
        (self.prompt_bytes.div_ceil(4) as f64 * p.input_per_1k + answer_bytes.div_ceil(4) as f64 * p.output_per_1k) / 1000.0 + p.per_request
    }
}

/// A stream's charge: what each provider streamed, settled when the stream ends or is dropped.
pub(crate) struct StreamCharge {
    reservation: Option<Reservation>,
    pricing: Pricing,
    /// Bytes of content each provider streamed.
    streamed: HashMap<String, u64>,
}

impl StreamCharge {
    pub fn new(reservation: Reservation, pricing: Pricing) -> Self {
        StreamCharge { reservation: Some(reservation), pricing, streamed: HashMap::new() }
    }

    pub fn delta(&mut self, provider: Option<&str>, content: &str) {
        *self.streamed.entry(provider.unwrap_or_default().to_string()).or_default() += content.len() as u64;
    }

    /// The estimate for every provider that streamed content, but `except`.
    fn estimated(&self, except: Option<&str>) -> f64 {
        self.streamed.iter().filter(|(p, n)| **n > 0 && Some(p.as_str()) != except).map(|(p, n)| self.pricing.estimate((!p.is_empty()).then_some(p.as_str()), *n)).sum()
    }

    /// The stream ended with `provider`'s answer, which cost `cost` if it reported usage.
    /// Returns the charge.
    pub fn done(&mut self, provider: Option<&str>, cost: Option<f64>) -> f64 {
        let charge = match cost {
            Some(c) => c + self.estimated(provider),
            None => self.estimated(None),
        };
        if let Some(r) = self.reservation.take() {
            r.settle(charge);
        }
        charge
    }
}

impl Drop for StreamCharge {
    /// Ended early (the caller left, or an error): what was streamed, estimated.
    fn drop(&mut self) {
        if let Some(r) = self.reservation.take() {
            r.settle(self.estimated(None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reservations_use_the_price_the_core_charges_table_and_per_request_included() {
        let cfg = Config::from_value(json!({
            "services": {"s": {"base_url": "http://127.0.0.1:1"}},
            "prices": {"m1": {"input_per_1k": 2.0, "output_per_1k": 4.0, "cached_input_per_1k": 0.5, "per_request": 0.25}},
            "routes": {"chat": {"adapter": "openai-compatible", "providers": [
                {"id": "a", "service": "s", "model": "m1", "weight": 1},
                {"id": "b", "service": "s", "model": "m2", "weight": 1, "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}}]}}
        }))
        .unwrap();
        let messages = json!("x".repeat(998)); // 1000 bytes as JSON
        let pricing = Pricing::new(&cfg, "chat", "chat", &messages);
        assert!(!pricing.is_free());
        // The dearest: a's table price (input 2.0, output 4.0, 0.25 a request).
        assert!((pricing.max_cost(500) - (2.0 + 2.0 + 0.25)).abs() < 1e-9, "{}", pricing.max_cost(500));
        // a's estimate: 250 prompt tokens and 100 answer tokens at its table price, plus 0.25.
        assert!((pricing.estimate(Some("a"), 400) - (0.5 + 0.4 + 0.25)).abs() < 1e-9);
        // b's own price, no per-request price.
        assert!((pricing.estimate(Some("b"), 400) - 0.35).abs() < 1e-9);
        // Only b may serve `chat/m2`.
        let pinned = Pricing::new(&cfg, "chat", "chat/m2", &messages);
        assert!((pinned.max_cost(500) - 1.5).abs() < 1e-9);
        // A per-request price alone is not free.
        let cfg = Config::from_value(json!({
            "services": {"s": {"base_url": "http://127.0.0.1:1"}},
            "prices": {"m1": {"per_request": 0.01}},
            "routes": {"chat": {"providers": [{"id": "a", "service": "s", "model": "m1", "weight": 1}]}}
        }))
        .unwrap();
        assert!(!Pricing::new(&cfg, "chat", "chat", &messages).is_free());
    }
}
