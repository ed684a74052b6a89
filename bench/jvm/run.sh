#!/usr/bin/env bash
# The JVM benchmark: release builds of the upstream and of harness-sdk (installed to ~/.m2),
# then HarnessClient vs OkHttp vs OkHttp + resilience4j at concurrency 1 and 64.
# BENCH_SCALE=0.2 for a quick run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
cargo build --release -p harness-upstream
(cd bindings-kotlin && mvn -B -ntp -q install -DskipTests)
cd bench/jvm
mvn -B -ntp -q compile exec:exec
