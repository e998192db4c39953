#!/bin/sh
# enrol-member.sh: join THIS server to the Incus cluster with the single-use join token that
# Apelora issued when an administrator approved its enrolment, then hold it out of automatic
# placement (scheduler.instance=manual) until Apelora admits it.
#
# Run it as root on the new server, where the incus daemon runs and is not clustered yet:
#
#   sh enrol-member.sh --name NAME --address ADDR[:PORT] \
#       [--member-config ENTITY/NAME/KEY=VALUE]... [--dry-run]
#
# The join token is read from standard input only (pasted at the hidden prompt, or piped in),
# so it stays out of shell history and the process list. It is never written to disk, never
# passed to another program as an argument and never printed.
#
# Exit status: 0 joined and held (or --dry-run passed every check); 1 refused, nothing changed;
# 2 usage error, nothing changed; 3 the join failed; 4 joined but NOT held.
#
# Needs only sh, base64, awk, date, id, stty and the incus CLI (Debian: incus-client).
set -eu

PROG=enrol-member.sh
DEFAULT_PORT=8443
HOLD_KEY=scheduler.instance
HOLD_VALUE=manual

TOKEN=''
SECRET=''
TTY_STATE=''
STAGE=checking

usage() {
	cat <<'EOF'
Usage: sh enrol-member.sh --name NAME --address ADDR[:PORT]
                          [--member-config ENTITY/NAME/KEY=VALUE]... [--dry-run]
       sh enrol-member.sh --help

Joins this server to the Incus cluster with the join token that Apelora issued when the
enrolment was approved, then sets scheduler.instance=manual on it, so no instance is placed
on it until Apelora admits it.

The join token is read from STANDARD INPUT ONLY: paste it when asked (the input is hidden),
or pipe it in. Never put it on the command line.

  --name NAME          the member name the token was issued for (default: the token's name)
  --address ADDR[:PORT]
                       the address the other cluster members reach this server at
                       (IPv4, [IPv6] or host name; port 8443 when omitted)
  --member-config ENTITY/NAME/KEY=VALUE
                       a member-specific setting of a storage pool or network to join with,
                       e.g. storage-pool/local/source=/dev/sdb or network/br0/parent=eno1;
                       ENTITY is storage-pool or network; repeat for each entry
                       (Apelora's approval prints the entries the cluster needs)
  --dry-run            check everything and print the preseed (token masked); change nothing
  -h, --help           show this help

Exit status: 0 joined and held (or --dry-run passed every check); 1 refused, nothing changed;
2 usage error, nothing changed; 3 the join failed; 4 joined but NOT held out of placement.
EOF
}

# ---- output ------------------------------------------------------------------------------

# mask TEXT: sets MASKED to TEXT with the join token and its secret replaced, so nothing this
# script prints can carry them, even text that came from incus. Pure shell: the token is never
# handed to another program.
mask() {
	MASKED=$1
	# A string this short cannot be (or give away) a join token.
	if [ "${#TOKEN}" -ge 8 ]; then
		while :; do
			case $MASKED in
			*"$TOKEN"*) MASKED="${MASKED%%"$TOKEN"*}<join token>${MASKED#*"$TOKEN"}" ;;
			*) break ;;
			esac
		done
	fi
	if [ -n "$SECRET" ]; then
		while :; do
			case $MASKED in
			*"$SECRET"*) MASKED="${MASKED%%"$SECRET"*}<join token secret>${MASKED#*"$SECRET"}" ;;
			*) break ;;
			esac
		done
	fi
}

say() {
	mask "$*"
	printf '%s: %s\n' "$PROG" "$MASKED"
}

warn() {
	mask "$*"
	printf '%s: %s\n' "$PROG" "$MASKED" >&2
}

# refuse MESSAGE...: a check failed before anything was changed.
refuse() {
	for line in "$@"; do
		warn "$line"
	done
	warn "Nothing was changed on this server."
	exit 1
}

# usage_error MESSAGE...
usage_error() {
	for line in "$@"; do
		warn "$line"
	done
	warn "Run 'sh $PROG --help' for usage. Nothing was changed on this server."
	exit 2
}

# indent TEXT: prints TEXT (masked), each line indented, on standard error.
indent() {
	mask "$1"
	printf '%s\n' "$MASKED" | sed 's/^/    /' >&2
}

# incus_read ARGS...: runs the read-only `incus ARGS` and sets VALUE to its standard output
# alone: on a fresh server the CLI prints a first-run banner on standard error, which must
# not end up in a value. On failure it runs the command again to set INCUS_ERR to what
# incus said, and returns 1.
incus_read() {
	if VALUE=$(incus "$@" 2>/dev/null); then
		return 0
	fi
	INCUS_ERR=$(incus "$@" 2>&1) || true
	return 1
}

