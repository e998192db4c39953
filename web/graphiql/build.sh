#!/bin/sh
# Rebuild dist/ (the GraphiQL page embedded by graphiql.go) from the pinned
# npm packages in package-lock.json. Needs node and npm; `go build` does not.
#
#   ./build.sh          # npm ci, then esbuild into dist/
#
# The output is deterministic for a given package-lock.json, so running this
# on an unchanged tree leaves `git status` clean.
set -eu
cd "$(dirname "$0")"

npm ci --no-audit --no-fund --loglevel=error

rm -rf dist
mkdir -p dist

# One JS and one CSS file, minified, named by content hash so the Go handler
# can serve them as immutable; licence comments kept at the end of each.
# Fonts and images stay inlined as data: URLs
# (GraphiQL's stylesheet already ships them that way).
./node_modules/.bin/esbuild src/graphiql.jsx \
  --bundle \
  --minify \
  --format=iife \
  --target=es2020,chrome100,firefox100,safari15 \
  --jsx=automatic \
  --define:process.env.NODE_ENV='"production"' \
  --legal-comments=eof \
  --charset=utf8 \
  --entry-names='[name]-[hash]' \
  --outdir=dist \
  --log-level=warning

cp src/index.html dist/index.html

ls -l dist
