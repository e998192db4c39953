#!/bin/sh
# ha-drill.sh [RUNS]: runs the failover drill (e2e TestFailoverDrill: the Patroni primary
# SIGKILLed in the middle of a fence, see testkit/patronilab) RUNS times (default 5) and
# prints what docs/operations/ha.md reports: write unavailability after the primary's loss (p50 and
# max), fence decisions lost or doubled, acknowledged mutations lost, and how many runs
# failed. Needs what the e2e tests need, as root (scripts/test-deps.sh), plus Debian's
# patroni and etcd-server (scripts/install-deps.sh): eval "$(scripts/test-deps.sh)" first.
# Exits non-zero when a run failed or anything was lost or doubled.
set -eu
runs=${1:-5}
: "${APELORA_TEST_DATABASE_URL:?set APELORA_TEST_DATABASE_URL (eval "$(scripts/test-deps.sh)")}"
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# One test binary, RUNS runs, each on a fresh Patroni lab, Incus lab and simulator.
go test -count="$runs" -timeout "$((runs * 8))m" -v -run '^TestFailoverDrill$' ./e2e >"$out" 2>&1 || true
grep -E 'FAILOVER DRILL:|^--- (PASS|FAIL)' "$out" | sed 's/^ *//' >&2
awk -v runs="$runs" '
	/FAILOVER DRILL:/ {
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			v[kv[1]] = kv[2]
		}
		n++
		ms[n] = v["write_unavailable_ms"]
		if (v["confirmed"] == 0) lost++
		if (v["confirmed"] > 1 || v["power_offs"] > 1) doubled++
		acked_lost += v["acked_lost"]
	}
	/^--- FAIL/ { failed++ }
	/^--- PASS/ { passed++ }
	END {
		if (n == 0) { print "ha-drill: no drill completed (see go test output above or run it with -v)"; exit 1 }
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (ms[j] < ms[i]) { t = ms[i]; ms[i] = ms[j]; ms[j] = t }
		printf "failover drills: %d of %d passed, %d measured\n", passed, runs, n
		printf "write unavailability after a primary loss: p50 %.1f s, max %.1f s\n", ms[int((n + 1) / 2)] / 1000, ms[n] / 1000
		printf "fence decisions lost: %d, doubled: %d\n", lost, doubled
		printf "acknowledged mutations lost: %d\n", acked_lost
		if (failed > 0 || passed < runs || lost + doubled + acked_lost > 0) exit 1
	}' "$out" || { echo "ha-drill: a drill failed; the last lines of go test:" >&2; tail -n 40 "$out" >&2; exit 1; }
