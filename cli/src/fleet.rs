//! `harness config push|promote|rollback|status|history`: the fleet's config in Redis
//! (README "Running a fleet"). Redis comes from `--redis URL` or `HARNESS_CONFIG_REDIS`.

use harness_core::fleet::{parse_guard, parse_percent, Admin, FleetState, Guard, Heartbeat};
use harness_core::Config;

pub const USAGE: &str = "usage: harness config push FILE --name N [--canary P% [--guard error_rate=+2%,p99=+50%,window=60s]] [--message M] [--author A] | promote N [--to P%] | rollback N [--reason R] | status N | history N | diff N V1 V2   (each with --redis URL or HARNESS_CONFIG_REDIS)";

struct Args {
    positional: Vec<String>,
    flags: std::collections::BTreeMap<String, String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args { positional: Vec::new(), flags: Default::default() };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            out.flags.insert(name.to_string(), v.clone());
        } else {
            out.positional.push(a.clone());
        }
    }
    Ok(out)
}

fn author(a: &Args) -> String {
    a.flags.get("author").cloned().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "unknown".into())
}

pub fn run(args: &[String]) -> i32 {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    match rt.block_on(go(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            if e.starts_with("usage") { 2 } else { 1 }
        }
    }
}

async fn go(args: &[String]) -> Result<(), String> {
    let Some(cmd) = args.first() else { return Err(USAGE.into()) };
    let a = parse(&args[1..])?;
    let redis = a.flags.get("redis").cloned().or_else(|| std::env::var("HARNESS_CONFIG_REDIS").ok()).ok_or("--redis URL (or HARNESS_CONFIG_REDIS) is required")?;
    let name = match cmd.as_str() {
        "push" => a.flags.get("name").cloned().ok_or("--name is required")?,
        _ => a.positional.first().cloned().ok_or(USAGE)?,
    };
    let mut admin = Admin::connect(&redis, &name).await.map_err(|e| e.to_string())?;
    match cmd.as_str() {
        "push" => {
            let file = a.positional.first().ok_or(USAGE)?;
            let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
            let format = match std::path::Path::new(file).extension().and_then(|e| e.to_str()) {
                Some("json") => "json",
                Some("toml") => "toml",
                _ => "yaml",
            };
            // The same validation every instance will run, before anything is stored.
            let parsed = Config::parse_text(&text, format).map_err(|e| e.to_string())?;
            Config::load_value(parsed.clone()).map_err(|e| e.to_string())?;
            let canary = a.flags.get("canary").map(|p| parse_percent(p)).transpose().map_err(|e| format!("--canary: {e}"))?;
            let guard = a.flags.get("guard").map(|g| parse_guard(g)).transpose().map_err(|e| format!("--guard: {e}"))?;
            let message = a.flags.get("message").cloned().unwrap_or_default();
            let v = admin.push(&text, format, &parsed, &author(&a), &message, canary, guard.as_ref()).await.map_err(|e| e.to_string())?;
            match canary {
                Some(bp) => println!("pushed {name} version {v} as a canary on {}% of instances{}", bp as f64 / 100.0, guard.map(|g| format!(", {}", describe(&g))).unwrap_or_default()),
                None => println!("pushed {name} version {v} to every instance"),
            }
        }
        "promote" => {
            let to = a.flags.get("to").map(|p| parse_percent(p)).transpose().map_err(|e| format!("--to: {e}"))?.unwrap_or(10_000);
            let v = admin.promote(to, &author(&a)).await.map_err(|e| e.to_string())?;
            println!("{name} version {v} now on {}% of instances", to as f64 / 100.0);
        }
        "rollback" => {
            let reason = a.flags.get("reason").cloned().unwrap_or_else(|| "by hand".into());
            let v = admin.rollback(&author(&a), &reason, None).await.map_err(|e| e.to_string())?;
            let s = admin.state().await.map_err(|e| e.to_string())?;
            println!("{name}: version {v} rolled back; every instance runs version {}", s.stable);
        }
        "status" => {
            let s = admin.state().await.map_err(|e| e.to_string())?;
            let beats = admin.heartbeats().await.map_err(|e| e.to_string())?;
            print!("{}", status_table(&name, &s, &beats));
            if let Some(g) = admin.guard().await.map_err(|e| e.to_string())? {
                println!("canary {}: {}", g.version, describe(&g));
            }
            let log = admin.log().await.map_err(|e| e.to_string())?;
            if let Some(r) = log.iter().rev().find(|r| r["action"] == "rollback") {
                println!("last rollback: version {} by {}: {}", r["version"], r["author"].as_str().unwrap_or("?"), r["message"].as_str().unwrap_or(""));
            }
        }
        "history" => {
            for doc_or_event in admin.log().await.map_err(|e| e.to_string())? {
                println!("{doc_or_event}");
            }
        }
        "diff" => {
            let v = |i: usize| a.positional.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or(USAGE);
            let (v1, v2) = (v(1)?, v(2)?);
            let mut values = Vec::new();
            for v in [v1, v2] {
                let doc = admin.doc(v).await.map_err(|e| e.to_string())?.ok_or(format!("{name} has no version {v}"))?;
                values.push(Config::parse_text(&doc.content, &doc.format).map_err(|e| format!("version {v}: {e}"))?);
            }
            let changes = harness_core::fleet::diff(&values[0], &values[1]);
            if changes.is_empty() {
                println!("{name}: versions {v1} and {v2} hold the same config");
            }
            for c in changes {
                println!("{c}");
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}

fn describe(g: &Guard) -> String {
    let mut parts = Vec::new();
    if let Some(e) = g.error_rate_points {
        parts.push(format!("error_rate=+{e}%"));
    }
    if let Some(p) = g.p99_percent {
        parts.push(format!("p99=+{p}%"));
    }
    format!("guarded ({}, window {} s, at least {} requests per side)", parts.join(", "), g.window_ms as f64 / 1000.0, g.min_requests)
}

/// Per version: instances, their requests, error rate and p99; then the stragglers.
pub fn status_table(name: &str, s: &FleetState, beats: &[Heartbeat]) -> String {
    let mut out = format!("{name}: stable {}, canary {}\n", s.stable, if s.canary > 0 { format!("{} on {}%", s.canary, s.percent as f64 / 100.0) } else { "none".into() });
    out.push_str("| version | instances | requests | error rate | p99 ms |\n|---:|---:|---:|---:|---:|\n");
    let (versions, stragglers) = harness_core::fleet::summarize(s, beats);
    for v in versions {
        let rate = if v.requests > 0 { format!("{:.2}%", 100.0 * v.errors as f64 / v.requests as f64) } else { "-".into() };
        out.push_str(&format!("| {} | {} | {} | {rate} | {} |\n", v.version, v.instances, v.requests, v.p99_ms.map_or("-".into(), |p| format!("{p:.1}"))));
    }
    if !stragglers.is_empty() {
        out.push_str(&format!("stragglers: {}\n", stragglers.join("; ")));
    }
    out
}
