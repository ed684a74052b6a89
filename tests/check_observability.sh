#!/usr/bin/env bash
# Checks the shipped alert rules and every query of the shipped Grafana dashboard with
# promtool (Debian's `prometheus` package; installed with apt when missing and root).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing promtool (apt: prometheus)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "promtool is needed by the tests: install it (e.g. apt-get install -y prometheus)" >&2
    exit 1
  fi
fi
promtool check rules alerts/harness.rules.yml
# Each dashboard query becomes a recording rule (Grafana's variables given fixed values), so
# promtool parses every one of them the same way.
rules="$(mktemp --suffix=.yml)"
trap 'rm -f "$rules"' EXIT
python3 - "$rules" <<'PY'
import json, sys
dash = json.load(open("dashboards/harness.json"))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert len(exprs) >= 12, f"only {len(exprs)} queries"
with open(sys.argv[1], "w") as out:
    out.write("groups:\n  - name: dashboard_queries\n    rules:\n")
    for i, e in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$service", ".*").replace("${datasource}", "prometheus")
        out.write(f"      - record: harness_dashboard_query_{i}\n        expr: {json.dumps(e)}\n")
print(f"{len(exprs)} dashboard queries")
PY
promtool check rules "$rules"