refuse_token_argument() {
	usage_error "refusing a join token on the command line: the join token is read from standard input only, so it stays out of shell history and the process list." \
		"Run the command without it and paste the token when asked (the input is hidden), or pipe it in."
}

# looks_like_token ARG: true if ARG is, or carries after '=', something shaped like a join
# token (base64 of {"server_name":…}, its JSON, or a long run of base64 characters).
looks_like_token() {
	for part in "$1" "${1#*=}"; do
		case $part in
		*eyJzZXJ2ZXJfbmFtZSI* | *'"server_name"'* | *'"secret"'*) return 0 ;;
		*[!A-Za-z0-9+/=]*) ;;
		*) [ "${#part}" -lt 64 ] || return 0 ;;
		esac
	done
	return 1
}

# ---- checks on the arguments ---------------------------------------------------------------

# valid_member_name NAME: Apelora's member-name rule (machines.ValidateName; its tests run
# this function on the same cases): 1 to 63 lower-case letters, digits and hyphens, a
# letter first, no hyphen last, not "none".
valid_member_name() {
	case $1 in
	'' | none | [!a-z]* | *- | *[!a-z0-9-]*) return 1 ;;
	esac
	[ "${#1}" -le 63 ]
}

# valid_ipv4 HOST
valid_ipv4() {
	case $1 in
	*[!0-9.]* | .* | *. | *..*) return 1 ;;
	esac
	_rest=$1.
	_n=0
	while [ -n "$_rest" ]; do
		_octet=${_rest%%.*}
		_rest=${_rest#*.}
		_n=$((_n + 1))
		case $_octet in
		'' | ????*) return 1 ;;
		0?*) return 1 ;; # no leading zeros: some parsers read them as octal
		esac
		[ "$_octet" -le 255 ] || return 1
	done
	[ "$_n" -eq 4 ]
}

# valid_hostname HOST: DNS labels of letters, digits and hyphens.
valid_hostname() {
	case $1 in
	'' | .* | *. | *..* | *[!A-Za-z0-9.-]*) return 1 ;;
	esac
	[ "${#1}" -le 253 ] || return 1
	_rest=$1.
	while [ -n "$_rest" ]; do
		_label=${_rest%%.*}
		_rest=${_rest#*.}
		case $_label in
		'' | -* | *-) return 1 ;;
		esac
		[ "${#_label}" -le 63 ] || return 1
	done
	# All digits and dots would be a (bad) IPv4 address, not a name.
	case $1 in
	*[!0-9.]*) return 0 ;;
	*) return 1 ;;
	esac
}

# valid_ipv6 HOST (without brackets)
valid_ipv6() {
	case $1 in
	*:*) ;;
	*) return 1 ;;
	esac
	case $1 in
	*[!0-9A-Fa-f:.]* | *:::*) return 1 ;;
	esac
	[ "${#1}" -le 45 ]
}

# parse_address ADDR: sets ADDRESS to host:port (IPv6 in brackets) or refuses.
parse_address() {
	_a=$1
	_port=''
	_bare6=false
	case $_a in
	\[*\]:*)
		_host=${_a%%\]:*}
		_host=${_host#\[}
		_port=${_a##*\]:}
		;;
	\[*\])
		_host=${_a#\[}
		_host=${_host%\]}
		;;
	*:*:*) # IPv6 without brackets: no port can be given
		_host=$_a
		_bare6=true
		;;
	*:*)
		_host=${_a%%:*}
		_port=${_a#*:}
		;;
	*)
		_host=$_a
		;;
	esac
	_hint="give the address the other cluster members reach this server at, as IPv4[:PORT], [IPv6][:PORT] or HOSTNAME[:PORT] (port $DEFAULT_PORT when omitted), e.g. --address 192.0.2.10:$DEFAULT_PORT"
	if [ -z "$_port" ]; then
		[ "$_bare6" = true ] || case $_a in
		*:) usage_error "--address '$_a' ends with ':' but gives no port: $_hint" ;;
		esac
		_port=$DEFAULT_PORT
	fi
	case $_port in
	'' | *[!0-9]* | 0*) usage_error "--address '$_a': the port '$_port' is not a number from 1 to 65535: $_hint" ;;
	esac
	if [ "${#_port}" -gt 5 ] || [ "$_port" -gt 65535 ]; then
		usage_error "--address '$_a': the port '$_port' is not a number from 1 to 65535: $_hint"
	fi
	if valid_ipv6 "$_host"; then
		case $_host in
		:: | ::0 | 0:0:0:0:0:0:0:0) usage_error "--address '$_a' is the IPv6 wildcard address; $_hint" ;;
		esac
		ADDRESS="[$_host]:$_port"
	elif valid_ipv4 "$_host"; then
		[ "$_host" != 0.0.0.0 ] || usage_error "--address '$_a' is the IPv4 wildcard address; $_hint"
		ADDRESS="$_host:$_port"
	elif valid_hostname "$_host"; then
		ADDRESS="$_host:$_port"
	else
		usage_error "--address '$_a' is not a valid address: $_hint"
	fi
}

