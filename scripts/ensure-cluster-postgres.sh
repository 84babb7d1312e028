#!/usr/bin/env bash
# ensure-cluster-postgres.sh — make PostgreSQL 15 ready for the local Temporal cluster
# (`make cluster`, `make test-cluster`).
#
# Idempotent; Debian 12, run as root. Runs ensure-postgres.sh (installs and starts PostgreSQL 15,
# role airlock), then:
#   1. creates (or resets the password of) role temporal/temporal with CREATEDB: the Temporal
#      schema tool creates the cluster's databases (temporal, temporal_visibility) with it;
#   2. creates database airlock owned by role airlock: the store of the cluster's Airlock
#      workers and approver page.
# Prints the cluster's PostgreSQL port on the LAST line of stdout; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")"
URL="$(./ensure-postgres.sh)"
PORT="$(sed -E 's#.*@[^:/]+:([0-9]+)/.*#\1#' <<<"$URL")"

say() { echo "ensure-cluster-postgres: $*" >&2; }
as_postgres() { (cd / && runuser -u postgres -- "$@"); }
psql_su() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PORT" -d postgres "$@"; }

if [ "$(psql_su -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'temporal'")" != "1" ]; then
	say "creating role temporal (CREATEDB)"
	psql_su -c "CREATE ROLE temporal LOGIN CREATEDB PASSWORD 'temporal'" >&2
else
	psql_su -c "ALTER ROLE temporal LOGIN CREATEDB PASSWORD 'temporal'" >&2
fi
if [ "$(psql_su -tAc "SELECT 1 FROM pg_database WHERE datname = 'airlock'")" != "1" ]; then
	say "creating database airlock"
	as_postgres createdb -p "$PORT" -O airlock airlock >&2
fi
say "PostgreSQL ready for the cluster on port ${PORT} (role temporal, database airlock)"
echo "$PORT"
