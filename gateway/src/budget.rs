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
use harness_core::routing::config::Price;
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
            prices = serving.into_iter().map(|p| (p.id.clone(), p.price.unwrap_or_default())).collect();
        }
        Pricing { prices, prompt_bytes: messages.to_string().len() as u64 }
    }

    fn dearest(&self) -> Price {
        self.prices.iter().fold(Price::default(), |a, (_, p)| Price { input_per_1k: a.input_per_1k.max(p.input_per_1k), output_per_1k: a.output_per_1k.max(p.output_per_1k) })
    }

    pub fn is_free(&self) -> bool {
        let p = self.dearest();
        p.input_per_1k <= 0.0 && p.output_per_1k <= 0.0
    }

    /// The most the request can cost with `max_tokens` of output.
    pub fn max_cost(&self, max_tokens: u64) -> f64 {
        let p = self.dearest();
        (self.prompt_bytes as f64 * p.input_per_1k + max_tokens as f64 * p.output_per_1k) / 1000.0
    }

    /// An estimate for an answer of `answer_bytes` bytes from `provider` that reported no usage.
    pub fn estimate(&self, provider: Option<&str>, answer_bytes: u64) -> f64 {
        let p = provider.and_then(|id| self.prices.iter().find(|(p, _)| p == id)).map(|(_, p)| *p).unwrap_or_else(|| self.dearest());
        (self.prompt_bytes.div_ceil(4) as f64 * p.input_per_1k + answer_bytes.div_ceil(4) as f64 * p.output_per_1k) / 1000.0
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
