#!/usr/bin/env bash
# Make sure PostgreSQL answers on 127.0.0.1:5432 (user postgres, trust auth) with a
# database `test`, for the journal tests and benchmarks. A server that already
# answers is used as it is. Otherwise Debian's postgresql is installed when absent
# and its cluster started when stopped, and `test` is created when missing.
# The machine's configuration is never changed: when postgres cannot connect from
# 127.0.0.1 without a password, this says which pg_hba.conf line would allow it
# and fails (the tests that fault a server use a private cluster of their own,
# tests/servers.py, which needs none of this).
set -euo pipefail

PATH="$PATH:/usr/sbin:/sbin"
HOST=127.0.0.1
PORT=5432
DB=test
export PGCONNECT_TIMEOUT=5

AS_ROOT_ELSE="start PostgreSQL on 127.0.0.1:5432 yourself (or set ACTORSCHED_TEST_PG_URL)"
# shellcheck source=as-root.sh
. "$(dirname "$0")/as-root.sh"

# accepting connections (pg_isready when there is one, a bare TCP connect otherwise)
answers() {
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$HOST" -p "$PORT" 2>/dev/null
    else
        (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
    fi
}

wait_answers() {
    for _ in $(seq 1 60); do answers && return 0; sleep 1; done
    return 1
}

# -w: never prompt for a password, fail instead
psql_postgres() { psql -X -w -h "$HOST" -p "$PORT" -U postgres "$@"; }

trust_works() { psql_postgres -d postgres -tAc 'SELECT 1' >/dev/null 2>&1; }

has_test_db() {
    [ "$(psql_postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" 2>/dev/null)" = 1 ]
}

newest_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1; }

installed() { command -v pg_ctlcluster >/dev/null 2>&1 && [ -n "$(newest_version)" ]; }

start_cluster() {
    local version
    version="$(newest_version)"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
        as_root service postgresql start
}

# the tests connect as postgres from 127.0.0.1 without a password; pg_hba.conf is
# the machine's and stays as it is: say what would be needed, and fail
ensure_trust() {
    trust_works && return 0
    cat >&2 <<MESSAGE
cannot connect to PostgreSQL on $HOST:$PORT as postgres without a password, and
this script does not change the machine's configuration. Either add this line
first in /etc/postgresql/$(newest_version)/main/pg_hba.conf and reload the server:
    host test,postgres postgres 127.0.0.1/32 trust
or point the tests at a database they can use:
    export ACTORSCHED_TEST_PG_URL=postgresql://USER:PASSWORD@HOST:PORT/DATABASE
MESSAGE
    return 1
}

ensure_test_db() {
    has_test_db && return 0
    echo "creating database $DB"
    psql_postgres -d postgres -qc "CREATE DATABASE $DB"
}

if [ -n "${ACTORSCHED_TEST_PG_URL:-}" ]; then
    echo "ACTORSCHED_TEST_PG_URL is set: the tests use that database, not $HOST:$PORT"
    exit 0
fi

if answers; then
    # running: use it as it is; only add the database when it is missing
    if trust_works && ! has_test_db; then ensure_test_db; fi
    exit 0
fi

if ! installed; then
    echo "no PostgreSQL on $HOST:$PORT and no cluster found: installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq postgresql
    if [ -z "$(newest_version)" ]; then
        # package already there but its cluster was dropped: make a new one
        version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
        as_root pg_createcluster "$version" main
    fi
    # the package may start the cluster itself; give it the chance before starting it
    for _ in $(seq 1 15); do answers && break; sleep 1; done
fi

if ! answers; then
    echo "starting PostgreSQL $(newest_version)/main"
    start_cluster
fi
if ! wait_answers; then
    echo "PostgreSQL did not answer on $HOST:$PORT" >&2
    exit 1
fi
ensure_trust
ensure_test_db
