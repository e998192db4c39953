#!/usr/bin/env bash
# Checks the files operators install from deploy/ (scripts/test.sh runs it):
#   - deploy/ha's HAProxy configuration parses (`haproxy -c`, with the example addresses)
#     and its Patroni configuration validates (`patroni --validate-config`), where those
#     programs are installed (the failover drill, scripts/ha-test.sh, needs them);
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
cp deploy/systemd/*.service deploy/ha/systemd/*.service "$root/etc/systemd/system/"
units=()
for f in deploy/systemd/*.service; do units+=("$root/etc/systemd/system/$(basename "$f")"); done
# The HA deployment's template units, as instance 1 (deploy/ha/README.md).
for f in deploy/ha/systemd/*@.service; do
	b=$(basename "$f" .service)
	ln -s "$b.service" "$root/etc/systemd/system/${b}1.service"
	units+=("$root/etc/systemd/system/${b}1.service")
done
out=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) || fail "systemd-analyze verify failed:
$out"
[ -z "$out" ] || fail "systemd-analyze verify complained:
$out"
for u in "${units[@]}"; do
	# Exposure 0–10 shown, compared ×10: 2.5 (the units are about 1.6) is "OK".
	systemd-analyze security --offline=true --root="$root" --threshold=25 "$u" >/dev/null 2>&1 ||
		fail "$(basename "$u") lost sandboxing: $(systemd-analyze security --offline=true --root="$root" "$u" 2>&1 | tail -n 1)"
done
if command -v haproxy >/dev/null; then
	out=$(env $(grep -v '^#' deploy/ha/haproxy.env.example | sed 's/=.*:/=127.0.0.1:/' | xargs) haproxy -c -f deploy/ha/haproxy.cfg 2>&1) ||
		fail "deploy/ha/haproxy.cfg: $out"
fi
if command -v patroni >/dev/null; then
	# Every check but those of this machine's network (no etcd runs here, and the
	# example's addresses are not this machine's); the example's settings otherwise.
	out=$(env $(grep -v '^#' deploy/ha/patroni-node.env.example | xargs) PATRONI_ETCD3_HOSTS=127.0.0.1:1 \
		patroni --validate-config deploy/ha/patroni.yml 2>&1 | grep -v -e 'etcd3.hosts.0 127.0.0.1:1' -e 'is already in use' || true)
	[ -z "$out" ] || fail "deploy/ha/patroni.yml: $out"
fi
echo "check-deploy: alert rules, their tests, the systemd units and deploy/ha are fine"
