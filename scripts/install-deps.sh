#!/usr/bin/env bash
# Installs what Apelora needs from Debian's packages, as root, in two sets:
#
#   install-deps.sh run    what running the product needs (scripts/run.sh):
#     - PostgreSQL (the postgresql package: server binaries and the postgres user);
#     - Incus (incus-base, incus-client) from bookworm-backports;
#     - Go, when `go` is missing or older than go.mod's `go` line: Debian's golang-go from
#       bookworm-backports (Go 1.21 or newer), which fetches the toolchain go.mod names
#       through the Go module proxy on first use (GOTOOLCHAIN=auto, Debian's default in its
#       go.env). A Go from 1.21 on fetches it by itself; older ones cannot.
#   install-deps.sh test   (the default; scripts/test-deps.sh) the run set, and:
#     - Patroni and etcd (patroni, etcd-server, etcd-client), for the failover drill
#       (testkit/patronilab starts its own processes; the packages' services are kept off);
#     - Chromium, for the console's end-to-end tests (playwright-core drives Debian's build;
#       no browser is ever downloaded);
#     - promtool, which checks the alert rules in deploy/prometheus, taken from Debian's
#       prometheus package without installing it (no Prometheus server, user or service);
#     - lintian, which scripts/package-check.sh runs on the Debian package;
#     - jq, which the docs' runnable examples use (e2e/readme_test.go runs them);
#     - rsyslog and rsyslog-gnutls, which the audit export's tests receive with, unpacked
#       from Debian's packages into /usr/local/lib/apelora-rsyslog without installing them
#       (the machine's /etc/rsyslog.conf and its syslog service stay as they are); their
#       libraries (libestr0, libfastjson4, liblognorm5) are installed.
#
# apt's (and go's) output goes to $APELORA_INSTALL_LOG (default
# /var/log/apelora-install.log); the terminal gets one line per step, and the log's last
# lines when a step fails. --plan says what would be installed, one line per step, and
# installs nothing. Idempotent: installs only what is missing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
set_name=test
plan=
for arg in "$@"; do
	case "$arg" in
	run | test) set_name=$arg ;;
	--plan) plan=1 ;;
	*)
		echo "usage: scripts/install-deps.sh [run|test] [--plan]" >&2
		exit 2
		;;
	esac
done
LOG=${APELORA_INSTALL_LOG:-/var/log/apelora-install.log}

log() { echo "install-deps: $*" >&2; }

if [ "$(id -u)" != 0 ] && [ -z "$plan" ]; then
	log "run me as root (I install Debian packages)"
	exit 1
fi
if [ -z "$plan" ]; then
	mkdir -p "$(dirname "$LOG")"
	echo "=== install-deps.sh $set_name, $(date -u +%FT%TZ)" >>"$LOG"
fi

# step NAME COMMAND…: runs a step with its output in the log; on failure, says so with the
# log's last lines and stops.
step() {
	local name=$1
	shift
	echo "--- $name: $*" >>"$LOG"
	if ! "$@" >>"$LOG" 2>&1; then
		log "$name failed; the last lines of $LOG:"
		tail -n 25 "$LOG" | sed 's/^/    /' >&2
		exit 1
	fi
}

apt_updated=
apt_update() {
	if [ -z "$apt_updated" ]; then
		# A source that cannot be reached is not fatal: the packages may be cached.
		echo "--- apt-get update" >>"$LOG"
		apt-get update >>"$LOG" 2>&1 || log "apt-get update reported errors (see $LOG); trying anyway"
		apt_updated=1
	fi
}

# pkg WHAT [-t SUITE] PACKAGE…: one line on the terminal, apt's output in the log.
pkg() {
	local what=$1 suite=
	shift
	if [ "$1" = -t ]; then
		suite=$2
		shift 2
	fi
	local from=${suite:+ from $suite}
	if [ -n "$plan" ]; then
		log "$what: would install $*$from"
		return
	fi
	log "$what: installing $*$from (apt's output: $LOG)"
	apt_update
	step "$what" env DEBIAN_FRONTEND=noninteractive apt-get install -y ${suite:+-t "$suite"} "$@"
}

