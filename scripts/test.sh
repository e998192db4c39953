#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine, as root: installs and starts what
# the tests need (scripts/test-deps.sh), checks the generated code is current, checks the
# console (web/console/build.sh --check: codegen current, tsc, unit tests, dist/ rebuilt
# byte for byte), then runs gofmt, go vet and every test against the real PostgreSQL, real
# incusd members and, for the console, Debian's Chromium.
# Extra arguments go to `go test` (for example -run TestName ./e2e/).
set -euo pipefail
cd "$(dirname "$0")/.."

eval "$(scripts/test-deps.sh)"
export APELORA_TEST_DATABASE_URL

if ! command -v go >/dev/null; then
	echo "test: Go is not installed: install Go 1.26 or newer (see go.mod)" >&2
	exit 1
fi
go mod download

# Generated code must match the schema and operations: regenerate and compare.
generated() { find graph client/generated.go resolvers -name '*.go' -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(generated)
go generate ./...
after=$(generated)
if [ "$before" != "$after" ]; then
	echo "test: generated code was stale; \`go generate ./...\` has now rewritten it:" >&2
	diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "test: review and commit the regenerated files" >&2
	exit 1
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './web/graphiql/node_modules/*'))
if [ -n "$unformatted" ]; then
	echo "test: gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...

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

if [ $# -eq 0 ]; then
	set -- ./...
fi
go test -count=1 -timeout 40m "$@"
