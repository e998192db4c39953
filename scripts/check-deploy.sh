#!/usr/bin/env bash
# Checks the files operators install from deploy/ (scripts/test.sh runs it):
#   - the Prometheus alert rules parse (`promtool check rules`) and fire on the series they
#     are for (`promtool test rules deploy/prometheus/test/*.yml`);
#   - the systemd units verify (`systemd-analyze verify`, where any message is a failure:
#     it exits 0 on unknown keys) and keep their sandboxing (`systemd-analyze security`
#     under an exposure threshold), against a throw-away root that holds the built
#     binaries at the units' ExecStart paths, the system's own unit files and /bin/sh,
#     so nothing is installed on this machine.
# The dashboard's and the rules' metric names are checked against a scrape of the real
# processes by go test (e2e/metrics_test.go).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-deploy: $*" >&2; exit 1; }

command -v promtool >/dev/null || fail "promtool is missing: run scripts/install-deps.sh"
promtool check rules deploy/prometheus/*.yml
(cd deploy/prometheus/test && promtool test rules ./*.yml)

command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (Debian's systemd package)"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root/bin"
go build -o "$root/usr/bin/" ./cmd/apelora ./cmd/apelora-worker
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp -L /bin/sh "$root/bin/sh"
cp deploy/systemd/*.service "$root/etc/systemd/system/"
units=()
for f in deploy/systemd/*.service; do units+=("$root/etc/systemd/system/$(basename "$f")"); done
out=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) || fail "systemd-analyze verify failed:
$out"
[ -z "$out" ] || fail "systemd-analyze verify complained:
$out"
for u in "${units[@]}"; do
	# Exposure 0–10 shown, compared ×10: 2.5 (the units are about 1.6) is "OK".
	systemd-analyze security --offline=true --root="$root" --threshold=25 "$u" >/dev/null 2>&1 ||
		fail "$(basename "$u") lost sandboxing: $(systemd-analyze security --offline=true --root="$root" "$u" 2>&1 | tail -n 1)"
done
echo "check-deploy: alert rules, their tests and the systemd units are fine"
