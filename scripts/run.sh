#!/usr/bin/env bash
# Runs Apelora fabric on this machine, as root, with embedded defaults:
#   - PostgreSQL: the server's own default, a local PostgreSQL from the system's binaries
#     in $APELORA_STATE_DIR/postgres (unless APELORA_DATABASE_URL is set);
#   - Incus: a one-member local cluster on 127.42.0.1 (bin/incus-lab), unless
#     APELORA_INCUS_URL or APELORA_INCUS_SOCKET is set;
#   - MAAS: the bundled MAAS simulator over HTTPS on 127.0.0.1:5240, unless APELORA_MAAS_URL
#     is set;
#   - an administrator identity, created on the first run (its token is printed once);
#   - the placement guard, turned on once the server answers (apeloractl placement-guard on);
#   - apelora-worker, the fencing worker, with the same MAAS (the simulator's key).
# Then serves Fabric Console at http://127.0.0.1:8080/, GraphQL at /graphql and GraphiQL at
# /graphiql/.
# Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "run: $*" >&2; }

# Only what running needs (PostgreSQL, Incus, Go when missing or older than go.mod's):
# scripts/test.sh installs the rest. apt's and go's output goes to the log, one line per
# step here.
export APELORA_INSTALL_LOG=${APELORA_INSTALL_LOG:-/var/log/apelora-install.log}
scripts/install-deps.sh run

export APELORA_STATE_DIR=${APELORA_STATE_DIR:-/var/lib/apelora}
mkdir -p "$APELORA_STATE_DIR"
chmod 755 "$APELORA_STATE_DIR"

cmds=(apelora apeloractl apelora-worker maas-sim incus-lab)
# The modules the binaries need, fetched once through the Go module proxy (go.sum checks
# them), their "go: downloading" lines in the log. Nothing to fetch: no line.
if ! GOPROXY=off go list -deps "${cmds[@]/#/./cmd/}" >/dev/null 2>&1; then
	log "fetching the Go modules go.sum pins (output: $APELORA_INSTALL_LOG)"
	echo "--- run.sh: go list -deps" >>"$APELORA_INSTALL_LOG"
	go list -deps "${cmds[@]/#/./cmd/}" >/dev/null 2>>"$APELORA_INSTALL_LOG" || {
		log "fetching the Go modules failed; the last lines of $APELORA_INSTALL_LOG:"
		tail -n 25 "$APELORA_INSTALL_LOG" | sed 's/^/    /' >&2
		exit 1
	}
fi

# One binary at a time, each named as it is built: the first build compiles every
# dependency (about a minute on two cores) and should not look like a hang.
mkdir -p bin
build_start=$(date +%s)
for cmd in "${cmds[@]}"; do
	log "building bin/$cmd ($(( $(date +%s) - build_start )) s so far; the first build takes about a minute)"
	go build -o bin/ "./cmd/$cmd"
done
log "built in $(( $(date +%s) - build_start )) s"

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "${started_lab:-}" ]; then bin/incus-lab stop "$LAB_DIR" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${APELORA_INCUS_URL:-}${APELORA_INCUS_SOCKET:-}" ]; then
	LAB_DIR=$APELORA_STATE_DIR/incus-lab
	if [ -f "$LAB_DIR/.apelora-incus-lab" ]; then
		bin/incus-lab stop "$LAB_DIR" >/dev/null 2>&1 || true
	fi
	log "starting a local one-member Incus cluster on 127.42.0.1 in $LAB_DIR"
	bin/incus-lab start 1 "$LAB_DIR" >/dev/null 2>"$APELORA_STATE_DIR/incus-lab.log" || {
		cat "$APELORA_STATE_DIR/incus-lab.log" >&2
		exit 1
	}
	started_lab=1
	eval "$(bin/incus-lab env "$LAB_DIR")"
fi

if [ -z "${APELORA_MAAS_URL:-}" ]; then
	SIM_DIR=$APELORA_STATE_DIR/maas-sim
	mkdir -p "$SIM_DIR"
	chmod 700 "$SIM_DIR"
	[ -s "$SIM_DIR/api-key" ] || write_key=-write-key
	log "starting the MAAS simulator on https://127.0.0.1:5240/MAAS"
	bin/maas-sim -listen 127.0.0.1:5240 -tls leaf -cert-out "$SIM_DIR/maas.pem" \
		-key-file "$SIM_DIR/api-key" ${write_key:-} -fixture cmd/maas-sim/testdata/fixture.json &
	pids+=($!)
	for _ in $(seq 50); do [ -s "$SIM_DIR/maas.pem" ] && break; sleep 0.1; done
	export APELORA_MAAS_URL=https://127.0.0.1:5240/MAAS
	APELORA_MAAS_API_KEY=$(cat "$SIM_DIR/api-key")
	export APELORA_MAAS_API_KEY APELORA_MAAS_CA_FILE=$SIM_DIR/maas.pem
