#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine, as root: installs and starts what
# the tests need (scripts/test-deps.sh), checks the generated code is current, checks the
# console (web/console/build.sh --check: codegen current, tsc, unit tests, dist/ rebuilt
# byte for byte), then runs gofmt, go vet and every test against the real PostgreSQL, real
# incusd members and, for the console, Debian's Chromium.
# Extra arguments go to `go test` (for example -run TestName ./e2e/). `--help` says more.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
usage: scripts/test.sh [GO-TEST-ARGUMENTS...]
       scripts/test.sh --help

Runs Apelora fabric's tests on this machine, as root. In order:

  1. scripts/test-deps.sh: installs the Debian packages the tests need if missing
     (PostgreSQL, Incus from bookworm-backports, Go from bookworm-backports when go is
     missing or older than go.mod's, Patroni, etcd, Chromium, promtool, lintian, jq,
     rsyslogd, node; apt's output in $APELORA_INSTALL_LOG, default
     /var/log/apelora-install.log), and starts a throw-away PostgreSQL on
     127.0.0.1:55432 (data in $APELORA_TEST_DIR, default /var/tmp/apelora-test). The
     tests start their own incusd members on private 127.X.Y.0/24 addresses and the
     MAAS simulator on loopback; nothing else is contacted.
  2. go mod download; go mod tidy -diff (go.mod and go.sum tidy); go generate ./... and a
     check that the generated code (graph/, client/generated.go, resolvers/, the mutations'
     declarations) and docs/configuration.md were committed current.
  3. gofmt and go vet; scripts/check-deploy.sh: the alert rules (promtool check and
     test rules) and the systemd units (systemd-analyze verify and security) in deploy/;
     scripts/package-check.sh: the Debian package builds byte-identical twice, holds what
     it should, is lintian clean and installs into a throw-away root (dpkg --root).
  4. go test -count=1 -timeout 40m with the arguments given, or ./... without any
     (for example: scripts/test.sh -run TestName ./e2e/).
  5. Under CI=true and with no arguments: every `func Fuzz…` target in the repository
     runs for $FUZZTIME each (default 20s; FUZZTIME=0 skips them). FUZZTIME=20s also
     fuzzes outside CI.

Environment:
  CI=true            what .ci/run sets: a missing incusd or database fails the tests
                     instead of skipping them, and the fuzz targets run.
  FUZZTIME           how long each fuzz target runs (a go test -fuzztime value).
  APELORA_TEST_DIR   where the test PostgreSQL keeps its data.

--help installs and starts nothing.
USAGE
}
case "${1:-}" in
-h | --help | help)
	usage
	exit 0
	;;
esac

# Each phase's time, printed at the end with the slowest tests (issue 26: CI within 20 minutes).
phases=()
phase_start=$(date +%s)
phase() { # phase NAME: the time since the last call goes to NAME
	local now
	now=$(date +%s)
	phases+=("$(printf '%6d s  %s' $((now - phase_start)) "$1")")
	phase_start=$now
}
print_phases() {
	echo "test: time by phase:"
	printf '  %s\n' "${phases[@]}"
}

eval "$(scripts/test-deps.sh)"
export APELORA_TEST_DATABASE_URL
phase "scripts/test-deps.sh (install and start what the tests need)"

if ! command -v go >/dev/null; then
	echo "test: Go is not installed: install Go 1.26 or newer (see go.mod)" >&2
	exit 1
fi
go mod download
# go.mod says which requirements the code imports (direct) and which it only needs for them
# (// indirect); a stale go.mod or go.sum fails here rather than in a reader's head.
if ! tidy=$(go mod tidy -diff 2>&1); then
	echo "test: go.mod or go.sum is not tidy; run \`go mod tidy\` and commit the result:" >&2
	echo "$tidy" >&2
	exit 1
fi
phase "go mod download, go mod tidy -diff"

# Generated code must match the schema and operations, and docs/configuration.md app's
# variable tables: regenerate and compare.
generated() { find graph client/generated.go resolvers internal/mutations/changes_gen.go internal/apperr/outcomes_gen.go web/console/src/api/changes.gen.ts docs/configuration.md \( -name '*.go' -o -name '*.ts' -o -name '*.md' \) -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(generated)
go generate ./...
after=$(generated)
if [ "$before" != "$after" ]; then
	echo "test: generated code was stale; \`go generate ./...\` has now rewritten it:" >&2
	diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "test: review and commit the regenerated files" >&2
	exit 1
fi
phase "go generate ./... and the drift check"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './web/graphiql/node_modules/*'))
if [ -n "$unformatted" ]; then
	echo "test: gofmt would change: $unformatted" >&2
	exit 1
fi
phase "gofmt"
go vet ./...
phase "go vet ./..."
scripts/check-deploy.sh
phase "scripts/check-deploy.sh"
scripts/package-check.sh
phase "scripts/package-check.sh"

# The console: typed operations match the schema, types check, its unit tests pass, and the
# committed dist/ is what its sources build (needs node; go build does not).
if command -v node >/dev/null && command -v npm >/dev/null; then
	web/console/build.sh --check
elif [ "${CI:-}" = true ]; then
	echo "test: node and npm are needed to check the console (web/console)" >&2
	exit 1
else
	echo "test: SKIPPED LOUDLY: node/npm missing, the console's checks and browser tests do not run" >&2
fi
phase "web/console/build.sh --check"

