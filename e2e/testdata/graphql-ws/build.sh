#!/bin/sh
# Rebuild dist/client.cjs (the reference graphql-ws client for e2e/graphqlws_node_test.go)
# from the pinned npm packages in package-lock.json: one file that node runs without
# node_modules. Needs node and npm; the tests need only node.
#
#   ./build.sh
#
# The output is deterministic for a given package-lock.json.
set -eu
cd "$(dirname "$0")"

npm ci --no-audit --no-fund --loglevel=error

rm -rf dist
mkdir -p dist
# ws's optional native helpers are loaded in a try/catch: leave them out. ws requires
# node's built-in modules, which an ES module bundle reaches through createRequire.
./node_modules/.bin/esbuild client.mjs \
  --bundle \
  "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" \
  --platform=node \
  --format=esm \
  --target=node18 \
  --external:bufferutil \
  --external:utf-8-validate \
  --legal-comments=eof \
  --outfile=dist/client.mjs \
  --log-level=warning

ls -l dist
