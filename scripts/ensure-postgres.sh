#!/usr/bin/env bash
# ensure-postgres.sh — make a local PostgreSQL 15 server available for tests.
#
# Idempotent; meant for a Debian 12 machine (developer, CI) running as root.
#   1. installs postgresql-15 with apt-get if its binaries are missing;
#   2. creates cluster 15/main if missing and starts it if it is down;
#   3. creates (or resets the password of) role airlock/airlock and database
#      airlock_test owned by it;
#   4. checks a password login over TCP and prints the URL on the LAST line
#      of stdout. Everything else goes to stderr, so:
#
#        export AIRLOCK_TEST_DATABASE_URL="$(scripts/ensure-postgres.sh)"
#
# Environment: PG_VERSION (default 15), PG_CLUSTER (default main).
set -euo pipefail

PG_VERSION="${PG_VERSION:-15}"
PG_CLUSTER="${PG_CLUSTER:-main}"
DB_USER=airlock
DB_PASSWORD=airlock
DB_NAME=airlock_test

say() { echo "ensure-postgres: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (it may install packages and start the server)"

# 1. binaries
if ! command -v pg_lsclusters >/dev/null 2>&1 || [ ! -x "/usr/lib/postgresql/${PG_VERSION}/bin/postgres" ]; then
	say "PostgreSQL ${PG_VERSION} is not installed: installing postgresql-${PG_VERSION} with apt-get (this may take a minute)..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends "postgresql-${PG_VERSION}" >&2
	say "installed postgresql-${PG_VERSION}"
fi

# 2. cluster
cluster_line() { pg_lsclusters --no-header 2>/dev/null | awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1 == v && $2 == c'; }
if [ -z "$(cluster_line)" ]; then
	say "creating cluster ${PG_VERSION}/${PG_CLUSTER}"
	pg_createcluster "$PG_VERSION" "$PG_CLUSTER" >&2
fi
LINE="$(cluster_line)"
PORT="$(awk '{print $3}' <<<"$LINE")"
STATUS="$(awk '{print $4}' <<<"$LINE")"
[ -n "$PORT" ] || die "cannot read the port of cluster ${PG_VERSION}/${PG_CLUSTER} from pg_lsclusters"
if [ "$STATUS" != "online" ]; then
	say "starting cluster ${PG_VERSION}/${PG_CLUSTER} on port ${PORT}"
	pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start >&2 ||
		die "could not start cluster ${PG_VERSION}/${PG_CLUSTER}; see /var/log/postgresql/postgresql-${PG_VERSION}-${PG_CLUSTER}.log"
else
	say "cluster ${PG_VERSION}/${PG_CLUSTER} already running on port ${PORT}"
fi

for _ in $(seq 1 60); do
	if pg_isready -q -h 127.0.0.1 -p "$PORT"; then break; fi
	sleep 0.5
done
pg_isready -q -h 127.0.0.1 -p "$PORT" || die "server on 127.0.0.1:${PORT} is not accepting connections after 30 s"

# 3. role and database (as the postgres superuser over the local socket)
as_postgres() { (cd / && runuser -u postgres -- "$@"); }
psql_su() { as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PORT" -d postgres "$@"; }

if [ "$(psql_su -tAc "SELECT 1 FROM pg_roles WHERE rolname = '${DB_USER}'")" != "1" ]; then
	say "creating role ${DB_USER}"
	psql_su -c "CREATE ROLE ${DB_USER} LOGIN PASSWORD '${DB_PASSWORD}'" >&2
else
	psql_su -c "ALTER ROLE ${DB_USER} LOGIN PASSWORD '${DB_PASSWORD}'" >&2
fi
if [ "$(psql_su -tAc "SELECT 1 FROM pg_database WHERE datname = '${DB_NAME}'")" != "1" ]; then
	say "creating database ${DB_NAME}"
	as_postgres createdb -p "$PORT" -O "$DB_USER" "$DB_NAME" >&2
fi

# 4. verify a password login over TCP, then print the URL
URL="postgres://${DB_USER}:${DB_PASSWORD}@127.0.0.1:${PORT}/${DB_NAME}?sslmode=disable"
PGCONNECT_TIMEOUT=10 psql -X -q "$URL" -tAc 'SELECT 1' >/dev/null ||
	die "cannot log in as ${DB_USER} over TCP (check pg_hba.conf of cluster ${PG_VERSION}/${PG_CLUSTER})"
say "PostgreSQL ${PG_VERSION} ready"
echo "$URL"