# add_member_config ENTITY/NAME/KEY=VALUE: checks one entry and appends it to MEMBER_CONFIG
# (one entry a line).
add_member_config() {
	_e=$1
	_form="it must be ENTITY/NAME/KEY=VALUE with ENTITY storage-pool or network, e.g. storage-pool/local/source=/dev/sdb (an empty VALUE is allowed: storage-pool/local/source=)"
	case $_e in
	*=*) ;;
	*) usage_error "--member-config '$_e' has no '=': $_form" ;;
	esac
	_id=${_e%%=*}
	_value=${_e#*=}
	case $_id in
	*/*/*/*) usage_error "--member-config '$_e': '$_id' has more than three parts: $_form" ;;
	?*/?*/?*) ;;
	*) usage_error "--member-config '$_e': '$_id' is not ENTITY/NAME/KEY: $_form" ;;
	esac
	_entity=${_id%%/*}
	_rest=${_id#*/}
	_name=${_rest%%/*}
	_key=${_rest#*/}
	case $_entity in
	storage-pool | network) ;;
	*) usage_error "--member-config '$_e': the entity '$_entity' is neither storage-pool nor network: $_form" ;;
	esac
	case $_name in
	*[!A-Za-z0-9._-]*) usage_error "--member-config '$_e': the $_entity name '$_name' may only hold letters, digits, '.', '_' and '-'" ;;
	esac
	case $_key in
	*[!A-Za-z0-9._-]*) usage_error "--member-config '$_e': the key '$_key' may only hold letters, digits, '.', '_' and '-'" ;;
	esac
	case $_value in
	*[[:cntrl:]]*) usage_error "--member-config '$_id=…': the value holds a line break or another control character" ;;
	esac
	_old_ifs=$IFS
	IFS='
'
	for _line in $MEMBER_CONFIG; do
		if [ "${_line%%=*}" = "$_id" ]; then
			IFS=$_old_ifs
			usage_error "--member-config '$_id' is given twice; give each ENTITY/NAME/KEY once"
		fi
	done
	IFS=$_old_ifs
	MEMBER_CONFIG="$MEMBER_CONFIG$_id=$_value
"
}

# ---- YAML ------------------------------------------------------------------------------------

# yaml_quote VALUE: sets QUOTED to VALUE as a single-quoted YAML scalar ('' for each ').
yaml_quote() {
	_s=$1
	QUOTED=''
	while :; do
		case $_s in
		*\'*)
			QUOTED="$QUOTED${_s%%\'*}''"
			_s=${_s#*\'}
			;;
		*) break ;;
		esac
	done
	QUOTED="'$QUOTED$_s'"
}