# backports adds bookworm-backports to apt's sources, derived from the machine's own
# Debian source (no host names here), unless it is there.
backports() {
	if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return
	fi
	if [ -n "$plan" ]; then
		log "apt: would add bookworm-backports to apt's sources"
		return
	fi
	log "apt: adding bookworm-backports to apt's sources"
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		awk 'BEGIN{RS="";ORS="\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
			sed 's/^Suites:.*/Suites: bookworm-backports/' >/etc/apt/sources.list.d/backports.sources
	else
		grep -m1 -E '^deb .* bookworm ' /etc/apt/sources.list |
			sed 's/ bookworm / bookworm-backports /' >/etc/apt/sources.list.d/backports.list
	fi
	apt_updated=
}

# --- the run set ----------------------------------------------------------------------

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ! id postgres >/dev/null 2>&1; then
	pkg PostgreSQL postgresql
fi

if [ ! -x /usr/libexec/incus/incusd ] || ! command -v incus >/dev/null; then
	backports
	pkg Incus -t bookworm-backports incus-base incus-client
fi

# Go. The version go.mod wants (its go line: the least Go that builds it; a toolchain
# line, when there is one, names the one to fetch), and the local one's, asked outside any
# module so that it does not switch toolchains to answer.
version_lt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }
go_wanted=$(awk '$1 == "go" { print $2; exit }' "$repo/go.mod")
go_fetch=$(awk '$1 == "toolchain" { sub(/^go/, "", $2); print $2; exit }' "$repo/go.mod")
go_fetch=${go_fetch:-$go_wanted}
go_local() { (cd / && GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed 's/^go//') || true; }
go_have=
if command -v go >/dev/null; then go_have=$(go_local); fi
if [ -z "$go_have" ] || version_lt "$go_have" 1.21; then
	# Missing, or too old to fetch a toolchain: Debian's from bookworm-backports.
	backports
	if [ -z "$plan" ]; then apt_update; fi
	bpo=$(apt-cache madison golang-go 2>/dev/null | awk -F'|' '$3 ~ /bookworm-backports/ { gsub(/ /, "", $2); print $2; exit }')
	bpo_go=$(echo "$bpo" | sed -E 's/^[0-9]+://; s/[~+-].*//')
	why="Go is not installed"
	[ -z "$go_have" ] || why="Go $go_have cannot fetch a newer toolchain (1.21 and later can)"
	if [ -z "$bpo_go" ] && [ -z "$plan" ]; then
		log "Go: $why, and apt knows no golang-go in bookworm-backports: install Go $go_wanted or newer (go.dev/dl) and run me again"
		exit 1
	fi
	if [ -n "$bpo_go" ] && version_lt "$bpo_go" 1.21; then
		log "Go: $why, and bookworm-backports' golang-go is $bpo_go (older than 1.21): install Go $go_wanted or newer (go.dev/dl) and run me again"
		exit 1
	fi
	pkg "Go ($why; golang-go ${bpo:-?} fetches go$go_fetch, go.mod's, through the Go module proxy)" -t bookworm-backports golang-go
	if [ -z "$plan" ]; then
		hash -r
		go_have=$(go_local)
		if [ -z "$go_have" ] || version_lt "$go_have" 1.21; then
			log "Go: the go first on PATH ($(command -v go || echo none): ${go_have:-no version}) is still not Debian's /usr/bin/go: put /usr/bin before it in PATH, or remove it"
			exit 1
		fi
	fi
fi
if [ -n "$go_have" ] && version_lt "$go_have" "$go_wanted"; then
	# Go 1.21+ older than go.mod's: it fetches the toolchain go.mod names (golang.org/toolchain,
	# through GOPROXY, checked against GOSUMDB) into the module cache, once, and runs it.
	if [ "$(cd / && go env GOTOOLCHAIN)" = local ]; then
		log "Go: Go $go_have is older than go.mod's $go_wanted and GOTOOLCHAIN=local forbids fetching it: unset GOTOOLCHAIN (or 'go env -u GOTOOLCHAIN') and run me again"
		exit 1
	fi
	if [ -n "$plan" ]; then
		log "Go: Go $go_have would fetch go$go_fetch (go.mod's) through the Go module proxy on first use"
	else
		log "Go: Go $go_have runs go$go_fetch (go.mod's), fetched through the Go module proxy on first use (output: $LOG)"
		step "Go toolchain" sh -c "cd '$repo' && go version | grep -F 'go$go_fetch '"
	fi
