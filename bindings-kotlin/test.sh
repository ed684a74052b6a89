#!/usr/bin/env bash
# Builds and tests the JVM binding: `mvn install` (cargo build -> uniffi-bindgen -> Kotlin
# facade -> the tests' harness-upstream -> JUnit 5 -> jar in ~/.m2). Maven builds everything
# its tests need, so this is the README's install line with the debug native library.
# The tests include the typed OpenAPI clients (`harness codegen --lang kotlin`): the examples'
# clients against the upstream, wrong calls that must not compile, and the public corpus's
# clients compiled in-process (OpenApiCorpusTest prints its counts per document).
# Needs: cargo, a JDK 17+ and Maven 3.8+ on PATH; Maven fetches the rest from Maven Central.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/bindings-kotlin"
# native-debug: the unoptimised native library is quicker to build and enough for the tests.
mvn -B -ntp -Pnative-debug install "$@"
