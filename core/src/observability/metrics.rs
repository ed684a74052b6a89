//! Prometheus metrics (prefix `harness_`) through prometheus-client.

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub service: String,
    pub endpoint: String,
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub service: String,
    pub endpoint: String,
    pub method: String,
    /// The final status code, or `error` when there was no response.
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub service: String,
    pub endpoint: String,
    pub method: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    pub service: String,
    pub endpoint: String,
    pub method: String,
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    pub service: String,
}

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
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("harness");
        let requests = Family::<RequestLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let latency = Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let retries = Family::<EndpointLabels, Counter>::default();
        let breaker_transitions = Family::<TransitionLabels, Counter>::default();
        let bulkhead_in_use = Family::<ServiceLabels, Gauge>::default();
        registry.register("requests", "Requests completed, by final status", requests.clone());
        registry.register("errors", "Requests that ended in an error, by error kind", errors.clone());
        registry.register(
            "request_duration_seconds",
            "Wall time of a request, retries and backoff included",
            latency.clone(),
        );
        registry.register("retries", "Attempts made after the first", retries.clone());
        registry.register("breaker_transitions", "Circuit breaker state changes", breaker_transitions.clone());
        registry.register("bulkhead_permits_in_use", "Bulkhead permits currently held", bulkhead_in_use.clone());
        Metrics { registry: Mutex::new(registry), requests, errors, latency, retries, breaker_transitions, bulkhead_in_use }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}