# preseed CLUSTER_TOKEN: prints the `incus admin init --preseed` document that joins this
# server. Called with the real token only inside the pipe to incus; printf is a shell builtin.
preseed() {
	printf 'cluster:\n  enabled: true\n'
	yaml_quote "$NAME"
	printf '  server_name: %s\n' "$QUOTED"
	yaml_quote "$ADDRESS"
	printf '  server_address: %s\n' "$QUOTED"
	yaml_quote "$1"
	printf '  cluster_token: %s\n' "$QUOTED"
	if [ -z "$MEMBER_CONFIG" ]; then
		printf '  member_config: []\n'
		return
	fi
	printf '  member_config:\n'
	_old_ifs=$IFS
	IFS='
'
	set -f
	for _line in $MEMBER_CONFIG; do
		_id=${_line%%=*}
		_rest=${_id#*/}
		yaml_quote "${_id%%/*}"
		printf '  - entity: %s\n' "$QUOTED"
		yaml_quote "${_rest%%/*}"
		printf '    name: %s\n' "$QUOTED"
		yaml_quote "${_rest#*/}"
		printf '    key: %s\n' "$QUOTED"
		yaml_quote "${_line#*=}"
		printf '    value: %s\n' "$QUOTED"
	done
	set +f
	IFS=$_old_ifs
}

# ---- JSON --------------------------------------------------------------------------------

# JSON_GET is an awk program: it reads one JSON object on standard input and prints the
# top-level member named by -v want=KEY: a string (unescaped), a number, true, false or null
# as written, or an array of strings joined by commas. Exit 1: no such member or another
# type; exit 2: not a JSON object.
# shellcheck disable=SC2016 # an awk program, not shell
JSON_GET='
function fail() { exit 2 }
function ws() { while (p <= n && index(" \t\r\n", substr(s, p, 1)) > 0) p++ }
function hexval(h,   i, v, d) {
	v = 0
	for (i = 1; i <= 4; i++) {
		d = index("0123456789abcdef", tolower(substr(h, i, 1)))
		if (d == 0) fail()
		v = v * 16 + d - 1
	}
	return v
}
function str(   c, out, v) {
	if (substr(s, p, 1) != "\"") fail()
	p++
	out = ""
	while (p <= n) {
		c = substr(s, p, 1)
		if (c == "\"") { p++; return out }
		if (c == "\\") {
			c = substr(s, p + 1, 1)
			p += 2
			if (c == "\"" || c == "\\" || c == "/") out = out c
			else if (c == "b" || c == "f" || c == "n" || c == "r" || c == "t") out = out "\001"
			else if (c == "u") {
				v = hexval(substr(s, p, 4))
				p += 4
				if (v >= 32 && v < 127) out = out sprintf("%c", v)
				else out = out "\001"
			} else fail()
			continue
		}
		if (c < " ") fail()
		out = out c
		p++
	}
	fail()
}
# value(): parses one value at p; returns its type and leaves scalars and joined string
# arrays in V.
function value(   c, t, joined, count, allstr) {
	ws()
	c = substr(s, p, 1)
	if (c == "\"") { V = str(); return "string" }
	if (c == "{") {
		p++
		ws()
		if (substr(s, p, 1) == "}") { p++; return "object" }
		while (1) {
			ws(); str(); ws()
			if (substr(s, p, 1) != ":") fail()
			p++
			value()
			ws()
			c = substr(s, p, 1)
			p++
			if (c == "}") return "object"
			if (c != ",") fail()
		}
	}
	if (c == "[") {
		p++
		ws()
		joined = ""; count = 0; allstr = 1
		if (substr(s, p, 1) == "]") { p++; V = ""; return "array" }
		while (1) {
			t = value()
			if (t == "string") joined = (count++ ? joined "," : "") V
			else allstr = 0
			ws()
			c = substr(s, p, 1)
			p++
			if (c == "]") break
			if (c != ",") fail()
		}
		V = allstr ? joined : ""
		return allstr ? "array" : "mixed"
	}
	if (match(substr(s, p), /^(true|false|null|-?[0-9][0-9.eE+-]*)/)) {
		V = substr(s, p, RLENGTH)
		p += RLENGTH
		return "literal"
	}
	fail()
}
{ s = s $0 "\n" }
END {
	n = length(s); p = 1; found = 0
	ws()
	if (substr(s, p, 1) != "{") fail()
	p++
	ws()
	if (substr(s, p, 1) == "}") p++
	else while (1) {
		ws()
		k = str()
		ws()
		if (substr(s, p, 1) != ":") fail()
		p++
		t = value()
		if (k == want) { found = (t == "mixed" || t == "object") ? 0 : 1; got = V }
		ws()
		c = substr(s, p, 1)
		p++
		if (c == "}") break
		if (c != ",") fail()
	}
	ws()
	if (p <= n) fail()
	if (!found) exit 1
	print got
	exit 0
}'

# token_field KEY: sets FIELD to the token's KEY from the decoded JSON in TOKEN_JSON; the JSON
# reaches awk on its standard input only.
token_field() {
	if FIELD=$(printf '%s' "$TOKEN_JSON" | awk -v want="$1" "$JSON_GET"); then
		:
	else
		case $? in
		1) refuse "the join token has no '$1': it is not a complete Incus join token." \
			"Copy the whole token again from Apelora's approval (it is one line of base64)." ;;
		*) refuse "the join token is not valid: it decodes, but not to the JSON of an Incus join token." \
			"Copy the whole token again from Apelora's approval (it is one line of base64)." ;;
		esac
	fi
	case $FIELD in
	'' | *[[:cntrl:]]*)
		refuse "the join token's '$1' is empty or malformed: it is not a usable Incus join token." \
			"Copy the whole token again from Apelora's approval, or approve the enrolment again for a new one."
		;;
	esac
}

