#!/usr/bin/env bash
# Installs what Apelora runs and tests with, from Debian's packages, as root:
#   - PostgreSQL (the postgresql package: server binaries and the postgres user);
#   - Incus (incus-base, incus-client) from bookworm-backports;
#   - Chromium, for the console's end-to-end tests (playwright-core drives Debian's build;
#     no browser is ever downloaded);
#   - promtool, which checks the alert rules in deploy/prometheus, taken from Debian's
#     prometheus package without installing it (no Prometheus server, user or service);
#   - lintian, which scripts/package-check.sh runs on the Debian package;
#   - rsyslog and rsyslog-gnutls, which the audit export's tests receive with, unpacked
#     from Debian's packages into /usr/local/lib/apelora-rsyslog without installing them
#     (the machine's /etc/rsyslog.conf and its syslog service stay as they are); their
#     libraries (libestr0, libfastjson4, liblognorm5) are installed.
# Idempotent: installs only what is missing.
set -euo pipefail

log() { echo "install-deps: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	log "run me as root (I install Debian packages)"
	exit 1
fi

apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		apt-get update -qq >&2 || log "apt-get update reported errors; trying the install anyway"
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || ! id postgres >/dev/null 2>&1; then
	log "installing PostgreSQL"
	apt_install postgresql
fi

if [ ! -x /usr/libexec/incus/incusd ] || ! command -v incus >/dev/null; then
	if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		# Derive the backports entry from the machine's own Debian source (no host names here).
		if [ -f /etc/apt/sources.list.d/debian.sources ]; then
			awk 'BEGIN{RS="";ORS="\n"} NR==1' /etc/apt/sources.list.d/debian.sources |
				sed 's/^Suites:.*/Suites: bookworm-backports/' >/etc/apt/sources.list.d/backports.sources
		else
			grep -m1 -E '^deb .* bookworm ' /etc/apt/sources.list |
				sed 's/ bookworm / bookworm-backports /' >/etc/apt/sources.list.d/backports.list
		fi
		apt_updated=
	fi
	log "installing Incus from bookworm-backports"
	apt_install -t bookworm-backports incus-base incus-client
fi

if [ ! -x /usr/bin/chromium ]; then
	log "installing Chromium (the console's browser tests)"
	apt_install chromium
fi

if ! command -v promtool >/dev/null; then
	# `apt-get install prometheus` would create a user, start a server (or fail to, without
	# systemd) and pull its dependencies; promtool alone is one binary that needs only libc.
	log "installing promtool from Debian's prometheus package (the server is not installed)"
	if [ -z "$apt_updated" ]; then
		apt-get update -qq >&2 || log "apt-get update reported errors; trying the download anyway"
		apt_updated=1
	fi
	deb_dir=$(mktemp -d)
	chown _apt "$deb_dir" 2>/dev/null || true # apt downloads as _apt where it can
	(cd "$deb_dir" && apt-get download -qq prometheus >&2)
	dpkg-deb -x "$deb_dir"/prometheus_*.deb "$deb_dir/root"
	install -m 0755 "$deb_dir/root/usr/bin/promtool" /usr/local/bin/promtool
	rm -rf "$deb_dir"
	promtool --version 2>&1 | head -n 1 >&2
fi

if ! command -v lintian >/dev/null; then
	log "installing lintian (the Debian package's checks)"
	apt_install lintian
fi

rsyslog_root=/usr/local/lib/apelora-rsyslog
if [ ! -x "$rsyslog_root/usr/sbin/rsyslogd" ]; then
	# `apt-get install rsyslog` would replace the machine's syslog daemon and start it; the
	# tests run rsyslogd themselves with a config of their own (e2e/auditexport_test.go).
	log "unpacking rsyslogd and its TLS driver into $rsyslog_root (the audit export's tests; no service)"
	apt_install libestr0 libfastjson4 liblognorm5 libgnutls30
	deb_dir=$(mktemp -d)
	chown _apt "$deb_dir" 2>/dev/null || true
	(cd "$deb_dir" && apt-get download -qq rsyslog rsyslog-gnutls >&2)
	mkdir -p "$rsyslog_root"
	for deb in "$deb_dir"/*.deb; do dpkg-deb -x "$deb" "$rsyslog_root"; done
	rm -rf "$deb_dir"
	"$rsyslog_root/usr/sbin/rsyslogd" -v 2>&1 | head -n 1 >&2
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	log "node and npm are missing: the console's build checks and browser tests need Node.js 20+ (Go builds without them)"
fi

if ! command -v go >/dev/null; then
	log "Go is not installed: install Go 1.26 or newer (see go.mod) and run me again"
	exit 1
fi
