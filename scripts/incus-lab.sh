#!/usr/bin/env bash
# incus-lab.sh: a real Incus cluster on loopback addresses, kept running for a developer
# (the Go tests use testkit/incuslab instead). Needs root, Debian's incus-base and
# incus-client (scripts/test-deps.sh installs them) and openssl.
#
#   incus-lab.sh start [N] [DIR]   start an N-member cluster (default 3) in DIR
#   incus-lab.sh stop [DIR]        kill its daemons by their recorded PIDs and remove DIR
#   incus-lab.sh status [DIR]      PIDs, process states and `incus cluster list`
#   incus-lab.sh env [DIR]         print the APELORA_INCUS_* exports for the product
#   incus-lab.sh cli MEMBER ARGS…  run the incus CLI against member MEMBER (m1, m2 …) of DIR
#
# DIR defaults to $APELORA_INCUS_LAB_DIR or /tmp/apelora-incus-lab. Members m1…mN listen on
# $APELORA_INCUS_LAB_BLOCK.1…N:8443 (block default 127.42.0; the Go tests use random blocks
# in 127.100-199.*). The block is locked with flock on /tmp/apelora-incuslab/<block>.lock,
# the same files the Go lab uses; the daemons inherit the lock, so it is held while they run.
# m1 bootstraps the cluster with a dir storage pool "local"; the others join with tokens.
# A client certificate (DIR/client.crt, DIR/client.key) is trusted as Apelora's admin identity
# and DIR/cluster.crt is the certificate to pin. `eval "$(scripts/incus-lab.sh env)"` points
# the product at member 1.
set -euo pipefail

INCUSD=${APELORA_INCUSD:-/usr/libexec/incus/incusd}
BLOCK=${APELORA_INCUS_LAB_BLOCK:-127.42.0}
DEFAULT_DIR=${APELORA_INCUS_LAB_DIR:-/tmp/apelora-incus-lab}
LOCK_DIR=${TMPDIR:-/tmp}/apelora-incuslab
PORT=8443
MARKER=.apelora-incus-lab

log() { echo "incus-lab: $*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# incus_on DIR MEMBER ARGS…: the CLI against one member's unix socket.
incus_on() {
	local dir=$1 member=$2
	shift 2
	INCUS_DIR=$dir/$member INCUS_CONF=$dir/cli timeout 120 incus "$@"
}

# pid_state PID: R/S/D… for a live process, Z for a zombie, "" when gone.
pid_state() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	echo "${stat%% *}"
}

# lab_pid DIR MEMBER: the recorded PID if that process is still this member's incusd.
lab_pid() {
	local dir=$1 member=$2 pid state
	[ -f "$dir/$member/pid" ] || return 0
	pid=$(cat "$dir/$member/pid")
	state=$(pid_state "$pid")
	if [ -n "$state" ] && [ "$state" != Z ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--logfile $dir/$member/incusd.log"; then
		echo "$pid"
	fi
}

members_of() {
	local dir=$1 d
	for d in "$dir"/m*/; do
		[ -f "$d/pid" ] && basename "$d"
	done | sort -V
}

unmount_under() {
	local dir=$1 mp
	# Field 5 of mountinfo is the mount point; deepest first.
	awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r mp; do umount -l "$mp" 2>/dev/null || log "could not unmount $mp"; done
}

# stop_lab DIR: SIGKILL each member's process group, wait, unmount, remove DIR.
stop_lab() {
	local dir=$1 m pid i
	[ -d "$dir" ] || {
		log "no lab in $dir"
		return 0
	}
	[ -f "$dir/$MARKER" ] || die "$dir is not an incus-lab directory (no $MARKER); not touching it"
	for m in $(members_of "$dir"); do
		pid=$(lab_pid "$dir" "$m")
		if [ -n "$pid" ]; then
			log "killing $m (pid $pid)"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	for m in $(members_of "$dir"); do
		pid=$(cat "$dir/$m/pid")
		for i in $(seq 1 100); do
			case $(pid_state "$pid") in "" | Z) break ;; esac
			sleep 0.1
		done
	done
	unmount_under "$dir"
	rm -rf "$dir"
	log "stopped and removed $dir"
}

start_failed() {
	local dir=$1 f
	trap - ERR
	log "start failed; the end of each member's log follows"
	for f in "$dir"/m*/incusd.log; do
		if [ -f "$f" ]; then
			log "--- $f"
			tail -n 20 "$f" >&2 || true
		fi
	done
	stop_lab "$dir"
	exit 1
}

