#!/bin/sh
# bench-audit-verify.sh [EVENTS]: the time and memory of `apelora audit verify` over
# EVENTS audit events (default 1,000,000), every one sealed, with a checkpoint. The rows
# are made with generate_series in the schema before migration 0010; 0010's backfill gives
# them their leaves, and `apelora audit checkpoint` seals them (the upgrade's one-time
# sealing of a trail recorded before migration 0020) and signs: both timed too. Needs
# APELORA_TEST_DATABASE_URL (a superuser URL of the form postgres://…/postgres?…, as
# scripts/test-deps.sh prints) and /usr/bin/time.
set -eu
n=${1:-1000000}
admin=${APELORA_TEST_DATABASE_URL:?set APELORA_TEST_DATABASE_URL (eval "$(scripts/test-deps.sh)")}
db=apelora_bench_audit_$$
url=$(printf %s "$admin" | sed "s#/postgres\([?]\|\$\)#/$db\1#")
work=$(mktemp -d)
trap 'psql -q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null; rm -rf "$work"' EXIT
go build -o "$work/apelora" ./cmd/apelora
psql -q "$admin" -c "CREATE DATABASE $db"
export APELORA_DATABASE_URL="$url" APELORA_STATE_DIR="$work/state" APELORA_LOG_LEVEL=warn
"$work/apelora" migrate >/dev/null
psql -q "$url" <<SQL
DROP TABLE audit_tree_hashes, audit_checkpoints;
DROP FUNCTION audit_refuse_truncate() CASCADE;
ALTER TABLE audit_events DROP COLUMN leaf_index, DROP COLUMN leaf_hash, DROP COLUMN seal;
DELETE FROM schema_migrations WHERE version IN (10, 16, 20);
INSERT INTO audit_events (at, actor, action, machine, parameters, outcome, error, request_id, details)
SELECT now() - make_interval(secs => $n - i), 'admin-' || (i % 7), 'registerMachine', 'node-' || (i % 300),
       jsonb_build_object('name', 'node-' || (i % 300), 'provisioner', 'MAAS', 'dryRun', false),
       CASE WHEN i % 11 = 0 THEN 'REFUSED' ELSE 'SUCCEEDED' END, CASE WHEN i % 11 = 0 THEN 'not allowed' END,
       md5(i::text), jsonb_build_object('checks', jsonb_build_array(jsonb_build_object('name', 'cpu', 'ok', true)))
FROM generate_series(1, $n) i;
SQL
echo "backfill (migration 0010) of $n events:"
/usr/bin/time -o "$work/time" -f "  %e s, max RSS %M KiB" "$work/apelora" migrate >/dev/null
cat "$work/time"
echo "sealing them and signing a checkpoint (apelora audit checkpoint):"
/usr/bin/time -o "$work/time" -f "  %e s, max RSS %M KiB" "$work/apelora" audit checkpoint >"$work/out"
sed -n '1,2p' "$work/out"
cat "$work/time"
echo "audit verify:"
/usr/bin/time -o "$work/time" -v "$work/apelora" audit verify || { cat "$work/time"; exit 1; }
grep -E "Elapsed|Maximum resident" "$work/time" | sed 's/^\s*/  /'