# ---- the terminal ------------------------------------------------------------------------

restore_tty() {
	if [ -n "$TTY_STATE" ]; then
		stty "$TTY_STATE" 2>/dev/null || stty echo 2>/dev/null || true
		TTY_STATE=''
	fi
}

on_exit() { restore_tty; }
on_signal() {
	restore_tty
	printf '\n' >&2
	trap - EXIT
	if [ "$STAGE" = joining ]; then
		warn "INTERRUPTED DURING THE JOIN: this server may or may not have joined the cluster as '$NAME'."
		warn "Check with 'incus cluster list'; if '$NAME' is listed, hold it now: incus cluster set local:$NAME $HOLD_KEY=$HOLD_VALUE"
		warn "If it is not listed, treat the join token as spent and approve the enrolment again in Apelora for a new one."
	elif [ "$STAGE" = failed ]; then
		warn "INTERRUPTED after a failed join: this server is not clustered, but its address settings may not be back as before; check them with 'incus config show'."
	elif [ "$STAGE" = holding ]; then
		warn "INTERRUPTED: this server joined the cluster as '$NAME' but may NOT BE HELD out of automatic placement. Run now:"
		warn "    incus cluster set local:$NAME $HOLD_KEY=$HOLD_VALUE"
	else
		warn "interrupted; nothing was changed on this server."
	fi
	exit 130
}

# read_token: reads the join token from standard input into TOKEN (trimmed; the lines of a
# wrapped token are joined). At a terminal it prompts and reads without echo.
read_token() {
	_raw=''
	if [ -t 0 ]; then
		# Echo goes off before the prompt shows, so nothing pasted at the prompt is echoed.
		TTY_STATE=$(stty -g) || TTY_STATE=''
		if ! stty -echo; then
			refuse "cannot turn off echo on this terminal, so the token would show: pipe it in instead of pasting it."
		fi
		printf 'Paste the join token from Apelora (input is hidden) and press Enter: ' >&2
		IFS= read -r _raw || true
		restore_tty
		printf '\n' >&2
	else
		while IFS= read -r _line || [ -n "$_line" ]; do
			_line=${_line#"${_line%%[![:space:]]*}"}
			_line=${_line%"${_line##*[![:space:]]}"}
			_raw=$_raw$_line
			_line=''
		done
	fi
	_raw=${_raw#"${_raw%%[![:space:]]*}"}
	_raw=${_raw%"${_raw##*[![:space:]]}"}
	TOKEN=$_raw
	_raw=''
	if [ -z "$TOKEN" ]; then
		refuse "no join token on standard input." \
			"Paste the token from Apelora's approval when asked (run this from a terminal), or pipe it in."
	fi
}

# ---- arguments -----------------------------------------------------------------------------

NAME=''
NAME_GIVEN=false
ADDRESS_ARG=''
ADDRESS=''
MEMBER_CONFIG=''
DRY_RUN=false

for arg in "$@"; do
	case $arg in
	--token | --token=* | --join-token | --join-token=* | --cluster-token | --cluster-token=*) refuse_token_argument ;;
	esac
	if looks_like_token "$arg"; then
		refuse_token_argument
	fi
done

# need_value OPTION COUNT: the option needs a value after it.
need_value() {
	[ "$2" -ge 2 ] || usage_error "$1 needs a value"
}

while [ $# -gt 0 ]; do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--name)
		need_value "$1" $#
		NAME=$2
		NAME_GIVEN=true
		shift 2
		;;
	--name=*)
		NAME=${1#--name=}
		NAME_GIVEN=true
		shift
		;;
	--address)
		need_value "$1" $#
		ADDRESS_ARG=$2
		shift 2
		;;
	--address=*)
		ADDRESS_ARG=${1#--address=}
		shift
		;;
	--member-config)
		need_value "$1" $#
		add_member_config "$2"
		shift 2
		;;
	--member-config=*)
		add_member_config "${1#--member-config=}"
		shift
		;;
	--dry-run)
		DRY_RUN=true
		shift
		;;
	-*)
		usage_error "unknown option '${1%%=*}'"
		;;
	*)
		# Not repeated: a stray argument may be a secret pasted in the wrong place.
		usage_error "unexpected argument (not repeated here); this script takes options only, and the join token on standard input"
		;;
	esac
done

if [ "$NAME_GIVEN" = true ] && ! valid_member_name "$NAME"; then
	usage_error "--name '$NAME' is not a valid member name: use 1 to 63 lower-case letters, digits and hyphens, a letter first, no hyphen last (the name Apelora approved)"