cmd_start() {
	local n=${1:-3} dir=${2:-$DEFAULT_DIR} i m addr t0 token lockfd
	case $n in '' | *[!0-9]*) die "N must be a number, got '$n'" ;; esac
	[ "$n" -ge 1 ] && [ "$n" -le 50 ] || die "N must be between 1 and 50"
	[ "$(id -u)" = 0 ] || die "run me as root (incusd needs it)"
	[ -x "$INCUSD" ] || die "incusd not found at $INCUSD; install incus-base from bookworm-backports (scripts/test-deps.sh)"
	command -v incus >/dev/null || die "the incus CLI is missing; install incus-client from bookworm-backports"
	command -v openssl >/dev/null || die "openssl is missing"
	dir=$(realpath -m "$dir")
	if [ -d "$dir" ]; then
		for m in $(members_of "$dir"); do
			[ -z "$(lab_pid "$dir" "$m")" ] || die "a lab is already running in $dir; run: $0 stop $dir"
		done
		[ -z "$(ls -A "$dir")" ] || [ -f "$dir/$MARKER" ] || die "$dir exists and is not an incus-lab directory"
		rm -rf "$dir"
	fi

	mkdir -p "$LOCK_DIR"
	exec {lockfd}>"$LOCK_DIR/$BLOCK.lock"
	flock -n "$lockfd" || die "address block $BLOCK.0/24 is in use by another lab; set APELORA_INCUS_LAB_BLOCK"
	for i in $(seq 1 "$n"); do
		if (exec 3<>"/dev/tcp/$BLOCK.$i/$PORT") 2>/dev/null; then
			die "$BLOCK.$i:$PORT is already in use; set APELORA_INCUS_LAB_BLOCK to another 127.X.Y"
		fi
	done

	t0=$(date +%s.%N)
	mkdir -p "$dir/cli"
	touch "$dir/$MARKER"
	# From here on, a failure stops what was started.
	trap 'start_failed "$dir"' ERR

	for i in $(seq 1 "$n"); do
		m=m$i
		mkdir -p "$dir/$m"
		echo "$BLOCK.$i:$PORT" >"$dir/$m/address"
		# setsid: own session, so the daemon outlives this shell and its terminal. The lock fd
		# is inherited on purpose: the block stays locked while any member lives.
		INCUS_DIR=$dir/$m setsid "$INCUSD" --group root --verbose --logfile "$dir/$m/incusd.log" \
			</dev/null >"$dir/$m/stdout.log" 2>&1 &
		echo $! >"$dir/$m/pid"
	done
	for i in $(seq 1 "$n"); do
		# waitready chats on an uninitialised daemon; keep that in the member's directory.
		incus_on "$dir" "m$i" admin waitready --timeout 30 >>"$dir/m$i/cli.log" 2>&1 ||
			{ log "m$i did not become ready: $(tail -n 3 "$dir/m$i/cli.log")" && start_failed "$dir"; }
	done

	incus_on "$dir" m1 admin init --preseed <<EOF
config:
  core.https_address: $BLOCK.1:$PORT
storage_pools:
- name: local
  driver: dir
cluster:
  server_name: m1
  enabled: true
EOF
	cp "$dir/m1/cluster.crt" "$dir/cluster.crt"

	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
		-subj "/O=Apelora/CN=apelora-dev" -addext "extendedKeyUsage=clientAuth" \
		-keyout "$dir/client.key" -out "$dir/client.crt" 2>/dev/null
	chmod 600 "$dir/client.key"
	incus_on "$dir" m1 config trust add-certificate "$dir/client.crt" --name apelora-dev >/dev/null

	for i in $(seq 2 "$n"); do
		m=m$i
		token=$(incus_on "$dir" m1 cluster add "$m" --quiet)
		incus_on "$dir" "$m" admin init --preseed <<EOF
cluster:
  enabled: true
  server_name: $m
  server_address: $BLOCK.$i:$PORT
  cluster_token: $token
  member_config:
  - entity: storage-pool
    name: local
    key: source
    value: ""
EOF
	done
	unset token
	trap - ERR

	cat >"$dir/env" <<EOF
export APELORA_INCUS_URL=https://$BLOCK.1:$PORT
export APELORA_INCUS_CLIENT_CERT=$dir/client.crt
export APELORA_INCUS_CLIENT_KEY=$dir/client.key
export APELORA_INCUS_SERVER_CERT=$dir/cluster.crt
EOF
	log "$n-member cluster ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s in $dir"
	log "environment for the product: eval \"\$($0 env $dir)\""
	incus_on "$dir" m1 cluster list >&2
	cat "$dir/env"
}

cmd_stop() {
	local dir
	dir=$(realpath -m "${1:-$DEFAULT_DIR}")
	stop_lab "$dir"
}

cmd_status() {
	local dir m pid state first="" rc=0
	dir=$(realpath -m "${1:-$DEFAULT_DIR}")
	[ -f "$dir/$MARKER" ] || die "no lab in $dir"
	printf '%-6s %-22s %-8s %s\n' MEMBER ADDRESS PID STATE
	for m in $(members_of "$dir"); do
		pid=$(lab_pid "$dir" "$m")
		if [ -z "$pid" ]; then
			state=dead
			rc=1
		else
			case $(pid_state "$pid") in
			T | t) state=frozen ;;
			*) state=running ;;
			esac
			[ -n "$first" ] || [ "$state" != running ] || first=$m
		fi
		printf '%-6s %-22s %-8s %s\n' "$m" "$(cat "$dir/$m/address")" "$(cat "$dir/$m/pid")" "$state"
	done
	if [ -n "$first" ]; then
		echo
		incus_on "$dir" "$first" cluster list || rc=1
	fi
	return $rc
}

cmd_env() {
	local dir
	dir=$(realpath -m "${1:-$DEFAULT_DIR}")
	[ -f "$dir/env" ] || die "no lab environment in $dir (start one with: $0 start)"
	cat "$dir/env"
}

cmd_cli() {
	local dir member
	[ $# -ge 1 ] || usage
	member=$1
	shift
	dir=$(realpath -m "$DEFAULT_DIR")
	[ -d "$dir/$member" ] || die "no member $member in $dir"
	incus_on "$dir" "$member" "$@"
}

case ${1:-} in
start) shift && cmd_start "$@" ;;
stop) shift && cmd_stop "$@" ;;
status) shift && cmd_status "$@" ;;
env) shift && cmd_env "$@" ;;
cli) shift && cmd_cli "$@" ;;
*) usage ;;
esac