fi

# The token is kept in this shell only, and printed last, once everything answers.
admin_token=
if [ ! -f "$APELORA_STATE_DIR/.admin-created" ]; then
	log "creating the administrator identity 'admin' (manage-infrastructure, hardware.delete)"
	admin_token=$(bin/apelora identity create --name admin --permission manage-infrastructure --permission hardware.delete | tail -n 1)
	touch "$APELORA_STATE_DIR/.admin-created"
fi

# One log line per request is for production logs; here it would bury what this script
# prints (APELORA_ACCESS_LOG=info brings them back).
export APELORA_ACCESS_LOG=${APELORA_ACCESS_LOG:-debug}

# A short-lived identity of run.sh's own turns the placement guard on once the server
# answers, then is revoked: the administrator's token is never kept.
runsh=run-sh-$(date +%s)
runsh_token=$(bin/apelora identity create --name "$runsh" --permission manage-infrastructure --expires 10m | tail -n 1)

listen=${APELORA_LISTEN:-127.0.0.1:8080}
bin/apelora serve &
serve=$!
pids+=($serve)
# The server owns the local PostgreSQL (it started it); the worker comes once it answers.
for _ in $(seq 300); do
	curl -fsS "http://$listen/readyz" >/dev/null 2>&1 && break
	kill -0 "$serve" 2>/dev/null || exit 1
	sleep 0.2
done
log "turning the placement guard on (apeloractl placement-guard on)"
APELORA_URL=http://$listen APELORA_TOKEN=$runsh_token bin/apeloractl placement-guard on >&2 ||
	log "the placement guard is NOT on: see the message above (a placement scriptlet of your own is left as it is)"
APELORA_URL=http://$listen APELORA_TOKEN=$runsh_token bin/apeloractl revoke-identity "$runsh" >/dev/null ||
	log "could not revoke $runsh; it expires within 10 minutes anyway"
unset runsh_token
log "starting the fencing worker"
bin/apelora-worker &
pids+=($!)
sleep 1 # its first lines come before the frame below, not after it
{
	echo
	echo "  ┌──────────────────────────────────────────────────────────────────────────"
	echo "  │ Fabric Console:  http://$listen/"
	echo "  │ GraphiQL:        http://$listen/graphiql/"
	if [ -n "$admin_token" ]; then
		echo "  │"
		echo "  │ Sign in with the administrator's bearer token, shown only now (Apelora keeps"
		echo "  │ only a hash of it):"
		echo "  │"
		echo "  │   $admin_token"
		echo "  │"
		echo "  │ In GraphiQL, set the header {\"Authorization\": \"Bearer <token>\"}."
	else
		echo "  │ Sign in with the token printed on the first run. Lost it? Make another:"
		echo "  │   bin/apelora identity create --name admin2 --permission manage-infrastructure"
	fi
	if [ -n "${LAB_DIR:-}" ]; then
		echo "  │"
		echo "  │ The local Incus cluster (one member, the cluster's first: m1 on 127.42.0.1):"
		echo "  │   eval \"\$(bin/incus-lab env $LAB_DIR)\"   # the APELORA_INCUS_* settings"
		echo "  │   APELORA_INCUS_LAB_DIR=$LAB_DIR bin/incus-lab cli m1 cluster list   # its incus CLI"
	fi
	# The founding member is Unregistered (no machine record) and not admitted: with the
	# guard on, nothing is placed until a member is admitted (docs/machines.md: The placement guard).
	member=m1 words=m1
	[ -n "${LAB_DIR:-}" ] || member=NAME words="the cluster's first member (NAME)"
	echo "  │"
	echo "  │ The placement guard is on: Incus places no instance until a member is"
	echo "  │ admitted. Admit $words first; its checks run again, each step audited:"
	echo "  │   Fabric Console: Enrolment (or its machine page) → Admit. A member with no"
	echo "  │     machine record is registered first, in the same dialog."
	echo "  │   apeloractl (with APELORA_URL=http://$listen APELORA_TOKEN=<the token>):"
	echo "  │     bin/apeloractl register $member && bin/apeloractl admit $member"
	echo "  │ Ctrl-C stops everything this script started."
	echo "  └──────────────────────────────────────────────────────────────────────────"
	echo
} >&2
unset admin_token
wait "$serve"
