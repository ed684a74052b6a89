//! Files a config names, as a user sees them: relative references in a config file resolve
//! against the file's folder (not the working directory); every file must be a regular file
//! under the size cap, or the load (or reload) fails with a `ConfigError` naming the field.

use harness_core::{Client, Request};
use serde_json::json;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("harness-cfgfiles-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf/fixtures")).unwrap();
    std::fs::create_dir_all(dir.join("conf/secrets")).unwrap();
    std::fs::create_dir_all(dir.join("conf/schemas")).unwrap();
    dir
}

/// Regression: `json_file: fixtures/order-created.json` in `conf/harness.json` failed unless
/// the process ran in `conf/`. Every reference resolves against the file's folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_references_in_a_config_file_resolve_against_its_folder() {
    let u = harness_upstream::start().await.unwrap();
    let dir = temp_dir("rel");
    let conf = dir.join("conf");
    std::fs::write(conf.join("fixtures/order-created.json"), r#"{"id": 7, "status": "created"}"#).unwrap();
    std::fs::write(conf.join("secrets/token"), "tok-from-file-123\n").unwrap();
    std::fs::write(conf.join("schemas/order.json"), r#"{"type": "object", "required": ["id"]}"#).unwrap();
    // One file mocks a service from a fixture; the other names a secret, a schema and the audit file.
    let mocked = json!({
        "log": {"enabled": false},
        "services": {"orders": {"base_url": "http://orders.invalid"}},
        "mock": {"enabled": true, "services": {"orders": [{"match": {"path": "/orders/{id}"}, "json_file": "fixtures/order-created.json"}]}}
    });
    let real = json!({
        "log": {"enabled": false},
        "services": {"api": {
            "base_url": u.url(),
            "auth": {"type": "bearer", "token": {"file": "secrets/token"}},
            "endpoints": {"GET /s/rel/{id}": {"response_schema": "schemas/order.json", "validate": "enforce"}}
        }},
        "audit": {"enabled": true, "sink": {"file": "logs/audit.jsonl"}}
    });
    std::fs::create_dir_all(conf.join("logs")).unwrap();
    let (mocked_path, real_path) = (conf.join("mocked.json"), conf.join("harness.yaml"));
    std::fs::write(&mocked_path, serde_json::to_string(&mocked).unwrap()).unwrap();
    std::fs::write(&real_path, serde_yaml::to_string(&real).unwrap()).unwrap();
    // The process's working directory is elsewhere (cargo runs tests in core/).
    assert_ne!(std::env::current_dir().unwrap(), conf);
    let client = Client::from_path(&mocked_path).unwrap_or_else(|e| panic!("{e}"));
    let r = client.request(Request::new("orders", "GET", "/orders/7")).await.unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["status"], "created");
    client.reload_path(&mocked_path).unwrap_or_else(|e| panic!("reloading the file: {e}"));

    let client = Client::from_path(&real_path).unwrap_or_else(|e| panic!("{e}"));
    let admin = reqwest::Client::new();
    let steps = json!({"steps": [{"json": {"id": 1}}, {"json": {"no_id": true}}]});
    admin.put(format!("{}/__admin/script/rel", u.url())).body(steps.to_string()).send().await.unwrap();
    client.request(Request::new("api", "GET", "/s/rel/1")).await.unwrap();
    let e = client.request(Request::new("api", "GET", "/s/rel/2")).await.unwrap_err();
    assert_eq!(e.name(), "SchemaError", "the schema file was found and enforced: {e}");
    let log: serde_json::Value = serde_json::from_slice(&admin.get(format!("{}/__admin/log/rel", u.url())).send().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!(log["requests"][0]["headers"]["authorization"], "Bearer tok-from-file-123");
    client.flush();
    client.close();
    let audit = std::fs::read_to_string(conf.join("logs/audit.jsonl")).unwrap();
    assert_eq!(audit.lines().count(), 2, "the audit file is in the config's folder: {audit}");
    // A config given as data keeps the working directory: the same references are not found.
    let e = Client::from_value(mocked).unwrap_err();
    assert!(e.message.contains("fixtures/order-created.json"), "{e}");
    let e = Client::from_value(real).unwrap_err();
    assert!(e.message.contains("secrets/token"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: a reload naming `json_file: /dev/zero` grew the process to 1.5 GiB in 1.5 s.
/// Files a config reads must be regular files under the size cap; the old config stays.
#[test]
fn a_fixture_schema_or_secret_that_is_not_a_regular_file_or_too_big_is_refused() {
    let dir = temp_dir("big");
    let big = dir.join("conf/fixtures/big.json");
    std::fs::File::create(&big).unwrap().set_len(harness_core::config::files::MAX_FILE_BYTES + 1).unwrap();
    let client = Client::from_value(json!({"services": {"orders": {"base_url": "http://orders.invalid"}}})).unwrap();
    let version = client.config_version();
    let cases = [
        (json!({"mock": {"enabled": true, "services": {"orders": [{"match": {"path": "*"}, "json_file": "/dev/zero"}]}}}), "mock.services.orders[0].json_file", "not a regular file"),
        (json!({"mock": {"enabled": true, "services": {"orders": [{"match": {"path": "*"}, "json_file": big.display().to_string()}]}}}), "mock.services.orders[0].json_file", "limit"),
        (json!({"services": {"orders": {"endpoints": {"GET /x": {"response_schema": "/dev/zero"}}}}}), "services.orders.endpoints.GET /x.response_schema", "not a regular file"),
        (json!({"services": {"orders": {"auth": {"type": "bearer", "token": {"file": "/dev/zero"}}}}}), "services.orders.auth.token.file", "not a regular file"),
        (json!({"services": {"orders": {"auth": {"type": "bearer", "token": {"file": "/dev/urandom"}}}}}), "services.orders.auth.token.file", "not a regular file"),
    ];
    for (over, field, why) in cases {
        let mut cfg = json!({"services": {"orders": {"base_url": "http://orders.invalid"}}});
        harness_upstream::merge_json(&mut cfg, &over);
        let t0 = std::time::Instant::now();
        let e = client.reload_value(cfg).unwrap_err();
        assert!(t0.elapsed().as_secs() < 2, "refused at once");
        assert_eq!(e.name(), "ConfigError");
        assert!(e.message.starts_with(field) && e.message.contains(why), "{field}: {}", e.message);
        assert_eq!(client.config_version(), version, "the old config stays");
    }
    // The config file itself has the same cap.
    let e = Client::from_path(&big).unwrap_err();
    assert!(e.message.contains("limit"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