fi
if [ -z "$ADDRESS_ARG" ]; then
	usage_error "missing --address: give the address the other cluster members reach this server at, e.g. --address 192.0.2.10:$DEFAULT_PORT"
fi
parse_address "$ADDRESS_ARG"

# ---- this server: tools ----------------------------------------------------------------------

for tool in base64 awk date id; do
	command -v "$tool" >/dev/null 2>&1 || refuse "'$tool' is not installed; this script needs it (Debian: coreutils, mawk)."
done
if ! command -v incus >/dev/null 2>&1; then
	refuse "the incus CLI is not installed (or not in PATH)." \
		"Install Incus first (Debian: apt-get install incus incus-client), start its daemon, then run this again."
fi
IS_ROOT=false
[ "$(id -u)" != 0 ] || IS_ROOT=true

# ---- the join token --------------------------------------------------------------------------

trap on_exit EXIT
trap on_signal INT TERM HUP
read_token

case $TOKEN in
*[!A-Za-z0-9+/=]*)
	refuse "the join token is not valid: it holds characters that base64 does not use." \
		"Copy the whole token again from Apelora's approval (it is one line of base64)."
	;;
esac
if TOKEN_JSON=$(printf '%s' "$TOKEN" | base64 -d 2>/dev/null); then
	:
else
	TOKEN_JSON=''
	refuse "the join token is not valid: it is not base64." \
		"Copy the whole token again from Apelora's approval (it is one line of base64)."
fi

token_field server_name
TOKEN_NAME=$FIELD
token_field fingerprint
TOKEN_FINGERPRINT=$FIELD
token_field addresses
TOKEN_ADDRESSES=$FIELD
token_field secret
# Incus's join secrets are 64 hexadecimal digits; anything else is not a usable token (and a
# short "secret" would make the masking below garble every message).
case $FIELD in
*[!0-9a-fA-F]*) refuse "the join token's secret is not hexadecimal: it is not a usable Incus join token." \
	"Copy the whole token again from Apelora's approval, or approve the enrolment again for a new one." ;;
esac
if [ "${#FIELD}" -lt 32 ]; then
	refuse "the join token's secret is too short: it is not a usable Incus join token." \
		"Copy the whole token again from Apelora's approval, or approve the enrolment again for a new one."
fi
SECRET=$FIELD
token_field expires_at
TOKEN_EXPIRES=$FIELD
TOKEN_JSON=''

case $TOKEN_ADDRESSES in
*[!A-Za-z0-9.:,%_\[\]-]*) refuse "the join token's member addresses hold unexpected characters: it is not a usable Incus join token." ;;
esac
case $TOKEN_FINGERPRINT in
*[!0-9a-fA-F]*) refuse "the join token's cluster certificate fingerprint is not hexadecimal: it is not a usable Incus join token." ;;
esac
if ! valid_member_name "$TOKEN_NAME"; then
	refuse "the join token names the member '$TOKEN_NAME', which is not a valid member name." \
		"Approve the enrolment again in Apelora for a new token."
fi

if [ "$NAME_GIVEN" = true ]; then
	if [ "$NAME" != "$TOKEN_NAME" ]; then
		refuse "this join token was issued for the member '$TOKEN_NAME', not '$NAME'." \
			"Check that you are on the right server and use the token Apelora issued for '$NAME' (approve its enrolment)."
	fi
else
	NAME=$TOKEN_NAME
	say "no --name given: joining as '$NAME', the name the join token was issued for."
fi

case $TOKEN_EXPIRES in
[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*) ;;
*) refuse "the join token's expiry '$TOKEN_EXPIRES' is not an RFC 3339 time: it is not a usable Incus join token." ;;
esac
if ! EXPIRES_EPOCH=$(date -u -d "$TOKEN_EXPIRES" +%s 2>/dev/null); then
	refuse "cannot read the join token's expiry '$TOKEN_EXPIRES' (GNU date is needed to compare it with the clock)."
fi
NOW_EPOCH=$(date -u +%s)
if [ "$NOW_EPOCH" -ge "$EXPIRES_EPOCH" ]; then
	refuse "this join token expired at $(date -u -d "@$EXPIRES_EPOCH" '+%Y-%m-%d %H:%M:%S UTC') (this server's clock says $(date -u '+%Y-%m-%d %H:%M:%S UTC')); the cluster would refuse it." \
		"Approve the enrolment again in Apelora for a new token (that replaces this one). If this server's clock is wrong, correct it first: cluster members need synchronised clocks."
fi