elif [ -n "$plan" ] && [ -n "$go_have" ]; then
	log "Go: Go $go_have builds go.mod's $go_wanted: nothing to install"
fi

if [ "$set_name" = run ]; then
	exit 0
fi

# --- the test set ---------------------------------------------------------------------

if ! command -v patroni >/dev/null || ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
	# Debian starts etcd (and would start Patroni) on install; the drill runs its own on
	# loopback, so the system services are neither started now nor at boot.
	no_start=
	if [ -z "$plan" ] && [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		no_start=1
	fi
	pkg "Patroni and etcd (the failover drill; their services stay off)" patroni etcd-server etcd-client
	if [ -n "$no_start" ]; then rm -f /usr/sbin/policy-rc.d; fi
	if [ -z "$plan" ]; then
		for unit in etcd patroni; do
			if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
				systemctl disable --now "$unit" >>"$LOG" 2>&1 || true
			fi
		done
	fi
fi

if [ ! -x /usr/bin/chromium ]; then
	pkg "Chromium (the console's browser tests)" chromium
fi

# unpack WHAT DIR PACKAGE…: downloads Debian packages and unpacks them into DIR, installing
# nothing (no maintainer script runs, no service starts).
unpack() {
	local what=$1 into=$2
	shift 2
	if [ -n "$plan" ]; then
		log "$what: would unpack $* into $into"
		return
	fi
	log "$what: unpacking $* into $into (output: $LOG)"
	apt_update
	local deb_dir
	deb_dir=$(mktemp -d)
	chown _apt "$deb_dir" 2>/dev/null || true # apt downloads as _apt where it can
	step "$what" sh -c "cd '$deb_dir' && apt-get download $*"
	mkdir -p "$into"
	for deb in "$deb_dir"/*.deb; do step "$what" dpkg-deb -x "$deb" "$into"; done
	rm -rf "$deb_dir"
}

if ! command -v promtool >/dev/null; then
	# `apt-get install prometheus` would create a user, start a server (or fail to, without
	# systemd) and pull its dependencies; promtool alone is one binary that needs only libc.
	unpack "promtool (from Debian's prometheus package; the server is not installed)" /var/tmp/apelora-promtool prometheus
	if [ -z "$plan" ]; then
		install -m 0755 /var/tmp/apelora-promtool/usr/bin/promtool /usr/local/bin/promtool
		rm -rf /var/tmp/apelora-promtool
		step promtool promtool --version
	fi
fi

if ! command -v jq >/dev/null; then
	pkg "jq (the docs' runnable examples, which e2e/readme_test.go runs)" jq
fi

if ! command -v lintian >/dev/null; then
	pkg "lintian (the Debian package's checks)" lintian
fi

rsyslog_root=/usr/local/lib/apelora-rsyslog
if [ ! -x "$rsyslog_root/usr/sbin/rsyslogd" ]; then
	# `apt-get install rsyslog` would replace the machine's syslog daemon and start it; the
	# tests run rsyslogd themselves with a config of their own (e2e/auditexport_test.go).
	pkg "rsyslogd's libraries (the audit export's tests)" libestr0 libfastjson4 liblognorm5 libgnutls30
	unpack "rsyslogd and its TLS driver (the audit export's tests; no service)" "$rsyslog_root" rsyslog rsyslog-gnutls
	if [ -z "$plan" ]; then step rsyslogd "$rsyslog_root/usr/sbin/rsyslogd" -v; fi
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	log "node and npm are missing: the console's build checks and browser tests need Node.js 20+ (Go builds without them)"
fi
