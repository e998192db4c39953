#!/bin/sh
# Makes docs/console-fleet.png, the README's picture of Fabric Console, from the console
# suite's own run: TestConsoleEndToEnd takes it (web/console/e2e/console.e2e.mjs: the fleet
# at 1280×800 after an enrolment, three machines selected for a step) and, asked to
# (APELORA_README_SHOT=write), writes it there. Without that, the suite checks that the
# committed picture has the size it takes. Needs what the suite needs (eval
# "$(scripts/test-deps.sh)": PostgreSQL, Incus, node, Chromium; web/console/build.sh for its
# npm packages).
set -eu
cd "$(dirname "$0")/.."
APELORA_README_SHOT=write go test -count=1 -run '^TestConsoleEndToEnd$' ./e2e/
echo "docs/console-fleet.png: the fleet as TestConsoleEndToEnd showed it; commit it"