fuzz=false
if [ $# -eq 0 ]; then
	set -- ./...
	if [ "${CI:-}" = true ] || [ -n "${FUZZTIME:-}" ]; then
		fuzz=true
	fi
fi

# go test -json keeps every test's time: the stream is written whole to $json and shown as
# go test shows it without -v (each package's line, a failing test's output, build errors),
# then the 15 slowest tests are printed.
json=${APELORA_TEST_JSON:-${APELORA_TEST_DIR:-/var/tmp/apelora-test}/go-test.json}
mkdir -p "$(dirname "$json")"
# shellcheck disable=SC2016
show='
	foreach (inputs | fromjson? // {Action: "output", Output: (. + "\n")}) as $e ({out: {}, emit: null};
		($e.Package + " " + ($e.Test // "")) as $k
		| if $e.Action == "build-output" then .emit = $e.Output
		elif $e.Action == "output" and ($e.Test == null) then
			.emit = (if $e.Output == "PASS\n" or ($e.Output | startswith("=== ")) then null else $e.Output end)
		elif $e.Action == "output" and ($e.Output | test("^(figure|console screenshots): ")) then .emit = $e.Output
		elif $e.Action == "output" then (if $e.Output | startswith("=== ") then . else .out[$k] += $e.Output end) | .emit = null
		elif $e.Action == "fail" and ($e.Test != null) then .emit = (.out[$k] // "") | del(.out[$k])
		elif ($e.Action == "pass" or $e.Action == "skip") and ($e.Test != null) then del(.out[$k]) | .emit = null
		else .emit = null end;
		.emit // empty)'
# A test's time is go test's Elapsed less what it waited for e2e's scheduler (the line
# "e2e: started after waiting Ns for the scheduler" it logs): its own time, not its turn.
# (awk reads all its input: `head` would end the pipe early, and pipefail would fail.)
slowest() {
	jq -rn '
		reduce (inputs | select(.Test != null and (.Test | contains("/") | not))) as $e ({};
			($e.Package + " " + $e.Test) as $k
			| if $e.Action == "output" and ($e.Output | test("e2e: started after waiting [0-9.]+s for the scheduler")) then
				.[$k].waited = ($e.Output | capture("waiting (?<s>[0-9.]+)s").s | tonumber)
			elif $e.Action == "pass" or $e.Action == "fail" then
				.[$k].elapsed = $e.Elapsed | .[$k].action = $e.Action | .[$k].test = $e.Test
				| .[$k].pkg = ($e.Package | sub("^github.com/apelora/fabric/?"; "./"))
			else . end)
		| .[] | select(.elapsed != null)
		| "\(.elapsed - (.waited // 0)) \(.action) \(.test) \(.pkg) \(.waited // 0)"' "$json" |
		sort -rn | awk '
			{ n++ }
			n <= 15 { line[n] = sprintf("  %8.1f s  %-4s %s (%s)%s", $1, $2, $3, $4, $5 > 0.5 ? sprintf(", after %.0f s waiting its turn", $5) : "") }
			END { print "test: the 15 slowest tests of " n " (every time in '"$json"'):"; for (i = 1; i <= 15 && i <= n; i++) print line[i] }'
	echo "test: the 5 slowest packages:"
	jq -r 'select(.Test == null and .Elapsed != null and (.Action == "pass" or .Action == "fail"))
		| "\(.Elapsed) \(.Action) \(.Package | sub("^github.com/apelora/fabric/?"; "./"))"' "$json" |
		sort -rn | awk 'NR <= 5 { printf "  %8.1f s  %-4s %s\n", $1, $2, $3 }'
}
status=0
go test -json -count=1 -timeout 40m "$@" | tee "$json" | jq -Rrj --unbuffered -n "$show" || status=$?
phase "go test $*"
slowest
if [ "$status" != 0 ]; then
	echo "test: FAILED: $(jq -r 'select(.Action == "fail") | "\(.Test // "the package") (\(.Package | sub("^github.com/apelora/fabric/?"; "./")))"' "$json" | sort -u | tr '\n' ' ')" >&2
	# A crash or the timeout ends the test binary with its tests unfinished: their last lines.
	jq -rn 'reduce (inputs | select(.Test != null)) as $e ({};
			($e.Package + " " + $e.Test) as $k
			| if $e.Action == "output" then .[$k].out = ((.[$k].out // []) + [$e.Output])[-40:]
			elif $e.Action == "pass" or $e.Action == "fail" or $e.Action == "skip" then .[$k].ended = true
			else . end)
		| to_entries[] | select(.value.ended != true)
		| "test: \(.key) never ended (a crash or the timeout); its last lines:\n" + (.value.out // [] | join(""))' "$json" >&2
	print_phases
	exit "$status"
fi

# Each fuzz target for a bounded time (go test -fuzz takes one target in one package).
# Go 1.26's fuzz coordinator can report "context deadline exceeded" when -fuzztime ends
# while a worker is mid-input (golang/go#75804, fixed in Go 1.27): that, with no failing
# input written to testdata/fuzz, is not a failure.
fuzz_one() {
	local dir=$1 name=$2 corpus=$1/testdata/fuzz/$2 before out
	before=$(ls "$corpus" 2>/dev/null || true)
	echo "test: fuzzing $name in ./$dir for $fuzztime"
	if out=$(go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "./$dir" 2>&1); then
		echo "$out" | tail -n 2
		return 0
	fi
	echo "$out"
	if [ "$(ls "$corpus" 2>/dev/null || true)" = "$before" ] && grep -q 'context deadline exceeded' <<<"$out"; then
		echo "test: $name stopped on Go's fuzztime race (golang/go#75804) with no failing input: not a failure" >&2
		return 0
	fi
	return 1
}
fuzztime=${FUZZTIME:-20s}
if $fuzz && [ "$fuzztime" != 0 ]; then
	git grep -n '^func Fuzz[A-Za-z0-9_]*(' -- '*_test.go' | while IFS=: read -r file _ decl; do
		name=${decl#func }
		fuzz_one "$(dirname "$file")" "${name%%(*}"
	done
	phase "fuzzing, $fuzztime per target"
fi
print_phases
