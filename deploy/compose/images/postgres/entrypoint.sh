#!/usr/bin/env bash
# PostgreSQL entrypoint. As root: own PGDATA and the socket dir, then run again as postgres.
# As postgres, on an empty PGDATA: initdb (superuser POSTGRES_USER with the password, scram-sha-256),
# listen on all addresses, pg_hba `host all all all scram-sha-256` + local trust, create POSTGRES_DB
# in single-user mode (no temporary server: an open TCP port means the real one is up).
# Then postgres replaces this shell, so SIGINT/SIGTERM reach it.
set -euo pipefail
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA
log() { printf 'postgres-entrypoint: %s\n' "$*" >&2; }

if [ "${1:0:1}" = '-' ]; then set -- postgres "$@"; fi
[ "${1:-}" = postgres ] || exec "$@"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  # A password file only root may read (a 0600 secret) is handed over as a postgres-owned copy.
  if [ ! -s "$PGDATA/PG_VERSION" ] && [ -n "${POSTGRES_PASSWORD_FILE:-}" ] && [ -r "$POSTGRES_PASSWORD_FILE" ]; then
    copy="$(mktemp)"
    cat "$POSTGRES_PASSWORD_FILE" >"$copy"
    chown postgres:postgres "$copy"
    export POSTGRES_PASSWORD_FILE="$copy" POSTGRES_PASSWORD_FILE_IS_COPY=1
  fi
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    [ -r "$POSTGRES_PASSWORD_FILE" ] || { log "POSTGRES_PASSWORD_FILE $POSTGRES_PASSWORD_FILE is not readable"; exit 1; }
    password="$(cat "$POSTGRES_PASSWORD_FILE")"
    if [ "${POSTGRES_PASSWORD_FILE_IS_COPY:-}" = 1 ]; then rm -f "$POSTGRES_PASSWORD_FILE"; fi
  else
    password="${POSTGRES_PASSWORD:-}"
  fi
  [ -n "$password" ] || { log "set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE (an empty data dir needs a superuser password)"; exit 1; }
  [ -z "$(ls -A "$PGDATA")" ] || { log "$PGDATA is not empty but has no PG_VERSION: refusing to initdb over it"; exit 1; }

  log "initdb in $PGDATA (superuser $user, database $db)"
  pwfile="$(mktemp)"
  printf '%s\n' "$password" >"$pwfile"
  # shellcheck disable=SC2086
  initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 ${POSTGRES_INITDB_ARGS:-} >/dev/null
  rm -f "$pwfile"
  printf "\nlisten_addresses = '*'\npassword_encryption = 'scram-sha-256'\n" >>"$PGDATA/postgresql.conf"
  printf 'local all all trust\nhost all all all scram-sha-256\n' >"$PGDATA/pg_hba.conf"

  if [ "$db" != postgres ]; then
    ident="\"${db//\"/\"\"}\""
    out="$(printf 'CREATE DATABASE %s;\n' "$ident" | postgres --single -j -D "$PGDATA" postgres 2>&1)" ||
      { printf '%s\n' "$out" >&2; log "CREATE DATABASE $db failed"; exit 1; }
    if printf '%s\n' "$out" | grep -q 'ERROR:'; then printf '%s\n' "$out" >&2; log "CREATE DATABASE $db failed"; exit 1; fi
  fi
  log "initialised"
fi

exec "$@"
