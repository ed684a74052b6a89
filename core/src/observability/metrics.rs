//! Prometheus metrics (prefix `harness_`) through prometheus-client.
//!
//! Guarantees: every label value is escaped as the text format requires
//! (prometheus-client writes them raw), so no value can forge a sample.

use std::fmt::Write;

use parking_lot::Mutex;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A label value, escaped on output (`\\`, `\"`, `\n`; other controls as `\u{..}`).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Label(pub String);

impl From<&str> for Label {
    fn from(s: &str) -> Self {
        Label(s.to_string())
    }
}

impl From<String> for Label {
    fn from(s: String) -> Self {
        Label(s)
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c if c.is_control() => write!(encoder, "\\u{{{:x}}}", c as u32)?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub service: Label,
    pub endpoint: Label,
    pub method: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub service: Label,
    pub endpoint: Label,
    pub method: Label,
    /// The final status code, or `error` when there was no response.
    pub status: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub service: Label,
    pub endpoint: Label,
    pub method: Label,
    pub kind: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    pub service: Label,
    pub endpoint: Label,
    pub method: Label,
    pub from: Label,
    pub to: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabels {
    pub service: Label,
    /// The key's configured name or its index, never the key.
    pub key: Label,
    /// `sent`, or the status that answered about the key (`401`, `403`, `429`).
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `applied` or `rejected`.
    pub result: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigVersionLabels {
    /// The config source's name.
    pub name: Label,
    pub version: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PushLabels {
    /// What this instance did with a version from the config source: `applied` or `rejected`.
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    pub service: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteAttemptLabels {
    pub route: Label,
    pub provider: Label,
    /// `success`, or the error kind of a failed attempt.
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    pub route: Label,
    pub provider: Label,
    pub model: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailoverLabels {
    pub route: Label,
    pub from: Label,
    pub to: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// The service, or the route.
    pub service: Label,
    pub endpoint: Label,
    /// `hit`, `revalidated`, `stale`, `exact`, `semantic`, `coalesced`, `miss`, `stored`, `bypass`.
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    pub route: Label,
    /// `cache` or `static`.
    pub kind: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub service: Label,
    /// `success` or `failure`.
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    pub route: Label,
    pub provider: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    pub service: Label,
    pub fault: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SchemaLabels {
    pub service: Label,
    pub endpoint: Label,
}

/// One attempt, for the retry heatmap: which attempt of its request, and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub service: Label,
    pub endpoint: Label,
    /// `1`, `2`, ... (`10+` past nine retries).
    pub attempt: Label,
    /// `success`, or the error kind (`HttpStatusError`, `TimeoutError`, ...).
    pub outcome: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLatencyLabels {
    pub service: Label,
    pub endpoint: Label,
    pub attempt: Label,
}

/// The attempt number as a label (bounded: `10+` for the tenth and later).
pub fn attempt_label(n: u32) -> &'static str {
    const L: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    L.get(n as usize).copied().unwrap_or("10+")
}

type CostCounter = Counter<f64, std::sync::atomic::AtomicU64>;

fn latency_histogram() -> Histogram {
    Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
}

pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RequestLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    pub retries: Family<EndpointLabels, Counter>,
    pub breaker_transitions: Family<TransitionLabels, Counter>,
    pub bulkhead_in_use: Family<ServiceLabels, Gauge>,
    pub config_reloads: Family<ReloadLabels, Counter>,
    /// 1 for the config source's version this instance runs (0: the bootstrap config).
    pub config_version: Family<ConfigVersionLabels, Gauge>,
    pub config_pushes: Family<PushLabels, Counter>,
    pub events_dropped: Counter,
    pub audit_dropped: Counter,
    pub pool_keys: Family<KeyLabels, Counter>,
    pub route_attempts: Family<RouteAttemptLabels, Counter>,
    pub cost: Family<CostLabels, CostCounter>,
    pub failed_cost: Family<CostLabels, CostCounter>,
    pub failovers: Family<FailoverLabels, Counter>,
    pub fallbacks: Family<FallbackLabels, Counter>,
    pub cache: Family<CacheLabels, Counter>,
    /// Provider cost a cached chat answer saved, by route.
    pub cache_saved: Family<ServiceLabels, CostCounter>,
    pub schema_violations: Family<SchemaLabels, Counter>,
    pub faults_injected: Family<FaultLabels, Counter>,
    pub token_refreshes: Family<OutcomeLabels, Counter>,
    pub budget_exhausted: Family<ServiceLabels, Counter>,
    /// 0 closed, 1 half-open, 2 open; set when metrics are read.
    pub breaker_state: Family<EndpointLabels, Gauge>,
    /// 0.0 to 1.0 per route and provider; set when metrics are read.
    pub provider_health: Family<ProviderLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub attempts: Family<AttemptLabels, Counter>,
    pub attempt_latency: Family<AttemptLatencyLabels, Histogram, fn() -> Histogram>,
    pub rate_limited: Family<ServiceLabels, Counter>,
    pub rate_limit_wait: Family<ServiceLabels, Histogram, fn() -> Histogram>,
    pub rate_limit_paused: Family<ServiceLabels, Gauge>,
    pub hedges_sent: Family<ServiceLabels, Counter>,
    pub hedges_won: Family<ServiceLabels, Counter>,
    pub bulkhead_limit: Family<ServiceLabels, Gauge>,
    /// Per endpoint, set when metrics are read (`sliding_window` breakers; 0 otherwise).
    pub breaker_failure_rate: Family<EndpointLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub breaker_slow_call_rate: Family<EndpointLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The share of calls a breaker lets through: 1 closed, 0 open, the ramp step's fraction.
    pub breaker_admit_ratio: Family<EndpointLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

/// Registers each metric under its name and help text, and hands it back for the struct.
struct Registering<'a>(&'a mut Registry);

impl Registering<'_> {
    fn add<M: prometheus_client::registry::Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0.register(name, help, metric.clone());
        metric
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("harness");
        let mut r = Registering(&mut registry);
        let requests = r.add("requests", "Requests completed, by final status", Default::default());
        let errors = r.add("errors", "Requests that ended in an error, by error kind", Default::default());
        let latency = r.add("request_duration_seconds", "Wall time of a request, retries and backoff included", Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram));
        let retries = r.add("retries", "Attempts made after the first", Default::default());
        let breaker_transitions = r.add("breaker_transitions", "Circuit breaker state changes", Default::default());
        let bulkhead_in_use = r.add("bulkhead_permits_in_use", "Bulkhead permits currently held", Default::default());
        let config_reloads = r.add("config_reloads", "Config reloads, by result (applied or rejected)", Default::default());
        let config_version = r.add("config_version_info", "The fleet config version this instance runs (config_source), always 1", Default::default());
        let config_pushes = r.add("config_push", "Versions from the fleet config source, by what this instance did (applied or rejected)", Default::default());
        let events_dropped = r.add("events_dropped", "Events dropped because a listener fell behind", Default::default());
        let audit_dropped = r.add("audit_dropped", "Audit records dropped because the writer fell behind", Default::default());
        let pool_keys = r.add("auth_pool_keys", "Key-pool use by key (name or index) and outcome", Default::default());
        let route_attempts = r.add("route_attempts", "Attempts per route and provider, by outcome", Default::default());
        let cost = r.add("cost", "Cost of the answers served, from the configured prices", Default::default());
        let failed_cost = r.add("failed_attempt_cost", "Cost reported by attempts that did not become the answer", Default::default());
        let failovers = r.add("route_failovers", "Moves from one provider to another within a request", Default::default());
        let fallbacks = r.add("route_fallbacks", "Requests served a degraded answer (cache or static)", Default::default());
        let cache = r.add("cache", "Cache outcomes: hit, revalidated, stale, exact, semantic, coalesced, miss, stored, bypass", Default::default());
        let cache_saved = r.add("cache_saved_cost", "Provider cost saved by cached chat answers", Default::default());
        let token_refreshes = r.add("token_refreshes", "Credential refreshes by outcome", Default::default());
        let budget_exhausted = r.add("retry_budget_exhausted", "Retries refused because the retry budget was spent", Default::default());
        let breaker_state = r.add("breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open", Default::default());
        let provider_health = r.add("provider_health", "A route provider's health score, 0 to 1", Default::default());
        let schema_violations = r.add("schema_violations", "2xx bodies that did not match the endpoint's JSON Schema (enforced or warned)", Default::default());
        let faults_injected = r.add("faults_injected", "Faults injected by `faults:` rules, by service and kind", Default::default());
        let attempts = r.add("attempts", "Attempts by attempt number and outcome (the retry heatmap)", Default::default());
        let attempt_latency = r.add("attempt_duration_seconds", "Time of one attempt, to its answer, by attempt number", Family::<AttemptLatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram));
        let rate_limited = r.add("rate_limited", "Requests refused by a client-side rate limit (nothing was sent)", Default::default());
        let rate_limit_wait = r.add("rate_limit_wait_seconds", "Time requests waited for rate-limit capacity or a pause", Family::<ServiceLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram));
        let rate_limit_paused = r.add("rate_limit_paused_ms", "Milliseconds left of a 429 pause, per service (0: not paused)", Default::default());
        let hedges_sent = r.add("hedges_sent", "Hedged attempts started (a second attempt on a slow idempotent request)", Default::default());
        let hedges_won = r.add("hedges_won", "Hedged attempts whose answer was used", Default::default());
        let bulkhead_limit = r.add("bulkhead_limit", "The bulkhead's current limit (moves when adaptive)", Default::default());
        let breaker_failure_rate = r.add("breaker_failure_rate", "Failure rate over a sliding-window breaker's window", Default::default());
        let breaker_slow_call_rate = r.add("breaker_slow_call_rate", "Slow-call rate over a sliding-window breaker's window", Default::default());
        let breaker_admit_ratio = r.add("breaker_admit_ratio", "Share of calls a breaker lets through: 1 closed, 0 open, the ramp step while recovering", Default::default());
        Metrics {
            hedges_sent,
            hedges_won,
            bulkhead_limit,
            breaker_failure_rate,
            breaker_slow_call_rate,
            breaker_admit_ratio,
            registry: Mutex::new(registry),
            schema_violations,
            faults_injected,
            token_refreshes,
            budget_exhausted,
            breaker_state,
            provider_health,
            attempts,
            attempt_latency,
            rate_limited,
            rate_limit_wait,
            rate_limit_paused,
            route_attempts,
            cost,
            failed_cost,
            failovers,
            fallbacks,
            cache,
            cache_saved,
            requests,
            errors,
            latency,
            retries,
            breaker_transitions,
            bulkhead_in_use,
            config_reloads,
            config_version,
            config_pushes,
            events_dropped,
            audit_dropped,
            pool_keys,
        }
    }

