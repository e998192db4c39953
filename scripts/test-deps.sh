#!/usr/bin/env bash
# Installs (scripts/install-deps.sh test: what running needs and the rest the tests need,
# apt's output in $APELORA_INSTALL_LOG) and starts what the tests need on a fresh Debian
# machine, as root:
#   - PostgreSQL, started as the `postgres` user on a unix socket and 127.0.0.1:55432 in
#     $APELORA_TEST_DIR (default /var/tmp/apelora-test);
#   - Incus is only installed: the tests start their own incusd members on loopback
#     addresses (testkit/incuslab);
#   - node, for the reference graphql-ws client the e2e tests run.
# Idempotent: a second run finds everything in place. Prints the environment the tests
# read (APELORA_TEST_DATABASE_URL) on its last line, ready for `eval`.
set -euo pipefail

TEST_DIR=${APELORA_TEST_DIR:-/var/tmp/apelora-test}
PG_PORT=${APELORA_TEST_PG_PORT:-55432}

log() { echo "test-deps: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
	log "run me as root (I install Debian packages and start PostgreSQL as the postgres user)"
	exit 1
fi

export APELORA_INSTALL_LOG=${APELORA_INSTALL_LOG:-/var/log/apelora-install.log}
"$(dirname "$0")/install-deps.sh" test

# node runs the reference graphql-ws client in the e2e tests (e2e/testdata/graphql-ws).
if ! command -v node >/dev/null; then
	log "nodejs: installing nodejs (the e2e tests run the reference graphql-ws client with it; apt's output: $APELORA_INSTALL_LOG)"
	apt-get update >>"$APELORA_INSTALL_LOG" 2>&1 || log "apt-get update reported errors; trying the install anyway"
	DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs >>"$APELORA_INSTALL_LOG" 2>&1 || {
		log "installing nodejs failed; the last lines of $APELORA_INSTALL_LOG:"
		tail -n 25 "$APELORA_INSTALL_LOG" | sed 's/^/    /' >&2
		exit 1
	}
fi
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

# --- start PostgreSQL ---------------------------------------------------------------------
PG_DIR=$TEST_DIR/pg
mkdir -p "$PG_DIR/sock"
chmod 755 "$TEST_DIR"
chown -R postgres:postgres "$PG_DIR"
as_pg() { runuser -u postgres -- "$@"; }
if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
	log "initdb in $PG_DIR/data"
	as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --no-locale >/dev/null
fi
if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1; then
	log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
	# fsync off: test data is thrown away; max_connections for parallel test packages.
	as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 60 \
		-o "-p $PG_PORT -k $PG_DIR/sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" start >&2
fi

echo "export APELORA_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
