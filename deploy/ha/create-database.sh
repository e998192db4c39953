#!/bin/sh
# Creates Apelora's role and database once, on the primary, after Patroni bootstrapped the
# cluster (deploy/ha/README.md, step 3). $1 is a superuser connection string, such as
#   postgresql://postgres@10.0.0.30:5432/postgres   (HAProxy's primary frontend)
# The roles get no password here (none in a file, none in shell history): set them with
# psql's \password apelora and \password apelora-worker, and put them in the root-only
# environment files. `apelora serve` applies the migrations at start.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 SUPERUSER-CONNECTION-STRING" >&2; exit 2; }
psql -v ON_ERROR_STOP=1 "$1" <<'SQL'
CREATE ROLE apelora LOGIN;
CREATE ROLE "apelora-worker" LOGIN IN ROLE apelora;
CREATE DATABASE apelora OWNER apelora;
SQL
