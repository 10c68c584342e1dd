#!/usr/bin/env bash
# Install and start the larger setup's servers on loopback for the scaled-setup tests:
# Debian's PostgreSQL (a role that may create databases, and a database of its own) and Redis.
# Runs as root on Debian or Ubuntu; safe to run again (it only starts what is not running).
# Progress goes to stderr; stdout gets exactly two lines, the URLs the tests read:
#   KERNELGRADER_TEST_POSTGRES_URL=postgresql+psycopg://...
#   KERNELGRADER_TEST_REDIS_URL=redis://127.0.0.1:6379/0
# It exports nothing itself; the caller does, e.g. .ci/run.
set -euo pipefail

pg_user="${KERNELGRADER_CI_PG_USER:-kernelgrader}"
pg_password="${KERNELGRADER_CI_PG_PASSWORD:-kernelgrader-ci}"
pg_database="${KERNELGRADER_CI_PG_DATABASE:-kernelgrader}"
pg_port="${KERNELGRADER_CI_PG_PORT:-5432}"
redis_port="${KERNELGRADER_CI_REDIS_PORT:-6379}"

say() { printf 'ci-services: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    say "run this as root: it installs packages with apt-get and starts servers as their users."
    exit 1
fi

if ! command -v pg_ctlcluster >/dev/null || ! command -v redis-server >/dev/null; then
    say "installing postgresql and redis-server with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql redis-server >&2
fi

# PostgreSQL: Debian's package makes a cluster "main"; make one if a policy stopped it.
version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
    say "creating PostgreSQL $version cluster main on port $pg_port"
    pg_createcluster --port "$pg_port" "$version" main >&2
fi
cluster_port="$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')"
if [ "$cluster_port" != "$pg_port" ]; then
    say "the PostgreSQL $version cluster main listens on $cluster_port, not $pg_port; using it"
    pg_port="$cluster_port"
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $4}' | grep -q online
then
    say "starting PostgreSQL $version (port $pg_port, loopback only)"
    # listen_addresses stays Debian's default, localhost.
    pg_ctlcluster "$version" main start >&2
fi
for _ in $(seq 60); do
    pg_isready -q -h 127.0.0.1 -p "$pg_port" && break
    sleep 0.5
done
pg_isready -h 127.0.0.1 -p "$pg_port" >&2

psql_admin() {
    runuser -u postgres -- psql -p "$pg_port" -v ON_ERROR_STOP=1 -qAtX "$@"
}
# The password is a CI default, not a secret; quote it for SQL all the same.
sql_password="${pg_password//\'/\'\'}"
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$pg_user'")" != "1" ]; then
    say "creating role $pg_user"
    psql_admin -c "CREATE ROLE \"$pg_user\" LOGIN CREATEDB PASSWORD '$sql_password'"
else
    # The tests create a fresh database per run, so the role must be allowed to.
    psql_admin -c "ALTER ROLE \"$pg_user\" LOGIN CREATEDB PASSWORD '$sql_password'"
fi
# The tests drop their databases WITH (FORCE); an autovacuum worker in one belongs to no role,
# and PostgreSQL lets only members of pg_signal_backend end it (else the drop fails, now and
# then, as autovacuum happens to visit).
psql_admin -c "GRANT pg_signal_backend TO \"$pg_user\""
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$pg_database'")" != "1" ]; then
    say "creating database $pg_database"
    psql_admin -c "CREATE DATABASE \"$pg_database\" OWNER \"$pg_user\""
fi

# Redis: started directly (no init system in CI containers), loopback only, with the
# append-only file as recommended (a restart keeps the queued jobs).
redis_dir="${KERNELGRADER_CI_REDIS_DIR:-/var/lib/kernelgrader-ci-redis}"
if ! redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null 2>&1; then
    say "starting Redis on 127.0.0.1:$redis_port (appendonly, in $redis_dir)"
    mkdir -p "$redis_dir"
    redis-server --bind 127.0.0.1 --port "$redis_port" --daemonize yes --save '' \
        --appendonly yes --dir "$redis_dir" --logfile /tmp/kernelgrader-ci-redis.log >&2
fi
for _ in $(seq 60); do
    [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" = "PONG" ] && break
    sleep 0.5
done
if [ "$(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null)" != "PONG" ]; then
    say "Redis did not answer on 127.0.0.1:$redis_port; see /tmp/kernelgrader-ci-redis.log"
    exit 1
fi

say "PostgreSQL and Redis are up"
echo "KERNELGRADER_TEST_POSTGRES_URL=postgresql+psycopg://$pg_user:$pg_password@127.0.0.1:$pg_port/$pg_database"
echo "KERNELGRADER_TEST_REDIS_URL=redis://127.0.0.1:$redis_port/0"
