#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian machine, as root: installs and starts what
# the tests need (scripts/test-deps.sh), checks the generated code is current, then runs
# gofmt, go vet and every test against the real PostgreSQL and real incusd members.
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

if [ $# -eq 0 ]; then
	set -- ./...
fi
go test -count=1 -timeout 40m "$@"