# The address must be this server's own, not that of a member the token lists.
_old_ifs=$IFS
IFS=,
for member_address in $TOKEN_ADDRESSES; do
	if [ "$member_address" = "$ADDRESS" ]; then
		IFS=$_old_ifs
		usage_error "--address $ADDRESS is the address of an existing cluster member (the join token lists it): give this server's own address."
	fi
done
IFS=$_old_ifs

# ---- this server: the incus daemon -----------------------------------------------------------

if ! out=$(incus admin waitready --timeout 30 2>&1); then
	hint="Start the incus daemon on this server (e.g. systemctl start incus), then run this again."
	[ "$IS_ROOT" = true ] || hint="$hint This script is not running as root: run it as root (or as a member of the incus-admin group)."
	warn "the local incus daemon is not answering (incus admin waitready --timeout 30):"
	indent "$out"
	refuse "$hint"
fi
if incus_read query local:/1.0/cluster; then
	CLUSTER_JSON=$VALUE
else
	warn "cannot ask the local incus daemon whether it is clustered (incus query local:/1.0/cluster):"
	indent "$INCUS_ERR"
	hint="Check that the daemon runs and that you may administer it."
	[ "$IS_ROOT" = true ] || hint="$hint This script is not running as root: run it as root (or as a member of the incus-admin group)."
	refuse "$hint"
fi
if ! CLUSTERED=$(printf '%s' "$CLUSTER_JSON" | awk -v want=enabled "$JSON_GET"); then
	refuse "the local incus daemon gave an answer this script cannot read to 'incus query local:/1.0/cluster'."
fi
if [ "$CLUSTERED" = true ]; then
	LOCAL_NAME=$(printf '%s' "$CLUSTER_JSON" | awk -v want=server_name "$JSON_GET") || LOCAL_NAME='?'
	if [ "$LOCAL_NAME" = "$NAME" ]; then
		refuse "this server's incus daemon is already clustered, as the member '$NAME': there is nothing to join (did this script run here before?). The join token was not used." \
			"Check that it is held out of automatic placement ('incus cluster get local:$NAME $HOLD_KEY' prints $HOLD_VALUE; if not, run: incus cluster set local:$NAME $HOLD_KEY=$HOLD_VALUE), then run the admission checks in Apelora."
	fi
	refuse "this server's incus daemon is already clustered, as the member '$LOCAL_NAME': it cannot join another cluster or take another name. The join token was not used." \
		"If this is the wrong server, run this on the server approved as '$NAME'. Otherwise remove it from its cluster first (incus cluster remove), then run this again."
fi

# ---- join ------------------------------------------------------------------------------------

say "checks passed: token for '$NAME' valid until $(date -u -d "@$EXPIRES_EPOCH" '+%Y-%m-%d %H:%M:%S UTC'); cluster members in the token: $TOKEN_ADDRESSES; this server's incus daemon is not clustered yet."

if [ "$DRY_RUN" = true ]; then
	say "dry run: would join with 'incus admin init --preseed' and this preseed on its standard input:"
	preseed '<join token>'
	say "dry run: then would run 'incus cluster set local:$NAME $HOLD_KEY=$HOLD_VALUE' and check it."
	say "dry run: nothing was changed, and the join token was not used."
	exit 0
fi

# Incus sets core.https_address and cluster.https_address before it presents the token and
# keeps them when the join fails; note them, to put them back if it does.
for key in core.https_address cluster.https_address; do
	if ! incus_read config get local: "$key"; then
		warn "cannot read this server's $key (incus config get local: $key):"
		indent "$INCUS_ERR"
		refuse "Check that the incus daemon runs and that you may administer it, then run this again."
	fi
	case $key in
	core.*) PRIOR_CORE=$VALUE ;;
	*) PRIOR_CLUSTER=$VALUE ;;
	esac
done

say "joining the cluster as '$NAME' at $ADDRESS (this takes a few seconds)…"
STAGE=joining
if JOIN_OUT=$(preseed "$TOKEN" | incus admin init --preseed 2>&1); then
	JOINED=true
else
	JOINED=false
fi

if [ "$JOINED" = false ]; then
	# If incus failed after the join went through (an interrupted wait, say), the member is
	# in the cluster anyway: then hold it below instead of reporting a failure.
	AFTER=$(incus query local:/1.0/cluster 2>/dev/null) || AFTER=''
	AFTER_ENABLED=$(printf '%s' "$AFTER" | awk -v want=enabled "$JSON_GET" 2>/dev/null) || AFTER_ENABLED=''
	AFTER_NAME=$(printf '%s' "$AFTER" | awk -v want=server_name "$JSON_GET" 2>/dev/null) || AFTER_NAME=''
	if [ "$AFTER_ENABLED" = true ] && [ "$AFTER_NAME" = "$NAME" ]; then
		warn "incus admin init reported an error, but this server is now the cluster member '$NAME':"
		indent "$JOIN_OUT"
		JOINED=true
	fi
