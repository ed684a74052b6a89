#!/usr/bin/env bash
# Builds and tests the JVM binding: the upstream test server, then `mvn install`
# (cargo build -> uniffi-bindgen -> Kotlin facade -> JUnit 5 -> jar in ~/.m2).
# Needs: cargo, a JDK 17+ and Maven 3.8+ on PATH; Maven fetches the rest from Maven Central.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build -p harness-upstream
cd "$root/bindings-kotlin"
# native-debug: the unoptimised native library is quicker to build and enough for the tests.
mvn -B -ntp -Pnative-debug install "$@"
