#!/usr/bin/env bash
# The admin console (`/admin/ui`) in a real browser: Debian's Chromium and chromedriver (apt,
# never downloaded at test time), driven by Selenium (pip, this folder's pins, into .venv),
# against real `harness serve` processes and the loopback upstream's simulated providers (and,
# for the fleet card, a real redis-server from apt).
# Writes the screenshots to docs/console/ (HARNESS_CONSOLE_SHOTS=<dir>: there instead) and the console's weight and load time to
# target/console-metrics.json.
# Usage: bash gateway/ui-tests/test.sh [pytest args]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# The fleet card's tests run a real redis-server (Debian's, on a free loopback port).
missing=()
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    missing+=(chromium chromium-driver)
fi
if [ ! -x /usr/bin/redis-server ]; then
    missing+=(redis-server)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    else
        echo "gateway/ui-tests: needs /usr/bin/chromium, /usr/bin/chromedriver and /usr/bin/redis-server (apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi

export CARGO_BUILD_TARGET="${CARGO_BUILD_TARGET:-x86_64-unknown-linux-gnu}"
cargo build -p harness-cli -p harness-upstream
export HARNESS_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness"
export HARNESS_UPSTREAM_BIN="$root/target/$CARGO_BUILD_TARGET/debug/harness-upstream"

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"

# Selenium must use the driver given, never fetch one.
export SE_OFFLINE=true
cd "$here"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -rA test_console.py "$@"
echo "== the console's weight and load time (target/console-metrics.json)"
cat "$root/target/console-metrics.json"
