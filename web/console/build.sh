#!/bin/sh
# Builds Fabric Console (web/console) from src/ with the npm packages pinned in
# package-lock.json. Needs node 20+ and npm; `go build` does not (dist/ is committed).
#
#   ./build.sh           # npm ci, codegen, then esbuild into dist/
#   ./build.sh --check   # what CI runs: codegen is current (graphql-codegen --check),
#                        # tsc --noEmit passes, the unit tests pass, and dist/ is exactly
#                        # what a rebuild from src/ makes
#   ./build.sh --unit    # the unit tests only (node's test runner)
#
# The output is deterministic for a given package-lock.json and src/, so a rebuild of an
# unchanged tree leaves `git status` clean.
set -eu
cd "$(dirname "$0")"
mode=${1:-build}

# npm ci only when the lock changed since the last install (it wipes node_modules).
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.apelora-lock 2>/dev/null)" != "$lock_sum" ]; then
	npm ci --no-audit --no-fund --loglevel=error
	echo "$lock_sum" >node_modules/.apelora-lock
fi
bin=./node_modules/.bin

# bundle DIR: one JS and one CSS file, minified, named by content hash so the Go handler
# serves them as immutable, licence comments kept at the end of each. CSS is imported by
# the TypeScript and bundled beside it (no CSS-in-JS: the CSP forbids inline styles).
bundle() {
	rm -rf "$1"
	mkdir -p "$1"
	$bin/esbuild src/main.tsx \
		--bundle \
		--minify \
		--format=iife \
		--target=es2020,chrome100,firefox100,safari15 \
		--jsx=automatic \
		--define:process.env.NODE_ENV='"production"' \
		--legal-comments=eof \
		--charset=utf8 \
		--entry-names='console-[hash]' \
		--outdir="$1" \
		--log-level=warning
	cp src/index.html "$1/index.html"
}

# unit: compile src/**/*.test.ts for node and run them with node's test runner.
unit() {
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	tests=$(find src -name '*.test.ts' | sort)
	# shellcheck disable=SC2086
	$bin/esbuild $tests --bundle --platform=node --format=esm --outdir="$out" \
		--out-extension:.js=.mjs --log-level=warning
	node --test "$out"
}

case $mode in
build)
	$bin/graphql-codegen --config codegen.yml --silent
	bundle dist
	ls -l dist
	;;
--unit)
	unit
	;;
--check)
	if ! $bin/graphql-codegen --config codegen.yml --check --silent; then
		echo "build.sh: src/gql/ is stale: run web/console/build.sh and commit it" >&2
		exit 1
	fi
	$bin/tsc --noEmit -p .
	unit
	fresh=$(mktemp -d)
	trap 'rm -rf "$fresh" "${out:-}"' EXIT
	bundle "$fresh/dist"
	if ! diff -r dist "$fresh/dist" >/dev/null; then
		echo "build.sh: dist/ does not match a rebuild from src/: run web/console/build.sh and commit dist/" >&2
		diff -rq dist "$fresh/dist" >&2 || true
		exit 1
	fi
	echo "build.sh: codegen current, types check, unit tests pass, dist/ matches src/"
	;;
*)
	echo "usage: $0 [--check|--unit]" >&2
	exit 2
	;;
esac
