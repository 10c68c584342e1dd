#!/bin/sh
# PostgreSQL from Debian's packages in the local base image (base-image.sh), standing in for
# the postgres:17 image where Docker Hub is out of reach. It reads the official image's
# variables: POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, PGDATA; and PGPORT (5432) and
# PGLISTEN (*). First start: a cluster whose superuser is POSTGRES_USER, and POSTGRES_DB.
set -eu
: "${POSTGRES_USER:?set POSTGRES_USER}" "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
if [ "$(id -u)" -eq 0 ]; then
    # A fresh named volume belongs to root; the server runs as postgres.
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 0700 "$PGDATA"
    exec runuser -u postgres -- "$0" "$@"
fi
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
db="${POSTGRES_DB:-$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    "$bin/initdb" -D "$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-host=scram-sha-256 --auth-local=trust --encoding=UTF8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    if [ "$db" != "postgres" ]; then
        echo "CREATE DATABASE \"$db\" OWNER \"$POSTGRES_USER\"" |
            "$bin/postgres" --single -D "$PGDATA" -j postgres >/dev/null
    fi
    echo "postgres-entrypoint: initialised $PGDATA with database $db"
fi
exec "$bin/postgres" -D "$PGDATA" -c "listen_addresses=${PGLISTEN:-*}" -c "port=${PGPORT:-5432}"
