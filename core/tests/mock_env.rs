//! `HARNESS_MOCK=1` and `HARNESS_FAULTS=1` switch mock mode and fault injection on from the
//! environment (a process of its own: the variables are process-wide).

use harness_core::{Client, Request};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_switches_mocks_and_faults_on() {
    let config = json!({"log": {"enabled": false},
        "mock": {"services": {"orders": [{"match": {"path": "/orders/{id}"}, "json": {"id": "{id}"}}]}},
        "faults": {"seed": 3, "rules": [{"service": "orders", "endpoint": "GET /orders/{id}", "rate": 1.0, "fault": "status", "status": 503}]},
        "services": {"orders": {"base_url": "http://127.0.0.1:9", "retry": {"max_retries": 0}}}});
    // Neither is on from config alone: the request goes to the (closed) network.
    let off = Client::from_value(config.clone()).unwrap();
    assert_eq!(off.request(Request::new("orders", "GET", "/orders/1")).await.unwrap_err().name(), "ConnectError");

    std::env::set_var("HARNESS_MOCK", "1");
    let mocked = Client::from_value(config.clone()).unwrap();
    let r = mocked.request(Request::new("orders", "GET", "/orders/1")).await.unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap(), json!({"id": "1"}));

    std::env::set_var("HARNESS_FAULTS", "true");
    let faulty = Client::from_value(config).unwrap();
    let e = faulty.request(Request::new("orders", "GET", "/orders/1")).await.unwrap_err();
    assert_eq!((e.status, e.code.as_deref()), (Some(503), Some("injected_fault")), "faults wrap the mock");
}
