//! `harness config` as an operator runs it, against a real `redis-server`: push for everyone
//! and as a canary, status, promote (part way and whole), rollback, history, and the refusals
//! (a literal secret, an invalid config, nothing to promote), a guarded canary and a diff
//! between versions, each with its exit code.

use std::process::Command;

use harness_upstream::redis_server::RedisServer as Redis;

fn harness(redis: &Redis, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness")).args(args).env("HARNESS_CONFIG_REDIS", redis.url()).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn push_canary_promote_rollback_history_and_refusals() {
    let redis = Redis::start();
    let dir = std::env::temp_dir().join(format!("harness-config-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.yaml");
    std::fs::write(&good, "services:\n  api: { base_url: \"http://127.0.0.1:9\", auth: { type: bearer, token: { env: API_TOKEN } } }\n").unwrap();
    let secret = dir.join("secret.yaml");
    std::fs::write(&secret, "services:\n  api: { base_url: \"http://127.0.0.1:9\", auth: { type: bearer, token: { value: \"s3cret-token\" } } }\n").unwrap();
    let invalid = dir.join("invalid.yaml");
    std::fs::write(&invalid, "services:\n  api: { base_url: \"http://127.0.0.1:9\", retry: { max_retries: lots } }\n").unwrap();
    let g = good.to_str().unwrap();

    assert_eq!(harness(&redis, &["config", "push", g, "--name", "shop", "--message", "first", "--author", "ana"]).1, "pushed shop version 1 to every instance\n");
    assert_eq!(harness(&redis, &["config", "push", g, "--name", "shop", "--canary", "10%"]).1, "pushed shop version 2 as a canary on 10% of instances\n");
    let (code, status, _) = harness(&redis, &["config", "status", "shop"]);
    assert_eq!(code, 0);
    assert!(status.starts_with("shop: stable 1, canary 2 on 10%\n"), "{status}");
    assert_eq!(harness(&redis, &["config", "promote", "shop", "--to", "50%"]).1, "shop version 2 now on 50% of instances\n");
    assert_eq!(harness(&redis, &["config", "promote", "shop"]).1, "shop version 2 now on 100% of instances\n");
    assert_eq!(harness(&redis, &["config", "rollback", "shop", "--reason", "latency"]).1, "shop: version 2 rolled back; every instance runs version 1\n");

    let (code, _, err) = harness(&redis, &["config", "push", secret.to_str().unwrap(), "--name", "shop"]);
    assert_eq!(code, 1);
    assert!(err.contains("services.api.auth.token.value") && !err.contains("s3cret"), "{err}");
    let (code, _, err) = harness(&redis, &["config", "push", invalid.to_str().unwrap(), "--name", "shop"]);
    assert_eq!(code, 1);
    assert!(err.contains("services.api.retry.max_retries"), "{err}");
    let (code, _, err) = harness(&redis, &["config", "promote", "shop"]);
    assert_eq!((code, err.contains("no canary")), (1, true), "{err}");
    assert_eq!(harness(&redis, &["config", "push", g]).0, 1, "--name is required");
    assert_eq!(harness(&redis, &["config"]).0, 2);

    let (_, history, _) = harness(&redis, &["config", "history", "shop"]);
    let actions: Vec<(String, u64)> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| (v["action"].as_str().unwrap().to_string(), v["version"].as_u64().unwrap()))
        .collect();
    let want: Vec<(String, u64)> = [("push", 1), ("push_canary", 2), ("widen", 2), ("promote", 2), ("rollback", 2)].iter().map(|(a, v)| (a.to_string(), *v)).collect();
    assert_eq!(actions, want);
    assert!(history.contains("\"author\":\"ana\"") && history.contains("latency") && !history.contains("s3cret"));

    // A guarded canary; then what changed between two versions, field by field.
    let wider = dir.join("wider.yaml");
    std::fs::write(&wider, "services:\n  api: { base_url: \"http://127.0.0.1:9\", timeouts: { response_ms: 2500 }, auth: { type: bearer, token: { env: API_TOKEN } } }\n").unwrap();
    let (code, out, err) = harness(&redis, &["config", "push", wider.to_str().unwrap(), "--name", "shop", "--canary", "5%", "--guard", "error_rate=+2%,p99=+50%,window=60s"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "pushed shop version 3 as a canary on 5% of instances, guarded (error_rate=+2%, p99=+50%, window 60 s, at least 20 requests per side)\n");
    let (_, status, _) = harness(&redis, &["config", "status", "shop"]);
    assert!(status.contains("canary 3: guarded (error_rate=+2%") && status.contains("last rollback: version 2 by ") && status.contains(": latency\n"), "{status}");
    assert_eq!(harness(&redis, &["config", "diff", "shop", "1", "3"]).1, "+ services.api.timeouts: {\"response_ms\":2500}\n");
    assert_eq!(harness(&redis, &["config", "diff", "shop", "1", "2"]).1, "shop: versions 1 and 2 hold the same config\n");
    let (code, _, err) = harness(&redis, &["config", "diff", "shop", "1", "99"]);
    assert_eq!((code, err.trim()), (1, "shop has no version 99"));
    let (code, _, err) = harness(&redis, &["config", "push", g, "--name", "shop", "--guard", "error_rate=+2%"]);
    assert_eq!((code, err.contains("only a canary")), (1, true), "{err}");
    let (code, _, err) = harness(&redis, &["config", "push", g, "--name", "shop", "--canary", "5%", "--guard", "latency=+2%"]);
    assert_eq!((code, err.contains("--guard: `latency=+2%`")), (1, true), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