    /// The (success, failure) refresh counters of a service's credential.
    pub fn refresh_counters(&self, service: &str) -> (Counter, Counter) {
        let get = |outcome: &str| self.token_refreshes.get_or_create(&OutcomeLabels { service: service.into(), outcome: outcome.into() }).clone();
        (get("success"), get("failure"))
    }

    /// Drops every series of one endpoint (its state was evicted).
    pub fn remove_endpoint(&self, labels: &EndpointLabels, statuses: &[String]) {
        self.latency.remove(labels);
        self.breaker_state.remove(labels);
        self.breaker_failure_rate.remove(labels);
        self.breaker_slow_call_rate.remove(labels);
        self.breaker_admit_ratio.remove(labels);
        self.retries.remove(labels);
        for n in 0..=10u32 {
            let attempt: Label = attempt_label(n).into();
            self.attempt_latency.remove(&AttemptLatencyLabels { service: labels.service.clone(), endpoint: labels.endpoint.clone(), attempt: attempt.clone() });
            for outcome in std::iter::once("success").chain(crate::error::ErrorKind::NAMES) {
                self.attempts.remove(&AttemptLabels {
                    service: labels.service.clone(),
                    endpoint: labels.endpoint.clone(),
                    attempt: attempt.clone(),
                    outcome: outcome.into(),
                });
            }
        }
        for status in statuses {
            self.requests.remove(&RequestLabels {
                service: labels.service.clone(),
                endpoint: labels.endpoint.clone(),
                method: labels.method.clone(),
                status: Label(status.clone()),
            });
        }
        for kind in crate::error::ErrorKind::NAMES {
            self.errors.remove(&ErrorLabels {
                service: labels.service.clone(),
                endpoint: labels.endpoint.clone(),
                method: labels.method.clone(),
                kind: kind.into(),
            });
        }
        for (from, to) in [("closed", "open"), ("open", "half_open"), ("half_open", "closed"), ("half_open", "open")] {
            self.breaker_transitions.remove(&TransitionLabels {
                service: labels.service.clone(),
                endpoint: labels.endpoint.clone(),
                method: labels.method.clone(),
                from: from.into(),
                to: to.into(),
            });
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_cannot_forge_samples() {
        let m = Metrics::new();
        let labels = EndpointLabels {
            service: "svc".into(),
            endpoint: "/x\"} 1\nharness_evil{a=\"b\\".into(),
            method: "GET".into(),
        };
        m.retries.get_or_create(&labels).inc();
        let text = m.encode();
        let line = text.lines().find(|l| l.starts_with("harness_retries_total{")).unwrap();
        assert_eq!(line, r#"harness_retries_total{service="svc",endpoint="/x\"} 1\nharness_evil{a=\"b\\",method="GET"} 1"#);
        assert!(!text.lines().any(|l| l.starts_with("harness_evil")));
    }
}