fi

# restore_address KEY PRIOR: puts the server setting KEY back to PRIOR (unset if empty);
# on failure prints the command to run.
restore_address() {
	_now=$(incus config get local: "$1" 2>/dev/null) || _now=''
	[ "$_now" != "$2" ] || return 0
	if [ -z "$2" ]; then
		_cmd="incus config unset local: $1"
		_done=$(incus config unset local: "$1" 2>&1) && return 0
	else
		_cmd="incus config set local: $1=$2"
		_done=$(incus config set local: "$1=$2" 2>&1) && return 0
	fi
	warn "could not put $1 back to '${2:-(unset)}' as before the join:"
	indent "$_done"
	warn "run: $_cmd"
	RESTORE_FAILED=true
}

if [ "$JOINED" = false ]; then
	STAGE=failed
	warn "JOIN FAILED: incus could not join this server to the cluster as '$NAME':"
	indent "$JOIN_OUT"
	RESTORE_FAILED=false
	restore_address cluster.https_address "$PRIOR_CLUSTER"
	restore_address core.https_address "$PRIOR_CORE"
	if [ "$RESTORE_FAILED" = false ]; then
		warn "This server is not clustered; its address settings (core.https_address, cluster.https_address) are as they were before."
	fi
	case $JOIN_OUT in
	*"fingerprint mismatch"*)
		warn "The cluster members did not present the cluster certificate the token names, so this server stopped before presenting the token: the token may be for another cluster, altered, or the connection intercepted."
		warn "Check that this server reaches the cluster Apelora manages at $TOKEN_ADDRESSES; then, in Apelora, revoke this enrolment's pending token and approve the enrolment again for a new one, and run this script again with it."
		;;
	*"Unable to connect to any of the cluster members"*)
		warn "This server could not reach any cluster member in the token ($TOKEN_ADDRESSES), so it never presented the token and the token was not spent."
		warn "Fix the network path (routing, firewall, the members' port), then run this again with the same token while it is valid; if the cluster then refuses it, get a new one: in Apelora, revoke the pending token and approve the enrolment again."
		;;
	*)
		warn "The join token is spent: Incus spends a join token (single use) when this server presents it to the cluster at the trust step, even if the join fails after that; a token the cluster refused (revoked, replaced, expired or unknown) cannot be used either."
		warn "Next: fix the cause above; then, in Apelora, revoke the enrolment's pending token (if one is still listed) and approve the enrolment again for a new token, and run this script again with it."
		;;
	esac
	exit 3
fi

STAGE=holding

# ---- hold --------------------------------------------------------------------------------------

# The member is in the cluster now; keep instances off it until Apelora admits it. Right after
# a join the cluster may still be rebalancing roles, so try a few times.
HOLD_CMD="incus cluster set local:$NAME $HOLD_KEY=$HOLD_VALUE"
HELD=false
attempt=1
while :; do
	if HOLD_OUT=$(incus cluster set "local:$NAME" "$HOLD_KEY=$HOLD_VALUE" 2>&1); then
		if incus_read cluster get "local:$NAME" "$HOLD_KEY"; then
			if [ "$VALUE" = "$HOLD_VALUE" ]; then
				HELD=true
				break
			fi
			HOLD_OUT="'incus cluster get local:$NAME $HOLD_KEY' printed '$VALUE', not '$HOLD_VALUE'"
		else
			HOLD_OUT=$INCUS_ERR
		fi
	fi
	[ "$attempt" -lt 3 ] || break
	attempt=$((attempt + 1))
	sleep 1
done

if [ "$HELD" = false ]; then
	warn "JOINED BUT IS NOT HELD: this server joined the cluster as '$NAME' at $ADDRESS, but setting $HOLD_KEY=$HOLD_VALUE on it failed:"
	indent "$HOLD_OUT"
	warn "The cluster may place instances on it before Apelora admits it. Run this now, on this server:"
	warn "    $HOLD_CMD"
	warn "and check that 'incus cluster get local:$NAME $HOLD_KEY' prints $HOLD_VALUE; then run the admission checks in Apelora."
	exit 4
fi

say "joined the cluster as $NAME at $ADDRESS; held out of automatic placement ($HOLD_KEY=$HOLD_VALUE); next: run the admission checks in Apelora"
